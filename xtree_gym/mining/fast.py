"""The fast X-Tree miner: incremental pair statistics, vectorized with numpy.

Produces exactly the merges of :func:`xtree_gym.mining.reference.reference_mine` (property tests hold them
equal). Why it is fast:

* the corpus is one flat ``int32`` array with a doubly linked list over live positions
  (``nxt``/``prv``), so a merge never copies the corpus;
* pair statistics are counted once, then updated by deltas: a merge touches only the
  positions of its occurrences and their left neighbours, all handled in a few numpy calls;
* the best candidate comes from a lazy max-heap (stale entries carry an old version number);
* positions of a pair are kept as a list of arrays and validated lazily when the pair is merged.

For ``u != v`` the raw adjacent count equals the non-overlapping count. Self pairs ``(a, a)``
can overlap in runs, so their exact statistics are recomputed from their positions.
"""

from __future__ import annotations

import heapq
from typing import Any

import numpy as np

from ..corpus.encoded import EncodedCorpus
from ..progress import Progress
from .base import Merge, is_candidate, x_score
from .config import MinerConfig


class _State:
    """Mutable mining state over the flat corpus (one instance per ``fast_mine`` call)."""

    def __init__(self, enc: EncodedCorpus, config: MinerConfig) -> None:
        self.config = config
        n_prim = len(enc.vocab)
        self.K = n_prim + config.cap + 1  # every symbol id is < K, so key = u * K + v is unique
        n = len(enc.flat)
        lengths = np.diff(enc.offsets)
        self.offsets = enc.offsets
        self.traj_of = np.repeat(np.arange(len(lengths), dtype=np.int32), lengths)  # (n,)
        self.ok = enc.success[self.traj_of].astype(np.int8)  # (n,) 1 if the trajectory succeeded
        self.tt = enc.task[self.traj_of].astype(np.int32)  # (n,) task-type id
        self.n_tasks = max(1, len(enc.task_names))
        self.need_tt = config.min_task_types > 1
        self.sym = enc.flat.astype(np.int32, copy=True)  # (n,) symbol at a live position, -1 dead
        idx = np.int32 if n < 2**31 - 1 else np.int64
        self.nxt = np.arange(1, n + 1, dtype=idx)  # (n,) next live position, -1 at the end
        self.prv = np.arange(-1, n - 1, dtype=idx)  # (n,) previous live position, -1 at start
        nonempty = lengths > 0
        self.nxt[enc.offsets[1:][nonempty] - 1] = -1
        self.prv[enc.offsets[:-1][nonempty]] = -1
        self.lens: list[int] = [1] * n_prim  # symbol -> number of primitives
        self.exp: list[tuple[int, ...]] = [(i,) for i in range(n_prim)]  # symbol -> expansion
        self.f: dict[int, int] = {}  # pair key -> raw adjacent count
        self.s: dict[int, int] = {}  # pair key -> raw count in successful trajectories
        self.ttc: dict[int, dict[int, int]] = {}  # pair key -> task id -> raw count (need_tt only)
        self.pos: dict[int, list[np.ndarray]] = {}  # pair key -> arrays of (possibly stale) positions
        self.version: dict[int, int] = {}  # pair key -> version of its newest heap entry
        self.heap: list[tuple[Any, ...]] = []
        self.owner = np.zeros(n, dtype=np.int32)  # scratch for de-duplicating positions
        self.mark = np.zeros(n, dtype=bool)  # scratch for set membership
        self._count_all()

    # -- initial counting -------------------------------------------------------------------
    def _count_all(self) -> None:
        # Narrow dtypes where they fit: at 1M trajectories these arrays are the miner's peak memory.
        pos = np.flatnonzero(self.nxt >= 0).astype(self.nxt.dtype, copy=False)
        kdt = np.int32 if self.K * self.K < 2**31 else np.int64
        keys = self.sym[pos].astype(kdt) * kdt(self.K) + self.sym[self.nxt[pos]].astype(kdt)
        order = _argsort_small_keys(keys, self.K * self.K)
        keys = keys[order]  # one at a time: the unsorted copy is freed before the next is made
        pos = pos[order]
        del order
        if len(keys) == 0:
            return
        starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
        bounds = np.r_[starts, len(keys)].tolist()
        f = np.diff(bounds).tolist()
        s = np.add.reduceat(self.ok[pos], starts, dtype=np.int64).tolist()
        for i, key in enumerate(keys[starts].tolist()):
            self.f[key] = f[i]
            self.s[key] = s[i]
            self.pos[key] = [pos[bounds[i] : bounds[i + 1]]]
        if self.need_tt and len(pos):
            combo = keys.astype(np.int64) * self.n_tasks + self.tt[pos].astype(np.int64)
            uniq, counts = np.unique(combo, return_counts=True)
            for c, n in zip(uniq.tolist(), counts.tolist()):
                key, task = divmod(c, self.n_tasks)
                self.ttc.setdefault(key, {})[task] = n
        for key in list(self.f):
            self._push(key)

    # -- statistics --------------------------------------------------------------------------
    def _apply_group(
        self,
        pos: np.ndarray,
        other: np.ndarray,
        fixed: int,
        fixed_is_left: bool,
        sign: int,
        touched: set[int],
    ) -> None:
        """Add ``sign`` for the pairs at ``pos``: (fixed, other) or (other, fixed) symbol pairs.

        Every delta of a merge falls in one of five such groups (one symbol of the pair is the
        same for the whole group), so they aggregate with ``bincount`` over symbols, not a sort.
        """
        if len(pos) == 0:
            return
        K = self.K
        counts = np.bincount(other, minlength=K)
        succ = np.bincount(other, weights=self.ok[pos], minlength=K)
        present = np.flatnonzero(counts)
        base = fixed * K if fixed_is_left else fixed
        mult = 1 if fixed_is_left else K
        keys = [base + o * mult for o in present.tolist()]
        if sign > 0:
            order = np.argsort(other, kind="stable")
            bounds = np.r_[0, np.cumsum(counts[present])].tolist()
            sorted_pos = pos[order]
        for i, (key, n, sc) in enumerate(zip(keys, counts[present].tolist(), succ[present].tolist())):
            touched.add(key)
            f = self.f.get(key, 0) + sign * n
            if f <= 0:
                self.f.pop(key, None)
                self.s.pop(key, None)
                self.pos.pop(key, None)
                self.ttc.pop(key, None)
                continue
            self.f[key] = f
            self.s[key] = self.s.get(key, 0) + sign * round(sc)
            if sign > 0:
                self.pos.setdefault(key, []).append(sorted_pos[bounds[i] : bounds[i + 1]])
        if self.need_tt:
            combo = other.astype(np.int64) * self.n_tasks + self.tt[pos]
            tc = np.bincount(combo, minlength=K * self.n_tasks)
            for c in np.flatnonzero(tc).tolist():
                o, task = divmod(c, self.n_tasks)
                key = base + o * mult
                if key not in self.f:
                    continue
                per = self.ttc.setdefault(key, {})
                val = per.get(task, 0) + sign * int(tc[c])
                if val > 0:
                    per[task] = val
                else:
                    per.pop(task, None)

    def positions(self, key: int) -> np.ndarray:
        """Live, non-overlapping occurrence positions of the pair ``key`` (sorted for self pairs)."""
        u, v = divmod(key, self.K)
        arrays = self.pos.get(key)
        if not arrays:
            return np.empty(0, dtype=np.int64)
        cand = np.concatenate(arrays) if len(arrays) > 1 else arrays[0]
        nx = self.nxt[cand]
        live = (self.sym[cand] == u) & (nx >= 0)
        live &= self.sym[np.where(nx >= 0, nx, 0)] == v
        cand = cand[live]
        if len(arrays) > 1:  # a position can be listed twice if its pair changed and changed back
            idx = np.arange(len(cand), dtype=np.int32)
            self.owner[cand] = idx
            cand = cand[self.owner[cand] == idx]
        self.pos[key] = [cand]  # compact: drop stale positions for good
        if u == v and len(cand) > 1:
            # Runs of a self pair overlap: keep every other occurrence of each chain, left to right.
            cand = np.sort(cand)
            linked = np.r_[False, self.nxt[cand[:-1]] == cand[1:]]
            chain_start = np.flatnonzero(~linked)
            chain_id = np.cumsum(~linked) - 1
            offset = np.arange(len(cand)) - chain_start[chain_id]
            cand = cand[offset % 2 == 0]
        return cand

    def exact_stats(self, key: int) -> tuple[int, int, int]:
        """(f, successes, number of task types) of the pair ``key``."""
        u, v = divmod(key, self.K)
        if u == v:
            p = self.positions(key)
            n_tt = len(_distinct(self.tt[p], self.n_tasks)) if self.need_tt else 1
            return len(p), int(self.ok[p].sum()), n_tt
        n_tt = len(self.ttc.get(key, ())) if self.need_tt else 1
        return self.f.get(key, 0), self.s.get(key, 0), n_tt

    # -- heap ----------------------------------------------------------------------------------
    def _push(self, key: int) -> None:
        ver = self.version.get(key, 0) + 1
        self.version[key] = ver
        u, v = divmod(key, self.K)
        if self.lens[u] + self.lens[v] > self.config.max_len or key not in self.f:
            return
        f, s, n_tt = self.exact_stats(key)
        entry = heap_entry(f, s, n_tt, u, v, self.lens, self.exp, self.config)
        if entry is not None:
            heapq.heappush(self.heap, (*entry, ver, key))

    def pop_best(self) -> tuple[int, float] | None:
        return pop_valid(self.heap, self.version)

    # -- merging -------------------------------------------------------------------------------
    def merge(self, key: int, new: int, P: np.ndarray | None = None) -> np.ndarray:
        """Replace the occurrences of pair ``key`` by symbol ``new``; returns their positions.

        ``P``: :meth:`positions` of ``key``, when the caller already has them (they are not re-validated).

        With x the symbol left of an occurrence and y the one right of it, the deltas are:
        -(x, u) at the left neighbours, -(u, v) at P, -(v, y) at Q, +(x, W) and +(W, y').
        """
        u, v = divmod(key, self.K)
        P = self.positions(key) if P is None else P
        Q = self.nxt[P]
        A = self.prv[P]
        B = self.nxt[Q]
        left = A[A >= 0]
        # A left neighbour that is the Q of the previous occurrence (u v u v) dies with it.
        self.mark[Q] = True
        left = left[~self.mark[left]]
        self.mark[Q] = False
        has_b = B >= 0
        x = self.sym[left]
        y_old = self.sym[B[has_b]]
        touched: set[int] = set()
        self._apply_group(left, x, u, fixed_is_left=False, sign=-1, touched=touched)
        self._apply_group(Q[has_b], y_old, v, fixed_is_left=True, sign=-1, touched=touched)
        self._apply_group(
            P, np.full(len(P), v, dtype=np.int32), u, fixed_is_left=True, sign=-1, touched=touched
        )
        # Splice: P now holds the merged symbol, Q dies.
        self.sym[P] = new
        self.sym[Q] = -1
        self.nxt[P] = B
        self.prv[B[has_b]] = P[has_b]
        self.nxt[Q] = -1
        self.prv[Q] = -1
        self.lens.append(self.lens[u] + self.lens[v])
        self.exp.append(self.exp[u] + self.exp[v])
        self._apply_group(left, x, new, fixed_is_left=False, sign=1, touched=touched)
        self._apply_group(P[has_b], self.sym[B[has_b]], new, fixed_is_left=True, sign=1, touched=touched)
        for k in sorted(touched):
            self._push(k)
        return P


def heap_entry(
    f: int,
    s: int,
    n_tt: int,
    u: int,
    v: int,
    lens: list[int],
    exp: list[tuple[int, ...]],
    config: MinerConfig,
) -> tuple[Any, ...] | None:
    """The heap entry of pair ``(u, v)`` with exact stats ``(f, s, n_tt)``; ``None`` if not a candidate.

    Its order is the miner's choice: the largest ``(X, f, length)``, then the smallest primitive
    expansion, the shorter left part, the smaller ``(u, v)``. The one-process and the sharded
    miner (:mod:`xtree_gym.mining.sharded`) both build entries here, so they choose alike.

    Example:
        >>> heap_entry(4, 4, 1, 0, 1, [1, 1], [(0,), (1,)], MinerConfig(min_freq=2, eta=0.5))[1:]
        (-4, -2, (0, 1), 1, 0, 1)
    """
    if f == 0:
        return None
    length = lens[u] + lens[v]
    succ = s / f
    if not is_candidate(f, length, succ, n_tt, config):
        return None
    x = x_score(f, length, succ, config)
    return (-x, -f, -length, exp[u] + exp[v], lens[u], u, v)


def pop_valid(heap: list[tuple[Any, ...]], version: dict[int, int]) -> tuple[int, float] | None:
    """Pop entries ``(*heap_entry, ver, key)`` until one is current; ``(key, X)`` of it, or ``None``."""
    while heap:
        entry = heapq.heappop(heap)
        key = entry[-1]
        if version.get(key) == entry[-2]:
            return key, -entry[0]
    return None


def _argsort_small_keys(keys: np.ndarray, key_bound: int) -> np.ndarray:
    """A stable argsort of non-negative ``keys < key_bound``, in O(n) when that is cheap.

    Keys are first renumbered densely through a lookup table; when fewer than 2**16 distinct
    keys exist the dense ids fit ``uint16``, which numpy sorts with a stable radix sort.
    """
    if key_bound > 50_000_000 or len(keys) == 0:
        return np.argsort(keys, kind="stable")
    present = np.bincount(keys, minlength=key_bound) > 0
    lut = np.cumsum(present) - 1  # key -> dense rank (keys' order kept)
    n_distinct = int(present.sum())
    dense = lut.astype(np.uint16 if n_distinct < 2**16 else np.int32)[
        keys
    ]  # narrow the table, not the result
    return np.argsort(dense, kind="stable")


def _distinct(values: np.ndarray, bound: int) -> tuple[int, ...]:
    """The sorted distinct values of ``values`` (non-negative ints below ``bound``).

    Example:
        >>> _distinct(np.array([3, 1, 3, 0]), 4)
        (0, 1, 3)
    """
    if len(values) >= bound:  # one counting pass, no sort
        return tuple(np.flatnonzero(np.bincount(values, minlength=bound)).tolist())
    return tuple(sorted(set(values.tolist())))  # not np.unique: its first call imports numpy.ma (7 ms)


def fast_mine(enc: EncodedCorpus, config: MinerConfig, progress: bool | None = False) -> list[Merge]:
    """Mine merges from an encoded corpus; same result as ``reference_mine``, much faster.

    Example:
        >>> enc = EncodedCorpus.from_tokens([["a", "b", "c"]] * 4, [True] * 4)
        >>> [(m.left, m.right, m.count) for m in fast_mine(enc, MinerConfig(min_freq=2, eta=0.5))]
        [(0, 1, 4), (3, 2, 4)]
    """
    st = _State(enc, config)
    n_prim = len(enc.vocab)
    merges: list[Merge] = []
    with Progress(total=config.cap, desc="mine", enabled=progress) as bar:
        while len(merges) < config.cap:
            best = st.pop_best()
            if best is None:
                break
            key, x = best
            u, v = divmod(key, st.K)
            f, s, _ = st.exact_stats(key)
            P = st.positions(key)
            tasks = _distinct(st.tt[P], st.n_tasks)
            new = n_prim + len(merges)
            P = st.merge(key, new, P)
            p0 = int(P.min())
            ti = int(st.traj_of[p0])
            first = (ti, p0 - int(st.offsets[ti]))
            merges.append(Merge(u, v, new, f, s, tasks, x, first))
            bar.update()
    return merges
