"""Parquet corpus files: trajectory records (plain dicts) to an Arrow table and back, losslessly.

A Parquet corpus holds the JSONL format's columns natively (``id``, ``env``, ``task``, ``goal``,
``success``, ``reward`` and ``steps`` as a list of ``{action, observation, thought, token}``
structs), so the miner reads ``steps.token`` without parsing anything. What has no fixed type
(``slots``, and the keys the format does not know, at trajectory and at step level) is kept as a
JSON text column (``slots``, ``extra``), so JSONL -> Parquet -> JSONL gives the same lines.

This module knows records only (the dicts of ``Trajectory.to_dict``); :mod:`xtree_gym.corpus`
turns them into trajectories, so the import graph only looks down.
"""

from __future__ import annotations

import itertools
import json
import os
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from ..errors import CorpusError, missing_dependency
from .io import output_target

_STEP_KEYS = ("action", "observation", "thought", "token", "slots")
_TRAJ_KEYS = ("id", "env", "task", "goal", "success", "reward", "steps")
ROWS_PER_GROUP = 65_536
"""Trajectories per Parquet row group (and per Arrow batch on writing)."""


def pyarrow() -> Any:
    """Import ``pyarrow`` or raise the one error naming the extra that installs it."""
    try:
        import pyarrow as pa
        import pyarrow.compute
        import pyarrow.json
        import pyarrow.parquet  # the submodules register pa.compute, pa.json, pa.parquet
    except ImportError:
        raise missing_dependency("pyarrow", "columnar", "Parquet corpora and the columnar reader") from None
    return pa


def is_parquet(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` names a Parquet corpus (by its suffix).

    Example:
        >>> is_parquet("runs/corpus.parquet"), is_parquet("corpus.jsonl.gz")
        (True, False)
    """
    return str(path).endswith(".parquet")


def corpus_schema() -> Any:
    """The Arrow schema of a Parquet corpus written by :func:`write_parquet`."""
    pa = pyarrow()
    step = pa.struct(
        [
            ("action", pa.string()),
            ("observation", pa.string()),
            ("thought", pa.string()),
            ("token", pa.string()),
            ("slots", pa.string()),
            ("extra", pa.string()),
        ]
    )
    return pa.schema(
        [
            ("id", pa.string()),
            ("env", pa.string()),
            ("task", pa.string()),
            ("goal", pa.string()),
            ("success", pa.bool_()),
            ("reward", pa.float64()),
            ("steps", pa.list_(step)),
            ("extra", pa.string()),
        ]
    )


def _json_or_none(d: Mapping[str, Any]) -> str | None:
    return json.dumps(d, ensure_ascii=False) if d else None


def _step_row(s: Mapping[str, Any]) -> dict[str, Any]:
    slots = s.get("slots")
    return {
        "action": s.get("action"),
        "observation": s.get("observation"),
        "thought": s.get("thought"),
        "token": s.get("token"),
        "slots": None if slots is None else json.dumps(slots, ensure_ascii=False),
        "extra": _json_or_none({k: v for k, v in s.items() if k not in _STEP_KEYS}),
    }


def record_row(rec: Mapping[str, Any]) -> dict[str, Any]:
    """One record as a row of :func:`corpus_schema` (untyped keys folded into JSON text).

    Example:
        >>> row = record_row({"id": "a", "success": True, "steps": [{"action": "go", "slots": {"X": 1}}], "seed": 3})
        >>> row["steps"][0]["slots"], row["extra"]
        ('{"X": 1}', '{"seed": 3}')
    """
    return {
        "id": rec.get("id"),
        "env": rec.get("env"),
        "task": rec.get("task"),
        "goal": rec.get("goal"),
        "success": rec.get("success"),
        "reward": rec.get("reward"),
        "steps": [_step_row(s) for s in rec.get("steps", ())],
        "extra": _json_or_none({k: v for k, v in rec.items() if k not in _TRAJ_KEYS}),
    }


def write_parquet(path: str | os.PathLike[str], records: Iterable[Mapping[str, Any]]) -> int:
    """Write records to a Parquet corpus atomically (row groups of ``ROWS_PER_GROUP``); returns how many.

    Equal records give byte-identical files (no timestamps are written).
    """
    pa = pyarrow()
    schema = corpus_schema()
    target = output_target(path)  # the rules of every writer: never an input, never a link planted in a run
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    n = 0
    try:
        with pa.parquet.ParquetWriter(tmp, schema, compression="zstd") as writer:
            batch: list[dict[str, Any]] = []
            for rec in records:
                batch.append(record_row(rec))
                if len(batch) >= ROWS_PER_GROUP:
                    writer.write_table(pa.Table.from_pylist(batch, schema=schema))
                    n += len(batch)
                    batch = []
            if batch or n == 0:
                writer.write_table(pa.Table.from_pylist(batch, schema=schema))
                n += len(batch)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return n


def open_parquet(path: str | os.PathLike[str]) -> Any:
    """A ``pyarrow.parquet.ParquetFile``, or a :class:`CorpusError` when the file is not Parquet."""
    pa = pyarrow()
    try:
        return pa.parquet.ParquetFile(str(path))
    except (pa.ArrowInvalid, OSError) as exc:
        raise CorpusError(
            f"cannot read the Parquet file ({exc})", where=str(path), fix="pass a Parquet corpus file"
        ) from None


def _loads(text: Any, where: str) -> Any:
    if text is None or not isinstance(text, str):
        return text
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise CorpusError(f"a JSON text column is not valid JSON ({exc.msg})", where=where) from None


def _steps_records(steps: Any, where: str) -> list[list[dict[str, Any]] | None]:
    """The step dicts of a ``list<struct>`` column, built column by column."""
    pa = pyarrow()
    steps = steps.combine_chunks() if isinstance(steps, pa.ChunkedArray) else steps
    kind = steps.type
    if not (pa.types.is_list(kind) or pa.types.is_large_list(kind)) or not pa.types.is_struct(
        kind.value_type
    ):
        # not list<struct> (a string, a list of ints...): the values as Python, for the record
        # checks to name the bad row ("steps is 'x', expected a list")
        return steps.to_pylist()  # type: ignore[no-any-return]
    values = steps.flatten()
    names = [values.type.field(i).name for i in range(values.type.num_fields)]
    cols = {n: values.field(n).to_pylist() for n in names}
    offsets = steps.offsets.to_pylist()
    valid = steps.is_valid().to_pylist()
    base = offsets[0]
    out: list[list[dict[str, Any]] | None] = []
    for r, (a, b) in enumerate(itertools.pairwise(offsets)):
        if not valid[r]:
            out.append(None)
            continue
        rows = []
        for j in range(a - base, b - base):
            d: dict[str, Any] = {}
            for n in names:
                v = cols[n][j]
                if n == "extra":
                    d.update(_loads(v, where) or {})
                elif n == "slots" and isinstance(v, str):
                    d[n] = _loads(v, where)
                elif v is not None or n in ("action", "observation"):
                    d[n] = v
            rows.append(d)
        out.append(rows)
    return out


def table_records(table: Any, where: str = "<table>") -> Iterator[dict[str, Any]]:
    """The records of an Arrow table with the corpus columns (ours, or a Hugging Face dataset's).

    Columns are converted whole (no per-row Arrow access); JSON text columns are parsed back.
    """
    names = table.column_names
    cols = {n: table.column(n).to_pylist() for n in names if n != "steps"}
    steps = _steps_records(table.column("steps"), where) if "steps" in names else None
    for i in range(table.num_rows):
        rec: dict[str, Any] = {}
        for n in names:
            if n == "steps":
                assert steps is not None
                rec[n] = steps[i]
            elif n == "extra":
                rec.update(_loads(cols[n][i], f"{where} row {i}") or {})
            elif cols[n][i] is not None or n in ("id", "success"):
                rec[n] = cols[n][i]
        yield rec


def iter_parquet_records(path: str | os.PathLike[str]) -> Iterator[dict[str, Any]]:
    """The records of a Parquet corpus, one row group at a time."""
    pf = open_parquet(path)
    for g in range(pf.num_row_groups):
        yield from table_records(pf.read_row_group(g), where=str(path))


def arrow_table(data: Any) -> Any:
    """The Arrow table behind ``data`` (a ``pyarrow.Table``, or a ``datasets.Dataset``), else None.

    Example:
        >>> arrow_table([{"id": "a"}]) is None
        True
    """
    try:
        import pyarrow as pa
    except ImportError:
        return None
    if isinstance(data, pa.Table):
        return data
    inner = getattr(getattr(data, "data", None), "table", None)  # datasets.Dataset -> its pa.Table
    if isinstance(inner, pa.Table) and getattr(data, "_indices", None) is None:
        return inner
    return None
