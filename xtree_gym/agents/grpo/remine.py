"""The tree co-evolves with the policy: a FIFO buffer of own rollouts, re-mined every K steps.

Both successes and failures go into the buffer (labelled by ``success``: the miner's success
filter needs both). Re-mining uses the same :class:`~xtree_gym.mining.config.MinerConfig` as the
starting tree, so only the data changes. Nodes are compared by their primitive expansion (node
ids are renumbered by every mining run): ``came`` = new expansions, ``went`` = gone, ``stayed``.

The tree is also *valued* on the buffer it was mined from (:func:`self_mine`): the buffer is the tree's own
labelled corpus, so the contrastive node values and ``--bonus-mode auto``'s pick read it, not a corpus the
starting tree came with. A run with no starting tree (``--remine-every K`` alone) is the "self-mined" rule:
outcome only for K steps, then a tree mined and valued on the agent's own episodes, re-mined every K steps
from the FIFO window (the claim check's ``self_mined`` arm calls the same :func:`self_mine`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ...corpus.records import Step, Trajectory, trajectory_from_dict
from ..types import Episode


def training_trajectory(ep: Episode) -> Trajectory:
    """The episode as a corpus record with only its valid, tokenized steps (what was matched).

    Example:
        >>> from xtree_gym.agents.types import Turn
        >>> turns = [Turn([], [], [], "", "a", "", token="a<x>"), Turn([], [], [], "", None, "", invalid=True)]
        >>> [s.token for s in training_trajectory(Episode("e", "env", "t", "g", 0, 0, 0, turns=turns)).steps]
        ['a<x>']
    """
    # ids/logprobs are left out: the miner reads tokens, and the buffer is checkpointed as JSON
    keep = [
        Step(t.action or "", t.observation, token=t.token, slots=t.slots)
        for t in ep.turns
        if t.token and not t.invalid
    ]
    return Trajectory(ep.id, keep, bool(ep.success), ep.env, ep.task, ep.goal, float(ep.reward))


class RolloutBuffer:
    """FIFO of the policy's own episodes (as corpus records), oldest dropped first.

    Example:
        >>> buf = RolloutBuffer(2)
        >>> buf.add([Episode(str(i), "env", "t", "g", 0, 0, 0) for i in range(3)])
        >>> [t.id for t in buf.trajectories()]
        ['1', '2']
    """

    def __init__(self, size: int) -> None:
        self.items: deque[Trajectory] = deque(maxlen=max(1, size))

    def add(self, episodes: Iterable[Episode]) -> None:
        for ep in episodes:
            self.items.append(training_trajectory(ep))

    def add_records(self, records: Iterable[dict[str, Any]]) -> None:
        """Append corpus-format records (e.g. gathered from other ranks)."""
        for r in records:
            self.items.append(trajectory_from_dict(r))

    def trajectories(self) -> list[Trajectory]:
        return list(self.items)

    def __len__(self) -> int:
        return len(self.items)

    def state(self) -> list[dict[str, Any]]:
        """JSON-safe records (corpus format) for checkpoints."""
        return [t.to_dict() for t in self.items]

    def load_state(self, records: Sequence[dict[str, Any]]) -> None:
        self.items.clear()
        for r in records:
            self.items.append(trajectory_from_dict(r))


def node_diff(old: Any, new: Any) -> dict[str, int]:
    """How many nodes came, went and stayed between two trees (compared by expansion).

    Example:
        >>> class T:
        ...     def __init__(self, *exps): self.nodes = [type("N", (), {"expansion": e})() for e in exps]
        >>> node_diff(T(("a", "b"), ("b", "c")), T(("a", "b"), ("c", "d"), ("d", "e")))
        {'came': 2, 'went': 1, 'stayed': 1}
    """
    before = {tuple(n.expansion) for n in (old.nodes if old is not None else [])}
    after = {tuple(n.expansion) for n in new.nodes}
    return {"came": len(after - before), "went": len(before - after), "stayed": len(before & after)}


def remine(buffer: RolloutBuffer, config: Any, *, name: str = "remined") -> Any:
    """Mine a fresh tree from the buffer with ``config`` (a MinerConfig or preset name)."""
    from ...mining.miner import mine

    return mine(buffer.trajectories(), config, name=name)


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
    from ...rewards.modes import AUTO_MODE, pick_bonus_mode

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
    from ...mining.miner import mine
    from ...rewards.contrastive import corpus_values
    from ...rewards.modes import CONTRASTIVE_MODES

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
    from ...rewards.contrastive import NodeValueBonus

    mined = tree.extra["self_mined"]
    values = mined.get("node_values")
    return str(mined["bonus_mode"]), (NodeValueBonus(dict(values)) if values is not None else None)


def miner_from_spec(spec: str) -> Any:
    """``--miner``'s value as a MinerConfig: a preset, optionally with field overrides after a colon.

    A run mining its own short episodes may need a lower ``min_freq`` than the paper's corpora (5): a
    preset's other settings are kept.

    Example:
        >>> cfg = miner_from_spec("webshop:min_freq=1,eta=0.25")
        >>> cfg.min_freq, cfg.eta, cfg.cap
        (1, 0.25, 60)
    """
    import json

    from ...errors import ConfigError
    from ...mining.config import MinerConfig

    name, _, rest = spec.partition(":")
    overrides: dict[str, Any] = {}
    for item in filter(None, (x.strip() for x in rest.split(","))):
        key, eq, value = item.partition("=")
        if not eq:
            raise ConfigError(
                f"miner {spec!r}: {item!r} is not FIELD=VALUE", fix="e.g. --miner webshop:min_freq=2"
            )
        try:
            overrides[key.strip()] = json.loads(value)
        except ValueError:
            raise ConfigError(f"miner {spec!r}: {value!r} is not a number", fix="e.g. min_freq=2") from None
    return MinerConfig.preset(name, **overrides)
