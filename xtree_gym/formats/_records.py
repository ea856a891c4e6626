"""Reading records from JSON (a list) or JSONL files, each with its position for error messages."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .._io import open_text
from ..errors import CorpusError


def iter_records(path: str | os.PathLike[str]) -> Iterator[tuple[str, Any]]:
    """Yield ``(where, record)`` from a ``.json`` list or a JSONL(.gz) file.

    ``where`` is ``file:line`` for JSONL and ``file: record i`` for a JSON list, so a reader can
    name the bad record in its :class:`CorpusError`.
    """
    p = Path(path)
    if not p.is_file():
        raise CorpusError(f"trajectory file {str(p)!r} does not exist", fix="check the path")
    with open_text(p) as fh:
        text = fh.read()
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise CorpusError(
                f"not valid JSON ({exc.msg})", where=f"{p}:{exc.lineno}", fix="repair the JSON list"
            ) from None
        for i, rec in enumerate(data):
            yield f"{p}: record {i}", rec
        return
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as exc:
            raise CorpusError(
                f"not valid JSON ({exc.msg} at column {exc.colno})",
                where=f"{p}:{lineno}",
                fix="repair the line (each line must be one JSON object)",
            ) from None
        yield f"{p}:{lineno}", rec


def bad_record(where: str, problem: str, fix: str) -> CorpusError:
    return CorpusError(problem, where=where, fix=fix)
