"""The tree's rewards inside other trainers: grouped Eq. 3 rewards for TRL-style reward functions and verl-agent."""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError
from .bonus import MATCHING, BonusDesign, default_nesting, resolve_bonus, sequence_bonus
from .constants import LAMBDA0, W_REF
from .group import lambda_g

if TYPE_CHECKING:
    from ..mining.tree import XTree


def _finite(x: Any, what: str) -> float:
    v = float(x)
    if not math.isfinite(v):
        raise ConfigError(f"{what} is {x!r}", fix="pass a finite number")
    return v


def grouped_rewards(
    outcomes: Sequence[float],
    bonuses: Sequence[float],
    groups: Sequence[Hashable],
    won: Sequence[bool] | None = None,
    lambda0: float = LAMBDA0,
    w_ref: float = W_REF["scienceworld"],
    *,
    win_threshold: float = 1.0,
) -> tuple[list[float], dict[Hashable, float]]:
    """Eq. 3 over a flat batch whose rollouts carry a group key; returns (rewards, key -> λ_g).

    Example:
        >>> r, lam = grouped_rewards([0, 0, 1, 0], [2.0, 0.0, 2.0, 2.0], ["a", "a", "b", "b"], w_ref=0.85)
        >>> r, lam["a"]
        ([1.5, 0.0, 1.6176470588235294, 0.6176470588235294], 0.75)
    """
    n = len(outcomes)
    if len(bonuses) != n or len(groups) != n or (won is not None and len(won) != n):
        raise ConfigError("outcomes, bonuses, groups (and won) must have one entry per rollout")
    members: dict[Hashable, list[int]] = {}  # group key -> rollout indices
    for i, g in enumerate(groups):
        members.setdefault(g, []).append(i)
    out = [0.0] * n
    lambdas: dict[Hashable, float] = {}
    for g, idx in members.items():
        sub_won = None if won is None else [won[i] for i in idx]
        flags = [outcomes[i] >= win_threshold for i in idx] if sub_won is None else sub_won
        lambdas[g] = lambda_g(sum(bool(f) for f in flags) / len(idx), lambda0, w_ref)
        for i in idx:
            out[i] = _finite(outcomes[i], "outcome") + lambdas[g] * float(bonuses[i])
    return out, lambdas


def completion_actions(completion: Any) -> list[str]:
    """The actions of a TRL completion: a string or a chat message list, one action per line.

    Example:
        >>> completion_actions([{"role": "assistant", "content": "open door to kitchen\\n\\ngo to kitchen"}])
        ['open door to kitchen', 'go to kitchen']
    """
    if isinstance(completion, list):
        text = "\n".join(
            str(m.get("content", ""))
            for m in completion
            if isinstance(m, Mapping) and m.get("role") == "assistant"
        )
    else:
        text = str(completion)
    return [line.strip() for line in text.splitlines() if line.strip()]


class XTreeRewardFunction:
    """A TRL ``GRPOTrainer`` reward function: ``(prompts, completions, **kwargs) -> list[float]``.

    Per rollout it reads the canonical tokens from the ``tokens_key`` column (a list of
    tokens), else canonicalizes the ``actions_key`` column, else the completion's lines, with
    ``domain``'s canonicalizer; the outcome R_out from ``outcome_fn(prompt, completion, **row)``
    or the ``outcome_key`` column; ``won`` from the ``won_key`` column or ``R_out >= win_threshold``.
    Rollouts are grouped by the ``group_key`` column, else by identical prompt (TRL puts a
    prompt's generations in one call; a group split across processes is weighted by the part
    this process sees). With ``include_outcome=False`` it returns only ``λ_g Σ b_v``, to be summed
    with a separate outcome reward function.

    Example:
        >>> from xtree_gym import MinerConfig, Step, Trajectory, mine
        >>> trajs = [Trajectory(str(i), [Step(t, token=t) for t in "abcab"], True) for i in range(6)]
        >>> tree = mine(trajs, MinerConfig(min_freq=3, eta=0.5, cap=5))  # S0 = a b (depth 1), ...
        >>> fn = XTreeRewardFunction(tree, w_ref=0.4)
        >>> fn(["p", "p"], ["", ""], xtree_tokens=[["a", "b"], ["b"]], outcome=[0.0, 0.0])  # all fail: λ = 0.75
        [1.125, 0.0]
    """

    __name__ = "xtree_bonus"  # TRL logs each reward function under its __name__

    def __init__(
        self,
        tree: XTree,
        *,
        bonus: str | BonusDesign = "depth",
        nesting: bool | None = None,
        domain: str | None = None,
        outcome_fn: Callable[..., float] | None = None,
        lambda0: float = LAMBDA0,
        w_ref: float = W_REF["scienceworld"],
        include_outcome: bool = True,
        win_threshold: float = 1.0,
        tokens_key: str = "xtree_tokens",
        actions_key: str = "actions",
        outcome_key: str = "outcome",
        won_key: str = "won",
        group_key: str | None = None,
        goal_options_key: str = "goal_options",
        matching: str = "stream",
    ) -> None:
        self.tree = tree
        self.design = resolve_bonus(bonus)
        self.nesting = default_nesting(self.design) if nesting is None else nesting
        if matching not in MATCHING:
            raise ConfigError(f"matching = {matching!r}", fix=f"use one of {list(MATCHING)}")
        self.matching = matching
        self.canon = None
        if domain is not None:
            from ..canon import get_canonicalizer

            self.canon = get_canonicalizer(domain)
        lambda_g(0.0, lambda0, w_ref)  # validates w_ref now, not at the first batch
        self.outcome_fn, self.lambda0, self.w_ref = outcome_fn, lambda0, w_ref
        self.include_outcome, self.win_threshold = include_outcome, win_threshold
        self.tokens_key, self.actions_key, self.outcome_key = tokens_key, actions_key, outcome_key
        self.won_key, self.group_key, self.goal_options_key = won_key, group_key, goal_options_key
        self.last_lambdas: dict[Hashable, float] = {}
        """group key -> λ_g of the last call, for logging."""

    def _tokens(self, i: int, completion: Any, kw: Mapping[str, Any]) -> list[str]:
        tokens_key, actions_key = self.tokens_key, self.actions_key
        if kw.get(tokens_key) is not None and kw[tokens_key][i] is not None:
            return list(kw[tokens_key][i])
        actions = kw[actions_key][i] if kw.get(actions_key) is not None else completion_actions(completion)
        if self.canon is None:
            raise ConfigError(
                f"no {tokens_key!r} column and no canonicalizer",
                fix=f"add a {tokens_key!r} column (list of tokens per rollout) or pass domain='scienceworld'",
            )
        return [self.canon(a).token for a in actions]

    def __call__(self, prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any) -> list[float]:
        outcome_key, group_key = self.outcome_key, self.group_key
        n = len(completions)
        rows = [
            {k: v[i] for k, v in kwargs.items() if isinstance(v, (list, tuple)) and len(v) == n}
            for i in range(n)
        ]
        if self.outcome_fn is not None:
            outcomes = [float(self.outcome_fn(prompts[i], completions[i], **rows[i])) for i in range(n)]
        elif kwargs.get(outcome_key) is not None:
            outcomes = [float(x) for x in kwargs[outcome_key]]
        else:
            raise ConfigError(
                f"no outcome: no outcome_fn and no {outcome_key!r} column", fix="pass outcome_fn="
            )
        bonuses = []
        for i in range(n):
            opts = rows[i].get(self.goal_options_key)
            goal_options = list(opts) if isinstance(opts, (list, tuple, dict)) else None
            res = sequence_bonus(
                self.tree, self._tokens(i, completions[i], kwargs), self.design,
                nesting=self.nesting, goal_options=goal_options, matching=self.matching,
            )  # fmt: skip
            bonuses.append(res.total)
        won = kwargs.get(self.won_key)
        groups = (
            kwargs[group_key]
            if group_key and kwargs.get(group_key) is not None
            else [repr(p) for p in prompts]
        )
        rewards, self.last_lambdas = grouped_rewards(
            outcomes, bonuses, groups, won, self.lambda0, self.w_ref, win_threshold=self.win_threshold
        )
        if not self.include_outcome:
            rewards = [self.last_lambdas[g] * b for g, b in zip(groups, bonuses)]
        return rewards


def verl_agent_rewards(
    episode_rewards: Sequence[float],
    uids: Sequence[Hashable],
    token_sequences: Sequence[Sequence[str]],
    tree: XTree,
    *,
    won: Sequence[bool] | None = None,
    bonus: str | BonusDesign = "depth",
    nesting: bool | None = None,
    lambda0: float = LAMBDA0,
    w_ref: float = W_REF["scienceworld"],
    win_threshold: float = 1.0,
    matching: str = "stream",
) -> tuple[list[float], dict[Hashable, float]]:
    """verl-agent-style hook: episode rewards + group uids + token sequences -> Eq. 3 rewards.

    verl-agent keeps one ``uid`` per GRPO group in ``non_tensor_batch["uid"]`` and the episode
    reward per rollout; call this where the episode rewards are assembled, before advantages.
    Returns the adjusted rewards and ``uid -> λ_g`` (log its mean as the paper's Figure 7 does).
    """
    design = resolve_bonus(bonus)
    bonuses = [
        sequence_bonus(tree, seq, design, nesting=nesting, matching=matching).total for seq in token_sequences
    ]
    return grouped_rewards(episode_rewards, bonuses, uids, won, lambda0, w_ref, win_threshold=win_threshold)
