"""The short, obviously-correct reference miner and its pure pair helpers.

It recounts every pair every round (O(rounds x tokens) in pure Python); it defines the semantics
of :mod:`xtree_gym.mining` and :mod:`xtree_gym.mining.fast` is tested against it.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any, TypeVar

from ..corpus.encoded import EncodedCorpus
from .base import Merge, is_candidate, x_score
from .config import MinerConfig

S = TypeVar("S", bound=Hashable)


def pair_counts(seq: Sequence[S]) -> dict[tuple[S, S], int]:
    """Non-overlapping adjacent pair counts, scanning left to right.

    Example:
        >>> pair_counts(["a", "b", "a", "b"])
        {('a', 'b'): 2, ('b', 'a'): 1}
        >>> pair_counts(["a", "a", "a", "a"])
        {('a', 'a'): 2}
    """
    counts: dict[tuple[S, S], int] = {}
    last: dict[tuple[S, S], int] = {}  # pair -> start index of its last counted occurrence
    for i in range(len(seq) - 1):
        pair = (seq[i], seq[i + 1])
        if last.get(pair) == i - 1:  # overlaps the occurrence just counted (only when u == v)
            continue
        last[pair] = i
        counts[pair] = counts.get(pair, 0) + 1
    return counts


def pair_positions(seq: Sequence[S], pair: tuple[S, S]) -> list[int]:
    """Start indices of the non-overlapping occurrences of ``pair``, left to right.

    Example:
        >>> pair_positions(["a", "a", "a", "b", "a", "a"], ("a", "a"))
        [0, 4]
    """
    out: list[int] = []
    i = 0
    while i < len(seq) - 1:
        if seq[i] == pair[0] and seq[i + 1] == pair[1]:
            out.append(i)
            i += 2
        else:
            i += 1
    return out


def merge_pair(seq: Sequence[S], pair: tuple[S, S], new: S) -> list[S]:
    """Replace the non-overlapping occurrences of ``pair`` by ``new``, left to right.

    Example:
        >>> merge_pair(["a", "a", "a", "b"], ("a", "a"), "Z")
        ['Z', 'a', 'b']
    """
    out: list[S] = []
    i = 0
    while i < len(seq):
        if i < len(seq) - 1 and seq[i] == pair[0] and seq[i + 1] == pair[1]:
            out.append(new)
            i += 2
        else:
            out.append(seq[i])
            i += 1
    return out


# ----------------------------------------------------------------------------- reference miner


def _tie_key(
    x: float, f: int, length: int, expansion: tuple[int, ...], left_len: int, left: int, right: int
) -> tuple[Any, ...]:
    """Sort key of a candidate: smallest key wins (largest X, f, l, then the documented ties)."""
    return (-x, -f, -length, expansion, left_len, left, right)


def reference_mine(enc: EncodedCorpus, config: MinerConfig) -> list[Merge]:
    """The short, obviously-correct miner: recount every pair every round.

    Slow (O(rounds x tokens) in pure Python); kept to define the semantics and test the fast one.

    Example:
        >>> enc = EncodedCorpus.from_tokens([["a", "b", "c"]] * 4, [True] * 4)
        >>> [(m.left, m.right, m.count) for m in reference_mine(enc, MinerConfig(min_freq=2, eta=0.5))]
        [(0, 1, 4), (3, 2, 4)]
    """
    seqs = enc.sequences()
    starts = [list(range(len(s))) for s in seqs]  # primitive start index of each symbol
    P = len(enc.vocab)
    expansion: list[tuple[int, ...]] = [(i,) for i in range(P)]
    merges: list[Merge] = []
    while len(merges) < config.cap:
        stats = corpus_pair_stats(seqs, starts, enc)
        best: tuple[Any, ...] | None = None
        for (u, v), (f, s, tasks, first) in stats.items():
            length = len(expansion[u]) + len(expansion[v])
            succ = s / f
            if not is_candidate(f, length, succ, len(tasks), config):
                continue
            x = x_score(f, length, succ, config)
            key = _tie_key(x, f, length, expansion[u] + expansion[v], len(expansion[u]), u, v)
            if best is None or key < best[0]:
                best = (key, u, v, f, s, tasks, first, x)
        if best is None:
            break
        _, u, v, f, s, tasks, first, x = best
        new = P + len(merges)
        expansion.append(expansion[u] + expansion[v])
        merges.append(Merge(u, v, new, f, s, tuple(sorted(tasks)), x, first))
        merge_everywhere(seqs, starts, (u, v), new)
    return merges


def corpus_pair_stats(
    seqs: Sequence[Sequence[int]], starts: Sequence[Sequence[int]], enc: EncodedCorpus
) -> dict[tuple[int, int], list[Any]]:
    """Every pair's statistics over the current sequences, recounted from scratch.

    Returns ``(u, v) -> [f, successes, task-type set, first (trajectory, primitive start)]``.
    """
    stats: dict[tuple[int, int], list[Any]] = {}
    for ti, seq in enumerate(seqs):
        ok = bool(enc.success[ti])
        task = int(enc.task[ti])
        for pair, pos_list in positions_by_pair(seq).items():
            st = stats.setdefault(pair, [0, 0, set(), (ti, starts[ti][pos_list[0]])])
            st[0] += len(pos_list)
            st[1] += len(pos_list) if ok else 0
            st[2].add(task)
    return stats


def merge_everywhere(seqs: list[list[int]], starts: list[list[int]], pair: tuple[int, int], new: int) -> None:
    """Apply one merge to every sequence in place, keeping each symbol's primitive start index."""
    for ti, seq in enumerate(seqs):
        merged = merge_pair(seq, pair, new)
        if len(merged) != len(seq):
            starts[ti] = merged_starts(seq, starts[ti], pair)
            seqs[ti] = merged


def positions_by_pair(seq: Sequence[int]) -> dict[tuple[int, int], list[int]]:
    """Non-overlapping occurrence positions of every pair of ``seq`` (like :func:`pair_counts`)."""
    out: dict[tuple[int, int], list[int]] = {}
    for i in range(len(seq) - 1):
        pair = (seq[i], seq[i + 1])
        lst = out.get(pair)
        if lst is not None and lst[-1] == i - 1:
            continue
        out.setdefault(pair, []).append(i)
    return out


def merged_starts(seq: Sequence[int], starts: list[int], pair: tuple[int, int]) -> list[int]:
    """The primitive start index of each symbol after :func:`merge_pair`."""
    out = []
    i = 0
    while i < len(seq):
        out.append(starts[i])
        i += 2 if i < len(seq) - 1 and seq[i] == pair[0] and seq[i + 1] == pair[1] else 1
    return out
