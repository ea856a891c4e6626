"""JSONL straight to the encoded corpus: ``xtree mine``'s one pass over a file.

:func:`read_encoded` reads each JSONL(.gz) file once, block by block, and decodes every line with
``msgspec`` into typed records: the field types the line validator checks are checked in C, and a
line of the format's own keys (slots of scalars) needs nothing else checked -- every number in it is
decoded, so 1e400 or a 4,301-digit integer is an error, and it cannot nest deeper than 4. A line
with other keys is decoded whole once more (numbers and depth, see :func:`_judge`). Each record
leaves behind only what the miner reads: its id, success flag, task and env codes, its tokens as
ints, and where its line starts (to read the few records the tree quotes as examples again
afterwards, see :meth:`StreamCorpus.prefetch`). No ``Trajectory``, no Arrow table, no second copy
of the corpus.

Whenever the input needs the validator's judgement -- a line that does not decode or type, a step
without a token, a repeated id, nesting deeper than the validator allows, a 4,301-digit integer, a
number such as ``1e400`` that overflows to infinity, text that is not UTF-8, Parquet --
:class:`FastPathUnavailable` says why and the caller reads the files the columnar or the object way
instead (the validator then names the bad line). Trees are byte-identical whichever way the corpus
was read (tested).

``msgspec`` is optional (``pip install xtree_gym[fast]``); without it :func:`read_encoded` raises
:class:`ImportError` and ``xtree mine`` reads the way it did before.
"""

from __future__ import annotations

import functools
import operator
from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import CorpusError
from .arrow_io import is_parquet
from .columnar import FastPathUnavailable, _chunks, _permute
from .encoded import EncodedCorpus
from .io import MAX_JSON_DEPTH, JSONProblem, _depth_exceeds, loads_strict, open_bytes
from .records import Trajectory, _RecordProblem, trajectory_from_dict


@functools.lru_cache(maxsize=1)
def _decoders() -> tuple[Any, Any, tuple[type[BaseException], ...]]:
    """Two msgspec decoders of one corpus line, typed as ``trajectory_from_dict`` checks, and their errors.

    * strict: the format's keys only, slots of scalars. A line it accepts has had every value
      decoded and range-checked (1e400 and 4,301-digit integers are errors, as in the validator) and
      nests 4 deep at most, so the common line costs one decode and no other check;
    * lenient: keys the format does not define are skipped unread and slots may nest; it only
      decodes a line that :func:`_judge` has decoded whole first (numbers checked, depth measured).

    A step needs a string ``token`` (one without needs the canonicalizer: the object path); an id is
    a string or an integer (the validator ``str()``s it).
    """
    import msgspec

    def record_type(strict: bool) -> Any:
        scalar = str | int | float | bool | None
        slots = dict[str, scalar] | None if strict else dict | None  # type: ignore[type-arg]
        step_fields: list[Any] = [
            ("action", str),
            ("token", str),
            ("observation", str | None, None),
            ("thought", str | None, None),
            ("slots", slots, None),
        ]
        step = msgspec.defstruct("CorpusStep", step_fields, gc=False, forbid_unknown_fields=strict)
        record_fields: list[Any] = [
            ("id", str | int),
            ("success", bool),
            ("steps", list[step]),  # type: ignore[valid-type]
            ("env", str, ""),
            ("task", str, ""),
            ("goal", str, ""),
            ("reward", float | None, None),
        ]
        return msgspec.defstruct("CorpusRecord", record_fields, gc=False, forbid_unknown_fields=strict)

    strict, lenient = (msgspec.json.Decoder(record_type(x)) for x in (True, False))
    return strict, lenient, (msgspec.DecodeError, RecursionError)


def _judge(line: bytes) -> Any:
    """The record of a line the strict decoder refused; ``None`` for a blank line.

    :class:`FastPathUnavailable` when the validator must judge the line: it is not JSON, a number
    anywhere in it overflows (``{"score": 1e400}`` under a key the record does not define), it
    nests deeper than the validator allows, or a field has a type the format does not take.

    Example:
        >>> _judge(b'{"id": 1, "success": true, "steps": [], "meta": {"k": [1.5]}}').id
        1
        >>> _judge(b'{"id": "a", "success": true, "steps": [], "score": -2.5E+999}')
        Traceback (most recent call last):
        ...
        xtree_gym.corpus.columnar.FastPathUnavailable: a line the validator should judge
    """
    if not line.strip():
        return None
    import msgspec

    _, lenient, errors = _decoders()
    try:
        if _depth_exceeds(msgspec.json.decode(line), MAX_JSON_DEPTH):  # every value, under any key
            raise FastPathUnavailable("nested deeper than the validator allows")
        return lenient.decode(line)
    except errors:
        raise FastPathUnavailable("a line the validator should judge") from None


STREAM_CHUNK_BYTES = 1 << 20
"""Bytes read and split at a time: 1 MiB pieces reuse the memory the last one freed (64 MiB ones
cost fresh pages: 0.32 vs 0.27 CPU s and 135 vs 46 MiB peak on the 100k short benchmark corpus)."""


class _Codes(dict):  # type: ignore[type-arg]
    """str -> int, a new string getting the next code (first-seen order)."""

    def __missing__(self, key: str) -> int:
        code = self[key] = len(self)
        return code


@dataclass
class _Columns:
    """What the read keeps of each record, in file order."""

    ids: list[str] = field(default_factory=list)
    success: bytearray = field(default_factory=bytearray)
    task: array = field(default_factory=lambda: array("i"))  # type: ignore[type-arg]
    lengths: array = field(default_factory=lambda: array("q"))  # type: ignore[type-arg]
    flat: array = field(default_factory=lambda: array("i"))  # type: ignore[type-arg]
    where: array = field(default_factory=lambda: array("q"))  # type: ignore[type-arg]
    file_of: array = field(default_factory=lambda: array("i"))  # type: ignore[type-arg]
    tokens: _Codes = field(default_factory=_Codes)
    tasks: _Codes = field(default_factory=_Codes)
    envs: set[str] = field(default_factory=set)


def _read_block(block: bytes, start: int, cols: _Columns) -> None:
    """Decode one block of whole lines (it starts at byte ``start`` of its file) into ``cols``.

    One record at a time: it leaves its columns' entries and is freed before the next line is
    decoded (a batch of records decoded first and read column by column is 2x slower: it leaves the cache).
    """
    if not block.isascii():
        try:
            block.decode("utf-8")
        except UnicodeDecodeError:
            raise FastPathUnavailable("not UTF-8 text") from None
    strict, _, errors = _decoders()
    decode = strict.decode
    tok, tasks, envs = cols.tokens, cols.tasks, cols.envs
    ids_append, success_append = cols.ids.append, cols.success.append
    task_append, len_append, where_append = cols.task.append, cols.lengths.append, cols.where.append
    flat_extend = cols.flat.extend
    code_of, token_of = tok.__getitem__, operator.attrgetter("token")  # C-level maps: no frame per step
    at = start
    for line in block.split(b"\n"):
        try:
            r = decode(line)
        except errors:
            r = _judge(line)
            if r is None:  # a blank line, as the validator allows
                at += len(line) + 1
                continue
        rid = r.id
        ids_append(rid if type(rid) is str else str(rid))  # integer ids, as the validator str()s them
        success_append(r.success)
        task_append(tasks[r.task])
        envs.add(r.env)
        steps = r.steps
        len_append(len(steps))
        flat_extend(map(code_of, map(token_of, steps)))
        where_append(at)
        at += len(line) + 1


def _read_file(path: Path, cols: _Columns) -> None:
    if not path.is_file():
        raise FastPathUnavailable("no such file")  # the validator says so in its own words
    if is_parquet(path):
        raise FastPathUnavailable("Parquet: the columnar path reads it")
    at = 0
    try:
        for block in _chunks(path, STREAM_CHUNK_BYTES):
            _read_block(block, at, cols)
            at += len(block)
    except (OSError, EOFError, CorpusError) as exc:  # a fake or truncated .gz, an overlong line
        raise FastPathUnavailable(str(exc)) from None


def _sorted_codes(codes: dict[str, int]) -> tuple[np.ndarray, list[str]]:
    """(first-seen code -> rank in sorted order, the sorted strings).

    Example:
        >>> lut, names = _sorted_codes({"b": 0, "a": 1})
        >>> lut.tolist(), names
        ([1, 0], ['a', 'b'])
    """
    names = sorted(codes)
    lut = np.empty(len(names), dtype=np.int32)
    for rank, name in enumerate(names):
        lut[codes[name]] = rank
    return lut, names


def _id_order(ids: list[str]) -> np.ndarray | None:
    """Row order by id (``None``: already strictly increasing); :class:`FastPathUnavailable` on a repeat."""
    if all(map(operator.lt, ids, islice(ids, 1, None))):
        return None
    order = sorted(range(len(ids)), key=ids.__getitem__)
    if any(ids[a] == ids[b] for a, b in zip(order, islice(order, 1, None))):
        raise FastPathUnavailable("duplicate ids")  # the validator's policy applies
    return np.array(order, dtype=np.int64)


def read_encoded(paths: str | Path | Sequence[str | Path]) -> StreamCorpus:
    """Read JSONL(.gz) corpus files straight into a :class:`StreamCorpus` (trajectories in id order).

    Raises :class:`FastPathUnavailable` when the files need the validator (then read them with
    :func:`xtree_gym.corpus.columnar.load_corpus`), :class:`ImportError` without ``msgspec``.

    Example:
        >>> import tempfile, pathlib
        >>> d = pathlib.Path(tempfile.mkdtemp())
        >>> line = '{{"id": "{}", "success": {}, "steps": [{{"action": "go north", "token": "{}"}}]}}\\n'
        >>> _ = (d / "c.jsonl").write_text(line.format("b", "true", "go<dir>") + line.format("a", "false", "look<>"))
        >>> c = read_encoded(d / "c.jsonl")
        >>> c.encoded.vocab, c.encoded.flat.tolist(), c.encoded.success.tolist(), c[1].steps[0].action
        (['go<dir>', 'look<>'], [1, 0], [False, True], 'go north')
    """
    _decoders()  # ImportError first, before any reading
    if isinstance(paths, (str, Path)):
        paths = [paths]
    files = [Path(p) for p in paths]
    cols = _Columns()
    first_row = []
    for p in files:
        first_row.append(len(cols.ids))
        _read_file(p, cols)
    return _assemble(cols, files, first_row)


def _assemble(cols: _Columns, files: list[Path], first_row: list[int]) -> StreamCorpus:
    """The encoded corpus in id order, from what the read kept."""
    n = len(cols.ids)
    order = _id_order(cols.ids)
    tok_lut, vocab = _sorted_codes(cols.tokens)
    task_lut, task_names = _sorted_codes(cols.tasks)
    flat = np.frombuffer(cols.flat, dtype=np.int32)
    flat = tok_lut[flat] if len(flat) else flat.astype(np.int32)
    cols.flat = array("i")  # its memory goes now, not at the end of the run
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.frombuffer(cols.lengths, dtype=np.int64), out=offsets[1:])
    success = np.frombuffer(bytes(cols.success), dtype=np.uint8).astype(bool)
    task = task_lut[np.frombuffer(cols.task, dtype=np.int32)] if n else np.zeros(0, np.int32)
    where = np.frombuffer(cols.where, dtype=np.int64)
    file_of = np.repeat(
        np.arange(len(files), dtype=np.int32), np.diff(np.append(first_row, n)).astype(np.int64)
    )
    ids = cols.ids
    if order is not None:
        flat, offsets = _permute(flat, offsets, order)
        success, task, where, file_of = success[order], task[order], where[order], file_of[order]
        ids = [ids[i] for i in order.tolist()]
    enc = EncodedCorpus(
        flat=flat, offsets=offsets, success=success, task=task, vocab=vocab, task_names=task_names
    )
    return StreamCorpus(enc, ids, sorted(cols.envs), files, file_of, where)


@dataclass
class StreamCorpus:
    """A corpus read by :func:`read_encoded`: its encoding, its ids and where each record's line is.

    Indexing reads that record's line again (the tree quotes a few records' actions as examples);
    :meth:`prefetch` reads many in one pass per file.
    """

    encoded: EncodedCorpus
    """The trajectories' tokens, success flags and task types, in id order."""
    ids: list[str]
    """Trajectory ids, sorted."""
    envs: list[str]
    """Sorted distinct env names."""
    files: list[Path]
    file_of: np.ndarray
    """(n,) which of ``files`` the ``i``-th trajectory is in."""
    where: np.ndarray
    """(n,) byte offset of its line in that (decompressed) file."""
    _cache: dict[int, Trajectory] = field(default_factory=dict, repr=False)

    def __len__(self) -> int:
        return len(self.ids)

    def env_names(self) -> list[str]:
        return self.envs

    def encode(self) -> EncodedCorpus:
        return self.encoded

    def __getitem__(self, i: int) -> Trajectory:
        if i not in self._cache:
            self.prefetch([i])
        return self._cache[i]

    def __iter__(self) -> Iterator[Trajectory]:
        return (self[i] for i in range(len(self)))

    def prefetch(self, rows: Sequence[int]) -> None:
        """Read the records of ``rows`` (one forward pass per file), as the validator reads them."""
        todo = sorted(
            {int(i) for i in rows} - self._cache.keys(), key=lambda i: (self.file_of[i], self.where[i])
        )
        for f in sorted({int(self.file_of[i]) for i in todo}):
            with open_bytes(self.files[f]) as fh:
                for i in (i for i in todo if self.file_of[i] == f):
                    fh.seek(int(self.where[i]))
                    self._cache[i] = self._record(fh.readline(), i)

    def _record(self, raw: bytes, i: int) -> Trajectory:
        where = f"{self.files[int(self.file_of[i])]} (byte {int(self.where[i])})"
        try:
            traj = trajectory_from_dict(loads_strict(raw.decode("utf-8")))
        except (JSONProblem, _RecordProblem, UnicodeDecodeError) as exc:
            raise CorpusError(
                f"the line changed while mining ({exc})", where=where, fix="mine again"
            ) from None
        if traj.id != self.ids[i]:
            raise CorpusError(
                f"the line now holds id {traj.id!r}, not {self.ids[i]!r}", where=where, fix="mine again"
            )
        return traj
