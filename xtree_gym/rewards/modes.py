"""Bonus designs beside Eq. 3: group rewards that let the outcome win (issue 23).

Eq. 3 (:func:`xtree_gym.rewards.group_rewards`) stays exact: mode ``eq3`` calls it unchanged, and it is
what :func:`shaped_group_rewards` does unless told otherwise. ``xtree train rlvr`` picks its mode with
:func:`pick_bonus_mode` (``auto``, issue 34's evidence: ``contrastive_gated`` given a labelled corpus).
The other modes keep Eq. 3's shape ``r_i = R_out(τ_i) + weight · bonus_i`` and change only what the
bonus may be worth:

* ``normalized`` (a): ``r_i = R_out + margin · (λ_g / λ0) · min(B_i / B_max, 1)`` with ``B_max`` the
  tree's largest reachable Σ b_v (:func:`max_episode_bonus`). A bonus-only episode earns at most
  ``margin``; with ``margin`` below the smallest win reward, any win outranks any bonus-only episode.
* ``gated`` (b): ``r_i = R_out + λ0 · B_i`` only in groups the verifier cannot separate (every
  rollout failed, or every rollout won); a group with both wins and failures gets ``R_out`` alone.
* ``annealed`` (c): ``λ = λ0 · clip(1 − max(w_g, w_best) / w_ref, 0, 1) · clip(1 − p / p_end, 0, 1)``:
  Eq. 3's weight, but reading the best win rate seen so far (a ratchet: a policy that drifts back
  to farming does not win its weight back) and fading to 0 at training progress ``p_end`` whatever
  the win rate does.

Issue 34's tree-derived designs (:mod:`xtree_gym.rewards.contrastive`) value each node by how much
its completion separates successes from failures in the mining corpus (``w_v``, no hand naming); the
caller computes ``bonus_i`` with those values (:class:`~xtree_gym.rewards.contrastive.NodeValueBonus`,
once per node per episode) and the mode says how it enters:

* ``contrastive_gated``: ``gated``'s rule with contrastive ``bonus_i``.
* ``contrastive_normalized``: ``normalized``'s rule with contrastive ``bonus_i`` and ``B_max = Σ_v w_v``.
* ``potential``: ``r_i = R_out + γ^T Φ(s_T)`` for a truncated episode, ``R_out`` for a terminated one,
  ``Φ = margin · min(bonus_i / B_max, 1)`` (potential-based shaping summed over the episode, γ = 1;
  :func:`~xtree_gym.rewards.contrastive.potential_return`). No λ_g: the shaping is policy-invariant.

All functions are pure; the caller keeps ``w_best`` and the progress.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..errors import ConfigError
from .bonus import BonusContext, resolve_bonus
from .constants import LAMBDA0, W_REF
from .contrastive import potential
from .group import group_rewards, lambda_g

if TYPE_CHECKING:
    from ..mining.tree import XTree

BONUS_MODES = (
    "eq3",
    "normalized",
    "gated",
    "annealed",
    "contrastive_gated",
    "contrastive_normalized",
    "potential",
)
"""``eq3`` (the paper's), ``normalized`` (a), ``gated`` (b), ``annealed`` (c); issue 34's tree-derived ones:
``contrastive_gated``, ``contrastive_normalized``, ``potential``. ``xtree train rlvr`` defaults to :data:`AUTO_MODE`."""
AUTO_MODE = "auto"
"""``xtree train rlvr``'s default ``--bonus-mode``: :func:`pick_bonus_mode` chooses ``contrastive_gated`` when the
labelled corpus the tree was mined from holds both successes and failures, ``eq3`` (the paper's) otherwise. Why
``contrastive_gated``: in issue 34's claim check (DoorKey-5x5, DoorKey-6x6, MultiRoom-N2-S4; 15 seeds; n = 2
and 16) it is the one mined design never significantly behind the hand-named subgoals, and ahead of them at n = 16
on two of the three envs (docs/experiments.md)."""
CONTRASTIVE_MODES = ("contrastive_gated", "contrastive_normalized", "potential")
"""Modes whose bonus uses the contrastive node values (:func:`~xtree_gym.rewards.contrastive.contrastive_values`)."""


def check_bonus_mode(mode: str, margin: float = 0.5, anneal_end: float = 1.0, *, auto: bool = False) -> None:
    """One :class:`ConfigError` for a mode name or a parameter out of range (``auto``: :data:`AUTO_MODE` allowed)."""
    names = (AUTO_MODE, *BONUS_MODES) if auto else BONUS_MODES
    if mode not in names:
        raise ConfigError(f"bonus mode {mode!r}", fix=f"use one of: {', '.join(names)}")
    if not margin > 0.0:
        raise ConfigError(f"bonus margin = {margin!r}", fix="use a margin > 0 below the smallest win reward")
    if not anneal_end > 0.0:
        raise ConfigError(f"bonus anneal end = {anneal_end!r}", fix="use a training fraction > 0, e.g. 1.0")


def pick_bonus_mode(mode: str, outcomes: Sequence[bool] | None) -> str:
    """The mode a run uses: ``mode`` itself, or for :data:`AUTO_MODE` ``contrastive_gated`` when ``outcomes`` (the
    success labels of the corpus the tree was mined from; ``None``: no corpus) hold both a success and a failure,
    else ``eq3`` (contrastive values need both: with successes only every node separates nothing and earns 0).

    Example:
        >>> pick_bonus_mode("auto", [True, False, True]), pick_bonus_mode("auto", [True, True])
        ('contrastive_gated', 'eq3')
        >>> pick_bonus_mode("auto", None), pick_bonus_mode("gated", None)
        ('eq3', 'gated')
    """
    if mode != AUTO_MODE:
        return mode
    labels = set(map(bool, outcomes or ()))
    return "contrastive_gated" if labels == {True, False} else "eq3"


def max_episode_bonus(tree: XTree, bonus: str = "depth") -> float:
    """The largest Σ b_v one episode can earn from ``tree``: every node paid once, in full.

    Each node is paid at most once per episode and the nesting rule only lowers a payment, so
    Σ_v b_v bounds any episode's sum (the WebShop design's b_v read at its largest: a node of
    length ℓ completes at step T >= ℓ).

    Example:
        >>> from xtree_gym.corpus import Step, Trajectory
        >>> from xtree_gym.mining import mine
        >>> from xtree_gym.mining.config import MinerConfig
        >>> trajs = [Trajectory(str(i), [Step(a, token=a) for a in "abcab"], True) for i in range(6)]
        >>> tree = mine(trajs, MinerConfig(min_freq=3, eta=0.5, cap=5))
        >>> [n.depth for n in tree.nodes], max_episode_bonus(tree)  # b_v = 1 + 0.5 d_v: 1.5 + 2 + 2.5
        ([1, 2, 3], 6.0)
    """
    design = resolve_bonus(bonus)
    return float(sum(design(n, BonusContext(t=max(1, n.length))) for n in tree.nodes))


def normalized_bonus(total: float, max_total: float, margin: float) -> float:
    """Design (a)'s bonus at full weight: ``margin · min(total / max_total, 1)`` (0 for an empty tree).

    Example:
        >>> normalized_bonus(3.0, 12.0, 0.09), normalized_bonus(20.0, 12.0, 0.09), normalized_bonus(1.0, 0.0, 0.5)
        (0.0225, 0.09, 0.0)
    """
    return potential(total, max_total, margin)  # the same capped fraction of the tree's reachable bonus


def gated_weight(won: Sequence[bool], lambda0: float = LAMBDA0) -> float:
    """Design (b)'s weight: ``λ0`` when the verifier cannot separate the group (all fail or all win), else 0.

    Example:
        >>> gated_weight([False, False]), gated_weight([True, True]), gated_weight([True, False])
        (0.75, 0.75, 0.0)
    """
    flags = [bool(w) for w in won]
    return lambda0 if flags and (all(flags) or not any(flags)) else 0.0


def annealed_weight(
    win_rate: float,
    best_win_rate: float = 0.0,
    progress: float = 0.0,
    lambda0: float = LAMBDA0,
    w_ref: float = W_REF["scienceworld"],
    anneal_end: float = 1.0,
) -> float:
    """Design (c)'s weight: Eq. 3's λ_g at ``max(win_rate, best_win_rate)``, times ``clip(1 − progress/anneal_end)``.

    Example (w_ref 0.4: the group's 0.1 would give 0.5625, the best-so-far 0.2 gives 0.375; half way
    through a schedule ending at 1.0 that is halved):
        >>> annealed_weight(0.1, 0.2, 0.5, 0.75, 0.4)
        0.1875
        >>> annealed_weight(0.0, 0.0, 1.0), annealed_weight(0.0, 0.0, 0.0) == lambda_g(0.0)
        (0.0, True)
    """
    fade = min(1.0, max(0.0, 1.0 - progress / anneal_end))
    return lambda_g(max(win_rate, best_win_rate), lambda0, w_ref) * fade


def shaped_group_rewards(
    outcomes: Sequence[float],
    bonuses: Sequence[float],
    won: Sequence[bool],
    *,
    mode: str = "eq3",
    lambda0: float = LAMBDA0,
    w_ref: float = W_REF["scienceworld"],
    max_bonus: float = 0.0,
    margin: float = 0.5,
    best_win_rate: float = 0.0,
    progress: float = 0.0,
    anneal_end: float = 1.0,
    terminated: Sequence[bool] | None = None,
) -> tuple[list[float], float]:
    """One group's rewards under ``mode``, and the weight the bonus got (λ_g for ``eq3``).

    ``eq3`` is :func:`xtree_gym.rewards.group_rewards` itself. ``max_bonus`` (``normalized``) is
    :func:`max_episode_bonus` of the tree; ``best_win_rate`` and ``progress`` (``annealed``) come
    from the caller's training state; ``terminated`` (``potential``) says which rollouts ended in a
    terminal state rather than at the step limit (default: the won ones).

    Example (an all-fail pair and a mixed pair, bonuses 4 and 1, B_max 8, margin 0.09):
        >>> shaped_group_rewards([0, 0], [4.0, 1.0], [False, False])
        ([3.0, 0.75], 0.75)
        >>> shaped_group_rewards([0, 0], [4.0, 1.0], [False, False], mode="normalized", max_bonus=8, margin=0.09)
        ([0.045, 0.01125], 0.75)
        >>> shaped_group_rewards([1, 0], [4.0, 1.0], [True, False], mode="gated")
        ([1.0, 0.0], 0.0)
        >>> shaped_group_rewards([0, 0], [4.0, 1.0], [False, False], mode="annealed", progress=0.5)
        ([1.5, 0.375], 0.375)
        >>> shaped_group_rewards([1, 0], [4.0, 1.0], [True, False], mode="potential", max_bonus=8, margin=0.09)
        ([1.0, 0.01125], 1.0)
    """
    check_bonus_mode(mode, margin, anneal_end)
    if mode == "eq3":
        out = group_rewards(outcomes, bonuses, won, lambda0, w_ref)
        return out, lambda_g(sum(bool(w) for w in won) / max(1, len(won)), lambda0, w_ref)
    if len(bonuses) != len(outcomes) or len(won) != len(outcomes):
        raise ConfigError(
            f"group sizes differ: {len(outcomes)} outcomes, {len(bonuses)} bonuses, {len(won)} won",
            fix="pass one outcome, one bonus and one won flag per rollout",
        )
    rate = sum(bool(w) for w in won) / max(1, len(won))
    if mode == "potential":
        ends = won if terminated is None else terminated
        if len(ends) != len(outcomes):
            raise ConfigError(
                f"{len(ends)} terminated flags for {len(outcomes)} rollouts", fix="pass one per rollout"
            )
        return [
            float(o) + (0.0 if end else potential(b, max_bonus, margin))
            for o, b, end in zip(outcomes, bonuses, ends)
        ], 1.0
    if mode in ("normalized", "contrastive_normalized"):
        lam = lambda_g(rate, lambda0, w_ref)
        scale = lam / lambda0 if lambda0 > 0 else 0.0
        return [
            float(o) + scale * normalized_bonus(b, max_bonus, margin) for o, b in zip(outcomes, bonuses)
        ], lam
    if mode in ("gated", "contrastive_gated"):
        lam = gated_weight(won, lambda0)
    else:
        lam = annealed_weight(rate, best_win_rate, progress, lambda0, w_ref, anneal_end)
    return [float(o) + lam * float(b) for o, b in zip(outcomes, bonuses)], lam
