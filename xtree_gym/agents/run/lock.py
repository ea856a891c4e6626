"""One writer per folder: ``xtree eval -o DIR`` and ``xtree train ... -o DIR`` hold a lock while they write.

The lock is ``flock`` on a small file in the folder (``.eval.lock`` for evaluations, ``.run.lock`` for
training runs). The kernel releases it when the holder exits, even on ``kill -9``, so a lock left by a
dead process is simply taken over; the file's text (pid, host, start time) only serves to name the
holder when a second writer is refused.

Example:
    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> with folder_lock(d, name=".run.lock", what="xtree train"):
    ...     with folder_lock(d, name=".run.lock", what="xtree train"):  # doctest: +ELLIPSIS
    ...         pass
    Traceback (most recent call last):
    xtree_gym.errors.ConfigError: another xtree train (pid ... on ..., started ...) is writing '...' -- fix: ...
"""

from __future__ import annotations

import errno
import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from ...errors import ConfigError

EVAL_LOCK = ".eval.lock"
RUN_LOCK = ".run.lock"
LOCK_FILES = frozenset({EVAL_LOCK, RUN_LOCK})
"""Lock file names: not part of a run (a folder holding only one is empty to ``--overwrite``)."""


def holder_text(what: str) -> str:
    """What the lock file says about this process: ``WHAT (pid N on HOST, started TIME)``.

    Example:
        >>> holder_text("xtree eval").startswith(f"xtree eval (pid {os.getpid()} on ")
        True
    """
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    return f"{what} (pid {os.getpid()} on {socket.gethostname()}, started {started})"


class Held:
    """A held lock: :meth:`announce` writes this process as the holder into the lock file."""

    def __init__(self, fh: IO[str] | None, what: str) -> None:
        self._fh, self._what = fh, what

    def announce(self) -> None:
        """Name this process in the lock file (once the run is sure to write: a refused run leaves the
        folder as it found it)."""
        if self._fh is None:
            return
        self._fh.seek(0)
        self._fh.truncate()  # a dead holder's text goes: the lock is ours now
        self._fh.write(holder_text(self._what) + "\n")
        self._fh.flush()


@contextmanager
def folder_lock(
    out: str | os.PathLike[str] | None,
    *,
    name: str = EVAL_LOCK,
    what: str = "xtree eval",
    announce: bool = True,
) -> Iterator[Held]:
    """Hold ``out/name`` (``flock``) for the block; a second holder meanwhile is one :class:`ConfigError`
    naming the first (pid, host, start time). ``None``: no lock. With ``announce=False`` the holder's
    text is written only when the block calls ``held.announce()``."""
    import fcntl

    if out is None:
        yield Held(None, what)
        return
    folder = Path(out)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise ConfigError(
            f"output folder {str(folder)!r} is a file", fix="pass a folder with -o (it is created if missing)"
        ) from None
    try:  # never through a link: the lock file is truncated, and a planted link could name an input
        fd = os.open(folder / name, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o666)
    except OSError as exc:
        if exc.errno != errno.ELOOP:
            raise
        raise ConfigError(
            f"the lock file {str(folder / name)!r} is a link; xtree does not write through it",
            fix="remove that link, or use another -o folder",
        ) from None
    with os.fdopen(fd, "a+", encoding="utf-8") as fh:
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            fh.seek(0)
            holder = fh.read().strip()
            if not holder.startswith("xtree "):  # an older lock file: its pid only
                holder = f"{what} (pid {holder or '?'})"
            raise ConfigError(
                f"another {holder} is writing {str(folder)!r}",
                fix="wait for it to finish, or use another -o folder",
            ) from None
        held = Held(fh, what)
        if announce:
            held.announce()
        yield held  # closing the file releases the lock


def is_main_rank() -> bool:
    """Whether this process is rank 0 of an ``accelerate launch`` (or runs alone): the one that locks."""
    return os.environ.get("RANK", "0") in ("", "0")
