"""No silent no-learning: which groups of a step carry signal, and the stop after K steps without.

A step has no learning signal when every group's advantages are 0 (all rewards of each group equal)
or every turn was invalid (``invalid_rate`` 1.0: no response was an action). The trainer writes
``no_signal`` (the reason, ``""`` otherwise) on each metrics line, says so on stderr, and
:class:`SignalWatch` stops the run after ``zero_signal_steps`` such steps in a row.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ...errors import NoSignalError
from ..run.metrics import safe_div
from .advantages import grouped_advantages


def signal_counts(rewards: Sequence[float], groups: Sequence[int], scale: bool) -> dict[str, float]:
    """``groups`` (distinct groups) and ``signal_groups`` (those with a nonzero advantage).

    Example:
        >>> signal_counts([1.0, 1.0, 0.0, 1.0], [0, 0, 1, 1], True)
        {'groups': 2.0, 'signal_groups': 1.0}
    """
    adv = grouped_advantages(list(rewards), list(groups), scale=scale)
    with_signal = {g for g, a in zip(groups, adv) if a != 0.0}
    return {"groups": float(len(set(groups))), "signal_groups": float(len(with_signal))}


def step_signal(stats: dict[str, float], metrics: dict[str, Any]) -> dict[str, Any]:
    """The step's signal keys: ``signal_groups``, ``groups``, ``updates``, ``ratio`` and ``no_signal``.

    ``no_signal`` is ``""`` on a step that can learn, else why not (every group's advantages 0,
    or every turn invalid).

    Example:
        >>> step_signal({"groups": 4, "signal_groups": 0, "tokens": 10, "ratio_sum": 10}, {"invalid_rate": 0.5})
        {'groups': 4, 'signal_groups': 0, 'updates': 1, 'ratio': 1.0, 'no_signal': 'every group has zero advantage variance'}
    """
    why = ""
    if metrics.get("invalid_rate", 0.0) >= 1.0:
        why = "invalid_rate is 1.0: no response was a valid action"
    elif stats.get("groups", 0) and not stats.get("signal_groups", 0):
        why = "every group has zero advantage variance"
    return {
        "groups": int(stats.get("groups", 0)),
        "signal_groups": int(stats.get("signal_groups", 0)),
        "updates": int(stats.get("updates", 1)),
        "ratio": safe_div(stats.get("ratio_sum", 0.0), stats.get("tokens", 0.0)),
        "no_signal": why,
    }


class SignalWatch:
    """Counts steps in a row without learning signal; :meth:`check` raises at ``limit`` (0 = never).

    Example:
        >>> w = SignalWatch(2, "runs/x")
        >>> w.check({"step": 1, "no_signal": "every group has zero advantage variance"}); w.run
        1
        >>> w.check({"step": 2, "no_signal": ""}); w.run  # a step with signal resets the count
        0
    """

    def __init__(self, limit: int, run_dir: str | Path) -> None:
        self.limit = int(limit)
        self.run_dir = str(run_dir)
        self.run = 0

    def check(self, metrics: dict[str, Any]) -> None:
        """Say so for a step without signal; one :class:`NoSignalError` after ``limit`` in a row."""
        why = metrics.get("no_signal")
        if not why:
            self.run = 0
            return
        self.run += 1
        print(f"step {metrics['step']}: no learning signal ({why})", file=sys.stderr)
        if self.limit and self.run >= self.limit:
            raise NoSignalError(
                f"{self.run} steps in a row without a learning signal (last: {why}): the run learns nothing",
                where=self.run_dir,
                fix="check --harness for this env (invalid_rate 1.0 means no response parsed) and the task "
                "difficulty (every group all-win or all-fail); --zero-signal-steps 0 continues anyway",
            )
