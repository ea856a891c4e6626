"""Group advantages for GRPO: per-trajectory statistics, broadcast to each turn's tokens.

Choices, written down once (verl / verl-agent's GRPO makes the same ones):

* the statistics are per group (the ``n`` rollouts of one task): ``A_i = (r_i − mean) / (std + ε)``;
* ``std`` is the *sample* standard deviation (ddof = 1, ``torch.std``'s default), ``ε = 1e-6``;
* a group whose rewards are all equal (zero variance) gets advantage 0 for every member: it
  carries no preference, so it contributes no policy gradient (only KL/entropy terms);
* a group of one gets advantage 0 (there is nothing to compare it with).

Pure functions on plain Python lists; the trainer turns them into per-token tensors.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence

EPS = 1e-6
"""ε added to the group's std (verl's default)."""


def group_advantages(rewards: Sequence[float], *, eps: float = EPS, scale: bool = True) -> list[float]:
    """GRPO advantages of one group.

    Example:
        >>> [round(a, 4) for a in group_advantages([1.0, 0.0, 0.0, 1.0])]
        [0.866, -0.866, -0.866, 0.866]
        >>> group_advantages([0.0, 0.0, 0.0])  # zero variance: no preference
        [0.0, 0.0, 0.0]
        >>> group_advantages([2.0, 0.0], scale=False)  # Dr. GRPO style: centred only
        [1.0, -1.0]
    """
    n = len(rewards)
    if n < 2:
        return [0.0] * n
    mean = sum(rewards) / n
    centred = [float(r) - mean for r in rewards]
    if all(abs(c) < 1e-12 for c in centred):
        return [0.0] * n
    if not scale:
        return centred
    std = math.sqrt(sum(c * c for c in centred) / (n - 1))
    return [c / (std + eps) for c in centred]


def grouped_advantages(
    rewards: Sequence[float], groups: Sequence[Hashable], *, eps: float = EPS, scale: bool = True
) -> list[float]:
    """:func:`group_advantages` applied to each group id; results in the input order.

    Example:
        >>> [round(a, 3) for a in grouped_advantages([1, 0, 5, 5], ["a", "a", "b", "b"])]
        [0.707, -0.707, 0.0, 0.0]
    """
    if len(rewards) != len(groups):
        raise ValueError(f"{len(rewards)} rewards but {len(groups)} group ids")
    members: dict[Hashable, list[int]] = {}
    for i, g in enumerate(groups):
        members.setdefault(g, []).append(i)
    out = [0.0] * len(rewards)
    for idx in members.values():
        for i, a in zip(idx, group_advantages([float(rewards[i]) for i in idx], eps=eps, scale=scale)):
            out[i] = a
    return out
