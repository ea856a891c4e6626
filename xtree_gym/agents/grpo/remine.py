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
from typing import Any

from ...corpus.records import Step, Trajectory, trajectory_from_dict
from ...rewards.self_mined import NO_BONUS, SelfMined, mined_state, self_mine, self_mined_mode
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


__all__ = [
    "NO_BONUS",
    "RolloutBuffer",
    "SelfMined",
    "mined_state",
    "miner_from_spec",
    "node_diff",
    "remine",
    "self_mine",
    "self_mined_mode",
    "training_trajectory",
]


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
