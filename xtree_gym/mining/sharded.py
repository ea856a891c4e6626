"""The fast miner over a corpus split into shards: workers hold the data, a driver chooses the merges.

The corpus is cut into contiguous shards (:func:`xtree_gym.corpus.shards.plan_shards`); each
:class:`ShardWorker` reads and encodes only its own shard and keeps a miner state over it (the
one-process :class:`~xtree_gym.mining.fast._State`, with its heap pushes turned into a record of the
pairs it touched). The driver (:func:`mine_sharded`) never holds the corpus:

1. each worker reports its shard's tokens and task names; the driver sorts their union into the
   global ids the one-process reader assigns, and places each shard's trajectories in the global id
   order (a shard start, or per-trajectory ranks when the shards' id ranges interleave);
2. each worker remaps its shard to those ids and counts its pairs; it sends the *changes* of its
   per-pair statistics since it last sent them: f, successes and (when ``min_task_types > 1``)
   per-task counts. For a self pair ``(a, a)`` it sends its shard's exact non-overlapping
   statistics: chains of ``a`` never cross trajectories, so the global exact value is their sum;
3. the driver keeps the summed statistics and the lazy heap, and chooses with the same entries as
   ``fast_mine`` (:func:`~xtree_gym.mining.fast.heap_entry`); each round it sends the chosen pair to
   every worker, which merges it in its shard and answers with its occurrences' count, successes,
   task types, first occurrence (global trajectory index, offset) and the changes of the pairs the
   merge touched: the bytes of one round are those changes.

So the merges are exactly ``fast_mine``'s, and the tree file is byte for byte the one ``xtree mine``
writes. Workers are anything with the methods of :class:`ShardWorker`: in-process objects (tests) or
Ray actors (:mod:`xtree_gym.mining.ray_mine`); the driver talks to them through one ``call`` function.
"""

from __future__ import annotations

import heapq
import itertools
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..corpus.columnar import FastPathUnavailable
from ..corpus.encoded import EncodedCorpus
from ..progress import Progress
from .base import Merge
from .config import MinerConfig
from .fast import _distinct, _State, heap_entry, pop_valid
from .tree import CorpusFacts, merge_lengths

Call = Callable[[str, Sequence[tuple[Any, ...]]], list[Any]]
"""``call(method, per-worker argument tuples)`` -> each worker's answer, in shard order."""

Report = dict[str, np.ndarray]
"""A worker's changes of pair statistics: keys, df, ds; tkey, ttask, tdelta (per-task counts)."""


class _ShardState(_State):
    """The one-process miner state over one shard; pairs it would push to its heap are marked dirty."""

    def __init__(self, enc: EncodedCorpus, config: MinerConfig) -> None:
        self.dirty: set[int] = set()
        self.sent: dict[int, tuple[int, int, dict[int, int]]] = {}  # key -> stats last reported
        super().__init__(enc, config)

    def _push(self, key: int) -> None:
        self.dirty.add(key)

    def _stats(self, key: int, u: int, v: int) -> tuple[int, int, dict[int, int]]:
        """(f, successes, task id -> count) of ``key`` in this shard; exact for self pairs."""
        if u == v:
            p = self.positions(key)
            tasks: dict[int, int] = {}
            if self.need_tt and len(p):
                counts = np.bincount(self.tt[p], minlength=self.n_tasks)
                tasks = {t: int(counts[t]) for t in np.flatnonzero(counts).tolist()}
            return len(p), int(self.ok[p].sum()), tasks
        return self.f.get(key, 0), self.s.get(key, 0), dict(self.ttc.get(key, {})) if self.need_tt else {}

    def report(self) -> Report:
        """The changes of the dirty pairs' statistics since last reported (pairs too long to merge skipped)."""
        keys, dfs, dss, tk, tt, td = [], [], [], [], [], []
        for key in sorted(self.dirty):
            u, v = divmod(key, self.K)
            if self.lens[u] + self.lens[v] > self.config.max_len:
                continue  # never a candidate: lengths never change
            f, s, tasks = self._stats(key, u, v)
            of, os_, ot = self.sent.get(key, (0, 0, {}))
            if (f, s, tasks) == (of, os_, ot):
                continue
            keys.append(key)
            dfs.append(f - of)
            dss.append(s - os_)
            for t in sorted(set(tasks) | set(ot)):
                d = tasks.get(t, 0) - ot.get(t, 0)
                if d:
                    tk.append(key)
                    tt.append(t)
                    td.append(d)
            if f:
                self.sent[key] = (f, s, tasks)
            else:
                self.sent.pop(key, None)
        self.dirty.clear()
        names = ("keys", "df", "ds", "tkey", "ttask", "tdelta")
        return {n: np.array(a, dtype=np.int64) for n, a in zip(names, (keys, dfs, dss, tk, tt, td))}


class ShardWorker:
    """One shard of the corpus: read from byte ranges of the files, or given encoded (tests)."""

    def __init__(
        self,
        paths: Sequence[str] = (),
        pieces: Sequence[tuple[int, int, int]] = (),
        encoded: EncodedCorpus | None = None,
    ) -> None:
        self.paths = [str(p) for p in paths]
        self.pieces = [tuple(p) for p in pieces]
        self.enc = encoded
        self.stream: Any = None
        self.state: _ShardState | None = None
        self.base = 0
        self.ranks: np.ndarray | None = None  # local -> global trajectory index, when not base + i

    def read(self) -> dict[str, Any]:
        """Read and encode the shard; what the driver needs to assign global ids."""
        if self.enc is None:
            from ..corpus.shards import read_shard

            self.stream = read_shard(self.paths, self.pieces)  # type: ignore[arg-type]
            self.enc = self.stream.encoded
        enc = self.enc
        ids = self.stream.ids if self.stream is not None else None
        return {
            "n": enc.n_trajectories,
            "vocab": list(enc.vocab),
            "task_names": list(enc.task_names),
            "counts": np.bincount(enc.flat, minlength=len(enc.vocab)).tolist(),
            "n_successful": int(enc.success.sum()),
            "envs": list(self.stream.envs) if self.stream is not None else [],
            "id_range": (ids[0], ids[-1]) if ids else None,
        }

    def ids(self) -> list[str]:
        """The shard's trajectory ids, sorted (only when shards' id ranges interleave)."""
        return list(self.stream.ids) if self.stream is not None else []

    def start(
        self,
        vocab: list[str],
        task_names: list[str],
        base: int,
        ranks: np.ndarray | None,
        config: dict[str, Any],
    ) -> Report:
        """Remap the shard to the global ids, count its pairs; the first report (every pair)."""
        assert self.enc is not None, "read() first"
        enc, self.enc = self.enc, None
        if self.stream is not None:  # from here on only the state holds the shard's tokens
            self.stream.encoded = None
        index = {t: i for i, t in enumerate(vocab)}
        tok = np.array([index[t] for t in enc.vocab], dtype=np.int32)
        task_index = {t: i for i, t in enumerate(task_names)}
        task = np.array([task_index[t] for t in enc.task_names], dtype=np.int32)
        glob = EncodedCorpus(
            flat=tok[enc.flat] if len(enc.flat) else enc.flat.astype(np.int32),
            offsets=enc.offsets,
            success=enc.success,
            task=task[enc.task] if len(enc.task) else enc.task,
            vocab=vocab,
            task_names=task_names,
        )
        del enc  # the shard's own ids go before the state's arrays are made
        self.base, self.ranks = base, ranks
        self.state = _ShardState(glob, MinerConfig.from_dict(config))
        return self.state.report()

    def _global(self, ti: int) -> int:
        return self.base + ti if self.ranks is None else int(self.ranks[ti])

    def _local(self, gti: int) -> int | None:
        st = self.state
        assert st is not None
        n = len(st.offsets) - 1
        if self.ranks is None:
            return gti - self.base if self.base <= gti < self.base + n else None
        i = int(np.searchsorted(self.ranks, gti))
        return i if i < n and int(self.ranks[i]) == gti else None

    def merge(self, key: int, new: int) -> tuple[int, int, tuple[int, ...], tuple[int, int] | None, Report]:
        """Merge pair ``key`` into symbol ``new`` in the shard: its occurrences' stats and the changes."""
        st = self.state
        assert st is not None
        P = st.positions(key)
        count, succ = len(P), int(st.ok[P].sum())
        tasks = _distinct(st.tt[P], st.n_tasks)
        P = st.merge(key, new, P)  # with no occurrence here it still extends the symbol tables
        first = None
        if count:
            p0 = int(P.min())
            ti = int(st.traj_of[p0])
            first = (self._global(ti), p0 - int(st.offsets[ti]))
        return count, succ, tasks, first, st.report()

    def examples(self, wanted: list[tuple[int, int, int]]) -> dict[int, list[str]]:
        """The actions of ``(global trajectory, start, length)`` rows this shard holds, by position in ``wanted``."""
        if self.stream is None:
            return {}
        mine = [(k, self._local(g), a, n) for k, (g, a, n) in enumerate(wanted)]
        mine = [m for m in mine if m[1] is not None]
        self.stream.prefetch([m[1] for m in mine])
        return {k: [s.action for s in self.stream[i].steps[a : a + n]] for k, i, a, n in mine}

    def memory(self) -> dict[str, float]:
        """This process's id, peak resident memory in bytes (Linux: VmHWM, which exec resets; else ru_maxrss)
        and CPU seconds so far."""
        import resource

        use = resource.getrusage(resource.RUSAGE_SELF)
        return {"pid": os.getpid(), "peak_rss": peak_rss(), "cpu_seconds": use.ru_utime + use.ru_stime}


def peak_rss() -> int:
    """This process's peak resident memory in bytes.

    ``VmHWM`` where ``/proc`` has it: ``ru_maxrss`` keeps the high-water mark of the process a child was
    forked from (across ``exec``), which can exceed the child's own.
    """
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def report_bytes(report: Report) -> int:
    """Bytes of a report's arrays: what a round sends over the wire, besides a few scalars."""
    return sum(int(a.nbytes) for a in report.values())


class _Driver:
    """Global pair statistics (sums of the shards') and the lazy heap of ``fast_mine``."""

    def __init__(self, n_prim: int, config: MinerConfig) -> None:
        self.config = config
        self.K = n_prim + config.cap + 1
        self.need_tt = config.min_task_types > 1
        self.f: dict[int, int] = {}
        self.s: dict[int, int] = {}
        self.ttc: dict[int, dict[int, int]] = {}
        self.version: dict[int, int] = {}
        self.heap: list[tuple[Any, ...]] = []
        self.lens = [1] * n_prim
        self.exp: list[tuple[int, ...]] = [(i,) for i in range(n_prim)]

    def absorb(self, reports: Sequence[Report]) -> None:
        """Add the workers' changes, then re-push every pair that changed."""
        changed: set[int] = set()
        for r in reports:
            keys = r["keys"].tolist()
            changed.update(keys)
            for key, df, ds in zip(keys, r["df"].tolist(), r["ds"].tolist()):
                f = self.f.get(key, 0) + df
                if f > 0:
                    self.f[key] = f
                    self.s[key] = self.s.get(key, 0) + ds
                else:
                    self.f.pop(key, None)
                    self.s.pop(key, None)
            for key, t, d in zip(r["tkey"].tolist(), r["ttask"].tolist(), r["tdelta"].tolist()):
                per = self.ttc.setdefault(key, {})
                val = per.get(t, 0) + d
                if val > 0:
                    per[t] = val
                else:
                    per.pop(t, None)
                if not per:
                    del self.ttc[key]
        for key in sorted(changed):
            self._push(key)

    def _push(self, key: int) -> None:
        ver = self.version.get(key, 0) + 1
        self.version[key] = ver
        if key not in self.f:
            return
        u, v = divmod(key, self.K)
        n_tt = len(self.ttc.get(key, ())) if self.need_tt else 1
        entry = heap_entry(self.f[key], self.s[key], n_tt, u, v, self.lens, self.exp, self.config)
        if entry is not None:
            heapq.heappush(self.heap, (*entry, ver, key))


def _placement(infos: list[dict[str, Any]], call: Call) -> list[tuple[int, np.ndarray | None]]:
    """Each shard's place in the global (id) order: a start index, or per-trajectory ranks.

    Shards whose id ranges follow one another (the usual corpus, written in id order) need only a
    start; otherwise the driver merges the shards' sorted ids once (the one time it holds them).
    """
    ns = [int(i["n"]) for i in infos]
    bases = np.r_[0, np.cumsum(ns)[:-1]].tolist()
    ranges = [i["id_range"] for i in infos if i["id_range"] is not None]
    if all(a[1] < b[0] for a, b in itertools.pairwise(ranges)):
        return [(b, None) for b in bases]
    id_lists = call("ids", [()] * len(infos))
    tagged = sorted((tid, w, i) for w, ids in enumerate(id_lists) for i, tid in enumerate(ids))
    if any(a[0] == b[0] for a, b in itertools.pairwise(tagged)):
        raise FastPathUnavailable("duplicate ids")  # the validator's policy applies
    ranks = [np.empty(n, dtype=np.int64) for n in ns]
    for g, (_, w, i) in enumerate(tagged):
        ranks[w][i] = g
    return [(0, r) for r in ranks]


def mine_sharded(
    call: Call, n_workers: int, config: MinerConfig, progress: bool | None = False
) -> tuple[list[Merge], CorpusFacts, list[list[str]], dict[str, Any]]:
    """Mine with ``n_workers`` shard workers behind ``call``: (merges, corpus facts, examples, run stats).

    The merges are ``fast_mine``'s on the whole corpus. Raises :class:`FastPathUnavailable` when the
    files need the validator (then mine them in one process, which names the problem).
    """
    clock = [time.perf_counter()]
    infos = call("read", [()] * n_workers)
    clock.append(time.perf_counter())
    if sum(int(i["n"]) for i in infos) == 0:
        raise FastPathUnavailable("empty")
    vocab = sorted(set().union(*(i["vocab"] for i in infos)))
    task_names = sorted(set().union(*(i["task_names"] for i in infos)))
    totals: dict[str, int] = dict.fromkeys(vocab, 0)
    for i in infos:
        for t, c in zip(i["vocab"], i["counts"]):
            totals[t] += c
    facts = CorpusFacts(
        vocab=vocab,
        task_names=task_names,
        n_trajectories=sum(int(i["n"]) for i in infos),
        n_successful=sum(int(i["n_successful"]) for i in infos),
        primitive_counts=[totals[t] for t in vocab],
        envs=sorted(set().union(*(i["envs"] for i in infos))),
    )
    places = _placement(infos, call)
    cfg = config.to_dict()
    reports = call("start", [(vocab, task_names, b, r, cfg) for b, r in places])
    driver = _Driver(len(vocab), config)
    driver.absorb(reports)
    clock.append(time.perf_counter())
    stats: dict[str, Any] = {"first_report_bytes": sum(map(report_bytes, reports)), "round_bytes": []}
    merges = _rounds(call, n_workers, driver, len(vocab), config, progress, stats["round_bytes"])
    clock.append(time.perf_counter())
    wanted = [(m.first[0], m.first[1], n) for m, n in zip(merges, merge_lengths(merges, len(vocab)))]
    found: dict[int, list[str]] = {}
    for part in call("examples", [(wanted,)] * n_workers):
        found.update(part)
    examples = [found.get(k, []) for k in range(len(merges))]
    clock.append(time.perf_counter())
    phases = ("read", "count", "rounds", "examples")  # wall seconds of each phase, seen from the driver
    stats["seconds"] = {p: round(b - a, 3) for p, a, b in zip(phases, clock, clock[1:])}
    return merges, facts, examples, stats


def _rounds(
    call: Call,
    n_workers: int,
    driver: _Driver,
    n_prim: int,
    config: MinerConfig,
    progress: bool | None,
    round_bytes: list[int],
) -> list[Merge]:
    """The merge rounds: choose as ``fast_mine`` does, have every shard merge, absorb the changes."""
    merges: list[Merge] = []
    with Progress(total=config.cap, desc="mine", enabled=progress) as bar:
        while len(merges) < config.cap:
            best = pop_valid(driver.heap, driver.version)
            if best is None:
                break
            key, x = best
            u, v = divmod(key, driver.K)
            new = n_prim + len(merges)
            answers = call("merge", [(key, new)] * n_workers)
            driver.lens.append(driver.lens[u] + driver.lens[v])
            driver.exp.append(driver.exp[u] + driver.exp[v])
            driver.absorb([a[4] for a in answers])
            round_bytes.append(sum(report_bytes(a[4]) + 8 * (4 + len(a[2])) for a in answers))
            count = sum(a[0] for a in answers)
            succ = sum(a[1] for a in answers)
            tasks = tuple(sorted(set().union(*(a[2] for a in answers))))
            first = min(a[3] for a in answers if a[3] is not None)
            merges.append(Merge(u, v, new, count, succ, tasks, x, first))
            bar.update()
    return merges


def in_process(workers: Sequence[ShardWorker]) -> Call:
    """A ``call`` over in-process workers (tests, and the algorithm without Ray).

    Example:
        >>> from xtree_gym.mining.fast import fast_mine
        >>> seqs = [["a", "b", "c"]] * 3 + [["a", "b"], ["c", "a", "b"]]
        >>> shards = [EncodedCorpus.from_tokens(seqs[:2], [True] * 2), EncodedCorpus.from_tokens(seqs[2:], [True] * 3)]
        >>> cfg = MinerConfig(min_freq=2, eta=0.5)
        >>> merges = mine_sharded(in_process([ShardWorker(encoded=e) for e in shards]), 2, cfg)[0]
        >>> merges == fast_mine(EncodedCorpus.from_tokens(seqs, [True] * 5), cfg)
        True
    """
    return lambda name, args: [getattr(w, name)(*a) for w, a in zip(workers, args)]


def file_workers(paths: Sequence[str | Path], n: int) -> list[ShardWorker]:
    """In-process workers over ``n`` byte-range shards of the files."""
    from ..corpus.shards import plan_shards

    return [ShardWorker([str(p) for p in paths], pieces) for pieces in plan_shards(paths, n)]
