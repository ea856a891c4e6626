"""A tree mined from the agent's own episodes and valued on them: the rule of ``xtree train rlvr --remine-every K``
without ``--tree``, of ``XTreeBonus.self_mine`` and of the claim check's ``self_mined`` arm (one code path).

In the rewards room (it mines, one floor down, and values with :mod:`.contrastive`) so that the wrappers and the
trainer both look down to it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..corpus.records import Step, Trajectory  # noqa: F401  (Step: the doctest's)

NO_BONUS = "none"
"""The mode :func:`self_mined_mode` picks for a buffer without a success: no bonus (outcome only)."""


def self_mined_mode(mode: str, successes: int, failures: int) -> str:
    """The bonus mode a tree mined from a buffer of ``successes`` and ``failures`` is used with.

    A mode other than ``auto`` is kept. ``auto``: ``contrastive_gated`` given both (the contrastive values
    separate them); ``eq3`` given successes only (every node separates nothing, so the contrastive values are
    all 0: the tree's own b_v design is paid, Eq. 3's weight fading as the win rate reaches w_ref);
    :data:`NO_BONUS` given no success (nothing says which nodes lead to one: a bonus would pay the agent's
    own failing habits, so the run stays outcome only until a success is in the window).

    Example:
        >>> [self_mined_mode("auto", s, f) for s, f in [(3, 5), (4, 0), (0, 8)]]
        ['contrastive_gated', 'eq3', 'none']
        >>> self_mined_mode("potential", 0, 8)
        'potential'
    """
    from .modes import AUTO_MODE, pick_bonus_mode

    if mode != AUTO_MODE:
        return mode
    if not successes:
        return NO_BONUS
    return pick_bonus_mode(AUTO_MODE, [True] * successes + [False] * failures)


@dataclass(frozen=True)
class SelfMined:
    """A tree mined from own episodes, the mode it is used with, its node values and the labels it saw."""

    tree: Any
    """The mined :class:`~xtree_gym.mining.tree.XTree` (its ``corpus`` counts are the buffer's)."""
    mode: str
    """:func:`self_mined_mode`'s pick: a bonus mode, or :data:`NO_BONUS`."""
    values: dict[str, float] | None
    """Contrastive node values over the same episodes (modes that use them), else None."""
    successes: int
    """Successful episodes in the buffer."""
    failures: int
    """Failed episodes in the buffer."""

    def record(self) -> dict[str, Any]:
        """The metrics line's keys for this re-mine."""
        return {"nodes": len(self.tree), "bonus_mode": self.mode, "buffer_successes": self.successes,
                "buffer_failures": self.failures}  # fmt: skip


def self_mine(
    trajectories: Iterable[Trajectory], config: Any, *, mode: str = "auto", name: str = "self-mined"
) -> SelfMined:
    """Mine a tree from ``trajectories`` (own episodes, labelled) and value it on the same episodes.

    Example (3 successes end in ``c``, 3 failures do not: the nodes holding ``c`` are the ones worth 1):
        >>> from xtree_gym import MinerConfig
        >>> trajs = [Trajectory(str(i), [Step(t, token=t) for t in ("abcab" if i < 3 else "ababz")], i < 3)
        ...          for i in range(6)]
        >>> got = self_mine(trajs, MinerConfig(min_freq=3, eta=0.5, cap=5))
        >>> got.mode, got.successes, got.failures, got.tree.corpus["n_trajectories"]
        ('contrastive_gated', 3, 3, 6)
        >>> max(got.values.values())
        1.0
    """
    from ..mining.miner import mine
    from .contrastive import corpus_values
    from .modes import CONTRASTIVE_MODES

    trajs = list(trajectories)
    won = sum(bool(t.success) for t in trajs)
    chosen = self_mined_mode(mode, won, len(trajs) - won)
    tree = mine(trajs, config, name=name)
    values = corpus_values(tree, trajs) if chosen in CONTRASTIVE_MODES and trajs else None
    got = SelfMined(tree, chosen, values, won, len(trajs) - won)
    tree.extra["self_mined"] = {**got.record(), "node_values": values}  # the tree file says how it is paid
    return got


def mined_state(tree: Any) -> tuple[str, Any]:
    """The bonus mode and node values (a :class:`~xtree_gym.rewards.contrastive.NodeValueBonus`, or None) a
    :func:`self_mine` tree was saved with (a resumed run pays what the run before it paid)."""
    from .contrastive import NodeValueBonus

    mined = tree.extra["self_mined"]
    values = mined.get("node_values")
    return str(mined["bonus_mode"]), (NodeValueBonus(dict(values)) if values is not None else None)
