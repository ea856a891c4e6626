"""What the harnesses ask of the live env per turn, against the env step itself (ScienceWorld, WebShop).

Replays gold / expert episodes and times, per turn (medians, ms):

* ScienceWorld: ``env.step``; ``rlvmr``'s ``env_view`` (action templates + objects in view, what
  RLVMR's prompt lists); ``valid_actions()`` (the full list, which no default harness asks for);
* WebShop: ``env.step``; ``valid_actions()`` (what ``verl-agent`` lists); ``render`` of the
  ``verl-agent`` prompt.

Run: ``JAVA_TOOL_OPTIONS=-Xmx1g python benchmarks/bench_harness_view.py [--webshop-data DIR]``
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any


def _ms(fn: Callable[[], Any], into: list[float]) -> Any:
    t = time.perf_counter()
    out = fn()
    into.append(1000 * (time.perf_counter() - t))
    return out


def scienceworld(task: str = "boil", variation: int = 0, steps: int = 25) -> dict[str, float]:
    from xtree_gym.agents.harness import get_harness
    from xtree_gym.envs.scienceworld import ScienceWorldEnv

    harness = get_harness("rlvmr")
    env = ScienceWorldEnv(step_limit=None)
    try:
        env.reset(options={"task": task, "variation": variation, "gold_path": True})
        t_step: list[float] = []
        t_view: list[float] = []
        t_valid: list[float] = []
        for action in env.gold_actions()[:steps]:
            _ms(lambda a=action: env.step(a), t_step)
            _ms(lambda: harness.env_view(env), t_view)
            _ms(env.valid_actions, t_valid)
    finally:
        env.close()
    return {
        "turns": len(t_step),
        "step_ms": statistics.median(t_step),
        "rlvmr_env_view_ms": statistics.median(t_view),
        "valid_actions_ms": statistics.median(t_valid),
    }


def webshop(data_dir: str | None, goals: int = 20) -> dict[str, float]:
    from xtree_gym.agents.harness import HarnessState, get_harness, goal_of
    from xtree_gym.agents.model.oracle import oracle_action
    from xtree_gym.envs.webshop import WebShopEnv

    harness = get_harness("verl-agent")
    env = WebShopEnv(data_dir=data_dir, split="all")
    t_step: list[float] = []
    t_valid: list[float] = []
    t_render: list[float] = []
    for g in range(goals):
        obs, info = env.reset(options={"goal_idx": g})
        state = HarnessState.start(goal_of(info, env), obs, info, valid_actions=env.valid_actions())
        while (action := oracle_action(env)) is not None:
            _ms(lambda s=state: harness.render(s), t_render)
            obs, _, term, trunc, info = _ms(lambda a=action: env.step(a), t_step)
            valid = _ms(env.valid_actions, t_valid)
            state.advance(action, obs, info, valid_actions=valid)
            if term or trunc:
                break
    return {
        "turns": len(t_step),
        "step_ms": statistics.median(t_step),
        "valid_actions_ms": statistics.median(t_valid),
        "verl_agent_render_ms": statistics.median(t_render),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--webshop-data", default=None, help="WebShop data folder (default $XTREE_WEBSHOP_DATA)")
    ap.add_argument("--skip-scienceworld", action="store_true")
    args = ap.parse_args()
    if not args.skip_scienceworld:
        print("scienceworld", {k: round(v, 2) for k, v in scienceworld().items()})
    print("webshop", {k: round(v, 3) for k, v in webshop(args.webshop_data).items()})


if __name__ == "__main__":
    main()
