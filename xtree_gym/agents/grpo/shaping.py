"""Per-episode training rewards: outcome − invalid penalty + shaping (none | xtree | segcost).

``r_i = R_out(τ_i) − invalid_penalty · #invalid(τ_i) + shaping_i`` where shaping is

* ``none``: 0;
* ``xtree`` (X-Tree Eq. 3): ``λ_g · Σ_{v ∈ matched(τ_i)} b_v`` — every node paid once per episode
  (nesting rule for the depth design), λ_g from the group's win rate (:func:`xtree_gym.rewards.lambda_g`);
* ``segcost`` (ReuseRL Eq. 6): successes pay ``λ · seg(s, C) / T`` with ``C`` extracted from the
  group's successes plus a FIFO buffer of earlier successes (:class:`xtree_gym.reuserl.mdl.ReuseRLShaper`).

Invalid steps (unparsed responses, refused actions) carry no token into the matcher: a refusal
earns no bonus. The pieces reuse :mod:`xtree_gym.rewards` and :mod:`xtree_gym.reuserl.mdl`; nothing is copied.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ...reuserl.mdl import MDLConfig, ReuseRLShaper
from ...rewards.bonus import sequence_bonus
from ...rewards.group import lambda_g
from ...rewards.modes import shaped_group_rewards
from ..types import Episode


@dataclass
class StepRewards:
    """What the reward phase of one step produced, one entry per episode (input order)."""

    rewards: list[float]
    """The training reward r_i (what the advantages are computed from)."""
    outcomes: list[float]
    """The env's outcome reward of each episode."""
    won: list[bool]
    """The benchmark's success of each episode."""
    bonuses: list[float] = field(default_factory=list)
    """Σ b_v (xtree) or SegCost (segcost) of each episode; 0 with no shaping."""
    lambdas: list[float] = field(default_factory=list)
    """λ_g of the episode's group (xtree), the SegCost λ (segcost), else 0."""
    invalid: list[int] = field(default_factory=list)
    """Invalid steps of each episode."""


def episode_tokens(ep: Episode) -> list[str]:
    """The canonical tokens of an episode's valid steps (what the tree is matched against).

    Example:
        >>> from xtree_gym.agents.types import Turn
        >>> t = lambda tok, bad=False: Turn([], [], [], "", "a", "", token=tok, invalid=bad)
        >>> episode_tokens(Episode("e", "env", "x", "g", 0, 0, 0, turns=[t("a"), t("b", True), t(None), t("c")]))
        ['a', 'c']
    """
    return [t.token for t in ep.turns if t.token and not t.invalid]


def goal_options(ep: Episode) -> list[str] | None:
    """Option types the goal names (WebShop), from the episode's meta or its turns' info."""
    for source in [ep.meta, *(t.info for t in ep.turns)]:
        opts = source.get("goal_options")
        if opts is None and isinstance(source.get("goal"), dict):
            opts = source["goal"].get("goal_options")
        if opts is not None:
            return list(opts)
    return None


WON_REWARD = 10.0
"""R_out of a won episode under ``outcome won10`` (RLVMR's ScienceWorld reward: ``10 · won``)."""


def outcome_of(ep: Episode, outcome: str = "env") -> float:
    """R_out of an episode: ``env`` = the env's summed reward (ScienceWorld: points −100..100);
    ``won10`` = ``10 · success``, as RLVMR (verl-agent) rewards ScienceWorld.

    Example:
        >>> ep = Episode("e", "env", "x", "g", 0, 0, 0, reward=75.0, success=False)
        >>> outcome_of(ep), outcome_of(ep, "won10")
        (75.0, 0.0)
    """
    if outcome == "env":
        return float(ep.reward)
    if outcome == "won10":
        return WON_REWARD * float(bool(ep.success))
    raise ValueError(f"unknown outcome {outcome!r} (use 'env' or 'won10')")


def outcome_rewards(episodes: Sequence[Episode], invalid_penalty: float, outcome: str = "env") -> list[float]:
    """``R_out − invalid_penalty · #invalid`` per episode.

    Example:
        >>> from xtree_gym.agents.types import Turn
        >>> bad = Turn([], [], [], "", None, "", invalid=True)
        >>> outcome_rewards([Episode("e", "env", "x", "g", 0, 0, 0, turns=[bad, bad], reward=1.0)], 0.1)
        [0.8]
    """
    return [outcome_of(ep, outcome) - invalid_penalty * ep.n_invalid for ep in episodes]


def groups_of(episodes: Sequence[Episode]) -> dict[int, list[int]]:
    """Episode indices per group id, in first-seen order.

    Example:
        >>> eps = [Episode(str(i), "env", "x", "g", 0, g, 0) for i, g in enumerate([3, 3, 5])]
        >>> groups_of(eps)
        {3: [0, 1], 5: [2]}
    """
    out: dict[int, list[int]] = {}
    for i, ep in enumerate(episodes):
        out.setdefault(ep.group, []).append(i)
    return out


def xtree_bonuses(
    episodes: Sequence[Episode], tree: Any, *, bonus: Any, matching: str = "stream"
) -> list[float]:
    """Σ b_v of each episode (:func:`xtree_gym.rewards.sequence_bonus` on its valid tokens)."""
    return [
        sequence_bonus(
            tree, episode_tokens(ep), bonus, goal_options=goal_options(ep), task=ep.task, matching=matching
        ).total
        for ep in episodes
    ]


def xtree_rewards(
    episodes: Sequence[Episode],
    bonuses: Sequence[float],
    *,
    invalid_penalty: float,
    lambda0: float,
    w_ref: float,
    outcome: str = "env",
    mode: str = "eq3",
    **design: float,
) -> StepRewards:
    """Eq. 3 per group: ``r_i = R_out − penalty·#invalid + λ_g · bonus_i``, λ_g from the group's wins.

    ``mode`` other than ``eq3`` is one of issue 23's or issue 34's designs (:mod:`xtree_gym.rewards.modes`),
    with ``design`` its parameters (``max_bonus``, ``margin``, ``best_win_rate``, ``progress``, ``anneal_end``);
    ``potential`` counts a won episode as terminated and any other as truncated (Φ kept).

    Example (an all-fail group of 4: only the bonus separates them; a group at w_ref gets none):
        >>> eps = [Episode(str(i), "env", "x", "g", 0, 0, i) for i in range(4)]
        >>> xtree_rewards(eps, [2.0, 1.0, 0.0, 0.0], invalid_penalty=0.1, lambda0=0.75, w_ref=0.4).rewards
        [1.5, 0.75, 0.0, 0.0]
        >>> for ep in eps[:2]: ep.success, ep.reward = True, 1.0
        >>> xtree_rewards(eps, [2.0, 1.0, 0.0, 0.0], invalid_penalty=0.1, lambda0=0.75, w_ref=0.4).rewards
        [1.0, 1.0, 0.0, 0.0]
    """
    base = outcome_rewards(episodes, invalid_penalty, outcome)
    lambdas = [0.0] * len(episodes)
    shaped = [b + 0.0 for b in base]
    params: dict[str, Any] = dict(design)  # floats only: ``terminated`` defaults to the won flags
    for idx in groups_of(episodes).values():
        won = [bool(episodes[i].success) for i in idx]
        if mode == "eq3":
            lam = lambda_g(sum(won) / len(idx), lambda0, w_ref)
            out = [base[i] + lam * float(bonuses[i]) for i in idx]
        else:
            out, lam = shaped_group_rewards([base[i] for i in idx], [float(bonuses[i]) for i in idx], won,
                                            mode=mode, lambda0=lambda0, w_ref=w_ref, **params)  # fmt: skip
        for i, r in zip(idx, out):
            lambdas[i], shaped[i] = lam, r
    return StepRewards(
        rewards=shaped,
        outcomes=[float(ep.reward) for ep in episodes],
        won=[bool(ep.success) for ep in episodes],
        bonuses=[float(x) for x in bonuses],
        lambdas=lambdas,
        invalid=[ep.n_invalid for ep in episodes],
    )


def plain_rewards(
    episodes: Sequence[Episode], *, invalid_penalty: float, outcome: str = "env"
) -> StepRewards:
    """Outcome-only rewards (``shaping none``)."""
    return StepRewards(
        rewards=outcome_rewards(episodes, invalid_penalty, outcome),
        outcomes=[float(ep.reward) for ep in episodes],
        won=[bool(ep.success) for ep in episodes],
        bonuses=[0.0] * len(episodes),
        lambdas=[0.0] * len(episodes),
        invalid=[ep.n_invalid for ep in episodes],
    )


class SegCostShaping:
    """ReuseRL's SegCost in the loop: one :class:`ReuseRLShaper` (FIFO success buffer) across steps.

    Example:
        >>> from xtree_gym.agents.types import Turn
        >>> def ep(i, toks, won):
        ...     turns = [Turn([], [], [], "", "a", "", token=t) for t in toks]
        ...     return Episode(str(i), "env", "x", "g", 0, 0, i, turns=turns, success=won, reward=float(won))
        >>> sc = SegCostShaping(horizon=10, lam=1.0, buffer_size=8)
        >>> out = sc.rewards([ep(0, "abab", True), ep(1, "ab", True), ep(2, "b", False)], invalid_penalty=0.0)
        >>> out.rewards, out.bonuses  # successes pay seg/T; the failure pays nothing
        ([0.6, 0.8, 0.0], [0.4, 0.2, 0.1])
    """

    def __init__(self, horizon: int, lam: float = 10.0, buffer_size: int = 256) -> None:
        self.config = MDLConfig(buffer_size=buffer_size, lam=lam)
        self.shaper = ReuseRLShaper(horizon=max(1, horizon), config=self.config)

    def rewards(
        self, episodes: Sequence[Episode], *, invalid_penalty: float, outcome: str = "env"
    ) -> StepRewards:
        base = outcome_rewards(episodes, invalid_penalty, outcome)
        out = [0.0] * len(episodes)
        costs = [0.0] * len(episodes)
        for idx in groups_of(episodes).values():
            seqs = [episode_tokens(episodes[i]) for i in idx]
            shaped = self.shaper.shape(seqs, [base[i] for i in idx], [episodes[i].success for i in idx])
            for j, i in enumerate(idx):
                out[i] = shaped.rewards[j]
                costs[i] = shaped.costs[j]
        return StepRewards(
            rewards=out,
            outcomes=[float(ep.reward) for ep in episodes],
            won=[bool(ep.success) for ep in episodes],
            bonuses=costs,
            lambdas=[self.config.lam] * len(episodes),
            invalid=[ep.n_invalid for ep in episodes],
        )

    def state(self) -> dict[str, Any]:
        """JSON-safe buffer (for checkpoints)."""
        return {"buffer": [list(s) for s in self.shaper.buffer]}

    def load_state(self, state: dict[str, Any]) -> None:
        self.shaper.buffer.clear()
        self.shaper.observe(tuple(s) for s in state.get("buffer", []))
