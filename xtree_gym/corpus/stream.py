"""JSONL straight to the encoded corpus: ``xtree mine``'s one pass over a file.

:func:`read_encoded` reads each JSONL(.gz) file once, in 64 KiB blocks of whole lines, and decodes
them with ``msgspec`` into typed records: the field types the line validator checks are checked in
C, and a line of the format's own keys (slots of scalars) needs nothing else checked -- every number
in it is decoded, so 1e400 or a 4,301-digit integer is an error, and it cannot nest deeper than 4. A
block of one such object per line is decoded in one call; a block with blank lines or other keys
line by line, a line with other keys decoded whole once more (numbers and depth, see
:func:`_judge`). Each record leaves behind only what the miner reads: its id, success flag, task and
env codes and its tokens as ints; each block, where it starts (to read the few records the tree
quotes as examples again afterwards, see :meth:`StreamCorpus.prefetch`). No ``Trajectory``, no
Arrow table, no second copy of the corpus.

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
from itertools import chain, islice
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


STREAM_CHUNK_BYTES = 1 << 16
"""Bytes read and decoded at a time: a 64 KiB block's records (a few hundred) are taken apart while
they are still in the cache and free memory the next block reuses (1 MiB blocks: 0.117 vs 0.068 CPU s
to decode the 100k short benchmark corpus; 64 MiB ones also cost fresh pages)."""


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
    blocks: array = field(default_factory=lambda: array("q"))  # type: ignore[type-arg]
    """Per block: its file's index, its first byte there, the read index of its first record."""
    tokens: _Codes = field(default_factory=_Codes)
    tasks: _Codes = field(default_factory=_Codes)
    envs: set[str] = field(default_factory=set)


def _read_block(block: bytes, start: int, cols: _Columns, file: int) -> None:
    """Decode one block of whole lines (byte ``start`` of file ``file``) into ``cols``.

    A block of one JSON object per line is decoded in one call (:func:`_object_lines`); any other
    (blank lines, a line the strict decoder refuses) is read line by line. The block's records are
    taken apart together (:func:`_take`), while they are still in the cache.
    """
    if not block.isascii():
        try:
            block.decode("utf-8")
        except UnicodeDecodeError:
            raise FastPathUnavailable("not UTF-8 text") from None
    cols.blocks.extend((file, start, len(cols.ids)))
    strict, _, errors = _decoders()
    n_lines = _object_lines(block)
    if n_lines:
        try:
            records = strict.decode_lines(block)
        except errors:
            pass  # the line by line read finds the line and says what is wrong with it
        else:
            if len(records) == n_lines:
                _take(records, cols)
                return
    records = []
    for line in block.split(b"\n"):
        try:
            records.append(strict.decode(line))
        except errors:
            r = _judge(line)
            if r is not None:  # else a blank line, as the validator allows
                records.append(r)
    _take(records, cols)


_ID, _SUCCESS, _TASK, _ENV, _STEPS, _TOKEN = map(
    operator.attrgetter, ("id", "success", "task", "env", "steps", "token")
)


def _take(records: Sequence[Any], cols: _Columns) -> None:
    """Append what the miner reads of ``records`` to ``cols``: C-level maps, no Python frame per record or step."""
    cols.ids.extend(map(_ID, records))  # integer ids become strings at the end, as the validator str()s them
    cols.success.extend(map(_SUCCESS, records))
    cols.task.extend(map(cols.tasks.__getitem__, map(_TASK, records)))
    cols.envs.update(map(_ENV, records))
    steps = list(map(_STEPS, records))
    cols.lengths.extend(map(len, steps))
    cols.flat.extend(map(cols.tokens.__getitem__, map(_TOKEN, chain.from_iterable(steps))))


def _object_lines(block: bytes) -> int:
    """How many lines ``block`` has when each starts with ``{`` and ends with ``}``; else 0.

    Then ``decode_lines`` returning that many values means one record per line: no value spans a
    line break (inside one JSON value, ``}`` then ``{`` needs a comma between them) and no line is blank.

    Example:
        >>> _object_lines(b'{"a": 1}\\n{}\\n'), _object_lines(b'{}\\n{}'), _object_lines(b'{}\\n\\n{}\\n')
        (2, 2, 0)
        >>> _object_lines(b'{"a": {}\\n}\\n')  # an object across two lines
        0
    """
    arr = np.frombuffer(block, dtype=np.uint8)
    ends = np.flatnonzero(arr == 10)  # the byte after each line
    if not block.endswith(b"\n"):
        ends = np.append(ends, len(arr))  # the file's last line, without its newline
    if not len(ends) or arr[0] != 123 or not (arr[ends - 1] == 125).all():  # { and }
        return 0
    return len(ends) if (arr[ends[:-1] + 1] == 123).all() else 0


def _read_file(path: Path, cols: _Columns, file: int) -> None:
    if not path.is_file():
        raise FastPathUnavailable("no such file")  # the validator says so in its own words
    if is_parquet(path):
        raise FastPathUnavailable("Parquet: the columnar path reads it")
    at = 0
    try:
        for block in _chunks(path, STREAM_CHUNK_BYTES):
            _read_block(block, at, cols, file)
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
    for f, p in enumerate(files):
        _read_file(p, cols, f)
    return _assemble(cols, files)


def _assemble(cols: _Columns, files: list[Path]) -> StreamCorpus:
    """The encoded corpus in id order, from what the read kept."""
    n = len(cols.ids)
    if set(map(type, cols.ids)) - {str}:  # integer ids, as the validator str()s them
        cols.ids = [i if type(i) is str else str(i) for i in cols.ids]
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
    ids = cols.ids
    if order is not None:
        flat, offsets = _permute(flat, offsets, order)
        success, task = success[order], task[order]
        ids = [ids[i] for i in order.tolist()]
    enc = EncodedCorpus(
        flat=flat, offsets=offsets, success=success, task=task, vocab=vocab, task_names=task_names
    )
    blocks = np.frombuffer(cols.blocks, dtype=np.int64).reshape(-1, 3)
    return StreamCorpus(enc, ids, sorted(cols.envs), files, blocks, order)


@dataclass
class StreamCorpus:
    """A corpus read by :func:`read_encoded`: its encoding, its ids and the blocks its lines are in.

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
    blocks: np.ndarray
    """(blocks, 3): each block's file index, first byte in that (decompressed) file, and the read
    index of its first record; a block's records are its non-blank lines, in order."""
    read_order: np.ndarray | None
    """(n,) the read index of the ``i``-th trajectory (``None``: the file order was the id order)."""
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

    def _locate(self, i: int) -> tuple[int, int, int]:
        """(file, first byte of its block, index of its line among the block's non-blank lines) of row ``i``."""
        r = i if self.read_order is None else int(self.read_order[i])
        b = int(np.searchsorted(self.blocks[:, 2], r, side="right")) - 1
        file, start, first = (int(x) for x in self.blocks[b])
        return file, start, r - first

    def prefetch(self, rows: Sequence[int]) -> None:
        """Read the records of ``rows`` (one forward pass per file), as the validator reads them."""
        todo = sorted((self._locate(i), i) for i in {int(i) for i in rows} - self._cache.keys())
        for f in sorted({where[0] for where, _ in todo}):
            with open_bytes(self.files[f]) as fh:
                block, k, at = -1, -1, 0
                for (_, start, line), i in (t for t in todo if t[0][0] == f):
                    if start != block:  # the records of one block are read in one forward pass
                        fh.seek(start)
                        block, k = start, -1
                    raw = b""
                    while k < line:
                        at = fh.tell()
                        raw = fh.readline()
                        if not raw:
                            break
                        k += raw.strip() != b""  # blank lines hold no record (as in the read)
                    self._cache[i] = self._record(raw, i, f"{self.files[f]} (byte {at})")

    def _record(self, raw: bytes, i: int, where: str) -> Trajectory:
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
