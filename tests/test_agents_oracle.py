"""The oracle's next action wins real episodes through the harnesses' full format -> parse path."""

from __future__ import annotations

import pytest

from xtree_gym.agents.harness import HarnessState, get_harness, goal_of
from xtree_gym.agents.model.oracle import oracle_action, oracle_reset_options
from xtree_gym.errors import EnvConfigError


def _play(env, harness, obs, info, max_steps):
    """Oracle -> format_response -> render/parse -> env.step, as the rollout does; returns (info, steps)."""
    view, valid = harness.look(env)
    state = HarnessState.start(goal_of(info, env), obs, info, view, valid)
    steps = 0
    for _ in range(max_steps):
        assert harness.render(state)[-1]["content"]  # the prompt renders at every turn
        action = oracle_action(env)
        if action is None:
            break
        response = harness.format_response(action, "following the reference policy")
        parsed = harness.parse(response)
        assert parsed.action == action
        obs, _, terminated, truncated, info = env.step(parsed.action)
        steps += 1
        view, valid = harness.look(env)
        state.advance(parsed.action, obs, info, response=response, view=view, valid_actions=valid)
        assert state.tokens[-1] == info["xtree"]["token"]
        if terminated or truncated:
            break
    return info, steps


def test_scienceworld_gold_path_wins_through_rlvmr(sciworld_env):
    env = sciworld_env
    assert oracle_reset_options(env) == {"gold_path": True}
    obs, info = env.reset(options={"task": "boil", "variation": 0, **oracle_reset_options(env)})
    harness = get_harness("rlvmr")
    view = harness.env_view(env)
    assert "open OBJ" in view["action_templates"] and "door to kitchen" in view["objects"]
    assert goal_of(info, env).startswith("Your task is to boil water")
    info, steps = _play(env, harness, obs, info, 200)
    assert info["won"] and info["score"] == 100 and steps == len(env.trajectory.steps)
    assert info["goal"] == env.goal  # the goal rides along on every step


def test_scienceworld_oracle_without_gold_path_is_one_clear_error(sciworld_env):
    sciworld_env.reset(options={"task": "boil", "variation": 1})
    with pytest.raises(EnvConfigError, match="gold_path"):
        oracle_action(sciworld_env)


def test_webshop_expert_wins_through_verl_agent_and_react(webshop_env):
    env = webshop_env
    assert oracle_reset_options(env) == {}
    wins = 0
    for goal_idx, name in [(0, "verl-agent"), (1, "react"), (2, "verl-agent")]:
        obs, info = env.reset(options={"goal_idx": goal_idx})
        harness = get_harness(name)
        if harness.needs_valid_actions:
            assert harness.valid_actions(env)[0] == "search[<your query>]"
        info, steps = _play(env, harness, obs, info, 15)
        wins += bool(info.get("won"))
        assert 2 <= steps <= 15
    assert wins == 3


def test_webshop_valid_actions_list_the_page(webshop_env):
    env = webshop_env
    env.reset(options={"goal_idx": 0})
    assert env.valid_actions() == ["search[<your query>]"]
    env.step(oracle_action(env))  # the expert's search
    actions = env.valid_actions()
    assert actions[0] == "click[back to search]" and not any(a.startswith("search[") for a in actions)
    assert all(a.startswith("click[") for a in actions) and len(actions) >= 3


def test_oracle_on_an_unknown_env_is_none():
    assert oracle_action(object()) is None and oracle_reset_options(object()) == {}


@pytest.mark.browser
def test_miniwob_scripted_solver_wins_through_browsergym(browser_chromium):
    import gymnasium as gym

    from xtree_gym.envs import register_envs
    from xtree_gym.envs.browser_launch import BrowserLaunchConfig

    register_envs()
    env = gym.make(
        "XTree-MiniWoB-v0", task="enter-text", launch=BrowserLaunchConfig(executable_path=browser_chromium)
    )
    try:
        obs, info = env.reset(seed=3)
        harness = get_harness("browsergym")
        assert harness.env_view(env).keys() == {"focused_element_bid"}
        first = oracle_action(env)
        assert first.startswith("fill(") and goal_of(info, env) == info["goal"]
        info, steps = _play(env, harness, obs, info, 30)
        assert steps == 2 and info["success"] and not info["invalid_action"]
        assert oracle_action(env) is None  # past the plan's end
    finally:
        env.close()
