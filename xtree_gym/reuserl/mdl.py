"""ReuseRL: a skill dictionary under a two-part MDL code, and the segmentation-cost penalty.

A successful trajectory is projected to a skill sequence ``s`` (a list of tokens). A dictionary
``C`` is a set of phrases (tuples of at most ``L`` tokens) that always holds every singleton of the
alphabet, so every sequence can be covered. The ReuseRL paper (seed 003, Eqs. 2-6) defines

* ``L_dict(C) = sum_j (|p_j| log2 K + log2 L)``                      (Eq. 2, ``K = |alphabet|``)
* ``BDL(B+, C) = L_dict(C)/|B+| + (1/|B+|) sum_i seg(s_i, C) log2|C|``  (Eq. 3)
* ``seg(s, C)``: the fewest phrases of ``C`` covering ``s`` exactly (dynamic programming)
* ``SegCost(s | C) = seg(s, C) / T`` and the shaped return ``r - lam * 1{success} * SegCost``  (Eqs. 5-6)

The dictionary is re-extracted by greedy BPE (:func:`extract_dictionary`): from the singletons,
adjacent phrase pairs of the current segmentations are proposed by frequency, and a merge is kept
only when it strictly lowers BDL. :func:`brute_force_dictionary` searches dictionaries exhaustively
(vectorised over subsets) for the paper's App. 14.1 check (``benchmarks/bench_mdl.py``).
"""

from __future__ import annotations

import itertools
import math
from collections import Counter, deque
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import ConfigError
from .fast import greedy_phrases

Phrase = tuple[Hashable, ...]  # a dictionary entry: 1..L skill tokens


@dataclass(frozen=True)
class MDLConfig:
    """Settings of the ReuseRL E-step (dictionary extraction) and penalty."""

    max_len: int = 4
    """``L``: the longest phrase, in skills (paper: 4); also the ``log2 L`` length code of Eq. 2."""
    buffer_size: int = 256
    """Global FIFO buffer of successful skill sequences added to each batch (paper: 256; 0 = none)."""
    lam: float = 10.0
    """``lambda``, the penalty coefficient (paper: 10 with rewards in {0, 10})."""
    scan_all: bool = True
    """When the most frequent pair does not lower BDL, try the next-ranked ones (the paper stops only
    "when no merge yields a negative MDL delta"); False stops at the first rejected pair."""

    def __post_init__(self) -> None:
        if not isinstance(self.max_len, int) or self.max_len < 2:
            raise ConfigError(f"max_len must be an int >= 2, got {self.max_len!r}", fix="use the paper's 4")
        if not isinstance(self.buffer_size, int) or self.buffer_size < 0:
            raise ConfigError(f"buffer_size must be an int >= 0, got {self.buffer_size!r}")
        if not (isinstance(self.lam, (int, float)) and math.isfinite(self.lam) and self.lam >= 0):
            raise ConfigError(f"lam must be a finite number >= 0, got {self.lam!r}")


def skill_alphabet(domain: str) -> tuple[str, ...] | None:
    """The fixed skill alphabet Sigma of a ReuseRL domain (``countdown`` 26, ``twcooking`` 10, ``alfworld`` 5).

    Example:
        >>> len(skill_alphabet("countdown")), skill_alphabet("scienceworld")
        (26, None)
    """
    import importlib

    name = {"countdown": "countdown", "twcooking": "twcooking", "alfworld": "alfworld"}.get(domain.lower())
    if name is None:
        return None
    return tuple(importlib.import_module(f"xtree_gym.canon.{name}").SKILLS)


# ----------------------------------------------------------------------------- pure functions


def phrase_cost(length: int, alphabet_size: int, max_len: int) -> float:
    """Bits to store one phrase of ``length`` skills (one term of Eq. 2).

    Example:
        >>> phrase_cost(2, 4, 4)  # 2*log2(4) + log2(4)
        6.0
    """
    return length * math.log2(max(alphabet_size, 1)) + math.log2(max_len)


def dict_cost(phrases: Iterable[Phrase], alphabet_size: int, max_len: int) -> float:
    """``L_dict(C)`` of Eq. 2.

    Example:
        >>> dict_cost([("a",), ("b",), ("a", "b")], 2, 4)  # 1+2 + 1+2 + 2+2
        10.0
    """
    return sum(phrase_cost(len(p), alphabet_size, max_len) for p in phrases)


def segment(seq: Sequence[Hashable], phrases: set[Phrase] | frozenset[Phrase], max_len: int) -> list[Phrase]:
    """A minimum-size exact cover of ``seq`` by ``phrases`` (dynamic programming).

    Ties go to the longest phrase at the earliest position, so the result is deterministic.
    Raises ``ValueError`` when no cover exists (a singleton is missing).

    Example:
        >>> segment("abcab", {("a",), ("b",), ("c",), ("a", "b")}, 4)
        [('a', 'b'), ('c',), ('a', 'b')]
    """
    seq = seq if isinstance(seq, tuple) else tuple(seq)  # slices of a tuple are the phrases
    n = len(seq)
    best = [0] * (n + 1)  # best[i] = seg of seq[i:]
    choice = [0] * (n + 1)  # choice[i] = length of the first phrase of that cover
    inf = n + 1
    for i in range(n - 1, -1, -1):
        b, c = inf, 0
        for k in range(min(max_len, n - i), 0, -1):
            if best[i + k] + 1 < b and seq[i : i + k] in phrases:
                b, c = best[i + k] + 1, k
        best[i], choice[i] = b, c
    if n and best[0] >= inf:
        raise ValueError(f"no cover of {list(seq)!r}: a singleton is missing from the dictionary")
    out, i = [], 0
    while i < n:
        out.append(seq[i : i + choice[i]])
        i += choice[i]
    return out


def seg(seq: Sequence[Hashable], phrases: set[Phrase] | frozenset[Phrase], max_len: int) -> int:
    """``seg(s, C)``: the fewest phrases covering ``seq`` exactly.

    Example:
        >>> seg("abab", {("a",), ("b",), ("a", "b")}, 4)
        2
    """
    return len(segment(seq, phrases, max_len))


def bdl(
    sequences: Sequence[Sequence[Hashable]], phrases: Iterable[Phrase], alphabet_size: int, max_len: int
) -> float:
    """``L_BDL(B+, C)`` of Eq. 3 (bits per successful sequence).

    Example:
        >>> round(bdl(["ab", "ab"], [("a",), ("b",)], 2, 4), 6)  # (6 + 4*log2 2) / 2
        5.0
    """
    pset = frozenset(phrases)
    if not sequences:
        return 0.0
    total_seg = sum(seg(s, pset, max_len) for s in sequences)
    return (dict_cost(pset, alphabet_size, max_len) + total_seg * math.log2(len(pset))) / len(sequences)


def seg_cost(
    seq: Sequence[Hashable], phrases: set[Phrase] | frozenset[Phrase], horizon: int, max_len: int = 4
) -> float:
    """``SegCost(s | C) = seg(s, C) / T`` (Eq. 5).

    Example:
        >>> seg_cost("abab", {("a",), ("b",), ("a", "b")}, horizon=10)
        0.2
    """
    _check_horizon(horizon)
    return seg(seq, phrases, max_len) / horizon


def shaped_return(reward: float, success: bool, cost: float, lam: float) -> float:
    """``r - lam * 1{success} * cost`` (Eq. 6), with ``cost`` a SegCost or ``|s|/T``.

    Example:
        >>> shaped_return(10.0, True, 0.25, 10.0), shaped_return(0.0, False, 0.9, 10.0)
        (7.5, 0.0)
    """
    return float(reward) - (lam * cost if success else 0.0)


def _check_horizon(horizon: int) -> None:
    if not isinstance(horizon, int) or horizon <= 0:
        raise ConfigError(
            f"horizon T must be a positive int, got {horizon!r}", fix="pass the env's step budget"
        )


# ----------------------------------------------------------------------------- the dictionary


@dataclass(frozen=True)
class SkillDictionary:
    """A ReuseRL dictionary: every singleton of ``alphabet`` plus the merged phrases, in merge order.

    Example:
        >>> d = SkillDictionary.singletons("abc").with_phrase(("a", "b"))
        >>> d.seg("abcab"), d.segment("abc"), len(d)
        (3, [('a', 'b'), ('c',)], 4)
    """

    alphabet: tuple[Hashable, ...]
    """The atomic skills Sigma (sorted); ``K = len(alphabet)`` unless ``alphabet_size`` says otherwise."""
    phrases: tuple[Phrase, ...] = ()
    """Every entry: the singletons first, then the merged phrases in acceptance order."""
    max_len: int = 4
    """``L`` of Eq. 2."""
    alphabet_size: int = 0
    """``K_Sigma`` used in Eq. 2 (0 = ``len(alphabet)``)."""
    _set: frozenset[Phrase] = field(default=frozenset(), repr=False, compare=False)

    def __post_init__(self) -> None:
        phrases = self.phrases or tuple((a,) for a in self.alphabet)
        object.__setattr__(self, "phrases", phrases)
        object.__setattr__(self, "_set", frozenset(phrases))
        if not self.alphabet_size:
            object.__setattr__(self, "alphabet_size", len(self.alphabet))

    @classmethod
    def singletons(
        cls, alphabet: Iterable[Hashable], max_len: int = 4, alphabet_size: int = 0
    ) -> SkillDictionary:
        return cls(tuple(sorted(set(alphabet), key=str)), (), max_len, alphabet_size)

    def with_phrase(self, phrase: Phrase) -> SkillDictionary:
        return SkillDictionary(
            self.alphabet, (*self.phrases, tuple(phrase)), self.max_len, self.alphabet_size
        )

    def __len__(self) -> int:
        return len(self.phrases)

    def __contains__(self, phrase: object) -> bool:
        return phrase in self._set

    @property
    def merged(self) -> list[Phrase]:
        """The non-singleton phrases, in acceptance order."""
        return [p for p in self.phrases if len(p) > 1]

    def segment(self, seq: Sequence[Hashable]) -> list[Phrase]:
        return segment(seq, self._set, self.max_len)

    def seg(self, seq: Sequence[Hashable]) -> int:
        return len(self.segment(seq))

    def seg_cost(self, seq: Sequence[Hashable], horizon: int) -> float:
        _check_horizon(horizon)
        return self.seg(seq) / horizon

    def cost(self) -> float:
        """``L_dict(C)`` (Eq. 2)."""
        return dict_cost(self.phrases, self.alphabet_size, self.max_len)

    def bdl(self, sequences: Sequence[Sequence[Hashable]]) -> float:
        """``L_BDL`` of ``sequences`` under this dictionary (Eq. 3)."""
        return bdl(sequences, self.phrases, self.alphabet_size, self.max_len)

    def to_dict(self) -> dict[str, Any]:
        return {
            "alphabet": list(self.alphabet),
            "phrases": [list(p) for p in self.phrases],
            "max_len": self.max_len,
            "alphabet_size": self.alphabet_size,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SkillDictionary:
        return cls(
            tuple(data["alphabet"]),
            tuple(tuple(p) for p in data["phrases"]),
            int(data["max_len"]),
            int(data.get("alphabet_size", 0)),
        )


# ----------------------------------------------------------------------------- greedy extraction


def _pair_counts(segs: Sequence[list[Phrase]], max_len: int) -> dict[tuple[Phrase, Phrase], int]:
    """Adjacent phrase pairs in the current segmentations whose concatenation fits in ``max_len``."""
    from ..mining.reference import (
        pair_counts,  # non-overlapping adjacent counts, shared with the X-Tree miner
    )

    counts: dict[tuple[Phrase, Phrase], int] = {}  # (left phrase, right phrase) -> count
    for s in segs:
        for pair, c in pair_counts(s).items():
            if len(pair[0]) + len(pair[1]) <= max_len:
                counts[pair] = counts.get(pair, 0) + c
    return counts


SMALL_CORPUS = 160
"""Below this many skills in all, :func:`extract_dictionary` runs the plain loop (same result, less set-up)."""


def extract_dictionary(
    sequences: Sequence[Sequence[Hashable]],
    alphabet: Iterable[Hashable] | None = None,
    config: MDLConfig | None = None,
    *,
    alphabet_size: int = 0,
) -> SkillDictionary:
    """Greedy BPE under the two-part code (the E-step of ReuseRL).

    Start from the singletons of ``alphabet`` (default: the skills seen in ``sequences``). Each round
    counts adjacent phrase pairs in the current minimal segmentations, ranks them by frequency (ties:
    the concatenation's string form), and accepts the first whose concatenation strictly lowers BDL
    (with ``config.scan_all=False`` only the top pair is tried). Stops when no pair lowers BDL.

    The same dictionary as :func:`extract_dictionary_reference`, faster: each round runs as a few
    numpy passes over the distinct sequences (:mod:`xtree_gym.reuserl.fast`); small corpora take the
    plain loop, whose set-up is cheaper.

    Example:
        >>> d = extract_dictionary(["abcd", "abce", "abd", "cab"], config=MDLConfig())
        >>> d.merged
        [('a', 'b')]
    """
    cfg = config or MDLConfig()
    seqs = list(map(tuple, sequences))
    if sum(map(len, seqs)) < SMALL_CORPUS:  # numpy set-up would cost more than it saves
        return extract_dictionary_reference(seqs, alphabet, cfg, alphabet_size=alphabet_size)
    mult = Counter(seqs)  # distinct sequence -> how many times it occurs
    uniq = list(mult)
    alpha = set(alphabet) if alphabet is not None else set()
    alpha.update(*uniq)
    d = SkillDictionary.singletons(alpha, cfg.max_len, alphabet_size)
    cost_of = [phrase_cost(k, d.alphabet_size, cfg.max_len) for k in range(cfg.max_len + 1)]
    try:
        phrases = greedy_phrases(uniq, [mult[s] for s in uniq], len(d), cost_of, cfg.max_len, cfg.scan_all)
    except OverflowError:  # too many skills for int64 window codes: the plain loop has no such limit
        return extract_dictionary_reference(seqs, alphabet, cfg, alphabet_size=alphabet_size)
    for p in phrases:
        d = d.with_phrase(p)
    return d


def extract_dictionary_reference(
    sequences: Sequence[Sequence[Hashable]],
    alphabet: Iterable[Hashable] | None = None,
    config: MDLConfig | None = None,
    *,
    alphabet_size: int = 0,
) -> SkillDictionary:
    """The plain form of :func:`extract_dictionary` (recounts every pair every round); tests hold them equal.

    Greedy BPE under the two-part code (the E-step of ReuseRL).

    Start from the singletons of ``alphabet`` (default: the skills seen in ``sequences``). Each round
    counts adjacent phrase pairs in the current minimal segmentations, ranks them by frequency (ties:
    the concatenation's string form), and accepts the first whose concatenation strictly lowers BDL
    (with ``config.scan_all=False`` only the top pair is tried). Stops when no pair lowers BDL.

    Example:
        >>> d = extract_dictionary_reference(["abcd", "abce", "abd", "cab"], config=MDLConfig())
        >>> d.merged
        [('a', 'b')]
    """
    cfg = config or MDLConfig()
    seqs = [tuple(s) for s in sequences]
    alpha = set(alphabet) if alphabet is not None else set()
    alpha.update(x for s in seqs for x in s)
    d = SkillDictionary.singletons(alpha, cfg.max_len, alphabet_size)
    if not seqs:
        return d
    n = len(seqs)
    where = _occurrences(seqs, cfg.max_len)  # phrase -> [(sequence index, occurrences)]
    segs: list[list[Phrase]] = [[(x,) for x in s] for s in seqs]  # = d.segment(s): singletons only
    total = sum(len(s) for s in segs)
    dcost = d.cost()
    current = (dcost + total * math.log2(len(d))) / n
    while True:
        counts = _pair_counts(segs, cfg.max_len)
        ranked = sorted(
            ((c, a + b) for (a, b), c in counts.items() if (a + b) not in d), key=lambda x: (-x[0], str(x[1]))
        )
        accepted = None
        log_next = math.log2(len(d) + 1)
        for _, phrase in ranked:
            hits = where.get(phrase, [])
            new_dcost = dcost + phrase_cost(len(phrase), d.alphabet_size, cfg.max_len)
            # p = a+b with a, b in C: each use of p saves at most one segment, so this bounds BDL below
            if (new_dcost + (total - sum(k for _, k in hits)) * log_next) / n >= current - 1e-12:
                if not cfg.scan_all:
                    break
                continue
            cand = d.with_phrase(phrase)
            new_segs = list(segs)
            for i, _ in hits:
                new_segs[i] = cand.segment(seqs[i])
            new_total = sum(len(s) for s in new_segs)
            value = (new_dcost + new_total * log_next) / n
            if value < current - 1e-12:
                accepted = (cand, new_segs, new_dcost, value, new_total)
                break
            if not cfg.scan_all:
                break
        if accepted is None:
            return d
        d, segs, dcost, current, total = accepted


def _occurrences(seqs: Sequence[tuple[Hashable, ...]], max_len: int) -> dict[Phrase, list[tuple[int, int]]]:
    """Every sub-sequence of length 2..max_len -> [(sequence index, overlapping occurrence count)]."""
    out: dict[Phrase, list[tuple[int, int]]] = {}
    for i, s in enumerate(seqs):
        seen: dict[Phrase, int] = {}  # = substrings([s], max_len), without the per-sequence call
        for k in range(2, max_len + 1):
            for j in range(len(s) - k + 1):
                p = s[j : j + k]
                seen[p] = seen.get(p, 0) + 1
        for p, c in seen.items():
            out.setdefault(p, []).append((i, c))
    return out


# ----------------------------------------------------------------------------- brute force (App. 14.1)


def substrings(sequences: Sequence[Sequence[Hashable]], max_len: int) -> dict[Phrase, int]:
    """Every contiguous sub-sequence of length 2..max_len -> its occurrence count (overlaps counted).

    Example:
        >>> substrings(["aab"], 3)
        {('a', 'a'): 1, ('a', 'b'): 1, ('a', 'a', 'b'): 1}
    """
    out: dict[Phrase, int] = {}
    for s in sequences:
        t = tuple(s)
        for k in range(2, max_len + 1):
            for i in range(len(t) - k + 1):
                out[t[i : i + k]] = out.get(t[i : i + k], 0) + 1
    return out


@dataclass(frozen=True)
class BruteForceResult:
    """The best dictionary an exhaustive search found."""

    phrases: tuple[Phrase, ...]
    """The chosen dictionary (kept singletons first, then phrases)."""
    bdl: float
    """Its ``L_BDL``."""
    n_candidates: int
    """How many multi-skill phrases could be in an optimum (searched: at most ``max_candidates``)."""
    exact: bool
    """False when the candidate list had to be cut to ``max_candidates`` (most frequent kept)."""


def brute_force_dictionary(
    sequences: Sequence[Sequence[Hashable]],
    max_len: int = 4,
    *,
    prune_singletons: bool = False,
    alphabet_size: int = 0,
    max_candidates: int = 18,
    chunk: int = 1 << 15,
) -> BruteForceResult:
    """Minimise Eq. 3 by trying every dictionary (the two baselines of App. 14.1).

    ``prune_singletons=False`` (BF-all-singletons) keeps every singleton seen in ``sequences``;
    ``True`` (BF-original) may drop a singleton when the rest still covers every sequence. With all
    singletons kept, a phrase is provably useless when its storage cost exceeds its best possible
    saving (``count * (|p|-1) * log2(M_max + 1)`` bits), so those are removed first and the search
    stays exact. Subsets are scored in numpy blocks of ``chunk`` dictionaries.

    Example:
        >>> r = brute_force_dictionary(["abab", "abab", "abc"], 4)
        >>> r.phrases[3:], r.exact
        ((('a', 'b'),), True)
    """
    seqs = [tuple(s) for s in sequences]
    alpha = sorted({x for s in seqs for x in s}, key=str)
    k_sigma = alphabet_size or len(alpha)
    counts = substrings(seqs, max_len)
    cands = sorted(counts, key=lambda p: (-counts[p], str(p)))
    if not prune_singletons:
        # the greedy dictionary is feasible: its BDL bounds how many phrases an optimum can afford
        upper = extract_dictionary(seqs, alphabet_size=k_sigma, config=MDLConfig(max_len=max_len)).bdl(seqs)
        budget = len(seqs) * upper - dict_cost([(a,) for a in alpha], k_sigma, max_len)
        min_segments = sum(-(-len(s) // max_len) for s in seqs)
        cands = _prune_useless(cands, seqs, len(alpha), k_sigma, max_len, budget, min_segments)
    n_useful = len(cands)
    cands = sorted(cands[:max_candidates], key=str)
    items: list[Phrase] = ([(a,) for a in alpha] if prune_singletons else []) + cands
    fixed: list[Phrase] = [] if prune_singletons else [(a,) for a in alpha]
    index = {p: i for i, p in enumerate(items)}
    cost_items = np.array([phrase_cost(len(p), k_sigma, max_len) for p in items])
    base_cost = dict_cost(fixed, k_sigma, max_len)
    uniq: dict[tuple[Hashable, ...], int] = {}  # sequence -> multiplicity
    for s in seqs:
        uniq[s] = uniq.get(s, 0) + 1
    best = (math.inf, 0)
    n_items = len(items)
    for start in range(0, 1 << n_items, chunk):
        masks = np.arange(start, min(start + chunk, 1 << n_items), dtype=np.int64)
        bits = ((masks[:, None] >> np.arange(n_items)) & 1).astype(bool)  # (chunk, n_items)
        size = len(fixed) + bits.sum(axis=1)
        total = np.zeros(len(masks))
        for s, mult in uniq.items():
            total += mult * _vector_seg(s, bits, index, set(fixed), max_len)
        with np.errstate(invalid="ignore", divide="ignore"):
            value = (base_cost + bits @ cost_items + total * np.log2(np.maximum(size, 1))) / len(seqs)
        value[~np.isfinite(total)] = np.inf
        i = int(np.argmin(value))
        if value[i] < best[0] - 1e-12:
            best = (float(value[i]), int(masks[i]))
    chosen = tuple(fixed) + tuple(p for j, p in enumerate(items) if best[1] >> j & 1)
    return BruteForceResult(chosen, best[0], n_useful, n_useful <= max_candidates)


def _prune_useless(
    cands: list[Phrase],
    seqs: Sequence[tuple[Hashable, ...]],
    n_alpha: int,
    k_sigma: int,
    max_len: int,
    budget: float = math.inf,
    min_segments: int = 0,
) -> list[Phrase]:
    """Drop phrases that cannot belong to an optimal dictionary, to a fixed point.

    With every singleton kept, removing ``p`` from a dictionary of size ``M`` turns each of its
    uses (at most its non-overlapping occurrences ``u``) into ``|p|`` singletons, so ``p`` is worth
    keeping only if ``cost(p) < u (|p|-1) log2(M-1)``. ``M`` is at most the largest size whose
    cheapest phrases plus ``min_segments * log2 M`` fit in ``budget`` bits (a known BDL times |B+|,
    less the singletons' cost).
    """
    uses = {p: sum(len(pair_positions_k(s, p)) for s in seqs) for p in cands}
    while True:
        costs = sorted(phrase_cost(len(p), k_sigma, max_len) for p in cands)
        spent = [0.0, *itertools.accumulate(costs)]  # spent[j] = cheapest j phrases
        affordable = max(
            (
                j
                for j in range(len(spent))
                if spent[j] + min_segments * math.log2(max(n_alpha + j, 1)) <= budget + 1e-9
            ),
            default=0,
        )
        m_max = n_alpha + affordable
        keep = [
            p
            for p in cands
            if phrase_cost(len(p), k_sigma, max_len) < uses[p] * (len(p) - 1) * math.log2(max(m_max - 1, 1))
        ]
        if len(keep) == len(cands):
            return keep
        cands = keep


def pair_positions_k(seq: Sequence[Hashable], phrase: Phrase) -> list[int]:
    """Start indices of the non-overlapping occurrences of ``phrase``, left to right.

    Example:
        >>> pair_positions_k("aaaa", ("a", "a", "a"))
        [0]
    """
    out, i, k = [], 0, len(phrase)
    t = tuple(seq)
    while i + k <= len(t):
        if t[i : i + k] == phrase:
            out.append(i)
            i += k
        else:
            i += 1
    return out


def _vector_seg(
    seq: tuple[Hashable, ...], bits: np.ndarray, index: dict[Phrase, int], fixed: set[Phrase], max_len: int
) -> np.ndarray:
    """``seg(seq, C_m)`` for every dictionary ``m`` of a block at once (inf where no cover)."""
    n = len(seq)
    f = [np.full(bits.shape[0], np.inf) for _ in range(n + 1)]
    f[n] = np.zeros(bits.shape[0])
    for i in range(n - 1, -1, -1):
        for k in range(1, min(max_len, n - i) + 1):
            p = seq[i : i + k]
            if p in fixed:
                f[i] = np.minimum(f[i], f[i + k] + 1)
            elif p in index:
                f[i] = np.minimum(f[i], np.where(bits[:, index[p]], f[i + k] + 1, np.inf))
    return f[0]


# ----------------------------------------------------------------------------- group-level shaping


@dataclass(frozen=True)
class GroupShaping:
    """What :func:`segcost_rewards` and :func:`round_length_rewards` return for one group."""

    rewards: list[float]
    """Shaped returns, one per trajectory, in input order."""
    costs: list[float]
    """SegCost (or ``|s|/T``) per trajectory; computed for failures too, applied only to successes."""
    segs: list[int]
    """``seg(s, C)`` per trajectory (``|s|`` for the round-length baseline)."""
    dictionary: SkillDictionary | None = None
    """The dictionary extracted for this group (None for the round-length baseline)."""


def _successes(rewards: Sequence[float], successes: Sequence[bool] | None) -> list[bool]:
    if successes is None:
        return [float(r) > 0 for r in rewards]
    if len(successes) != len(rewards):
        raise ConfigError(f"got {len(successes)} success flags for {len(rewards)} rewards")
    return [bool(x) for x in successes]


def segcost_rewards(
    sequences: Sequence[Sequence[Hashable]],
    rewards: Sequence[float],
    horizon: int,
    successes: Sequence[bool] | None = None,
    *,
    config: MDLConfig | None = None,
    buffer: Sequence[Sequence[Hashable]] = (),
    alphabet: Iterable[Hashable] | None = None,
    dictionary: SkillDictionary | None = None,
) -> GroupShaping:
    """ReuseRL-SegCost for one group: extract C from ``successes + buffer``, then penalise successes.

    ``successes`` defaults to ``reward > 0``. A given ``dictionary`` skips the extraction.

    Example:
        >>> g = segcost_rewards(["abcd", "abce", "abd", "cab", "ba"], [10, 10, 10, 10, 0], horizon=10)
        >>> g.dictionary.merged, g.segs, g.rewards
        ([('a', 'b')], [3, 3, 2, 2, 2], [7.0, 7.0, 8.0, 8.0, 0.0])
    """
    cfg = config or MDLConfig()
    _check_horizon(horizon)
    if len(sequences) != len(rewards):
        raise ConfigError(f"got {len(sequences)} sequences for {len(rewards)} rewards")
    ok = _successes(rewards, successes)
    if dictionary is None:
        corpus = [s for s, good in zip(sequences, ok) if good] + [tuple(b) for b in buffer]
        alpha = set(alphabet or ()) | {x for s in sequences for x in s}
        dictionary = extract_dictionary(corpus, alpha, cfg)
    else:
        missing = {x for s in sequences for x in s} - set(dictionary.alphabet)
        if missing:
            dictionary = SkillDictionary(
                dictionary.alphabet + tuple(sorted(missing, key=str)),
                dictionary.phrases + tuple((m,) for m in sorted(missing, key=str)),
                dictionary.max_len,
                dictionary.alphabet_size,
            )
    segs = [dictionary.seg(s) for s in sequences]
    costs = [k / horizon for k in segs]
    shaped = [shaped_return(r, g, c, cfg.lam) for r, g, c in zip(rewards, ok, costs)]
    return GroupShaping(shaped, costs, segs, dictionary)


def round_length_rewards(
    sequences: Sequence[Sequence[Hashable]],
    rewards: Sequence[float],
    horizon: int,
    successes: Sequence[bool] | None = None,
    *,
    lam: float = 10.0,
) -> GroupShaping:
    """The pure round-length baseline ``r - lam * 1{success} * |s| / T`` (the fixed-code case).

    Example:
        >>> round_length_rewards(["abab", "ab"], [10, 0], horizon=10).rewards
        [6.0, 0.0]
    """
    _check_horizon(horizon)
    ok = _successes(rewards, successes)
    segs = [len(s) for s in sequences]
    costs = [k / horizon for k in segs]
    return GroupShaping([shaped_return(r, g, c, lam) for r, g, c in zip(rewards, ok, costs)], costs, segs)


class ReuseRLShaper:
    """The E-step with its global FIFO buffer of successful skill sequences, batch after batch.

    Each :meth:`shape` call extracts the dictionary from the batch's successes plus the buffer
    (sequences of earlier batches), scores the batch, then appends the batch's successes.

    Example:
        >>> shaper = ReuseRLShaper(horizon=10, config=MDLConfig(buffer_size=3))
        >>> shaper.shape(["abcd", "dd"], [10, 0]).rewards  # one success: no merge pays for itself
        [6.0, 0.0]
        >>> shaper.shape(["abce", "abd", "cab"], [10, 10, 10]).rewards  # with "abcd" from the buffer
        [7.0, 8.0, 8.0]
        >>> shaper.dictionary.merged, len(shaper.buffer)
        ([('a', 'b')], 3)
    """

    def __init__(
        self, horizon: int, config: MDLConfig | None = None, alphabet: Iterable[Hashable] = ()
    ) -> None:
        _check_horizon(horizon)
        self.horizon = horizon
        self.config = config or MDLConfig()
        self.alphabet = set(alphabet)
        self.buffer: deque[tuple[Hashable, ...]] = deque(maxlen=self.config.buffer_size)  # oldest first
        self.dictionary: SkillDictionary = SkillDictionary.singletons(self.alphabet, self.config.max_len)

    def shape(
        self,
        sequences: Sequence[Sequence[Hashable]],
        rewards: Sequence[float],
        successes: Sequence[bool] | None = None,
    ) -> GroupShaping:
        out = segcost_rewards(
            sequences,
            rewards,
            self.horizon,
            successes,
            config=self.config,
            buffer=list(self.buffer),
            alphabet=self.alphabet,
        )
        assert out.dictionary is not None
        self.dictionary = out.dictionary
        self.observe(s for s, g in zip(sequences, _successes(rewards, successes)) if g)
        return out

    def observe(self, successful: Iterable[Sequence[Hashable]]) -> None:
        """Append successful skill sequences to the FIFO buffer (oldest dropped first)."""
        for s in successful:
            self.buffer.append(tuple(s))

    def refresh(self) -> SkillDictionary:
        """Re-extract the dictionary from the buffer alone (used by the per-episode wrapper)."""
        alpha = self.alphabet | {x for s in self.buffer for x in s}
        self.dictionary = extract_dictionary(list(self.buffer), alpha, self.config)
        return self.dictionary
