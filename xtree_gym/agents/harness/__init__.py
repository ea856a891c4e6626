"""Benchmark protocols: one module per harness, each registered by name (see :mod:`.base`).

Importing this package registers ``rlvmr``, ``verl-agent``, ``react``, ``browsergym``, ``node``, ``replay``, ``countdown`` and ``textgame``;
:mod:`.registry` maps each env domain to its default harness.
"""

from . import browsergym, node, react, replay, rlvmr, textgame, verl_agent  # noqa: F401 - importing a protocol module registers it
from .base import Harness, HarnessState, get_harness, goal_of, harness_names, register_harness

__all__ = ["Harness", "HarnessState", "get_harness", "goal_of", "harness_names", "register_harness"]
