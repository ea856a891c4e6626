"""Eq. 3, the online group reward: ``r_i = R_out(τ_i) + λ_g Σ_{v ∈ matched(τ_i)} b_v``.

``λ_g = λ0 · clip(1 − w_g / w_ref, 0, 1)`` (λ0 = 0.75; w_ref = 0.4 ScienceWorld, 0.85 WebShop), with
:class:`RunningWinRate` keeping w_g per task across groups.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable, Sequence

from ..errors import ConfigError
from .constants import LAMBDA0, W_REF


def lambda_g(win_rate: float, lambda0: float = LAMBDA0, w_ref: float = W_REF["scienceworld"]) -> float:
    """Eq. 3 bonus weight: ``λ0 · clip(1 − w_g / w_ref, 0, 1)``.

    Example:
        >>> lambda_g(0.0), lambda_g(0.2), lambda_g(0.4), lambda_g(0.9)
        (0.75, 0.375, 0.0, 0.0)
    """
    if not w_ref > 0:
        raise ConfigError(f"w_ref = {w_ref!r}", fix="use a win rate in (0, 1], e.g. 0.4 (ScienceWorld)")
    return lambda0 * min(1.0, max(0.0, 1.0 - win_rate / w_ref))


def group_rewards(
    outcomes: Sequence[float],
    bonuses: Sequence[float],
    won: Sequence[bool] | None = None,
    lambda0: float = LAMBDA0,
    w_ref: float = W_REF["scienceworld"],
    *,
    win_threshold: float = 1.0,
) -> list[float]:
    """Eq. 3 for one GRPO group: ``r_i = R_out(τ_i) + λ_g · bonus_i``.

    ``bonuses[i]`` is Σ b_v of rollout i (``info["xtree"]["episode_bonus"]`` of the wrapper in
    ``weight="record"`` mode, or :func:`sequence_bonus`). ``won[i]`` says whether the verifier
    counts rollout i as a success; when omitted, ``outcomes[i] >= win_threshold``.

    Example:
        >>> group_rewards([0, 0], [4.0, 1.5], [False, False])  # all-fail: only the bonus separates
        [3.0, 1.125]
        >>> group_rewards([1, 0], [4.0, 1.5], [True, False], w_ref=0.85)  # w_g = 0.5
        [2.235294117647059, 0.4632352941176471]
    """
    n = len(outcomes)
    if len(bonuses) != n or (won is not None and len(won) != n):
        raise ConfigError(
            f"group sizes differ: {n} outcomes, {len(bonuses)} bonuses, {None if won is None else len(won)} won",
            fix="pass one outcome, one bonus and one won flag per rollout",
        )
    if n == 0:
        return []
    flags = [o >= win_threshold for o in outcomes] if won is None else [bool(w) for w in won]
    lam = lambda_g(sum(flags) / n, lambda0, w_ref)
    return [float(o) + lam * float(b) for o, b in zip(outcomes, bonuses)]


class RunningWinRate:
    """Per-task win rate over the last ``window`` episodes: λ_g for single-env RL libraries.

    Eq. 3 needs the group's win rate, known only when the group ends. A library that steps one
    env at a time has no group; this estimate (the share of wins among the task's last
    ``window`` finished episodes, 0 before any) stands in for it. It is an approximation: it
    lags the policy by up to ``window`` episodes and mixes rollouts of different policy versions.

    Example:
        >>> w = RunningWinRate(window=4)
        >>> for won in (True, False, False, False, True):
        ...     w.update("boil", won)
        >>> w.rate("boil"), w.rate("melt"), w.weight("boil", w_ref=0.4)
        (0.25, 0.0, 0.28125)
    """

    def __init__(self, window: int = 8) -> None:
        if not isinstance(window, int) or window < 1:
            raise ConfigError(f"window = {window!r}", fix="use an integer >= 1 (a GRPO group size such as 8)")
        self.window = window
        self._hist: dict[Hashable, deque[bool]] = {}  # task -> last `window` outcomes

    def update(self, task: Hashable, won: bool) -> None:
        self._hist.setdefault(task, deque(maxlen=self.window)).append(bool(won))

    def rate(self, task: Hashable) -> float:
        h = self._hist.get(task)
        return sum(h) / len(h) if h else 0.0

    def weight(self, task: Hashable, lambda0: float = LAMBDA0, w_ref: float = W_REF["scienceworld"]) -> float:
        return lambda_g(self.rate(task), lambda0, w_ref)
