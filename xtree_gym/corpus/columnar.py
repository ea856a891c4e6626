"""The columnar corpus path: file -> Arrow columns -> :class:`EncodedCorpus`, no per-step Python objects.

``xtree mine``, ``xtree tile`` and :func:`xtree_gym.mine` read corpora through :func:`load_corpus`.
When every step carries a ``token``, the file is parsed by Arrow's JSON reader (JSONL, JSONL.gz)
or read as Parquet, with an explicit schema that types every field the line validator checks;
the miner then needs only ``id``, ``success``, ``task``, ``env``, ``steps[].token`` and, for the
nodes' examples, ``steps[].action``. Whenever that path cannot take the input as is -- a parse
or type error, a missing field, a ``null`` where the validator wants a string, steps without a
token, two trajectories with the same id -- :func:`load_corpus` hands the files to
:func:`xtree_gym.corpus.read_corpus` instead, whose line-by-line validator names the bad line
(``file:line``), counts it under ``skip_bad``, and applies the canonicalizer to tokenless steps.
Both paths give byte-identical trees.

Order: trajectories are sorted by id (byte order of UTF-8 = code point order, as Python sorts
strings); equal ids never reach this path, so content only breaks ties on the object path.
"""

from __future__ import annotations

import dataclasses
import gzip
import io
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import CorpusError
from .arrow_io import arrow_table, is_parquet, open_parquet, pyarrow
from .encoded import EncodedCorpus
from .io import MAX_JSON_DEPTH, MAX_LINE_BYTES, JSONProblem, loads_strict
from .records import Corpus, Step, Trajectory, read_corpus

COLUMNAR_MIN_BYTES = 4 << 20
"""JSONL input smaller than this (all files together) takes the object path: importing pyarrow costs
more CPU than it saves there (``xtree mine`` on the packaged 278-episode sample imports no pyarrow).
Parquet always takes the columnar path."""

CHUNK_BYTES = 64 << 20
"""Bytes of JSONL handed to Arrow at a time (cut at a line end), so memory stays bounded."""
# A required or string-typed key given as JSON null: Arrow reads it like a missing key, the line
# validator rejects it, so such a chunk goes to the validator. False alarms only cost speed.
_NULL_KEY = re.compile(rb'(?<!\\)"(?:id|success|steps|env|task|goal|action)"\s*:\s*null')


_BIG_INT_DIGITS = 4300  # Python's int() refuses longer digit strings (the validator names the line)
_BIG_INT = re.compile(rb"\d{%d}" % _BIG_INT_DIGITS)


class FastPathUnavailable(Exception):
    """Internal: the columnar path cannot take this input as is; the reason says why."""


@dataclass
class ColumnarCorpus:
    """A corpus as Arrow columns: what mining and tiling need, nothing per step.

    The columns stay as the reader made them (chunked, in file order); ``order`` says which row
    is the ``i``-th trajectory (``None``: file order), so sorting never copies the corpus.
    ``tokens`` and ``actions`` are ``list<string>`` columns (one list per trajectory). Indexing
    gives a light :class:`Trajectory` (id, success, env, task, steps with action and token).
    """

    ids: Any
    """``string`` column of trajectory ids (file order)."""
    success: np.ndarray
    """(n,) bool (file order)."""
    task: Any
    """``string`` column of task types (``""`` where absent)."""
    env: Any
    """``string`` column of environment names (``""`` where absent)."""
    tokens: Any
    """``list<string>`` column: each trajectory's step tokens (``None`` after :meth:`without_tokens`)."""
    actions: Any
    """``list<string>`` column: each trajectory's raw actions (for the nodes' examples)."""
    order: np.ndarray | None = None
    """(n,) int64: the file row of the ``i``-th trajectory; ``None`` keeps file order."""
    sorted_by_id: bool = False
    """Whether ``order`` (or file order) is the id order the miner needs."""
    keep_tokens: bool = True
    """False: :meth:`encode` drops the token column once encoded, freeing its memory (``xtree mine``
    sets it; indexing then gives steps without a token)."""
    skipped: tuple[()] = ()
    """Always empty: a file with bad lines is read by the validator instead."""

    def __len__(self) -> int:
        return len(self.ids)

    def row(self, i: int) -> int:
        """The file row of the ``i``-th trajectory."""
        return int(self.order[i]) if self.order is not None else i

    def __getitem__(self, i: int) -> Trajectory:
        r = self.row(i)
        actions = self.actions[r].as_py()
        tokens = self.tokens[r].as_py() if self.tokens is not None else [None] * len(actions)
        steps = [Step(a, token=t) for a, t in zip(actions, tokens)]
        return Trajectory(
            self.ids[r].as_py(),
            steps,
            bool(self.success[r]),
            env=self.env[r].as_py(),
            task=self.task[r].as_py(),
        )

    def __iter__(self) -> Iterator[Trajectory]:
        return (self[i] for i in range(len(self)))

    def sort(self) -> ColumnarCorpus:
        """The same corpus viewed in id order (the miner's canonical order); no column is copied."""
        if self.sorted_by_id:
            return self
        pa = pyarrow()
        order = _ints(pa.compute.sort_indices(self.ids)).astype(np.int64)
        return dataclasses.replace(self, order=order, sorted_by_id=True)

    def without_tokens(self) -> ColumnarCorpus:
        """This corpus without its token column (once encoded, the miner needs only the actions)."""
        return dataclasses.replace(self, tokens=None)

    def id_list(self) -> list[str]:
        """The ids in this view's order."""
        ids = self.ids.to_pylist()
        return ids if self.order is None else [ids[r] for r in self.order.tolist()]

    def env_names(self) -> list[str]:
        """Sorted distinct environment names (what the tree file records)."""
        pa = pyarrow()
        return sorted(pa.compute.unique(self.env).to_pylist())

    def token_lists(self) -> list[list[str]]:
        """Each trajectory's tokens as a Python list, in this view's order (for tiling)."""
        toks = self.tokens.to_pylist()
        return toks if self.order is None else [toks[r] for r in self.order.tolist()]

    def encode(self) -> EncodedCorpus:
        """The :class:`EncodedCorpus` of the trajectories in this view's order (Arrow and numpy only)."""
        pa = pyarrow()
        flat, lengths, vocab = _encode_lists(pa, self.tokens)
        task, task_names = _sorted_codes(pa, self.task)
        success = np.asarray(self.success, dtype=bool)
        offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        if self.order is not None:
            flat, offsets = _permute(flat, offsets, self.order)
            task, success = task[self.order], success[self.order]
        if not self.keep_tokens:
            self.tokens = None
        return EncodedCorpus(
            flat=flat, offsets=offsets, success=success, task=task, vocab=vocab, task_names=task_names
        )


def _permute(flat: np.ndarray, offsets: np.ndarray, order: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sequences ``order[0], order[1], ...`` of a flat/offsets corpus, back to back.

    Example:
        >>> f, o = _permute(np.array([1, 2, 3]), np.array([0, 2, 3]), np.array([1, 0]))
        >>> f.tolist(), o.tolist()
        ([3, 1, 2], [0, 1, 3])
    """
    lengths = np.diff(offsets)[order]
    new_offsets = np.zeros(len(order) + 1, dtype=np.int64)
    np.cumsum(lengths, out=new_offsets[1:])
    index = np.repeat(offsets[:-1][order] - new_offsets[:-1], lengths)
    index += np.arange(len(index), dtype=np.int64)
    return flat[index], new_offsets


def _encode_lists(pa: Any, lists: Any) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """(flat int32 codes into the sorted vocabulary, list lengths, vocabulary) of a ``list<string>`` column.

    Each chunk is dictionary-encoded on its own; the small per-chunk dictionaries are then mapped
    to the global sorted vocabulary, so no chunk is ever concatenated with another.
    """
    chunks = lists.chunks if hasattr(lists, "chunks") else [lists]
    parts = []
    for ch in chunks:
        offs = _ints(ch.offsets).astype(np.int64)
        values = ch.values.slice(int(offs[0]), int(offs[-1] - offs[0]))
        enc = pa.compute.dictionary_encode(values)
        parts.append((_ints(enc.indices).astype(np.int32), enc.dictionary.to_pylist(), np.diff(offs)))
    vocab = sorted({t for _, names, _ in parts for t in names})
    index = {t: i for i, t in enumerate(vocab)}
    flat = np.empty(sum(len(c) for c, _, _ in parts), dtype=np.int32)
    at = 0
    for codes, names, _ in parts:
        lut = np.fromiter((index[t] for t in names), dtype=np.int32, count=len(names))
        flat[at : at + len(codes)] = lut[codes] if len(names) else codes
        at += len(codes)
    lengths = np.concatenate([ln for _, _, ln in parts]) if parts else np.zeros(0, np.int64)
    return flat, lengths, vocab


def _sorted_codes(pa: Any, strings: Any) -> tuple[np.ndarray, list[str]]:
    """Codes of ``strings`` into their sorted distinct values, as int32.

    Example:
        >>> import pyarrow as pa
        >>> codes, names = _sorted_codes(pa, pa.array(["b", "a", "b"]))
        >>> codes.tolist(), names
        ([1, 0, 1], ['a', 'b'])
    """
    enc = pa.compute.dictionary_encode(strings)
    enc = enc.combine_chunks() if isinstance(enc, pa.ChunkedArray) else enc
    names = enc.dictionary.to_pylist()
    order = sorted(range(len(names)), key=names.__getitem__)
    rank = np.empty(len(names), dtype=np.int32)
    rank[order] = np.arange(len(names), dtype=np.int32)
    codes = rank[_ints(enc.indices)] if len(names) else np.zeros(len(enc), np.int32)
    return codes.astype(np.int32, copy=False), [names[i] for i in order]


# ----------------------------------------------------------------------------- reading


def _json_schema(pa: Any, id_type: Any = None) -> Any:
    """Every field the line validator types, so Arrow rejects what it would (then it names the line)."""
    step = pa.struct(
        [
            ("action", pa.string()),
            ("token", pa.string()),
            ("observation", pa.string()),
            ("thought", pa.string()),
            ("slots", pa.struct([])),  # any object; its keys are ignored
        ]
    )
    return pa.schema(
        [
            ("id", id_type or pa.string()),
            ("success", pa.bool_()),
            ("env", pa.string()),
            ("task", pa.string()),
            ("goal", pa.string()),
            ("reward", pa.float64()),
            ("steps", pa.list_(step)),
        ]
    )


def _chunks(path: Path, size: int | None = None) -> Iterator[bytes]:
    """The file's bytes in pieces of about ``size`` (default ``CHUNK_BYTES``), each cut after a newline."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as fh:
        while True:
            block = fh.read(size or CHUNK_BYTES)
            if not block:
                break
            if not block.endswith(b"\n"):
                rest = fh.readline(MAX_LINE_BYTES + 1)  # finish the line (one copy of the block at most)
                if len(rest) > MAX_LINE_BYTES and not rest.endswith(b"\n"):
                    raise CorpusError(
                        f"a line longer than {MAX_LINE_BYTES} bytes (a corrupt or decompression-bomb file?)",
                        where=str(path),
                        fix="check the file (XTREE_MAX_LINE_BYTES raises the limit)",
                    )
                block += rest
            yield block


def _line_starts(block: bytes) -> np.ndarray:
    """Offset of each line of ``block`` (a final newline opens no line).

    Example:
        >>> _line_starts(b"ab\\n\\ncd").tolist(), _line_starts(b"ab\\n").tolist()
        ([0, 3, 4], [0])
    """
    ends = np.flatnonzero(np.frombuffer(block, np.uint8) == 10)
    starts = np.empty(len(ends) + 1, dtype=np.int64)
    starts[0] = 0
    starts[1:] = ends + 1
    return starts[:-1] if len(block) and block.endswith(b"\n") else starts


def _n_records(block: bytes, starts: np.ndarray | None = None) -> int:
    """Non-blank lines in ``block`` (each must hold exactly one record).

    Only lines that are empty or open with white space can be blank, so only those are looked at.

    Example:
        >>> _n_records(b'{"a": 1}\\n\\n  \\n{"b": 2}'), _n_records(b'{"a": 1}\\n{"b": 2}\\n')
        (2, 2)
    """
    if not block:
        return 0
    starts = _line_starts(block) if starts is None else starts
    first = np.frombuffer(block, np.uint8)[starts]  # every start is inside the block
    maybe_blank = np.flatnonzero(np.isin(first, _BLANK_OPENERS))
    stops = np.append(starts[1:] - 1, len(block))
    blank = sum(1 for i in maybe_blank.tolist() if not block[starts[i] : stops[i]].strip())
    return len(starts) - blank


_BLANK_OPENERS = np.frombuffer(b" \t\r\f\v\n", np.uint8)
_ALL_BUT_BRACKETS = bytes(b for b in range(256) if b not in b"{[\n")


def _text_problem(block: bytes) -> str | None:
    """The whole-text checks of :func:`_strict_problem`: not UTF-8, ``NaN``/``Infinity``, a null required key."""
    if not block.isascii():
        try:
            block.decode("utf-8")
        except UnicodeDecodeError:
            return "not UTF-8 text"
    if b"NaN" in block or b"Infinity" in block:
        return "NaN or Infinity in the text"
    if b"null" in block and _NULL_KEY.search(block):
        return "a required or string field is null"
    return None


def _strict_problem(block: bytes, starts: np.ndarray | None = None) -> str | None:
    """Why the strict line validator might refuse a line of ``block`` that Arrow would take, or None.

    Arrow's reader accepts invalid UTF-8 inside strings, ``NaN``/``Infinity``, any nesting and
    integers of any length in the values it skips, and reads a ``null`` like a missing key; the
    validator (``_io.loads_strict``) refuses those. Cheap scans find the blocks where that can
    happen (false alarms only cost speed): non-ASCII text that is not UTF-8, the words ``NaN`` or
    ``Infinity``, a ``null`` for a required or string key, a line with more brackets than the depth
    limit that ``loads_strict`` then refuses, a line long enough for a 4,300-digit integer holding one.
    Per-line counts come from whole-block operations (``bytes.translate``, numpy), not a loop over lines.

    Example:
        >>> _strict_problem(b'{"id": "a", "n": [[1]]}\\n'), _strict_problem(b'{"id": "a\\xff"}\\n')
        (None, 'not UTF-8 text')
        >>> _strict_problem(b'{"x": ' + b"[" * 150 + b"]" * 150 + b"}\\n")
        'nested deeper than 100 levels'
    """
    problem = _text_problem(block)
    if problem:
        return problem
    starts = _line_starts(block) if starts is None else starts
    if len(starts) == 0:
        return None
    stops = np.append(starts[1:] - 1, len(block))
    deep: set[int] = set()
    if block.count(b"{") + block.count(b"[") > MAX_JSON_DEPTH:
        # per-line bracket counts: keep only '{', '[' and newlines, then measure the pieces
        per_line = map(len, block.translate(None, _ALL_BUT_BRACKETS).split(b"\n"))
        deep = {i for i, n in enumerate(per_line) if n > MAX_JSON_DEPTH}
    long = set(np.flatnonzero(stops - starts > _BIG_INT_DIGITS).tolist())
    for i in sorted(deep | long):  # the first line with a problem names it, as the line loop would
        line = block[starts[i] : stops[i]]
        if i in deep:
            try:
                loads_strict(line.decode("utf-8"))
            except JSONProblem as exc:
                return str(exc)
        if i in long and _BIG_INT.search(line):
            return "an integer of 4,300+ digits"
    return None


def _strict_problem_slow(block: bytes) -> str | None:
    """:func:`_strict_problem` line by line in Python: the obviously-correct version it is tested against."""
    problem = _text_problem(block)
    if problem:
        return problem
    for line in block.split(b"\n"):
        if line.count(b"{") + line.count(b"[") > MAX_JSON_DEPTH:
            try:
                loads_strict(line.decode("utf-8"))
            except JSONProblem as exc:
                return str(exc)
        if len(line) > _BIG_INT_DIGITS and _BIG_INT.search(line):
            return "an integer of 4,300+ digits"
    return None


def _parse_block(pa: Any, block: bytes) -> Any:
    """One JSONL block -> an Arrow table of the mining columns, or :class:`FastPathUnavailable`."""
    starts = _line_starts(block)
    problem = _strict_problem(block, starts)
    if problem:
        raise FastPathUnavailable(problem)
    opts = pa.json.ParseOptions(explicit_schema=_json_schema(pa), unexpected_field_behavior="ignore")
    size = 16 << 20
    int_ids = False
    while True:
        try:
            table = pa.json.read_json(
                io.BytesIO(block), read_options=pa.json.ReadOptions(block_size=size), parse_options=opts
            )
            break
        except pa.ArrowInvalid as exc:
            if "straddl" in str(exc) and size < len(block):  # a line longer than the block size
                size = len(block) + 1
                continue
            if "Column(/id) changed from string to number" in str(exc) and not int_ids:
                int_ids = True  # integer ids: the validator accepts them (and str()s them)
                schema = _json_schema(pa, pa.int64())
                opts = pa.json.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore")
                continue
            raise FastPathUnavailable(str(exc)) from None
        except (UnicodeDecodeError, ValueError, OSError) as exc:
            raise FastPathUnavailable(str(exc)) from None
    if table.num_rows != _n_records(block, starts):
        raise FastPathUnavailable("a line holds more or less than one record")
    return _mining_columns(pa, table)


def _list_field(pa: Any, steps: Any, name: str) -> Any:
    """``steps[].name`` as a ``list<string>`` array sharing the steps' offsets."""
    return pa.ListArray.from_arrays(steps.offsets, steps.values.field(name))


def _mining_columns(pa: Any, table: Any) -> Any:
    """Check what the validator would and keep the mining columns (``FastPathUnavailable`` if not).

    Works chunk by chunk, so the columns the miner does not need (observations, ...) are never copied.
    """
    pc = pa.compute
    names = set(table.column_names)
    for col in ("id", "success", "steps"):
        if col not in names or table.column(col).null_count:
            raise FastPathUnavailable(f"missing {col!r}")
    if table.num_rows == 0:
        return None
    ids = table.column("id")
    if pa.types.is_integer(ids.type):
        ids = pc.cast(ids, pa.string())  # the validator accepts integer ids and str()s them
    if not pa.types.is_string(ids.type):
        raise FastPathUnavailable("id is not a string")
    if not pa.types.is_boolean(table.column("success").type):
        raise FastPathUnavailable("success is not a boolean")
    steps = table.column("steps")
    if not pa.types.is_list(steps.type) or not pa.types.is_struct(steps.type.value_type):
        raise FastPathUnavailable("steps is not a list of objects")
    fields = {steps.type.value_type.field(i).name for i in range(steps.type.value_type.num_fields)}
    if "action" not in fields or "token" not in fields:
        raise FastPathUnavailable("steps carry no token")
    tokens, actions = [], []
    for ch in steps.chunks:
        vals = ch.values
        if vals.null_count or vals.field("action").null_count:
            raise FastPathUnavailable("a step or its action is missing")
        if vals.field("token").null_count:
            raise FastPathUnavailable("steps without a token need the canonicalizer")
        tokens.append(_list_field(pa, ch, "token"))
        actions.append(_list_field(pa, ch, "action"))
    if "reward" in names and pa.types.is_floating(table.column("reward").type):
        finite = pc.is_finite(table.column("reward"))  # null stays null, and is allowed
        if finite.null_count < len(finite) and not pc.all(finite).as_py():
            raise FastPathUnavailable("a reward is not finite")
    strings = pa.list_(pa.string())
    out = {
        "id": ids,
        "success": table.column("success"),
        "env": _strings(pa, table, "env"),
        "task": _strings(pa, table, "task"),
        "tokens": pa.chunked_array(tokens, strings),
        "actions": pa.chunked_array(actions, strings),
    }
    return pa.table(out)


def _strings(pa: Any, table: Any, name: str) -> Any:
    # the "" scalar is built from buffers: converting a Python value would make pyarrow import pandas
    empty = pa.StringArray.from_buffers(1, pa.py_buffer(bytes(8)), pa.py_buffer(b""))[0]
    if name not in table.column_names:
        return pa.repeat(empty, table.num_rows)
    col = table.column(name)
    if not pa.types.is_string(col.type):
        raise FastPathUnavailable(f"{name} is not a string")
    return pa.compute.fill_null(col, empty)


def _read_parquet(pa: Any, path: Path) -> Any:
    pf = open_parquet(path)
    names = set(pf.schema_arrow.names)
    cols = [c for c in ("id", "success", "env", "task", "goal", "reward") if c in names]
    try:
        table = pf.read(columns=[*cols, "steps.list.element.action", "steps.list.element.token"])
    except (pa.ArrowInvalid, KeyError, IndexError) as exc:
        raise FastPathUnavailable(f"Parquet columns: {exc}") from None
    return _mining_columns(pa, table)


def _read_file(pa: Any, path: Path) -> list[Any]:
    if not path.is_file():
        raise FastPathUnavailable("no such file")  # the validator says so with its own message
    if is_parquet(path):
        t = _read_parquet(pa, path)
        return [] if t is None else [t]
    tables = []
    try:
        for block in _chunks(path):
            t = _parse_block(pa, block)
            if t is not None:
                tables.append(t)
    except (OSError, EOFError) as exc:  # a fake or truncated .gz: the validator words the error
        raise FastPathUnavailable(str(exc)) from None
    return tables


def from_arrow(table: Any) -> ColumnarCorpus:
    """A :class:`ColumnarCorpus` from an Arrow table (or ``datasets.Dataset``) with the corpus columns.

    Raises :class:`FastPathUnavailable` when the columns do not pass (then use the row path).
    """
    pa = pyarrow()
    t = arrow_table(table)
    if t is None:
        raise FastPathUnavailable("no Arrow table")
    part = _mining_columns(pa, t)
    return _assemble(pa, [] if part is None else [part])


def _ints(arr: Any) -> np.ndarray:
    """A null-free Arrow integer array as numpy: a view of its buffer (read-only).

    Example:
        >>> import pyarrow as pa
        >>> _ints(pa.array([5, 6, 7], pa.int32()).slice(1)).tolist()
        [6, 7]
    """
    data = np.frombuffer(arr.buffers()[1], np.dtype(str(arr.type)).newbyteorder("<"))
    return data[arr.offset : arr.offset + len(arr)]


def _bools(arr: Any) -> np.ndarray:
    """A null-free Arrow boolean array as numpy, from its bit buffer.

    (``np.asarray`` and ``to_numpy`` make pyarrow import pandas: +0.25 s for every ``xtree mine``; the
    same holds for :func:`_ints`.)

    Example:
        >>> import pyarrow as pa
        >>> _bools(pa.array([True, False, True, True]).slice(1)).tolist()
        [False, True, True]
    """
    bits = np.unpackbits(np.frombuffer(arr.buffers()[1], np.uint8), bitorder="little")
    return bits[arr.offset : arr.offset + len(arr)].astype(bool)


def _assemble(pa: Any, tables: list[Any], sort: bool = True) -> ColumnarCorpus:
    """Join per-chunk tables (no copy), refuse duplicate ids, view in id order (unless ``sort`` is False)."""
    pc = pa.compute
    strings = pa.list_(pa.string())

    def column(name: str, typ: Any) -> Any:
        return pa.chunked_array([c for t in tables for c in t.column(name).chunks], typ)

    ids = column("id", pa.string())
    success = column("success", pa.bool_())
    cc = ColumnarCorpus(
        ids=ids,
        success=np.concatenate([_bools(c) for c in success.chunks]) if len(ids) else np.zeros(0, bool),
        task=column("task", pa.string()),
        env=column("env", pa.string()),
        tokens=column("tokens", strings),
        actions=column("actions", strings),
        sorted_by_id=True,
    )
    if len(ids) < 2:
        return cc
    ids_flat = ids.combine_chunks()
    n = len(ids_flat)
    if pc.all(pc.less(ids_flat.slice(0, n - 1), ids_flat.slice(1))).as_py():
        return cc  # already in strictly increasing id order: sorted and unique
    order = _ints(pc.sort_indices(ids_flat)).astype(np.int64)
    in_order = ids_flat.take(order)
    if pc.any(pc.equal(in_order.slice(1), in_order.slice(0, n - 1))).as_py():
        raise FastPathUnavailable("duplicate ids")  # the validator's policy and the content tie-break apply
    return dataclasses.replace(cc, order=order) if sort else dataclasses.replace(cc, sorted_by_id=False)


def read_columnar(
    paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]], *, sort: bool = True
) -> ColumnarCorpus:
    """Read corpus files the columnar way; :class:`FastPathUnavailable` when they need the validator."""
    pa = pyarrow()
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    tables: list[Any] = []
    for p in paths:
        tables.extend(_read_file(pa, Path(p)))
    return _assemble(pa, tables, sort)


def _worth_columns(paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]]) -> bool:
    """Whether the columnar path pays for its import: any Parquet file, or JSONL of COLUMNAR_MIN_BYTES+."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    total = 0
    for p in paths:
        try:
            if is_parquet(p):
                return True
            total += os.path.getsize(p)
        except OSError:
            continue  # the reader names a missing or unreadable file
    return total >= COLUMNAR_MIN_BYTES


def load_corpus(
    paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    *,
    skip_bad: bool = False,
    sort: bool = True,
    columnar: bool | None = None,
    **read_options: Any,
) -> ColumnarCorpus | Corpus:
    """Read corpus files for mining or tiling: columns when possible, else the validated object path.

    Returns a :class:`ColumnarCorpus` when every line parses, types check and every step has a token;
    otherwise :func:`xtree_gym.corpus.read_corpus`'s :class:`Corpus` (which raises the one
    :class:`CorpusError` naming ``file:line``, or skips and counts bad lines under ``skip_bad``).
    Without ``pyarrow`` installed, always the object path. ``sort=False`` keeps line order (tiling).
    ``columnar``: ``None`` picks by size (:data:`COLUMNAR_MIN_BYTES`), ``False`` forces the object
    path, ``True`` tries the columnar path whatever the size.
    ``read_options`` go to :func:`read_corpus` unchanged (e.g. its policy on repeated ids): the fast
    path never sees a repeated id, so that policy always applies.

    The fast path checks every field the format defines as the validator does, and sends any
    text holding ``NaN``/``Infinity`` to it; values under keys it does not define (and inside
    ``slots``) are otherwise skipped unparsed (nesting depth, 4,300-digit integers), since no tree
    reads them.

    Example:
        >>> import tempfile, pathlib
        >>> d = pathlib.Path(tempfile.mkdtemp())
        >>> line = '{{"id": "{}", "success": true, "steps": [{{"action": "go", "token": "go<>"}}]}}\\n'
        >>> _ = (d / "c.jsonl").write_text(line.format("b") + line.format("a"))
        >>> c = load_corpus(d / "c.jsonl", columnar=True)
        >>> type(c).__name__, c.id_list(), c.encode().flat.tolist()
        ('ColumnarCorpus', ['a', 'b'], [0, 0])
        >>> _ = (d / "c.jsonl").write_text(line.format("a") + "not json\\n")
        >>> load_corpus(d / "c.jsonl")
        Traceback (most recent call last):
        ...
        xtree_gym.errors.CorpusError: ...c.jsonl:2: not valid JSON (Expecting value at column 1) -- fix: ...
    """
    if columnar is None:
        columnar = _worth_columns(paths)
    if not columnar:
        return read_corpus(paths, skip_bad=skip_bad, **read_options)
    try:
        pyarrow()
        return read_columnar(paths, sort=sort)
    except (FastPathUnavailable, ImportError):
        return read_corpus(paths, skip_bad=skip_bad, **read_options)
    except CorpusError:  # e.g. an unreadable Parquet file: the validator's message is the one to show
        return read_corpus(paths, skip_bad=skip_bad, **read_options)
