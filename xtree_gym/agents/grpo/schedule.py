"""The learning-rate schedule of ``xtree train rlvr``: a pure function of the step.

Steps are the trainer's steps (one rollout batch each, ``--steps``), as verl steps its actor's
scheduler once per PPO step: every optimizer update inside a step (``--mini-batch-size``,
``--ppo-epochs``) uses that step's rate. With ``W = warmup_steps`` and ``N = steps``, step ``s``
(1-based) gets

* warm-up, ``s <= W``: ``lr · s / W`` (step 1 already learns; step W reaches ``lr``);
* after it, with ``p = (s − W − 1) / (N − W)`` in ``[0, 1)``: ``constant`` ``lr``, ``linear``
  ``lr · (1 − p)``, ``cosine`` ``lr · (1 + cos(π p)) / 2``; the last step still learns.

A pure function of ``s`` needs no scheduler state in checkpoints: a resumed run gets the same rates.
"""

from __future__ import annotations

import math

from ...errors import ConfigError


def lr_at(step: int, *, lr: float, total: int, warmup: int = 0, kind: str = "constant") -> float:
    """The learning rate of step ``step`` (1-based) of ``total``.

    Example:
        >>> [lr_at(s, lr=1.0, total=6, warmup=2, kind="linear") for s in range(1, 7)]
        [0.5, 1.0, 1.0, 0.75, 0.5, 0.25]
        >>> [round(lr_at(s, lr=1.0, total=5, warmup=1, kind="cosine"), 4) for s in range(1, 6)]
        [1.0, 1.0, 0.8536, 0.5, 0.1464]
    """
    if kind not in ("constant", "linear", "cosine"):
        raise ConfigError(f"lr_scheduler = {kind!r}", fix="use one of: constant, linear, cosine")
    if warmup and step <= warmup:
        return lr * step / warmup
    if kind == "constant" or total <= warmup:
        return lr
    p = min(max((step - warmup - 1) / (total - warmup), 0.0), 1.0)
    if kind == "linear":
        return lr * (1.0 - p)
    return lr * 0.5 * (1.0 + math.cos(math.pi * p))
