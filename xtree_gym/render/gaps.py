"""Corpus gaps: where the trajectory pool is thin, so that new trajectories would pay off.

The paper names collecting data where the tree is weak as future use; this module measures four
kinds of gap from a tree and its corpus:

* failing nodes -- nodes that recur (``>= min_count`` occurrences) but whose occurrences sit in
  successful trajectories ``margin`` below the corpus base rate or more;
* failing pairs -- adjacent symbols of the top-level tiling (nodes or primitives) with the same property:
  recurring transitions the miner did not turn into a success-bearing skill;
* thin task types -- task types with fewer than ``thin_successes`` successful trajectories;
* unmerged tokens -- primitive tokens of the corpus that no node contains.
"""

from __future__ import annotations

import itertools
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

from ..errors import ConfigError
from .stats import CorpusUsage


@dataclass(frozen=True)
class FailingPattern:
    """A recurring node or adjacent pair whose occurrences mostly fail."""

    symbols: tuple[str, ...]
    """The node id (one symbol) or the two tiling symbols of a pair."""
    count: int
    """Occurrences in the corpus."""
    success: float
    """Share of those occurrences inside successful trajectories."""


@dataclass(frozen=True)
class ThinTask:
    """A task type with few successful trajectories."""

    task: str
    n_trajectories: int
    n_successful: int


@dataclass(frozen=True)
class UnmergedToken:
    """A primitive token no node contains."""

    token: str
    count: int
    """Steps carrying it."""
    success: float
    """Share of those steps inside successful trajectories."""


@dataclass
class CorpusGaps:
    """The four gap lists plus what they were measured against.

    Example:
        >>> g = CorpusGaps(base_rate=0.5, has_failures=True)
        >>> g.lines()[0]
        'Base rate 50%; a pattern counts as failing at 40% or less (margin 10 points), from 5 occurrences.'
    """

    base_rate: float
    has_failures: bool
    """False when every trajectory succeeded: failure-based gaps cannot be measured."""
    min_count: int = 5
    margin: float = 0.1
    thin_successes: int = 5
    failing_nodes: list[FailingPattern] = field(default_factory=list)
    failing_pairs: list[FailingPattern] = field(default_factory=list)
    thin_tasks: list[ThinTask] = field(default_factory=list)
    unmerged_tokens: list[UnmergedToken] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def lines(self) -> list[str]:
        """A plain-text account, one finding per line."""
        cut = round(100 * (self.base_rate - self.margin))
        out = [
            f"Base rate {round(100 * self.base_rate)}%; a pattern counts as failing at {cut}% or less"
            f" (margin {round(100 * self.margin)} points), from {self.min_count} occurrences."
        ]
        if not self.has_failures:
            out.append("Every trajectory succeeded, so failing nodes and pairs cannot be measured.")
        for p in self.failing_nodes:
            out.append(
                f"failing node {p.symbols[0]}: {p.count} occurrences, {round(100 * p.success)}% success"
            )
        for p in self.failing_pairs:
            out.append(
                f"failing pair {p.symbols[0]} + {p.symbols[1]}: {p.count} occurrences,"
                f" {round(100 * p.success)}% success"
            )
        for t in self.thin_tasks:
            out.append(f"thin task type {t.task}: {t.n_successful} successful of {t.n_trajectories}")
        for u in self.unmerged_tokens:
            out.append(f"unmerged token {u.token}: {u.count} steps, {round(100 * u.success)}% in successes")
        return out


def _failing(
    counts: Counter[Any], wins: Counter[Any], cut: float, min_count: int, top: int
) -> list[FailingPattern]:
    rows = []
    for key, n in counts.items():
        rate = wins[key] / n
        if n >= min_count and rate <= cut + 1e-12:
            rows.append(FailingPattern(key if isinstance(key, tuple) else (key,), n, rate))
    rows.sort(key=lambda p: (p.success, -p.count, p.symbols))
    return rows[:top]


def find_gaps(
    tree: Any,
    usage: CorpusUsage,
    *,
    min_count: int = 5,
    margin: float = 0.1,
    thin_successes: int = 5,
    top: int = 15,
) -> CorpusGaps:
    """Measure the gaps of ``usage``'s corpus under ``tree`` (each list at most ``top`` long)."""
    if min_count < 1 or top < 1 or not 0.0 <= margin <= 1.0:
        raise ConfigError(
            f"min_count={min_count}, top={top}, margin={margin}",
            fix="min_count and top are >= 1, margin is in [0, 1]",
        )
    base = usage.base_rate
    gaps = CorpusGaps(base, base < 1.0, min_count, margin, thin_successes)
    cut = base - margin
    if gaps.has_failures:
        node_n: Counter[str] = Counter(
            {nid: nu.occurrences for nid, nu in usage.nodes.items() if nu.occurrences}
        )
        node_w: Counter[str] = Counter({nid: nu.success_occurrences for nid, nu in usage.nodes.items()})
        gaps.failing_nodes = _failing(node_n, node_w, cut, min_count, top)
        pair_n: Counter[tuple[str, str]] = Counter()
        pair_w: Counter[tuple[str, str]] = Counter()
        for traj, toks in zip(usage.trajectories, usage.tokens):
            syms = [s.symbol for s in tree.tile(toks)]
            pairs = list(itertools.pairwise(syms))
            pair_n.update(pairs)
            if traj.success:
                pair_w.update(pairs)
        gaps.failing_pairs = _failing(pair_n, pair_w, cut, min_count, top)
    per_task: dict[str, list[int]] = {}
    for t in usage.trajectories:
        if t.task:
            per_task.setdefault(t.task, [0, 0])
            per_task[t.task][0] += 1
            per_task[t.task][1] += bool(t.success)
    thin = [ThinTask(k, n, w) for k, (n, w) in per_task.items() if w < thin_successes]
    gaps.thin_tasks = sorted(thin, key=lambda t: (t.n_successful, t.task))[:top]
    merged = {t for n in tree.nodes for t in n.expansion}
    steps: Counter[str] = Counter()
    wins: Counter[str] = Counter()
    for traj, toks in zip(usage.trajectories, usage.tokens):
        steps.update(toks)
        if traj.success:
            wins.update(toks)
    loose = [UnmergedToken(t, n, wins[t] / n) for t, n in steps.items() if t not in merged]
    gaps.unmerged_tokens = sorted(loose, key=lambda u: (-u.count, u.token))[:top]
    return gaps
