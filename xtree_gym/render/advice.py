"""In-context advice (paper Appendix C, Table 8): the top nodes for a task, as a hint at every step.

A node's relevance to a task utterance is the best n-gram overlap between the utterance and the
utterances (goals) of the trajectories the node occurs in: for each ``n`` in ``1..n_max`` the share
of the utterance's distinct n-grams found in the other utterance, averaged over ``n``. The top
``k`` nodes (default 8; ties: deeper, then more frequent, then earlier merged) are written as an
advisory hint; at each step the hint also says which listed chain the recent actions are inside.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError
from .cards import domain_glosses, gloss
from .stats import CorpusUsage, node_success

_WORD = re.compile(r"[a-z0-9]+")


def ngram_sets(text: str, n_max: int = 3) -> list[frozenset[tuple[str, ...]]]:
    """Distinct word n-grams of the lower-cased text, one set per ``n`` in ``1..n_max``.

    Example:
        >>> [sorted(s) for s in ngram_sets("Buy a red hat", 2)]
        [[('a',), ('buy',), ('hat',), ('red',)], [('a', 'red'), ('buy', 'a'), ('red', 'hat')]]
    """
    words = _WORD.findall(text.lower())
    return [
        frozenset(tuple(words[i : i + n]) for i in range(len(words) - n + 1)) for n in range(1, n_max + 1)
    ]


def utterance_overlap(query: str, other: str, n_max: int = 3) -> float:
    """Mean over ``n`` of the share of ``query``'s n-grams that ``other`` contains (0..1).

    Example:
        >>> utterance_overlap("buy a red hat", "buy a red hat")
        1.0
        >>> round(utterance_overlap("buy a red hat", "buy a blue hat"), 3)
        0.361
    """
    return _overlap(ngram_sets(query, n_max), ngram_sets(other, n_max))


def _overlap(q: Sequence[frozenset[Any]], o: Sequence[frozenset[Any]]) -> float:
    parts = [len(a & b) / len(a) for a, b in zip(q, o) if a]
    return sum(parts) / len(parts) if parts else 0.0


@dataclass(frozen=True)
class Advice:
    """One node chosen for a task."""

    node_id: str
    score: float
    """Best utterance overlap (0..1)."""
    expansion: tuple[str, ...]
    depth: int
    count: int
    success: float | None
    example: tuple[str, ...] | None
    """One recorded occurrence as raw actions, when the tree keeps one."""


class Advisor:
    """Picks the top-``k`` nodes for a task utterance and writes the per-step hint.

    ``glosses`` (or ``domain``'s declared glosses) phrase the next step; ``options=True`` applies the
    WebShop option rules (``click<option-color>`` -> "select the goal's color option").

    Example:
        >>> from types import SimpleNamespace as N
        >>> tree = N(nodes=[N(id="S0", expansion=("a<x>", "b<y>"), depth=1, count=5, success=None,
        ...                   example=None, length=2)])
        >>> usage = N(trajectories=[N(goal="boil water")], nodes={"S0": N(episodes={0})})
        >>> Advisor(tree, usage, top_k=1).select("boil the water")[0].node_id
        'S0'
    """

    def __init__(
        self,
        tree: Any,
        usage: CorpusUsage,
        *,
        top_k: int = 8,
        n_max: int = 3,
        glosses: Mapping[str, str] | None = None,
        options: bool = False,
        domain: str | None = None,
    ) -> None:
        if top_k < 1 or n_max < 1:
            raise ConfigError(f"top_k={top_k}, n_max={n_max}; both must be >= 1", fix="use top_k=8, n_max=3")
        self.tree = tree
        self.top_k = top_k
        self.n_max = n_max
        # token -> phrase for the "next step" line: given, else the domain's declared glosses
        self.glosses = glosses if glosses is not None or domain is None else domain_glosses(domain)
        self.options = options  # WebShop: gloss click<option-*> with the goal-option rules
        goals = sorted({t.goal for t in usage.trajectories})
        where = {g: i for i, g in enumerate(goals)}
        self._goal_grams = [ngram_sets(g, n_max) for g in goals]  # distinct goal -> n-gram sets
        # node id -> indices (into goals) of the utterances of the trajectories it occurs in
        self._node_goals = {
            n.id: sorted({where[usage.trajectories[i].goal] for i in usage.nodes[n.id].episodes})
            for n in tree.nodes
        }
        self._usage = usage

    def select(self, utterance: str) -> list[Advice]:
        """The top-``k`` nodes for ``utterance``, best first (nodes that never occur are left out)."""
        q = ngram_sets(utterance, self.n_max)
        per_goal = [_overlap(q, g) for g in self._goal_grams]
        rows = []
        for order, n in enumerate(self.tree.nodes):
            idx = self._node_goals.get(n.id)
            if not idx:
                continue
            s = max(per_goal[i] for i in idx)
            rows.append((-s, -n.depth, -n.count, order, n))
        rows.sort(key=lambda r: r[:4])
        return [
            Advice(
                n.id,
                -neg,
                tuple(n.expansion),
                n.depth,
                n.count,
                node_success(n, self._usage if isinstance(self._usage, CorpusUsage) else None),
                tuple(n.example) if n.example else None,
            )
            for neg, _, _, _, n in rows[: self.top_k]
        ]

    def hint(self, utterance: str, history: Sequence[str] = ()) -> str:
        """The advisory text for the next step; ``history`` is the canonical tokens taken so far."""
        chosen = self.select(utterance)
        if not chosen:
            return ""
        lines = ["Advice: chains that recur in similar tasks (a hint, not an order; skip what does not fit):"]
        for k, a in enumerate(chosen, 1):
            rate = f", {round(100 * a.success)}% success" if a.success is not None else ""
            eg = f" e.g. {' ; '.join(a.example)}" if a.example else ""
            lines.append(
                f"{k}. {' -> '.join(a.expansion)} (depth {a.depth}, seen {a.count} times{rate}).{eg}"
            )
        lines += self._progress_lines(chosen, list(history))
        return "\n".join(lines)

    def _progress_lines(self, chosen: list[Advice], history: list[str]) -> list[str]:
        """For each listed chain whose proper prefix ends the history: where we are and the next step."""
        out = []
        for k, a in enumerate(chosen, 1):
            for done in range(min(len(a.expansion) - 1, len(history)), 0, -1):
                if tuple(history[-done:]) == a.expansion[:done]:
                    nxt = a.expansion[done]
                    out.append(
                        f"Now: your last {done} step(s) match chain {k} ({done} of {len(a.expansion)} done);"
                        f" its next step is {nxt} ({gloss(nxt, self.glosses, options=self.options)})."
                    )
                    break
        return out
