"""Where each node of a tree occurs in a corpus: the counts cards, advice, gaps and the report read.

One pass of ``tree.find_matches`` over every trajectory; everything else is counting.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import CorpusError
from ..mining.miner import trajectory_tokens

if TYPE_CHECKING:
    from ..corpus.records import Trajectory


@dataclass
class NodeUsage:
    """Where one node occurs in the corpus."""

    node_id: str
    """The node's id (``S3``)."""
    spans: list[tuple[int, int, int]] = field(default_factory=list)
    """Every occurrence as ``(trajectory index, start, end)``, end exclusive."""
    episodes: set[int] = field(default_factory=set)
    """Indices of the trajectories with at least one occurrence."""
    success_occurrences: int = 0
    """Occurrences inside successful trajectories."""

    @property
    def occurrences(self) -> int:
        return len(self.spans)

    @property
    def success(self) -> float | None:
        """Fraction of occurrences in successful trajectories (``None`` when it never occurs)."""
        return self.success_occurrences / len(self.spans) if self.spans else None


@dataclass
class CorpusUsage:
    """Node occurrences over a corpus, plus the per-trajectory tokens and the base rate.

    Example:
        >>> from xtree_gym.corpus import Step, Trajectory
        >>> class _Tree:  # the two members CorpusUsage reads
        ...     nodes = []
        ...     def find_matches(self, tokens): return []
        >>> u = CorpusUsage.build(_Tree(), [Trajectory("a", [Step("x", token="x<y>")], True)])
        >>> u.base_rate, u.n_trajectories
        (1.0, 1)
    """

    trajectories: list[Trajectory]
    """The corpus, in its order."""
    tokens: list[list[str]]
    """Canonical tokens per trajectory (same order)."""
    nodes: dict[str, NodeUsage]
    """node id -> where it occurs (every node of the tree, occurring or not)."""

    @classmethod
    def build(
        cls, tree: Any, trajectories: Iterable[Trajectory], domain: str | None = None, progress: bool = False
    ) -> CorpusUsage:
        trajs = list(trajectories)
        if not trajs:
            raise CorpusError("the corpus is empty", fix="pass a corpus with at least one trajectory")
        tokens = trajectory_tokens(trajs, domain)
        nodes = {n.id: NodeUsage(n.id) for n in tree.nodes}
        it: Iterable[int] = range(len(trajs))
        if progress:
            from ..progress import progress as bar

            it = bar(it, total=len(trajs), desc="matching nodes")
        for i in it:
            ok = bool(trajs[i].success)
            for m in tree.find_matches(tokens[i]):
                nu = nodes[_node_id(m.node)]
                nu.spans.append((i, m.start, m.end))
                nu.episodes.add(i)
                nu.success_occurrences += ok
        return cls(trajs, tokens, nodes)

    @property
    def n_trajectories(self) -> int:
        return len(self.trajectories)

    @property
    def base_rate(self) -> float:
        """Fraction of trajectories that succeeded."""
        return sum(bool(t.success) for t in self.trajectories) / len(self.trajectories)

    def family_of(self, index: int) -> str:
        """Task type (family) of trajectory ``index``; ``""`` when the corpus has none."""
        return self.trajectories[index].task or ""

    def families(self) -> dict[str, list[int]]:
        """family -> trajectory indices, families sorted by name."""
        out: dict[str, list[int]] = defaultdict(list)
        for i, t in enumerate(self.trajectories):
            out[t.task or ""].append(i)
        return dict(sorted(out.items()))

    def task_types(self, node_id: str) -> list[str]:
        """Sorted distinct families in which ``node_id`` occurs."""
        return sorted({self.family_of(i) for i in self.nodes[node_id].episodes})

    def token_counts(self) -> Counter[str]:
        """token -> number of steps carrying it."""
        c: Counter[str] = Counter()
        for toks in self.tokens:
            c.update(toks)
        return c

    def actions_at(self, node_id: str, within: set[int] | None = None) -> list[list[str]]:
        """Raw actions of every occurrence of ``node_id`` (optionally only in trajectories ``within``)."""
        out = []
        for i, s, e in self.nodes[node_id].spans:
            if within is None or i in within:
                out.append([st.action for st in self.trajectories[i].steps[s:e]])
        return out


def _node_id(node: Any) -> str:
    """A Match may carry the node object or its id."""
    return node if isinstance(node, str) else node.id


def node_success(node: Any, usage: CorpusUsage | None) -> float | None:
    """The node's success rate: the tree's value, else the corpus's (``None`` when neither has one)."""
    if node.success is not None:
        return float(node.success)
    if usage is not None and node.id in usage.nodes:
        return usage.nodes[node.id].success
    return None


def expansion_of(node_or_token: Any) -> Sequence[str]:
    """Primitive tokens a node or token stands for."""
    if isinstance(node_or_token, str):
        return (node_or_token,)
    return tuple(node_or_token.expansion)
