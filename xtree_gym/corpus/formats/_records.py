"""Reading records from JSON (a list) or JSONL files, each with its position for error messages.

Also the two guards the ``xtree canon/report/plot/cards`` handlers put around the files a user
names, so that a binary file, a broken gzip or an unwritable path is one clear error line, not a
traceback from deep in the standard library.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ...errors import ConfigError, CorpusError, XTreeError
from ..io import JSONProblem, input_problem, loads_strict, open_bytes

# What reading a user's file can raise below our own checks: not UTF-8, not gzip, a truncated or
# corrupt gzip stream, a permission or I/O failure.
_READ_FAILURES = (UnicodeDecodeError, OSError, EOFError, zlib.error)


@contextmanager
def reading(path: str | os.PathLike[str], error: type[XTreeError] = CorpusError) -> Iterator[None]:
    """Turn a low-level failure while reading ``path`` into one ``error`` naming the file.

    Example:
        >>> import tempfile, pathlib
        >>> p = pathlib.Path(tempfile.mkdtemp()) / "c.jsonl"
        >>> _ = p.write_bytes(b"\\xff\\xfe")
        >>> with reading(p):
        ...     _ = p.read_text(encoding="utf-8")
        Traceback (most recent call last):
        xtree_gym.errors.CorpusError: ...c.jsonl: cannot read the file: not UTF-8 text (invalid start byte at byte 0) -- fix: ...
    """
    try:
        yield
    except _READ_FAILURES as exc:
        raise error(f"cannot read the file: {_describe(exc)}", where=str(path), fix=_READ_FIX) from None


@contextmanager
def writing(path: str | os.PathLike[str]) -> Iterator[None]:
    """Turn an OS failure while writing ``path`` (missing folder, no permission, full disk) into one error."""
    try:
        yield
    except OSError as exc:
        raise ConfigError(
            f"cannot write {str(path)!r}: {exc.strerror or exc}",
            fix="choose an output path in a folder you can write to",
        ) from None


_READ_FIX = "pass a UTF-8 JSON/JSONL file (.gz only when it is really gzip-compressed)"


def _describe(exc: BaseException) -> str:
    if isinstance(exc, UnicodeDecodeError):
        return f"not UTF-8 text ({exc.reason} at byte {exc.start})"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__


def iter_records(path: str | os.PathLike[str]) -> Iterator[tuple[str, Any]]:
    """Yield ``(where, record)`` from a ``.json`` list or a JSONL(.gz) file.

    ``where`` is ``file:line`` for JSONL and ``file: record i`` for a JSON list, so a reader can
    name the bad record in its :class:`CorpusError`.
    """
    p = Path(path)
    problem = input_problem(p, "trajectory file")
    if problem:
        raise CorpusError(problem, fix="check the path")
    with reading(p), open_bytes(p) as fh:
        raw = fh.read()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:  # name the line, as the corpus reader does
        bad_line = raw.count(b"\n", 0, exc.start) + 1
        raise CorpusError(
            f"not UTF-8 text ({exc.reason} at byte {exc.start})",
            where=f"{p}:{bad_line}",
            fix=_READ_FIX,
        ) from None
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            data = loads_strict(text)
        except JSONProblem as exc:
            raise CorpusError(
                exc.problem, where=f"{p}:{exc.lineno}" if exc.lineno else str(p), fix="repair the JSON list"
            ) from None
        if not isinstance(data, list):  # "[1] [2]" and the like
            raise CorpusError("not a JSON list of records", where=str(p), fix="repair the JSON list")
        for i, rec in enumerate(data):
            yield f"{p}: record {i}", rec
        return
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rec = loads_strict(line)
        except JSONProblem as exc:
            raise CorpusError(
                exc.problem,
                where=f"{p}:{lineno}",
                fix="repair the line (each line must be one JSON object)",
            ) from None
        yield f"{p}:{lineno}", rec


def bad_record(where: str, problem: str, fix: str) -> CorpusError:
    return CorpusError(problem, where=where, fix=fix)
