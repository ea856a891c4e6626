"""Corpus files cut into contiguous shards, each read on its own (``xtree mine --ray``).

:func:`plan_shards` cuts the files, in order, into ``n`` pieces of about equal bytes: a plain JSONL
file is cut at line starts (by byte offset, so a worker reads only its own bytes); a ``.jsonl.gz``
file cannot be entered in the middle, so it goes whole to one shard (a corpus of one ``.gz`` file is
read by one worker: split it into several files to spread it). :func:`read_shard` reads one shard's
pieces with the one-pass reader of :mod:`xtree_gym.corpus.stream`, so a shard's records are decoded,
checked and encoded exactly as ``xtree mine`` reads the whole file.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from pathlib import Path

from ..errors import CorpusError
from .arrow_io import is_parquet
from .columnar import FastPathUnavailable
from .io import MAX_LINE_BYTES
from .stream import STREAM_CHUNK_BYTES, StreamCorpus, _assemble, _Columns, _decoders, _read_block

Piece = tuple[int, int, int]
"""(file index, first byte, end byte) of a shard's part of one file; a ``.gz`` piece is ``(f, 0, -1)``."""


def _line_start_at(path: Path, at: int, size: int) -> int:
    """The first line start at or after byte ``at`` of a plain file (``size`` at the end)."""
    if at <= 0:
        return 0
    if at >= size:
        return size
    with open(path, "rb") as fh:
        fh.seek(at - 1)
        fh.readline()  # the rest of the line byte at - 1 lies in
        return min(fh.tell(), size)


def check_shardable(paths: Sequence[str | Path]) -> list[Path]:
    """The files as paths; :class:`FastPathUnavailable` for one that is missing or Parquet (the one-process
    reader takes those, and words the error)."""
    files = [Path(p) for p in paths]
    for p in files:
        if not p.is_file():
            raise FastPathUnavailable("no such file")
        if is_parquet(p):
            raise FastPathUnavailable("Parquet: the columnar path reads it")
    return files


def plan_shards(paths: Sequence[str | Path], n: int) -> list[list[Piece]]:
    """Cut the files into ``n`` contiguous shards of about equal bytes (fewer when ``.gz`` files cannot be cut).

    Example:
        >>> import tempfile, pathlib
        >>> p = pathlib.Path(tempfile.mkdtemp()) / "c.jsonl"
        >>> _ = p.write_bytes(b"aaaa\\nbb\\ncccccc\\ndd\\n")
        >>> plan_shards([p], 2)
        [[(0, 0, 15)], [(0, 15, 18)]]
    """
    files = check_shardable(paths)
    sizes = [p.stat().st_size for p in files]
    total = max(1, sum(sizes))
    cuts = [0]  # cut points in the files' concatenated bytes, each at a line start or a .gz file's end
    for k in range(1, n):
        at, base = total * k // n, 0
        for p, size in zip(files, sizes):
            if at < base + size:
                at = base + size if p.suffix == ".gz" else base + _line_start_at(p, at - base, size)
                break
            base += size
        cuts.append(max(at, cuts[-1]))
    cuts.append(sum(sizes))
    shards: list[list[Piece]] = []
    for lo, hi in itertools.pairwise(cuts):
        pieces: list[Piece] = []
        base = 0
        for f, (p, size) in enumerate(zip(files, sizes)):
            a, b = max(lo, base), min(hi, base + size)
            if a < b or (size == 0 and lo <= base < hi):
                pieces.append((f, 0, -1) if p.suffix == ".gz" else (f, a - base, b - base))
            base += size
        if pieces:
            shards.append(pieces)
    return shards


def _range_blocks(path: Path, start: int, end: int) -> Iterator[tuple[int, bytes]]:
    """(first byte, block) of whole lines covering bytes ``[start, end)`` of a plain file (``end`` a line start)."""
    with open(path, "rb") as fh:
        fh.seek(start)
        at = start
        while at < end:
            block = fh.read(min(STREAM_CHUNK_BYTES, end - at))
            if not block:
                break
            if not block.endswith(b"\n") and at + len(block) < end:
                rest = fh.readline(MAX_LINE_BYTES + 1)  # finish the line, as the whole-file reader does
                if len(rest) > MAX_LINE_BYTES and not rest.endswith(b"\n"):
                    raise CorpusError(f"a line longer than {MAX_LINE_BYTES} bytes", where=str(path))
                block += rest
            yield at, block
            at += len(block)


def _gz_blocks(path: Path) -> Iterator[tuple[int, bytes]]:
    from .columnar import _chunks

    at = 0
    for block in _chunks(path, STREAM_CHUNK_BYTES):
        yield at, block
        at += len(block)


def read_shard(paths: Sequence[str | Path], pieces: Sequence[Piece]) -> StreamCorpus:
    """Read one shard's pieces as :func:`~xtree_gym.corpus.stream.read_encoded` reads whole files.

    The result's vocabulary and task names are the shard's own (sorted), its trajectories in id
    order; block offsets are the files' own, so :meth:`StreamCorpus.prefetch` reads examples back.
    Raises :class:`FastPathUnavailable` as ``read_encoded`` does.
    """
    _decoders()  # ImportError first, before any reading
    files = [Path(p) for p in paths]
    cols = _Columns()
    for f, start, end in pieces:
        path = files[f]
        blocks = _gz_blocks(path) if end < 0 else _range_blocks(path, start, end)
        try:
            for at, block in blocks:
                _read_block(block, at, cols, f)
        except (OSError, EOFError, CorpusError) as exc:  # a fake or truncated .gz, an overlong line
            raise FastPathUnavailable(str(exc)) from None
    return _assemble(cols, files)
