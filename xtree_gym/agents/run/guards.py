"""Numeric guards of the training loops: a non-finite loss or gradient stops the run before it saves.

Example:
    >>> check_finite_step(3, loss=0.5, grad_norm=1.2)
    >>> check_finite_step(3, loss=float("nan"), grad_norm=1.2)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    xtree_gym.errors.TrainingError: step 3: the loss is nan; ... -- fix: ...
"""

from __future__ import annotations

import math

from ...errors import TrainingError


def check_finite_step(step: int, *, loss: float, grad_norm: float) -> None:
    """Raise one :class:`TrainingError` naming ``step`` when the loss or the gradient norm is not finite.

    Called after the backward passes and before ``optimizer.step()``, so neither the weights nor any
    checkpoint ever hold the result of a non-finite step.
    """
    bad = [
        (name, v)
        for name, v in (("the loss", loss), ("the gradient norm", grad_norm))
        if not math.isfinite(v)
    ]
    if bad:
        what = " and ".join(f"{name} is {v}" for name, v in bad)
        raise TrainingError(
            f"step {step}: {what}; the run stops before this step is applied or saved",
            fix="lower --lr, keep --max-grad-norm > 0, check the rewards and the data; "
            "resume from the last checkpoint with --resume RUN",
        )
