"""X-Tree mining: small pure helpers, the obviously-correct reference miner, and ``mine()``.

The rules (§3.1 of the paper, made exact):

* ``f_uv`` counts NON-overlapping adjacent occurrences, scanning each trajectory left to right
  (``a a a`` holds one ``(a, a)``; ``a a a a`` holds two). Pairs never cross trajectories.
* ``succ(uv)`` is the share of those occurrences that lie in successful trajectories.
* ``X(u, v) = f_uv * (l_u + l_v) ** p_len * (succ + eps) ** p_succ`` in float64, in that order.
* A candidate has ``f >= min_freq``, ``l <= max_len``, ``f - 1 > eta * l``, ``succ >= min_succ`` and
  occurs in ``>= min_task_types`` task types.
* The best candidate has the largest ``(X, f, l)``; remaining ties go to the lexicographically
  smallest primitive expansion (tuple of token strings), then the shorter left part, then the
  smaller ``(left, right)`` symbol ids (nodes are numbered after the primitives, in merge order).
* Merging replaces those same non-overlapping occurrences, left to right.

Symbols are ints: primitives ``0..P-1`` in sorted token order (so comparing id tuples compares
token strings), node ``k`` is ``P + k``. :mod:`xtree_gym.mining_fast` produces exactly the
merges of :func:`reference_mine`, much faster; tests hold them equal.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from .config import MinerConfig
from .errors import CanonicalizationError, ConfigError, CorpusError

if TYPE_CHECKING:
    from .corpus import Trajectory
    from .tree import XTree

S = TypeVar("S", bound=Hashable)


# ----------------------------------------------------------------------------- pure helpers


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


def x_score(f: int, length: int, succ: float, config: MinerConfig) -> float:
    """Eq. 1: ``f * length**p_len * (succ + eps)**p_succ`` in float64, in that order.

    Example:
        >>> x_score(10, 3, 0.5, MinerConfig(eps=0.0))
        15.0
    """
    return float(f) * float(length) ** config.p_len * (succ + config.eps) ** config.p_succ


def is_candidate(f: int, length: int, succ: float, n_task_types: int, config: MinerConfig) -> bool:
    """The candidate rule: frequency, length cap, compression, success floor, task-type spread.

    Example:
        >>> cfg = MinerConfig(eta=0.5, min_freq=2)
        >>> is_candidate(3, 2, 1.0, 1, cfg), is_candidate(2, 2, 1.0, 1, cfg)  # 2 > 1.0; 1 > 1.0 fails
        (True, False)
    """
    return (
        f >= config.min_freq
        and length <= config.max_len
        and f - 1 > config.eta * length
        and succ >= config.min_succ
        and n_task_types >= config.min_task_types
    )


# ----------------------------------------------------------------------------- data types


@dataclass(frozen=True)
class Merge:
    """One merge of the miner: ``left + right -> symbol`` with its statistics at merge time."""

    left: int
    right: int
    symbol: int
    count: int
    """f_uv when merged."""
    success_count: int
    """How many of those occurrences lie in successful trajectories."""
    task_types: tuple[int, ...]
    """Sorted task-type ids the occurrences lie in."""
    score: float
    """The X-Score when merged."""
    first: tuple[int, int]
    """(trajectory index, primitive start index) of the leftmost occurrence, for the node's example."""


@dataclass
class EncodedCorpus:
    """Token sequences as ints, ready for either miner.

    ``flat`` holds every trajectory's primitive ids back to back; trajectory ``i`` is
    ``flat[offsets[i]:offsets[i + 1]]``.
    """

    flat: np.ndarray  # (n_tokens,) int32
    offsets: np.ndarray  # (n_trajectories + 1,) int64
    success: np.ndarray  # (n_trajectories,) bool
    task: np.ndarray  # (n_trajectories,) int32 task-type id
    vocab: list[str]  # primitive id -> token string, sorted
    task_names: list[str]  # task-type id -> name, sorted

    @property
    def n_trajectories(self) -> int:
        return len(self.offsets) - 1

    def sequences(self) -> list[list[int]]:
        return [self.flat[a:b].tolist() for a, b in zip(self.offsets[:-1], self.offsets[1:])]

    @classmethod
    def from_tokens(
        cls, sequences: Sequence[Sequence[str]], success: Sequence[bool], tasks: Sequence[str] | None = None
    ) -> EncodedCorpus:
        """Encode string token sequences (one success flag and task type per sequence).

        Example:
            >>> enc = EncodedCorpus.from_tokens([["b", "a"], ["a"]], [True, False])
            >>> enc.vocab, enc.flat.tolist(), enc.offsets.tolist()
            (['a', 'b'], [1, 0, 0], [0, 2, 3])
        """
        if len(success) != len(sequences) or (tasks is not None and len(tasks) != len(sequences)):
            raise ConfigError("sequences, success and tasks must have the same length")
        tasks = tasks if tasks is not None else [""] * len(sequences)
        vocab = sorted({t for seq in sequences for t in seq})
        index = {t: i for i, t in enumerate(vocab)}
        task_names = sorted(set(tasks))
        task_index = {t: i for i, t in enumerate(task_names)}
        lengths = np.fromiter((len(s) for s in sequences), dtype=np.int64, count=len(sequences))
        offsets = np.zeros(len(sequences) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        flat = np.fromiter(
            (index[t] for seq in sequences for t in seq), dtype=np.int32, count=int(offsets[-1])
        )
        return cls(
            flat=flat,
            offsets=offsets,
            success=np.asarray(success, dtype=bool),
            task=np.fromiter((task_index[t] for t in tasks), dtype=np.int32, count=len(tasks)),
            vocab=vocab,
            task_names=task_names,
        )


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


# ----------------------------------------------------------------------------- public entry point


def trajectory_tokens(trajectories: Sequence[Trajectory], domain: str | None = None) -> list[list[str]]:
    """The token sequence of each trajectory: its stored ``token`` fields, else a canonicalizer's.

    A step that carries ``token`` is taken as is; a step without one is canonicalized by the
    canonicalizer ``domain`` names (with the trajectory as context). Without ``domain``, a missing
    token is a :class:`CanonicalizationError` naming the trajectory.
    """
    from .canon import get_canonicalizer

    canon = get_canonicalizer(domain) if domain else None
    out: list[list[str]] = []
    for t in trajectories:
        tokens: list[str] = []
        for i, s in enumerate(t.steps):
            if s.token is not None:
                tokens.append(s.token)
            elif canon is not None:
                tokens.append(canon(s.action, canon.corpus_context(t, i)).token)
            else:
                raise CanonicalizationError(
                    f"trajectory {t.id!r} has steps without a 'token' and no canonicalizer was named",
                    fix="pass --domain NAME (e.g. scienceworld), or run `xtree canon` on the corpus first",
                )
        out.append(tokens)
    return out


def mine(
    trajectories: Sequence[Trajectory],
    config: MinerConfig | str = "scienceworld",
    *,
    domain: str | None = None,
    progress: bool | None = False,
    name: str = "",
    engine: str = "fast",
) -> XTree:
    """Mine an X-Tree from trajectories.

    ``config`` is a :class:`MinerConfig` or a preset name. Trajectories are put in a canonical
    order first, so any line order of the same corpus gives the same tree (byte-identical file).
    ``engine`` is ``"fast"`` (default) or ``"reference"``.
    """
    from .tree import XTree

    cfg = MinerConfig.preset(config) if isinstance(config, str) else config
    if len(trajectories) == 0:
        raise CorpusError("the corpus is empty: nothing to mine", fix="check the corpus file(s)")
    ordered = sorted(trajectories, key=canonical_order)
    tokens = trajectory_tokens(ordered, domain)
    enc = EncodedCorpus.from_tokens(tokens, [t.success for t in ordered], [t.task for t in ordered])
    if engine == "fast":
        from .mining_fast import fast_mine

        merges = fast_mine(enc, cfg, progress=progress)
    elif engine == "reference":
        merges = reference_mine(enc, cfg)
    else:
        raise ConfigError(f"unknown engine {engine!r}", fix="use 'fast' or 'reference'")
    return XTree.from_merges(merges, enc, cfg, ordered, name=name)


def canonical_order(t: Trajectory) -> tuple[str, str]:
    import json

    return (t.id, json.dumps(t.to_dict(), sort_keys=True, ensure_ascii=False))
