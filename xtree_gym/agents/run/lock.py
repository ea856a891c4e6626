"""One writer per folder: ``xtree eval -o DIR`` and ``xtree train ... -o DIR`` hold a lock while they write.

The lock is ``flock`` on a small file in the folder (``.eval.lock`` for evaluations, ``.run.lock`` for
training runs). The kernel releases it when the holder exits, even on ``kill -9``, so a lock left by a
dead process is simply taken over; the file's text (pid, host, start time) only serves to name the
holder when a second writer is refused. A writer refused before it made its work (:data:`RESULTS`) takes
back what it made (files, the lock file, new folders), so a refused run leaves the folder as it was; a
holder that finds its lock file removed under it takes the new one, so two writers never hold one folder.

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
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import IO

from ...errors import ConfigError

EVAL_LOCK = ".eval.lock"
RUN_LOCK = ".run.lock"
LOCK_FILES = frozenset({EVAL_LOCK, RUN_LOCK})
"""Lock file names: not part of a run (a folder holding only one is empty to ``--overwrite``)."""

RESULTS = {
    EVAL_LOCK: ("episodes.jsonl", "results.json"),
    RUN_LOCK: ("metrics.jsonl", "latest.json", "checkpoint-"),
}
"""What a writer's work is, by lock: a writer that fails before it made one of these (a refused run: bad
model id, bad env, bad tree) takes back everything it made, so the folder is as it found it. Once it made
one, what it wrote stays (a run to resume)."""


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
        self.announced = False

    def announce(self) -> None:
        """Name this process in the lock file (once the run is sure to write: a refused run leaves the
        folder as it found it)."""
        if self._fh is None:
            return
        self.rewrite(holder_text(self._what) + "\n")
        self.announced = True

    def rewrite(self, text: str) -> None:
        """Make ``text`` the whole of the lock file (a no-op without a lock)."""
        if self._fh is None:
            return
        self._fh.seek(0)
        self._fh.truncate()  # a dead holder's text goes: the lock is ours now
        self._fh.write(text)
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
    text is written only when the block calls ``held.announce()``.

    A block that raises before it made its work (:data:`RESULTS`) leaves the folder as it found it: what
    it made goes, the lock file too when this call made it (else its old text is put back), and the
    folders this call made."""
    if out is None:
        yield Held(None, what)
        return
    folder = Path(out)
    made, fd, created = _take(folder, name, what)
    old = os.pread(fd, 1 << 16, 0)  # the text to put back if the block is refused (byte for byte)
    with os.fdopen(fd, "a+", encoding="utf-8", errors="replace") as fh:
        entries = set(os.listdir(folder))
        held = Held(fh, what)
        try:
            if announce:
                held.announce()
            yield held  # closing the file releases the lock
        except BaseException:
            _take_back(folder, entries, RESULTS.get(name, ()))
            if created:
                _unlink_if_same(folder / name, fd)
            elif held.announced:
                with suppress(OSError):
                    fh.flush()
                    os.ftruncate(fd, 0)
                    os.pwrite(fd, old, 0)
            _remove_folders(made)
            raise


def _take(folder: Path, name: str, what: str) -> tuple[list[Path], int, bool]:
    """Make ``folder`` and hold its lock file: ``(folders made, fd, whether the file was made)``."""
    import fcntl

    from ...corpus.outfolder import make_output_folder

    made: list[Path] = []
    for _ in range(100):  # another writer removed the folder or the lock file meanwhile (its refused run)
        made += make_output_folder(folder)
        try:
            fd, created = _open_lock(folder / name)
        except FileNotFoundError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = _read(fd).strip()
            os.close(fd)
            _remove_folders(made)
            if not holder.startswith("xtree "):  # an older lock file: its pid only
                holder = f"{what} (pid {holder or '?'})"
            raise ConfigError(
                f"another {holder} is writing {str(folder)!r}",
                fix="wait for it to finish, or use another -o folder",
            ) from None
        if _is_at(fd, folder / name):
            return made, fd, created
        os.close(fd)  # held a lock file that its refused holder removed: take the one there now
    raise ConfigError(f"could not take the lock file {str(folder / name)!r}", fix="try again")


def _open_lock(path: Path) -> tuple[int, bool]:
    """Open (or make) the lock file, never through a link, never blocking on a FIFO: ``(fd, made)``."""
    import stat

    flags = os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK
    fix = "remove it, or use another -o folder"
    try:
        try:
            return os.open(path, flags | os.O_CREAT | os.O_EXCL, 0o666), True
        except FileExistsError:
            fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # the lock file is truncated: a planted link could name an input
            raise ConfigError(f"the lock file {str(path)!r} is a link; xtree does not write through it",
                              fix="remove that link, or use another -o folder") from None  # fmt: skip
        if exc.errno == errno.EISDIR:
            raise ConfigError(f"the lock file {str(path)!r} is a folder, not a file", fix=fix) from None
        if exc.errno == errno.ENXIO:  # a socket (or a device without a driver) cannot be opened
            raise ConfigError(f"the lock file {str(path)!r} is a socket, not a file", fix=fix) from None
        raise
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        kind = "a FIFO" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode) else "a device"
        raise ConfigError(f"the lock file {str(path)!r} is {kind}, not a regular file", fix=fix)
    return fd, False


def _read(fd: int) -> str:
    return os.pread(fd, 4096, 0).decode("utf-8", "replace")


def _is_at(fd: int, path: Path) -> bool:
    """Whether the open file ``fd`` is still the one at ``path`` (not removed or replaced meanwhile)."""
    try:
        a, b = os.fstat(fd), os.lstat(path)
    except OSError:
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def _unlink_if_same(path: Path, fd: int) -> None:
    if _is_at(fd, path):
        with suppress(OSError):
            os.unlink(path)


def _take_back(folder: Path, entries: set[str], results: tuple[str, ...]) -> None:
    """Remove what a failed writer made in ``folder`` (the names not in ``entries``), unless it made a
    result (a name in ``results``, or one starting with a ``results`` name that ends in ``-``)."""
    import shutil

    try:
        new = set(os.listdir(folder)) - entries
    except OSError:
        return
    if any(n in results or any(r.endswith("-") and n.startswith(r) for r in results) for n in new):
        return
    for n in sorted(new):
        p = folder / n
        with suppress(OSError):
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p)
            else:
                p.unlink()


def _remove_folders(made: list[Path]) -> None:
    """Remove the folders this process made, innermost first, as long as they are empty."""
    for p in sorted(set(made), key=lambda q: len(q.parts), reverse=True):
        try:
            os.rmdir(p)
        except OSError:
            return


def is_main_rank() -> bool:
    """Whether this process is rank 0 of an ``accelerate launch`` (or runs alone): the one that locks."""
    return os.environ.get("RANK", "0") in ("", "0")
