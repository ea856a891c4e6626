"""The fast ReuseRL E-step: greedy BPE under the two-part code, every round in a few numpy passes.

:func:`xtree_gym.reuserl.mdl.extract_dictionary` calls :func:`greedy_phrases` and gets exactly the phrases of
the plain loop (:func:`xtree_gym.reuserl.mdl.extract_dictionary_reference`; property tests hold them equal).
Why it is fast enough to re-mine a 256-sequence buffer at every training step:

* equal sequences are handled once, with their multiplicity as a weight;
* every window of 1..L skills of every distinct sequence gets a dense id up front (skills coded
  ``1..K``, a window is the base-(K+1) number of its codes), so a phrase is an int and a
  dictionary a boolean mask over ids;
* a round -- minimal segmentations of all sequences (ties to the longest phrase at the earliest
  position, as :func:`xtree_gym.reuserl.mdl.segment`), their weighted non-overlapping adjacent pairs, the
  concatenation of each pair, the lower bound that rules most out -- is numpy over
  (sequences x positions) arrays; Python sorts only the few pairs the bound keeps;
* the exact BDL of those candidates comes from one dynamic program over (candidates x sequences).

Short sequences (the in-loop buffer: at most :data:`ROW_BUDGET` covers in all) skip the rounds'
dynamic programs: :class:`CoverRows` lists every cover of every distinct sequence once, so a
segmentation is the first complete row, and every candidate's exact total comes from the rows that
miss only it -- all candidates of a round in one pass, updated incrementally as phrases are accepted.

This module knows nothing of :class:`~xtree_gym.reuserl.mdl.SkillDictionary`; it only looks down.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Hashable, Iterator, Sequence

import numpy as np

Phrase = tuple[Hashable, ...]


class WindowTable:
    """Every window (1..L skills) of every distinct sequence, numbered, with a dictionary mask.

    Example:
        >>> t = WindowTable([("a", "b", "a", "b"), ("a", "c")], [2, 1], 4)
        >>> for p in [("a",), ("b",), ("c",)]:
        ...     t.add(p)
        >>> t.totals([("a", "b"), ("a", "c"), ("b", "a")])  # 2*2+2, 2*4+1, 2*3+2
        [6, 9, 8]
        >>> t.add(("a", "b")); t.segment_ids().tolist() == [[t.id(("a", "b"))] * 2 + [-1, -1], [t.id(("a",)), t.id(("c",)), -1, -1]]
        True
    """

    def __init__(self, uniq: Sequence[Phrase], weights: Sequence[int], max_len: int) -> None:
        skills = sorted(set().union(*uniq), key=str)
        self.code = {x: i + 1 for i, x in enumerate(skills)}  # 0 pads
        self.base = len(skills) + 1
        if float(self.base) ** max_len >= 2**62:
            raise OverflowError(f"{len(skills)} skills with max_len {max_len} overflow the window codes")
        self.uniq = uniq
        self.L = max_len
        lens = np.array([len(s) for s in uniq], dtype=np.int64)
        width = int(lens.max())
        codes = np.zeros((len(uniq), width + max_len), dtype=np.int64)
        flat = np.fromiter(
            map(self.code.__getitem__, itertools.chain.from_iterable(uniq)), np.int64, int(lens.sum())
        )
        codes[:, :width][np.arange(width)[None, :] < lens[:, None]] = flat
        win = np.zeros((len(uniq), width, max_len), dtype=np.int64)
        win[:, :, 0] = codes[:, :width]
        for k in range(1, max_len):
            win[:, :, k] = win[:, :, k - 1] * self.base + codes[:, k : k + width]
        fits = (
            np.arange(width)[None, :, None] + np.arange(1, max_len + 1)[None, None, :] <= lens[:, None, None]
        )
        self.keys, first, dense = np.unique(np.where(fits, win, -1), return_index=True, return_inverse=True)
        # window -> dense id; id 0 is "no window" (its key -1 sorts first)
        self.win: np.ndarray = np.asarray(dense).reshape(win.shape)
        self.first = np.asarray(first)  # dense id -> flat index of one window with that id
        self.id_len = (np.asarray(first) % max_len) + 1  # dense id -> phrase length
        self.lens = lens
        self.weights = np.asarray(weights, dtype=np.int64)
        self.in_dict = np.zeros(len(self.keys), dtype=bool)
        self._phrase: dict[int, Phrase] = {}

    @functools.cached_property
    def win_t(self) -> np.ndarray:
        """(W, L, U) window ids, position-major (the DP rounds only: the cover rows never read it)."""
        return np.ascontiguousarray(self.win.transpose(1, 2, 0))

    @functools.cached_property
    def active(self) -> np.ndarray:
        """(W, U): whether a position lies inside the sequence."""
        return np.arange(self.win.shape[1])[:, None] < self.lens[None, :]

    @functools.cached_property
    def saved(self) -> np.ndarray:
        """Dense id -> weighted overlapping occurrences as a window of 2+ skills (exact: integer weights)."""
        keep = np.zeros(self.win.shape, dtype=bool)
        keep[:, :, 1:] = True  # windows of 2+ skills: what a merge can save
        keep &= self.win > 0
        w = np.broadcast_to(self.weights[:, None, None], self.win.shape)[keep]
        return np.bincount(self.win[keep], weights=w, minlength=len(self.keys)).round().astype(np.int64)

    def id(self, phrase: Phrase) -> int:
        """Dense id of ``phrase`` (0 when it is no window of any sequence)."""
        key = 0
        for x in phrase:
            c = self.code.get(x)
            if c is None:
                return 0
            key = key * self.base + c
        at = int(np.searchsorted(self.keys, key))
        return at if at < len(self.keys) and self.keys[at] == key and len(phrase) <= self.L else 0

    def phrase(self, i: int) -> Phrase:
        """The phrase of dense id ``i``."""
        p = self._phrase.get(i)
        if p is None:
            u, rest = divmod(int(self.first[i]), self.win.shape[1] * self.L)
            pos, k = divmod(rest, self.L)
            p = self._phrase[i] = tuple(self.uniq[u][pos : pos + k + 1])
        return p

    def add(self, phrase: Phrase) -> None:
        """Put ``phrase`` in the dictionary."""
        i = self.id(phrase)
        if i:
            self.in_dict[i] = True

    def _dp(self, valid: np.ndarray, choose: bool) -> tuple[np.ndarray, np.ndarray | None]:
        """Fewest phrases covering each sequence; ``valid`` is (W, L, ..., U), position-major so each
        step reads contiguous slices. With ``choose``: each position's first-phrase length as well."""
        width, L = self.win.shape[1], self.L
        big = width + 1
        best = np.zeros((width + L + 1, *valid.shape[2:]), dtype=np.int64)
        choice = np.zeros((width, *valid.shape[2:]), dtype=np.int64) if choose else None
        for i in range(width - 1, -1, -1):
            if choice is None:
                cur = np.where(valid[i], best[i + 1 : i + L + 1] + 1, big).min(axis=0)
            else:  # k = L .. 1: the first minimum is the longest phrase among ties (as segment())
                cand = np.where(valid[i, ::-1], best[i + L : i : -1] + 1, big)
                cur = cand.min(axis=0)
                choice[i] = L - np.argmin(cand, axis=0)
            best[i] = np.where(self.active[i], cur, 0)
        return best[0], choice

    def segment_ids(self) -> np.ndarray:
        """(U, W) dense ids of each sequence's minimal segmentation under the dictionary, -1 padded."""
        _, choice = self._dp(self.in_dict[self.win_t], choose=True)
        assert choice is not None
        width, n_u = choice.shape
        rows = np.arange(n_u)
        pos = np.zeros(n_u, dtype=np.int64)
        out = np.full((n_u, width), -1, dtype=np.int64)
        for j in range(width):
            live = pos < self.lens
            if not live.any():
                break
            at = np.minimum(pos, width - 1)
            k = choice[at, rows]
            out[:, j] = np.where(live, self.win[rows, at, np.maximum(k - 1, 0)], -1)
            pos = pos + np.where(live, k, 0)
        return out

    def totals(self, candidates: Sequence[Phrase]) -> list[int]:
        """For each candidate, the weighted total ``seg`` of all sequences with it added."""
        pid = np.array([self.id(p) or -1 for p in candidates], dtype=np.int64)  # -1 matches no window
        valid = self.in_dict[self.win_t][:, :, None, :] | (
            self.win_t[:, :, None, :] == pid[None, None, :, None]
        )
        best, _ = self._dp(valid, choose=False)
        return (best @ self.weights).tolist()


def pair_counts_of(seg: np.ndarray, weights: np.ndarray, n_ids: int) -> tuple[np.ndarray, np.ndarray]:
    """(pair keys ``left * n_ids + right``, weighted non-overlapping counts) of segmentations ``seg``.

    Like :func:`xtree_gym.mining.reference.pair_counts`: in a run of equal phrases only every
    other self pair counts, left to right.

    Example:
        >>> keys, counts = pair_counts_of(np.array([[1, 1, 1, 2, -1]]), np.array([3]), 10)
        >>> keys.tolist(), counts.tolist()
        ([11, 12], [3, 3])
    """
    left, right = seg[:, :-1], seg[:, 1:]
    valid = right >= 0
    same = valid & (left == right)
    idx = np.broadcast_to(np.arange(left.shape[1]), left.shape)
    starts = same & ~np.concatenate([np.zeros((len(seg), 1), bool), same[:, :-1]], axis=1)
    run_start = np.maximum.accumulate(np.where(starts, idx, -1), axis=1)
    counted = valid & (~same | ((idx - run_start) % 2 == 0))
    keys = (left * n_ids + right)[counted]
    w = np.broadcast_to(weights[:, None], left.shape)[counted]
    uniq, inv = np.unique(keys, return_inverse=True)
    return uniq, np.bincount(inv, weights=w, minlength=len(uniq)).round().astype(np.int64)


def _batches(n: int, first: int = 4) -> Iterator[tuple[int, int]]:
    """``[start, stop)`` ranges covering ``0..n``, growing 4x (most rounds accept a top-ranked pair).

    Example:
        >>> list(_batches(30))
        [(0, 4), (4, 20), (20, 30)]
    """
    start, size = 0, first
    while start < n:
        yield start, min(n, start + size)
        start, size = start + size, size * 4


def greedy_phrases(
    uniq: Sequence[Phrase],
    weights: Sequence[int],
    dict_size: int,
    cost_of: Sequence[float],
    max_len: int,
    scan_all: bool = True,
) -> list[Phrase]:
    """The phrases greedy BPE accepts, in order, from a dictionary of ``dict_size`` singletons.

    ``uniq`` are the distinct sequences, ``weights`` their multiplicities, ``cost_of[k]`` the Eq. 2
    bits of a ``k``-skill phrase. Every singleton of the sequences must be in the dictionary.

    Example:
        >>> cost = [2 * k + 2 for k in range(5)]  # K = 4, L = 4: k log2 4 + log2 4
        >>> greedy_phrases([tuple("abcd"), tuple("abce"), tuple("abd"), tuple("cab")], [1, 1, 1, 1], 5, cost, 4)
        [('a', 'b')]
    """
    table = WindowTable(uniq, weights, max_len)
    table.in_dict[1:] = table.id_len[1:] == 1  # every singleton is in the dictionary
    n = int(sum(weights))
    n_ids = len(table.keys)
    size = dict_size
    dcost = sum(cost_of[1] for _ in range(dict_size))
    seg = np.where(table.win[:, :, 0] > 0, table.win[:, :, 0], -1)  # the singletons' segmentation
    total = int(table.lens @ table.weights)
    current = (dcost + total * math.log2(size)) / n
    if _n_rows(table.lens, max_len) <= ROW_BUDGET:  # short sequences: score all covers at once
        # but first the bound, which often rules every pair out: each 2-window is an adjacent pair
        # of singletons, all cost the same, so the most frequent one passes if any does
        pair = table.win[:, :-1, 1]
        most = int(
            np.bincount(
                pair[pair > 0], weights=np.broadcast_to(table.weights[:, None], pair.shape)[pair > 0]
            ).max(initial=0)
        )
        if scan_all and (dcost + cost_of[2] + (total - most) * math.log2(size + 1)) / n >= current - 1e-12:
            return []
        return greedy_rows(table, n, dcost, size, cost_of, scan_all)
    accepted: list[Phrase] = []
    while True:
        log_next = math.log2(size + 1)
        worth = _worth(table, seg, n_ids, dcost, cost_of, total, n, log_next, current, max_len, scan_all)
        best = None
        for start, stop in _batches(len(worth)):  # the first that lowers BDL wins, as in the plain loop
            batch = worth[start:stop]
            for (phrase, new_dcost), new_total in zip(batch, table.totals([p for p, _ in batch])):
                value = (new_dcost + new_total * log_next) / n
                if value < current - 1e-12:
                    best = (phrase, new_dcost, value, new_total)
                    break
            if best is not None:
                break
        if best is None:
            return accepted
        phrase, dcost, current, total = best
        accepted.append(phrase)
        table.add(phrase)
        size += 1
        seg = table.segment_ids()


def _worth(
    table: WindowTable,
    seg: np.ndarray,
    n_ids: int,
    dcost: float,
    cost_of: Sequence[float],
    total: int,
    n: int,
    log_next: float,
    current: float,
    max_len: int,
    scan_all: bool,
) -> list[tuple[Phrase, float]]:
    """The round's candidates the lower bound keeps, in the plain loop's rank order, with their L_dict.

    The plain loop ranks every adjacent pair by (count desc, str of the concatenation) and skips
    those whose bound fails; the bound is computed here for all pairs at once, and only the
    survivors are sorted. (Without ``scan_all`` only the overall top pair may be tried.)
    """
    keys, counts = pair_counts_of(seg, table.weights, n_ids)
    left, right = keys // n_ids, keys % n_ids
    length = table.id_len[left] + table.id_len[right]
    ok = length <= max_len
    left, right, counts, length = left[ok], right[ok], counts[ok], length[ok]
    cat_key = table.keys[left] * (table.base ** table.id_len[right]) + table.keys[right]
    cat = np.searchsorted(table.keys, cat_key)  # every adjacent pair is a window of <= L skills
    fresh = ~table.in_dict[cat]
    cat, counts, length = cat[fresh], counts[fresh], length[fresh]
    if not len(cat):
        return []
    if not scan_all:  # the top pair by (count, str) only
        top = counts == counts.max()
        pick = min(np.flatnonzero(top).tolist(), key=lambda j: str(table.phrase(int(cat[j]))))
        cat, counts, length = cat[[pick]], counts[[pick]], length[[pick]]
    new_dcost = dcost + np.asarray(cost_of, dtype=np.float64)[length]
    passes = (new_dcost + (total - table.saved[cat]) * log_next) / n < current - 1e-12
    best_count: dict[int, int] = {}  # a concatenation reached by several pairs ranks by its best count
    for c, k in zip(cat[passes].tolist(), counts[passes].tolist()):
        if k > best_count.get(c, 0):
            best_count[c] = k
    ranked = sorted(best_count.items(), key=lambda ck: (-ck[1], str(table.phrase(ck[0]))))
    cost = {int(c): float(v) for c, v in zip(cat[passes].tolist(), new_dcost[passes].tolist())}
    return [(table.phrase(c), cost[c]) for c, _ in ranked]


# ----------------------------------------------------------------------------- short sequences: every cover up front

_GATHER = 6_000
"""Most indices one gather of :class:`CoverRows` builds (about 48 kB: below malloc's mmap threshold)."""

ROW_BUDGET = 40_000
"""Most covers (rows) :func:`greedy_phrases` enumerates up front; longer corpora take the DP rounds."""


@functools.lru_cache(maxsize=64)
def compositions(n: int, max_len: int) -> tuple[tuple[int, ...], ...]:
    """Every cover of ``n`` skills by parts of 1..``max_len``, in the order :func:`xtree_gym.reuserl.mdl.segment`
    prefers among equals: fewest parts first, then the longest part at the earliest position.

    Example:
        >>> compositions(3, 2)
        ((2, 1), (1, 2), (1, 1, 1))
    """
    out: list[tuple[int, ...]] = []

    def walk(left: int, parts: tuple[int, ...]) -> None:
        if not left:
            out.append(parts)
        for k in range(min(left, max_len), 0, -1):
            walk(left - k, (*parts, k))

    walk(n, ())
    return tuple(sorted(out, key=len))  # stable: within a size, walk() already lists longest-first


@functools.lru_cache(maxsize=64)
def _cover_arrays(n: int, max_len: int) -> tuple[np.ndarray, np.ndarray]:
    """(start, length) of every part of every cover of ``n`` skills, zero padded to ``n`` parts.

    Example:
        >>> [a.tolist() for a in _cover_arrays(3, 2)]
        [[[0, 2, 0], [0, 1, 0], [0, 1, 2]], [[2, 1, 0], [1, 2, 0], [1, 1, 1]]]
    """
    comps = compositions(n, max_len)
    starts = np.zeros((len(comps), n), dtype=np.int64)
    ks = np.zeros((len(comps), n), dtype=np.int64)
    for r, c in enumerate(comps):
        ks[r, : len(c)] = c
        starts[r, : len(c)] = np.cumsum((0, *c[:-1]))
    return starts, ks


@functools.lru_cache(maxsize=256)
def _cover_offsets(n: int, max_len: int, width: int, size: int) -> np.ndarray:
    """Where each cover's parts, then its adjacent pairs' concatenations, sit in the flat window table
    (``size`` slots of ``(W, L)`` blocks: the windows, then one copy per left length of the pair);
    part or pair ``j`` by rows, covers by columns. "None" lies past the end of the table, which
    ``np.take(mode="clip")`` turns into its last slot (0)."""
    starts, ks = _cover_arrays(n, max_len)
    none = 1 << 60
    part = np.where(ks > 0, starts * max_len + ks - 1, none).T
    both = ks[:, :-1] + ks[:, 1:]
    fits = (ks[:, 1:] > 0) & (both <= max_len)
    at = ks[:, :-1] * size + starts[:, :-1] * max_len + both - 1
    return np.concatenate([part, np.where(fits, at, none).T])


def _n_rows(lens: np.ndarray, max_len: int) -> int:
    """How many covers all sequences of ``lens`` have (more than :data:`ROW_BUDGET` when any is long)."""
    if not len(lens) or int(lens.max()) > 24:
        return ROW_BUDGET + 1 if len(lens) else 0
    per = np.bincount(lens)
    return sum(int(c) * len(compositions(n, max_len)) for n, c in enumerate(per.tolist()) if c)


class CoverRows:
    """Every cover of every distinct sequence as a row of window ids, with what each row still misses.

    A sequence's minimal segmentation is its first row whose phrases are all in the dictionary; a
    candidate ``c`` shortens a sequence exactly when some row misses ``c`` and nothing else, so one
    pass over the rows gives the exact new total of every candidate at once (no bound, no DP).

    Example:
        >>> t = WindowTable([tuple("abab")], [1], 4)
        >>> t.in_dict[1:] = t.id_len[1:] == 1
        >>> rows = CoverRows(t)
        >>> rows.first().tolist() == [len(rows.nparts) - 1]  # only the all-singletons cover is complete
        True
    """

    def __init__(self, table: WindowTable) -> None:
        self.table = table
        L, width = table.L, table.win.shape[1]
        groups = [(n, np.flatnonzero(table.lens == n)) for n in sorted(set(table.lens.tolist()))]
        sizes = [len(compositions(n, L)) for n, _ in groups]
        n_rows = sum(size * len(us) for size, (_, us) in zip(sizes, groups))
        # position-major (W, R): the per-row sums below run over contiguous rows, not 6-wide axes
        # int32 halves the bytes (and keeps these below malloc's fresh-mapping threshold)
        self.parts_t = parts_t = np.zeros((width, n_rows), dtype=np.int32)  # window ids, 0 pads
        # each adjacent pair of parts as (left length) * n_ids + (its concatenation's id), 0 = none
        self.pair_t = pair_t = np.zeros((max(width - 1, 1), n_rows), dtype=np.int32)
        n_ids, block = len(table.keys), width * L
        flat = np.append(table.win.ravel(), 0).astype(
            np.int32
        )  # the last slot, past every window, stands for "none"
        # flat_pair[k - 1]: a window's id as the concatenation of a pair whose left part has k skills
        flat_pair = np.where(flat > 0, flat + np.arange(1, L, dtype=np.int32)[:, None] * np.int32(n_ids), 0)
        both_flat = np.concatenate([flat, flat_pair.ravel()])
        owner: list[np.ndarray] = []
        order: list[int] = []
        at = 0
        for size, (n, us) in zip(sizes, groups):  # a few gathers per sequence length, already (W, R)
            offsets = _cover_offsets(n, L, width, len(flat))  # (2n - 1, C_n): parts, then pairs
            step = max(1, _GATHER // offsets.size)  # small temporaries: big ones cost fresh pages
            for lo in range(0, len(us), step):
                chunk = us[lo : lo + step]
                stop = at + size * len(chunk)
                got = np.take(both_flat, chunk[None, :, None] * block + offsets[:, None, :], mode="clip")
                got = got.reshape(2 * n - 1, -1)
                parts_t[:n, at:stop] = got[:n]
                pair_t[: n - 1, at:stop] = got[n:]
                at = stop
            owner.append(np.repeat(np.arange(len(order), len(order) + len(us)), size))
            order += us.tolist()
        self.owner = np.concatenate(owner)  # row -> its sequence's block; rows grouped by sequence
        self.weights = table.weights[order]  # block -> multiplicity
        self.starts = np.flatnonzero(np.diff(self.owner, prepend=-1))
        self.rank = np.arange(n_rows)
        used = parts_t > 0
        self.nparts = used.sum(axis=0)
        miss = np.where(used & ~table.in_dict[parts_t], parts_t, 0)
        self.mcnt = (miss > 0).sum(axis=0)  # how many parts are not in the dictionary, and their id sum
        self.msum = miss.sum(axis=0, dtype=np.int64)  # all equal (one missing phrase) iff cnt*sq == sum^2
        self.msq = np.einsum("ij,ij->j", miss, miss, dtype=np.int64)
        self.lacks = self._lacks(slice(None))  # row -> the one phrase it misses, -1 if none or several
        prev = np.zeros(n_rows, dtype=bool)  # in a run of equal phrases only every other pair counts
        for j in range(width - 1):
            same = (parts_t[j] == parts_t[j + 1]) & (parts_t[j + 1] > 0)
            prev = same & ~prev
            pair_t[j] = np.where(same & ~prev, 0, pair_t[j])
        self.w_pairs = np.tile(self.weights, pair_t.shape[0])

    def first(self) -> np.ndarray:
        """Each distinct sequence's first complete row (its minimal segmentation)."""
        return np.minimum.reduceat(np.where(self.mcnt == 0, self.rank, len(self.rank)), self.starts)

    def _lacks(self, rows: slice | np.ndarray) -> np.ndarray:
        """For ``rows``: the one phrase each misses, or -1 when it misses none or several."""
        cnt, tot = self.mcnt[rows], self.msum[rows]
        one = (cnt > 0) & (cnt * self.msq[rows] == tot * tot)
        return np.where(one, tot // np.maximum(cnt, 1), -1)

    def add(self, i: int) -> None:
        """Put dense id ``i`` in the dictionary: rows using it miss it no more."""
        rows = np.flatnonzero(self.parts_t.ravel() == i) % self.parts_t.shape[1]  # once per use
        np.subtract.at(self.mcnt, rows, 1)
        np.subtract.at(self.msum, rows, i)
        np.subtract.at(self.msq, rows, i * i)
        self.lacks[rows] = self._lacks(rows)

    def round(self) -> tuple[int, np.ndarray, np.ndarray, np.ndarray]:
        """(total seg, candidate ids, their best pair counts, their exact totals) of this dictionary."""
        weights = self.weights
        first = self.first()
        cur = self.nparts[first]
        total = int(cur @ weights)
        cats, best = self._pair_counts(first)
        slot = np.full(len(self.table.keys) + 1, -1, dtype=np.int64)  # phrase -> candidate; [-1]: none
        slot[cats] = np.arange(len(cats))
        at = slot[self.lacks]  # rows that miss one candidate only ...
        rows = np.flatnonzero((at >= 0) & (self.nparts < cur[self.owner]))  # ... and would shorten
        owner = self.owner[rows]
        gains = np.zeros((len(cats), len(first)), dtype=np.int64)  # (candidate, sequence) -> best gain
        np.maximum.at(gains, (at[rows], owner), cur[owner] - self.nparts[rows])
        return total, cats, best, total - gains @ weights

    def _pair_counts(self, first: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(ids of the concatenations not yet in the dictionary, each one's best pair count) of the
        segmentations ``first``; a concatenation reached by several pairs ranks by its best count."""
        n_ids = len(self.table.keys)
        counts = np.bincount(self.pair_t[:, first].ravel(), self.w_pairs, minlength=self.table.L * n_ids)
        best = counts.reshape(self.table.L, n_ids).max(axis=0)
        best[0] = 0  # pads and pairs too long to merge
        best[self.table.in_dict] = 0
        cats = np.flatnonzero(best)
        return cats, best[cats].round().astype(np.int64)


def greedy_rows(
    table: WindowTable, n: int, dcost: float, size: int, cost_of: Sequence[float], scan_all: bool
) -> list[Phrase]:
    """:func:`greedy_phrases` over :class:`CoverRows`: every round's candidates scored exactly at once."""
    rows = CoverRows(table)
    cost = np.asarray(cost_of, dtype=np.float64)
    total, cats, best, totals = rows.round()
    current = (dcost + total * math.log2(size)) / n
    accepted: list[Phrase] = []
    while len(cats):
        log_next = math.log2(size + 1)
        new_dcost = dcost + cost[table.id_len[cats]]
        value = (new_dcost + totals * log_next) / n
        passes = value < current - 1e-12
        top = best == best.max()
        if scan_all:
            if not passes.any():
                break
            top = passes & (best == best[passes].max())
        pick = min(np.flatnonzero(top).tolist(), key=lambda j: str(table.phrase(int(cats[j]))))
        if not passes[pick]:
            break
        i = int(cats[pick])
        accepted.append(table.phrase(i))
        dcost, current, size = float(new_dcost[pick]), float(value[pick]), size + 1
        table.in_dict[i] = True
        rows.add(i)
        total, cats, best, totals = rows.round()
    return accepted
