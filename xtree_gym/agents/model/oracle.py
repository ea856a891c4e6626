"""The env's own gold / expert next action, for the ``oracle`` backend (a sanity upper bound).

:func:`oracle_action` answers, for a live env, the action its reference policy takes next, in the
env's own action syntax; the oracle generator writes it in the harness's response format, so the
whole parse path runs. Each env's reference policy is the one the corpus collectors already use:

* ScienceWorld: the simulator's gold action sequence (the env must be reset with
  ``options={"gold_path": True}``; :func:`oracle_reset_options` says so for any env);
* WebShop: the ``expert`` shopper of :mod:`xtree_gym.collect.webshop` (search the goal's words,
  page for the target, open it, click the goal's options, buy), planned on a scratch copy of the
  env with the same data, prices and goal;
* Countdown: the drawn puzzle's own solution (``CountdownEnv.solution``), one operation a step;
* MiniWoB: the scripted solvers of :mod:`xtree_gym.collect.miniwob`, planned from the goal and the
  first AXTree of the episode.

The plan is indexed by the number of steps the env has taken, so it is right while the episode
follows it (the oracle backend's case); past the plan's end the answer is ``None``.
"""

from __future__ import annotations

import dataclasses
import random
import weakref
from typing import Any

from ...errors import ConfigError, EnvConfigError

_PLANS: weakref.WeakKeyDictionary[Any, list[str]] = weakref.WeakKeyDictionary()
"""env -> the expert plan of its current episode (WebShop, MiniWoB), made at its first step."""


def _kind(base: Any) -> str:
    """Which reference policy fits ``base`` (an unwrapped env), by the members it has."""
    if hasattr(base, "gold_actions") and hasattr(base, "current_task"):
        return "scienceworld"
    if hasattr(base, "get_available_actions") and hasattr(base, "goals"):
        return "webshop"
    if hasattr(base, "last_browsergym_obs") and hasattr(base, "task"):
        return "miniwob"
    if hasattr(base, "solution") and hasattr(base, "pool") and hasattr(base, "target"):
        return "countdown"
    return ""


def oracle_reset_options(env: Any) -> dict[str, Any]:
    """The ``reset`` options the oracle needs on ``env`` (ScienceWorld: generate the gold path).

    Example:
        >>> oracle_reset_options(object())
        {}
    """
    return {"gold_path": True} if _kind(getattr(env, "unwrapped", env)) == "scienceworld" else {}


def _scienceworld(base: Any) -> str | None:
    traj = base.trajectory
    if traj is None:
        raise EnvConfigError("oracle_action() before reset()", fix="reset the env first")
    missing = EnvConfigError(
        "the ScienceWorld oracle needs the gold path, which this episode was loaded without",
        fix='reset with options={"gold_path": True} (oracle_reset_options(env) gives them)',
    )
    try:
        gold = base.gold_actions()
    except EnvConfigError as exc:
        raise missing from exc
    if not gold:  # a load without generateGoldPath answers an empty sequence
        raise missing
    k = len(traj.steps)
    return gold[k] if k < len(gold) else None


def webshop_expert_plan(base: Any) -> list[str]:
    """The ``expert`` shopper's actions for ``base``'s current goal, played on a scratch copy of the env."""
    from ...collect.webshop import run_episode
    from ...envs.webshop import WebShopEnv

    if base.goal is None:
        raise EnvConfigError("oracle_action() before reset()", fix="reset the env first")
    config = dataclasses.replace(base.config, max_steps=None, split="all")
    scratch = WebShopEnv(**dataclasses.asdict(config))
    record = run_episode(scratch, base.goal.index, "expert", random.Random(0), keep_observations=False)
    return [str(step["action"]) for step in record["steps"]]


def miniwob_plan(base: Any) -> list[str]:
    """The scripted solver's actions, planned from the goal and the current AXTree ([] without a solver)."""
    from ...collect.miniwob import scripted_plan

    obs = base.last_browsergym_obs
    if obs is None:
        raise EnvConfigError("oracle_action() before reset()", fix="reset the env first")
    try:
        return scripted_plan(base.task, base.goal, obs.get("axtree_object"))
    except ConfigError:  # no solver for this task, or a page the solver does not recognise
        return []


def oracle_action(env: Any) -> str | None:
    """The env's gold / expert next action in its own syntax; ``None`` when it has none.

    Example:
        >>> oracle_action(object()) is None
        True
    """
    base = getattr(env, "unwrapped", env)
    kind = _kind(base)
    if kind == "scienceworld":
        return _scienceworld(base)
    if kind == "countdown":  # the drawn puzzle's solution, step by step
        k = int(getattr(base, "_t", 0))
        return base.solution[k] if k < len(base.solution) else None
    if kind not in ("webshop", "miniwob"):
        return None
    k = int(getattr(base, "_steps", 0))
    plan = _PLANS.get(base)
    if k == 0 or plan is None:  # a new episode: plan it from its first state
        plan = webshop_expert_plan(base) if kind == "webshop" else miniwob_plan(base)
        _PLANS[base] = plan
    return plan[k] if k < len(plan) else None
