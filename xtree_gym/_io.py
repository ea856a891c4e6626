"""Small file helpers shared by every writer: atomic writes and transparent gzip."""

from __future__ import annotations

import gzip
import io
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO


@contextmanager
def atomic_open(path: str | os.PathLike[str], mode: str = "w") -> Iterator[IO[str]]:
    """Open ``path`` for writing text so that readers never see a half-written file.

    The text goes to a temporary file in the same folder, which replaces ``path`` only when
    the block ends without error (``os.replace`` is atomic on POSIX). A ``.gz`` suffix writes
    gzip with a fixed mtime, so equal text gives byte-identical files.
    """
    if mode not in ("w", "wt"):
        raise ValueError(f"atomic_open writes text only, got mode {mode!r}")
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; give the file the usual permissions
    try:
        with os.fdopen(fd, "wb") as raw:
            if target.suffix == ".gz":
                with (
                    gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as gz,
                    io.TextIOWrapper(gz, encoding="utf-8", newline="\n") as text,
                ):
                    yield text
            else:
                with io.TextIOWrapper(raw, encoding="utf-8", newline="\n") as text:
                    yield text
                    text.flush()
                    os.fsync(raw.fileno())
        os.replace(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` to ``path`` atomically (see :func:`atomic_open`)."""
    with atomic_open(path) as fh:
        fh.write(text)


def open_text(path: str | os.PathLike[str]) -> IO[str]:
    """Open a text file for reading, decompressing ``.gz`` transparently."""
    p = Path(path)
    if p.suffix == ".gz":
        return io.TextIOWrapper(gzip.open(p, "rb"), encoding="utf-8")
    return open(p, encoding="utf-8")
