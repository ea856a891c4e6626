"""Eq. 2, the offline node-instance reward: ``r = (1 - α) · matched/ℓ_v + α · (1 + γ·d_v) · c_v``.

α = 0.3, γ = 0.5 (Table 7); :func:`node_reward` also gives the plain and outcome-only ablations.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import ConfigError
from .constants import ALPHA, GAMMA


def normalize_action(action: str) -> str:
    """An action as compared with the gold one: thought removed, whitespace collapsed.

    A thought is whatever precedes the last ``Action:`` marker (ReAct style), if any.

    Example:
        >>> normalize_action("Thought: the door first.\\nAction:  open   door to kitchen ")
        'open door to kitchen'
    """
    idx = action.rfind("Action:")
    if idx >= 0:
        action = action[idx + len("Action:") :]
    return " ".join(action.split())


def matched_steps(actions: Sequence[str], gold: Sequence[str]) -> int:
    """How many steps reproduce the gold actions before the first mismatch (a rollout stops there).

    Example:
        >>> matched_steps(["a", "x", "c"], ["a", "b", "c"])
        1
    """
    n = 0
    for a, g in zip(actions, gold):
        if normalize_action(a) != normalize_action(g):
            break
        n += 1
    return n


def node_completion_reward(
    actions: Sequence[str], gold: Sequence[str], depth: int, alpha: float = ALPHA, gamma: float = GAMMA
) -> float:
    """Eq. 2: ``(1 − α) · matched/ℓ_v + α · (1 + γ·d_v) · c_v``, ``c_v = 1`` iff every step matched.

    ``actions`` are the rollout's actions (at most ``ℓ_v = len(gold)`` are read); the rollout
    stops at the first mismatch, so later actions never count.

    Example:
        >>> round(node_completion_reward(["fill from", "fill to", "apply"], ["fill from", "fill to", "apply"], 2), 4)
        1.3
        >>> round(node_completion_reward(["fill from", "apply"], ["fill from", "fill to", "apply"], 2), 4)
        0.2333
    """
    if not gold:
        raise ConfigError("the gold node has no steps", fix="pass the node's gold actions (ℓ_v >= 1)")
    if not 0.0 <= alpha <= 1.0:
        raise ConfigError(f"alpha = {alpha!r}", fix="use a weight in [0, 1] (0.3 in the paper)")
    k = matched_steps(actions, gold)
    complete = 1.0 if k == len(gold) else 0.0
    return (1.0 - alpha) * k / len(gold) + alpha * (1.0 + gamma * depth) * complete


NODE_REWARDS = ("hier", "plain", "outcome")
"""Offline node-RL rewards (Tables 1-2's reward controls): Eq. 2, its step share alone, the binary outcome."""


def node_reward(
    actions: Sequence[str],
    gold: Sequence[str],
    depth: int,
    mode: str = "hier",
    alpha: float = ALPHA,
    gamma: float = GAMMA,
) -> float:
    """The reward of one node rollout under ``mode``.

    ``hier`` is Eq. 2 (:func:`node_completion_reward`); ``plain`` keeps only the step-matching
    share ``matched/ℓ_v`` (no completion bonus, no depth factor: the flat reward of "plain mixing");
    ``outcome`` is the binary ``c_v`` (1 only when every gold step was reproduced).

    Example:
        >>> gold = ["fill from", "fill to", "apply"]
        >>> [round(node_reward(["fill from", "apply"], gold, 2, m), 4) for m in NODE_REWARDS]
        [0.2333, 0.3333, 0.0]
        >>> [round(node_reward(gold, gold, 2, m), 4) for m in NODE_REWARDS]
        [1.3, 1.0, 1.0]
    """
    if mode == "hier":
        return node_completion_reward(actions, gold, depth, alpha, gamma)
    if not gold:
        raise ConfigError("the gold node has no steps", fix="pass the node's gold actions (ℓ_v >= 1)")
    k = matched_steps(actions, gold)
    if mode == "plain":
        return k / len(gold)
    if mode == "outcome":
        return 1.0 if k == len(gold) else 0.0
    raise ConfigError(f"node reward {mode!r}", fix=f"use one of {list(NODE_REWARDS)}")
