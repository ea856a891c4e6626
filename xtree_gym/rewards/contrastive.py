"""Node values read off the mining corpus, and potential-based shaping over the tree (issue 34).

No hand naming: everything here is computed from the tree and the labelled corpus it was mined from.

* **Contrastive node value** (diverse density, McGovern & Barto 2001): a node is worth what its
  completion separates successful from failed episodes,

  ``d_v = P(success | v completed in τ) − P(success | v not completed in τ)`` over the corpus,
  ``w_v = max(0, d_v) / max_u max(0, d_u)`` (the most separating node is worth 1; 0 when none separates).

  A node completed in (nearly) every episode, successes and failures alike, earns ~0; a node that
  fails more often than it wins earns 0 (clipped). "Completed" is what the bonus pays: the
  streaming matcher's completions (:func:`completed_nodes`).
* **Once per episode**: :class:`~xtree_gym.rewards.bonus.EpisodeBonus` already pays a node at its
  first completion only (a navigation loop repeated ten times pays once); :class:`NodeValueBonus`
  goes through the same ledger, so every design here inherits it.
* **Potential-based shaping** (Ng, Harada & Russell 1999): ``Φ(s_t) = margin · min(B_t / B_max, 1)``
  with ``B_t`` the contrastive bonus collected by step t (progress along the success-bearing nodes)
  and ``B_max = Σ_v w_v``; ``F_t = γ Φ(s_{t+1}) − Φ(s_t)``, with ``Φ = 0`` at a terminal state and a
  time-limit truncation *not* terminal (the return past it is bootstrapped with Φ, the usual
  treatment of time limits). Summed over an episode (:func:`potential_return`) the shaping is
  ``γ^T Φ(s_T)`` for a truncated episode and 0 for a terminated one (Φ(s_0) = 0: nothing completed).
  With Φ = 0 at truncation too, the episode sum would be the constant −Φ(s_0) = 0 and a group-relative
  advantage would not move at all: in episode-level GRPO, Ng's invariance is exact invariance.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

from ..errors import ConfigError
from .bonus import BonusContext, NodeLike

if TYPE_CHECKING:
    from ..mining.tree import XTree


def completed_nodes(tree: XTree, tokens: Sequence[str]) -> set[str]:
    """The node ids whose expansion the streaming matcher completes somewhere in ``tokens``.

    Example:
        >>> from xtree_gym import MinerConfig, Step, Trajectory, mine
        >>> trajs = [Trajectory(str(i), [Step(t, token=t) for t in "abcab"], True) for i in range(6)]
        >>> tree = mine(trajs, MinerConfig(min_freq=3, eta=0.5, cap=5))  # S0 = a b, S1 = S0 c, S2 = S1 S0
        >>> sorted(completed_nodes(tree, list("abzz"))), sorted(completed_nodes(tree, list("abcab")))
        (['S0'], ['S0', 'S1', 'S2'])
    """
    matcher = tree.matcher()
    matcher.reset()
    out: set[str] = set()
    for tok in tokens:
        out.update(m.node for m in matcher.feed(tok))
    return out


def separation(done: Sequence[bool], success: Sequence[bool]) -> float:
    """``P(success | done) − P(success | not done)`` over episodes; 0 when either side is empty.

    Example (4 episodes: the node is done in both successes and one failure):
        >>> round(separation([True, True, True, False], [True, True, False, False]), 4)  # 2/3 − 0
        0.6667
        >>> separation([True, True], [True, False])  # in every episode: separates nothing
        0.0
    """
    if len(done) != len(success):
        raise ConfigError(
            f"{len(done)} completion flags for {len(success)} outcomes", fix="pass one flag per episode"
        )
    with_v = [s for d, s in zip(done, success) if d]
    without = [s for d, s in zip(done, success) if not d]
    if not with_v or not without:
        return 0.0
    return sum(with_v) / len(with_v) - sum(without) / len(without)


def contrastive_values(tree: XTree, episodes: Iterable[tuple[Sequence[str], bool]]) -> dict[str, float]:
    """Every node's contrastive value ``w_v = max(0, d_v) / max_u max(0, d_u)`` over ``episodes``.

    ``episodes`` are (tokens, success) pairs: the labelled corpus the tree was mined from.

    Example (S0 = a b is in every episode; S1 = a b c only in the two successes; S2 = S1 S0 in one):
        >>> from xtree_gym import MinerConfig, Step, Trajectory, mine
        >>> trajs = [Trajectory(str(i), [Step(t, token=t) for t in "abcab"], True) for i in range(6)]
        >>> tree = mine(trajs, MinerConfig(min_freq=3, eta=0.5, cap=5))
        >>> eps = [(list("abcab"), True), (list("abczz"), True), (list("abzzz"), False), (list("abzab"), False)]
        >>> contrastive_values(tree, eps)  # d: S0 0, S1 1 − 0, S2 1 − 1/3
        {'S0': 0.0, 'S1': 1.0, 'S2': 0.6666666666666667}
    """
    eps = [(completed_nodes(tree, toks), bool(ok)) for toks, ok in episodes]
    if not eps:
        raise ConfigError("no episodes to weigh the nodes with", fix="pass the labelled mining corpus")
    ok = [s for _, s in eps]
    d = {n.id: max(0.0, separation([n.id in done for done, _ in eps], ok)) for n in tree.nodes}
    top = max(d.values(), default=0.0)
    return {k: (v / top if top > 0 else 0.0) for k, v in d.items()}


def corpus_values(tree: XTree, corpus: Iterable[object]) -> dict[str, float]:
    """:func:`contrastive_values` over corpus trajectories (their step tokens, else actions, and ``success``)."""
    eps = [([s.token or s.action for s in t.steps], bool(t.success)) for t in corpus]  # type: ignore[attr-defined]
    return contrastive_values(tree, eps)


@dataclass(frozen=True)
class NodeValueBonus:
    """A b_v design from a table: ``b_v = values[v]`` (0 for a node not in it), e.g. :func:`contrastive_values`.

    Paid through :class:`~xtree_gym.rewards.bonus.EpisodeBonus` like every design: once per node per
    episode, at its first completion.

    Example:
        >>> from types import SimpleNamespace
        >>> b = NodeValueBonus({"S1": 1.0, "S2": 0.5})
        >>> b(SimpleNamespace(id="S2"), BonusContext()), b(SimpleNamespace(id="S9"), BonusContext())
        (0.5, 0.0)
    """

    values: Mapping[str, float] = field(default_factory=dict)
    """node id -> b_v."""
    nests: ClassVar[bool] = True
    """The nesting rule applies (:func:`~xtree_gym.rewards.bonus.default_nesting`): a nested family of
    separating nodes earns its largest member, not the sum (one event is not paid twice)."""

    def __call__(self, node: NodeLike, ctx: BonusContext | None = None) -> float:
        return float(self.values.get(node.id, 0.0))

    def __hash__(self) -> int:
        return hash(tuple(sorted(self.values.items())))

    def total(self) -> float:
        """``B_max = Σ_v b_v``: the most one episode can collect (each node once, nesting only lowers)."""
        return float(sum(max(0.0, v) for v in self.values.values()))


def potential(collected: float, max_total: float, margin: float) -> float:
    """``Φ = margin · min(B / B_max, 1)`` (0 for an empty or worthless tree).

    Example:
        >>> potential(1.0, 4.0, 0.09), potential(9.0, 4.0, 0.09), potential(1.0, 0.0, 0.09)
        (0.0225, 0.09, 0.0)
    """
    if max_total <= 0:
        return 0.0
    return margin * min(max(collected, 0.0) / max_total, 1.0)


def potential_shaping(phis: Sequence[float], terminated: bool, gamma: float = 1.0) -> list[float]:
    """Per-step ``F_t = γ Φ(s_{t+1}) − Φ(s_t)`` for an episode whose potentials are ``phis`` = Φ(s_0..s_T).

    ``Φ(s_T)`` is replaced by 0 when the episode terminated (Ng et al.'s absorbing state); a
    truncated episode keeps it.

    Example (progress 0 → 0.05 → 0.05 → 0.09, then truncated or terminated):
        >>> potential_shaping([0.0, 0.05, 0.05, 0.09], terminated=False)
        [0.05, 0.0, 0.039999999999999994]
        >>> potential_shaping([0.0, 0.05, 0.05, 0.09], terminated=True)
        [0.05, 0.0, -0.05]
    """
    ph = list(phis)
    if terminated and ph:
        ph[-1] = 0.0
    return [gamma * b - a for a, b in itertools.pairwise(ph)]


def potential_return(final_phi: float, steps: int, terminated: bool, gamma: float = 1.0) -> float:
    """``Σ_t γ^t F_t`` of a whole episode that starts at Φ = 0: ``γ^T Φ(s_T)`` if truncated, else 0.

    Example (the telescoped sum of :func:`potential_shaping`'s example):
        >>> potential_return(0.09, 3, terminated=False), potential_return(0.09, 3, terminated=True)
        (0.09, 0.0)
        >>> round(potential_return(0.09, 3, False, gamma=0.5), 5)
        0.01125
    """
    return 0.0 if terminated else gamma**steps * final_phi
