"""Gymnasium wrappers, grouped by kind.

* :mod:`xtree_gym.wrappers.reward` -- reward shaping from an X-Tree: :class:`XTreeBonus` (Eq. 3 skill bonus),
  :class:`InvalidActionPenalty`.
* :mod:`xtree_gym.wrappers.mdl` -- ReuseRL's segmentation-cost penalty: :class:`SegCost`.
* :mod:`xtree_gym.wrappers.macro` -- the node-level test-time protocol (App. D): :class:`MacroAction`.
* :mod:`xtree_gym.wrappers.discrete` -- ``verb<role>`` tokens on any discrete-action env:
  :class:`DiscreteTokens`, :func:`xtree_discrete` (tokens + :class:`XTreeBonus`).

Imports are lazy so ``import xtree_gym.wrappers`` does not need gymnasium.
"""

from __future__ import annotations

from typing import Any

_LAZY = {
    "XTreeBonus": "xtree_gym.wrappers.reward",
    "InvalidActionPenalty": "xtree_gym.wrappers.reward",
    "SegCost": "xtree_gym.wrappers.mdl",
    "MacroAction": "xtree_gym.wrappers.macro",
    "DiscreteTokens": "xtree_gym.wrappers.discrete",
    "xtree_discrete": "xtree_gym.wrappers.discrete",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'xtree_gym.wrappers' has no attribute {name!r}")
