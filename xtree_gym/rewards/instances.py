"""Node instances for offline RL (X-Tree §3.2, Appendix E) and the ablation controls (Tables 2, 20).

A :class:`NodeInstance` is one training row: a span ``[start, end)`` of a gold trajectory, the
gold steps before it (the prefix the policy is conditioned on) and the gold steps of the span
(what the policy must reproduce). The real set is the node segments of each trajectory's
top-level tiling; the controls produce the same type so an experiment swaps them in:

* :func:`random_span_instances` -- spans at random positions, same count and length histogram;
* :func:`random_tree` -- a tree with the same number of merges, each joining a uniformly
  random adjacent pair instead of the X-Score best (then :func:`node_instances` on it);
* :func:`whole_trajectory_instances` -- one instance per trajectory.

Instances are JSON lines (:func:`write_instances` / :func:`read_instances`), never pickles.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ..corpus.io import read_records, write_records
from ..errors import ConfigError, CorpusError

if TYPE_CHECKING:
    from ..corpus.records import Step, Trajectory
    from ..mining.config import MinerConfig
    from ..mining.tree import XTree

KINDS = ("node", "nested", "random_span", "random_tree", "whole")
"""What an instance was cut from: the tree's tiling, every nested occurrence, or a control."""


@dataclass
class NodeInstance:
    """One offline-RL instance: a gold span of a trajectory and the gold prefix before it."""

    id: str
    """Unique name: ``{trajectory_id}@{start}:{end}`` (plus ``#kind`` for controls)."""
    trajectory_id: str
    """The trajectory it was cut from."""
    kind: str
    """One of :data:`KINDS`."""
    node: str
    """Node id (``""`` for random spans and whole trajectories)."""
    depth: int
    """d_v of Eq. 2 (for a random span, the depth of the node instance it replaces; 0 for whole)."""
    start: int
    """Index of the first gold step of the span."""
    end: int
    """One past the last gold step (end exclusive); ``ℓ_v = end - start``."""
    goal: str = ""
    """The trajectory's instruction."""
    task: str = ""
    """The trajectory's task type."""
    initial_observation: str = ""
    """What the env showed before the first step (``extra["initial_observation"]`` of the corpus)."""
    prefix: list[dict[str, Any]] = field(default_factory=list)
    """Gold steps ``[0, start)``: ``{"action", "observation"[, "thought"]}`` each."""
    gold: list[dict[str, Any]] = field(default_factory=list)
    """Gold steps ``[start, end)``: ``{"action", "observation", "token"[, "thought"]}`` each."""

    @property
    def length(self) -> int:
        return self.end - self.start

    @property
    def gold_actions(self) -> list[str]:
        return [s["action"] for s in self.gold]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Any) -> NodeInstance:
        if not isinstance(d, dict):
            raise ValueError(f"record is {type(d).__name__}, expected an object")
        missing = [k for k in ("id", "trajectory_id", "kind", "node", "depth", "start", "end") if k not in d]
        if missing:
            raise ValueError(f"missing key(s) {missing}")
        inst = cls(**{k: d[k] for k in d if k in cls.__dataclass_fields__})
        if inst.end - inst.start != len(inst.gold) or inst.start != len(inst.prefix):
            raise ValueError(
                f"span {inst.start}:{inst.end} disagrees with {len(inst.prefix)} prefix / {len(inst.gold)} gold steps"
            )
        return inst


def _step_dict(step: Step, token: str | None = None) -> dict[str, Any]:
    d: dict[str, Any] = {"action": step.action, "observation": step.observation}
    if token is not None:
        d["token"] = token
    if step.thought is not None:
        d["thought"] = step.thought
    return d


def make_instance(
    traj: Trajectory,
    start: int,
    end: int,
    *,
    kind: str,
    node: str = "",
    depth: int = 0,
    tokens: Sequence[str] | None = None,
) -> NodeInstance:
    """Cut ``traj[start:end]`` into an instance with its gold prefix."""
    if not 0 <= start < end <= len(traj.steps):
        raise ConfigError(f"span {start}:{end} is outside trajectory {traj.id!r} ({len(traj.steps)} steps)")
    suffix = "" if kind in ("node", "nested") else f"#{kind}"
    toks = tokens if tokens is not None else [s.token for s in traj.steps]
    return NodeInstance(
        id=f"{traj.id}@{start}:{end}{suffix}",
        trajectory_id=traj.id,
        kind=kind,
        node=node,
        depth=depth,
        start=start,
        end=end,
        goal=traj.goal,
        task=traj.task,
        initial_observation=str(traj.extra.get("initial_observation", "")),
        prefix=[_step_dict(s) for s in traj.steps[:start]],
        gold=[_step_dict(traj.steps[i], toks[i]) for i in range(start, end)],
    )


def _tokens(trajectories: Sequence[Trajectory], domain: str | None) -> list[list[str]]:
    from ..mining.miner import trajectory_tokens

    return trajectory_tokens(trajectories, domain)


def node_instances(
    trajectories: Iterable[Trajectory],
    tree: XTree,
    *,
    nested: bool = False,
    domain: str | None = None,
    kind: str = "",
) -> list[NodeInstance]:
    """The node instances of a corpus: each trajectory's top-level tiling, primitives excluded.

    With ``nested`` every occurrence of every node counts, nested and overlapping ones included.
    Tokens are the steps' ``token`` fields, or ``domain``'s canonicalizer's.
    """
    trajs = list(trajectories)
    out: list[NodeInstance] = []
    label = kind or ("nested" if nested else "node")
    for traj, toks in zip(trajs, _tokens(trajs, domain)):
        if nested:
            spans = [(m.start, m.end, m.node) for m in tree.find_matches(toks)]
        else:
            spans = [(s.start, s.end, s.symbol) for s in tree.tile(toks) if s.is_node]
        for start, end, nid in spans:
            out.append(
                make_instance(traj, start, end, kind=label, node=nid, depth=tree[nid].depth, tokens=toks)
            )
    return out


def depth_histogram(instances: Iterable[NodeInstance]) -> dict[int, int]:
    """Instance count per depth (the paper: 3.5k / 1.2k / 0.4k at depth 1 / 2 / 3 on WebArena)."""
    return dict(sorted(Counter(i.depth for i in instances).items()))


def length_histogram(instances: Iterable[NodeInstance]) -> dict[int, int]:
    """Instance count per span length ℓ_v (the horizon histogram the random spans reproduce)."""
    return dict(sorted(Counter(i.length for i in instances).items()))


def whole_trajectory_instances(
    trajectories: Iterable[Trajectory], *, domain: str | None = None
) -> list[NodeInstance]:
    """One instance per non-empty trajectory: empty prefix, every step gold, depth 0."""
    trajs = [t for t in trajectories if t.steps]
    return [
        make_instance(t, 0, len(t.steps), kind="whole", tokens=toks)
        for t, toks in zip(trajs, _tokens(trajs, domain))
    ]


def random_span_instances(
    trajectories: Iterable[Trajectory],
    like: Sequence[NodeInstance],
    *,
    seed: int = 0,
    domain: str | None = None,
) -> list[NodeInstance]:
    """Spans at uniformly random positions, one per instance of ``like``, with the same lengths.

    Each span takes the length and depth of the instance it replaces (so the count, the length
    histogram and the Eq. 2 depth factors match); its trajectory is drawn uniformly among those
    at least that long, its start uniformly among the positions that fit. Seeded, deterministic.
    """
    trajs = [t for t in trajectories if t.steps]
    toks = _tokens(trajs, domain)
    lengths = np.array([len(t.steps) for t in trajs])
    rng = np.random.default_rng(seed)
    out: list[NodeInstance] = []
    for ref in like:
        fits = np.flatnonzero(lengths >= ref.length)
        if len(fits) == 0:
            raise ConfigError(f"no trajectory has {ref.length} steps for a span like {ref.id!r}")
        ti = int(fits[rng.integers(len(fits))])
        start = int(rng.integers(lengths[ti] - ref.length + 1))
        out.append(
            make_instance(
                trajs[ti], start, start + ref.length, kind="random_span", depth=ref.depth, tokens=toks[ti]
            )
        )
    return out


def random_tree(
    trajectories: Sequence[Trajectory],
    n_merges: int,
    config: MinerConfig | str = "scienceworld",
    *,
    seed: int = 0,
    domain: str | None = None,
    name: str = "random-tree",
    progress: bool | None = False,
    lengths: Sequence[int] | None = None,
    exact: bool = False,
) -> XTree:
    """A tree of ``n_merges`` merges, each joining a uniformly random adjacent pair (Tables 2, 20).

    Everything but the X-Score is kept: the pair is drawn uniformly among the distinct pairs
    that pass the miner's candidate rule (frequency, length cap, compression, success floor,
    task-type spread); when none is left, among the pairs of length <= ``max_len`` seen at least
    twice. Merging, counting and the node records are the miner's (:meth:`XTree.from_merges`).
    With ``lengths`` (e.g. ``[n.length for n in tree.nodes]``), merge ``i`` is drawn among the
    pairs of length ``lengths[i]`` when there are any (else those of the nearest length), so the
    random tree's length histogram follows the reference tree's. With ``exact`` too, ``lengths``
    is a multiset to fill exactly: each merge is drawn uniformly among the pairs whose length is
    still wanted, and a :class:`ConfigError` says when none is left (draw again with another seed).
    """
    from ..corpus.encoded import EncodedCorpus  # the miner's order: line order does not matter
    from ..mining.config import MinerConfig
    from ..mining.miner import canonical_order
    from ..mining.tree import XTree

    cfg = MinerConfig.preset(config) if isinstance(config, str) else config
    if not isinstance(n_merges, int) or n_merges < 0:
        raise ConfigError(f"n_merges = {n_merges!r}", fix="use an integer >= 0, e.g. len(tree)")
    if len(trajectories) == 0:
        raise CorpusError("the corpus is empty: nothing to merge", fix="check the corpus file(s)")
    ordered = sorted(trajectories, key=canonical_order)
    enc = EncodedCorpus.from_tokens(
        _tokens(ordered, domain), [t.success for t in ordered], [t.task for t in ordered]
    )
    merges = _random_merges(enc, n_merges, cfg, np.random.default_rng(seed), progress, lengths, exact)
    tree = XTree.from_merges(merges, enc, cfg, ordered, name=name)
    tree.extra["control"] = {"kind": "random_tree", "seed": seed, "n_merges": n_merges}
    if lengths is not None:
        tree.extra["control"]["lengths"] = [int(x) for x in lengths]
    return tree


def _random_merges(
    enc: Any,
    n_merges: int,
    cfg: MinerConfig,
    rng: np.random.Generator,
    progress: bool | None = False,
    lengths: Sequence[int] | None = None,
    exact: bool = False,
) -> list[Any]:
    """The reference miner's loop with the best-X-Score choice replaced by a uniform draw."""
    from ..mining.base import Merge, is_candidate, x_score
    from ..mining.reference import corpus_pair_stats, merge_everywhere
    from ..progress import Progress

    bar = Progress(total=n_merges, desc="random tree", enabled=progress)

    seqs = enc.sequences()
    starts = [list(range(len(s))) for s in seqs]  # primitive start index of each symbol
    length = [1] * len(enc.vocab)  # symbol id -> primitive length
    merges: list[Merge] = []
    while len(merges) < n_merges:
        stats = corpus_pair_stats(seqs, starts, enc)  # the reference miner's counts
        pool = sorted(p for p, (f, s, tasks, _) in stats.items()
                      if is_candidate(f, length[p[0]] + length[p[1]], s / f, len(tasks), cfg))  # fmt: skip
        if not pool:
            pool = sorted(
                p for p, st in stats.items() if st[0] >= 2 and length[p[0]] + length[p[1]] <= cfg.max_len
            )
        if exact and lengths is not None:
            wanted = Counter(int(x) for x in lengths) - Counter(length[len(length) - len(merges) :])
            pool = [p for p in pool if wanted[length[p[0]] + length[p[1]]] > 0]
            if not pool:
                raise ConfigError(f"no pair of a wanted length {sorted(wanted.elements())} is left",
                                  fix="draw again with another seed")  # fmt: skip
        if not pool:
            break
        if lengths is not None and len(merges) < len(lengths) and not exact:
            pool = _nearest_length(pool, length, int(lengths[len(merges)]))
        u, v = pool[int(rng.integers(len(pool)))]
        f, s, tasks, first = stats[(u, v)]
        new = len(length)
        length.append(length[u] + length[v])
        merges.append(
            Merge(u, v, new, f, s, tuple(sorted(tasks)), x_score(f, length[new], s / f, cfg), first)
        )
        merge_everywhere(seqs, starts, (u, v), new)
        bar.update()
    bar.close()
    return merges


def _nearest_length(pool: list[tuple[int, int]], length: list[int], want: int) -> list[tuple[int, int]]:
    """The pairs of ``pool`` whose merged length is nearest ``want`` (all of that length if any).

    Example:
        >>> _nearest_length([(0, 1), (0, 2), (2, 2)], [1, 1, 3], 5)  # lengths 2, 4, 6: 4 and 6 tie
        [(0, 2), (2, 2)]
    """
    gap = [abs(length[u] + length[v] - want) for u, v in pool]
    best = min(gap)
    return [p for p, g in zip(pool, gap) if g == best]


def make_instances(
    kind: str,
    trajectories: Sequence[Trajectory],
    tree: XTree,
    *,
    seed: int = 0,
    domain: str | None = None,
) -> list[NodeInstance]:
    """One entry point for experiments: ``kind`` in :data:`KINDS` (``random_tree`` mines a control tree
    with ``len(tree)`` merges and the tree's own miner config, then tiles with it).

    Example:
        >>> from xtree_gym.corpus import Step, Trajectory
        >>> from xtree_gym.mining import mine
        >>> from xtree_gym.mining.config import MinerConfig
        >>> trajs = [Trajectory(str(i), [Step(a, token=a) for a in "abcab"], True) for i in range(6)]
        >>> tree = mine(trajs, MinerConfig(min_freq=3, eta=0.5, cap=5))
        >>> [(i.node, i.start, i.end) for i in make_instances("node", trajs, tree)[:2]]
        [('S2', 0, 5), ('S2', 0, 5)]
        >>> len(make_instances("random_span", trajs, tree)), len(make_instances("whole", trajs, tree))
        (6, 6)
    """
    if kind == "node":
        return node_instances(trajectories, tree, domain=domain)
    if kind == "nested":
        return node_instances(trajectories, tree, nested=True, domain=domain)
    if kind == "random_span":
        return random_span_instances(
            trajectories, node_instances(trajectories, tree, domain=domain), seed=seed, domain=domain
        )
    if kind == "random_tree":
        cfg = tree.miner_config or "scienceworld"
        control = random_tree(trajectories, len(tree), cfg, seed=seed, domain=domain)
        return node_instances(trajectories, control, domain=domain, kind="random_tree")
    if kind == "whole":
        return whole_trajectory_instances(trajectories, domain=domain)
    raise ConfigError(f"unknown instance kind {kind!r}", fix=f"use one of {list(KINDS)}")


def write_instances(path: str | os.PathLike[str], instances: Iterable[NodeInstance]) -> int:
    """Write instances as JSON lines, atomically; returns how many were written."""
    return write_records(path, (inst.to_dict() for inst in instances))


def read_instances(path: str | os.PathLike[str]) -> list[NodeInstance]:
    """Read instances written by :func:`write_instances`; a bad line raises naming ``file:line``."""
    return read_records(
        path, NodeInstance.from_dict, what="instance file", fix="write the file with write_instances"
    )
