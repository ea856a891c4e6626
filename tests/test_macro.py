"""MacroAction (App. D's node-level test-time protocol) on the real Countdown env, hand cases."""

from __future__ import annotations

import re

import pytest

from xtree_gym.agents.types import ParsedAction
from xtree_gym.envs.countdown import CountdownEnv
from xtree_gym.errors import EnvConfigError
from xtree_gym.wrappers import MacroAction
from xtree_gym.wrappers.macro import NO_ACTION, as_actions

PUZZLE = {"numbers": [80, 2, 28, 1], "target": 54}
SOLUTION = ["op(-, 80, 28)", "op(+, 52, 2)", "op(*, 54, 1)"]


def _env(budget: int = 30, **kw: object) -> MacroAction:
    env = MacroAction(CountdownEnv(), budget=budget, **kw)
    env.reset(options=PUZZLE)
    return env


def test_all_valid_one_turn_equals_three_plain_steps():
    plain = CountdownEnv()
    plain.reset(options=PUZZLE)
    obs_plain = [plain.step(a)[0] for a in SOLUTION]
    env = _env()
    obs, reward, term, trunc, info = env.step(SOLUTION)
    m = info["macro"]
    assert obs == obs_plain[-1]  # only the last observation comes back
    assert [r["observation"] for r in m["actions"]] == obs_plain  # the others are in the records
    assert (reward, term, trunc) == (10.0, True, False)
    assert m["executed"] == 3 and m["skipped"] == 0 and m["invalid"] == 0
    assert m["tokens"] == ["sub<large-small>", "add<near_target-small>", "mul<near_target-small>"]
    assert m["joined"] == "op(-, 80, 28); op(+, 52, 2); op(*, 54, 1)"
    assert m["budget_left"] == 27 and info["invalid_action"] is False


def test_rejected_action_in_the_middle_the_rest_still_executes():
    env = _env()
    obs, reward, term, trunc, info = env.step(["op(-, 80, 28)", "op(+, 99, 2)", "op(+, 52, 2)"])
    m = info["macro"]
    assert [r["invalid"] for r in m["actions"]] == [False, True, False]
    assert m["actions"][1]["observation"].startswith("99 is not in the pool [2, 1, 52].")
    assert "Pool: [1, 54]" in obs  # the third action ran on the pool the first one left
    # the failure is shown at the next turn, before the last observation
    assert obs.splitlines()[0] == "Action 'op(+, 99, 2)' failed: 99 is not in the pool [2, 1, 52]."
    assert info["invalid_action"] is True and m["invalid"] == 1
    assert m["executed"] == 3 and m["budget_left"] == 27
    assert (term, trunc) == (False, False)
    # a second turn continues from there
    obs, reward, term, _, info = env.step(["op(*, 54, 1)"])
    assert (reward, term) == (10.0, True)
    assert info["macro"]["budget_left"] == 26


def test_budget_exhausted_truncates_and_skips_the_rest():
    env = _env(budget=4)
    _, _, term, trunc, info = env.step(["op(+, 1, 2)", "rollback", "op(+, 1, 2)"])
    assert (term, trunc) == (False, False) and info["macro"]["budget_left"] == 1
    obs, _, term, trunc, info = env.step(["rollback", "op(-, 80, 28)", "op(+, 52, 2)"])
    m = info["macro"]
    assert (term, trunc) == (False, True)
    assert m["executed"] == 1 and m["skipped"] == 2 and m["budget_left"] == 0
    assert [r["skipped"] for r in m["actions"]] == [False, True, True]
    assert m["joined"] == "rollback"  # only what ran goes into the history
    assert "Pool: [80, 2, 28, 1]" in obs
    with pytest.raises(EnvConfigError, match="budget"):
        env.step(["op(+, 1, 2)"])
    env.reset(options=PUZZLE)  # a new episode has the full budget again
    assert env.budget_left == 4


def test_env_ending_mid_turn_skips_the_remaining_actions():
    env = _env()
    _, reward, term, trunc, info = env.step([*SOLUTION, "op(+, 1, 2)"])
    assert (reward, term, trunc) == (10.0, True, False)
    assert info["macro"]["executed"] == 3 and info["macro"]["skipped"] == 1
    assert info["macro"]["budget_left"] == 27


def _tags(text: str) -> list[str]:
    return [a.strip() for a in re.findall(r"<action>(.*?)</action>", text, flags=re.S)]


def test_response_text_through_a_parser():
    env = _env(parser=_tags)
    text = "<planning>subtract, add, multiply</planning>" + "".join(f"<action>{a}</action>" for a in SOLUTION)
    _, reward, term, _, info = env.step(text)
    assert (reward, term) == (10.0, True) and info["macro"]["executed"] == 3


def test_parsed_action_and_empty_turn():
    assert as_actions(ParsedAction(action="a; b", actions=("a", "b"))) == ["a", "b"]
    assert as_actions(ParsedAction(action="look")) == ["look"]
    assert as_actions(ParsedAction(action=None, error="no tag")) == []
    env = _env(budget=2, parser=_tags)
    obs, _, term, trunc, info = env.step("I will think about it.")
    assert obs == NO_ACTION and info["invalid_action"] and (term, trunc) == (False, False)
    assert info["macro"]["budget_left"] == 1  # an empty turn spends one unit, so a silent policy ends
    _, _, _, trunc, _ = env.step("still nothing")
    assert trunc


def test_bad_budget_is_one_clear_error():
    with pytest.raises(EnvConfigError, match="budget=0"):
        MacroAction(CountdownEnv(), budget=0)


def test_node_harness_rollout_follows_the_protocol():
    """The rollout's macro turns (``--harness node``): refused action shown next turn, joined actions, budget 30."""
    from xtree_gym.agents.harness import get_harness
    from xtree_gym.agents.model.generation import ScriptedGenerator
    from xtree_gym.agents.play.rollout import rollout
    from xtree_gym.agents.types import TaskSpec

    h = get_harness("node")
    first = h.format_actions(["op(-, 80, 28)", "op(+, 99, 2)", "op(+, 52, 2)"], "subtract, then add")
    stall = h.format_actions(["op(+, 1, 54)", "rollback"] * 3, "undo")  # 6 actions a turn: the budget bites
    gen = ScriptedGenerator([first] + [stall] * 5)
    task = TaskSpec("countdown", reset_options=PUZZLE)
    (ep,) = rollout("XTree-Countdown-v0", [task], gen, h, max_steps=30)
    t0 = ep.turns[0]
    assert t0.action == "op(-, 80, 28); op(+, 99, 2); op(+, 52, 2)" and t0.invalid
    assert t0.observation.splitlines()[0] == "Action 'op(+, 99, 2)' failed: 99 is not in the pool [2, 1, 52]."
    assert [p["action"] for p in t0.info["primitives"]] == ["op(-, 80, 28)", "op(+, 99, 2)", "op(+, 52, 2)"]
    executed = sum(len(t.info.get("primitives", [])) for t in ep.turns)
    assert executed == 30 and ep.truncated  # 3 + 4 × 6 + 3: the last turn is cut at the budget
    assert len(ep.turns[-1].info["primitives"]) == 3  # the last turn ran 3 of its 6 actions
