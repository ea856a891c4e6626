"""XTree-ScienceWorld-v0 on the real simulator (one session-wide JVM, see tests/fixtures/scienceworld.py)."""

from __future__ import annotations

import os
import signal

import pytest

from xtree_gym.canon import get_canonicalizer
from xtree_gym.envs import register_envs
from xtree_gym.envs import sciworld_folds as folds
from xtree_gym.errors import EnvConfigError

pytestmark = pytest.mark.jvm

# A spread of task families (matter, measurement, electricity, classification, life, chemistry,
# forces); the mendelian-genetics tasks are left out (gold generation takes ~30 s and may replay to -100).
GOLD_CASES = [
    ("boil", 0),
    ("find-animal", 3),
    ("chemistry-mix", 1),
    ("power-component", 2),
    ("lifespan-longest-lived", 0),
    ("identify-life-stages-1", 0),
]


def _replay(env, task: str, variation: int) -> tuple[list[str], list[dict], tuple]:
    env.reset(options={"task": task, "variation": variation, "gold_path": True})
    gold = env.gold_actions()
    actions, infos, last = [], [], None
    for action in gold:
        last = env.step(action)
        actions.append(action)
        infos.append(last[4])
        if last[2] or last[3]:
            break
    return actions, infos, last


@pytest.mark.parametrize(("task", "variation"), GOLD_CASES)
def test_gold_replay_wins_and_tokens_match_the_canonicalizer(sciworld_env, task: str, variation: int) -> None:
    actions, infos, last = _replay(sciworld_env, task, variation)
    _obs, _reward, terminated, truncated, info = last
    assert terminated and not truncated
    assert info["score"] == 100 and info["won"] is True
    assert info["task"] == task and info["variation"] == variation
    canon = get_canonicalizer("scienceworld")
    traj = sciworld_env.trajectory
    assert [s.action for s in traj.steps] == actions
    offline = [canon(a, canon.corpus_context(traj, i)) for i, a in enumerate(actions)]
    assert [i["xtree"]["token"] for i in infos] == [c.token for c in offline]
    assert [i["xtree"]["slots"] for i in infos] == [c.slots for c in offline]
    assert all(i["xtree"]["raw"] == a for i, a in zip(infos, actions))


def test_bare_integer_answers_a_disambiguation_prompt(sciworld_env) -> None:
    # grow-plant's gold path moves seeds into pots, which the simulator asks to disambiguate.
    actions, infos, last = _replay(sciworld_env, "grow-plant", 0)
    answers = [i for i, a in enumerate(actions) if a.strip().isdigit()]
    assert answers, "expected at least one bare-integer gold action"
    prompt = sciworld_env.trajectory.steps[answers[0] - 1].observation
    assert prompt.startswith("Ambiguous request")
    assert infos[answers[0]]["xtree"]["token"] == "disambiguate<choice>"
    assert last[4]["won"]


def test_step_limit_truncates_without_winning(sciworld_jvm) -> None:
    from xtree_gym.envs.scienceworld import ScienceWorldEnv

    env = ScienceWorldEnv(task="boil", variation=0, step_limit=3, jvm=sciworld_jvm)
    try:
        obs, info = env.reset()
        assert obs.startswith("This room is called") and info["goal"].startswith("Your task is to boil")
        flags = [env.step("look around")[2:4] for _ in range(3)]
        assert flags == [(False, False), (False, False), (False, True)]
    finally:
        env.close()


def test_gym_make_valid_actions_and_seeded_sampling(sciworld_jvm) -> None:
    import gymnasium as gym

    register_envs()
    env = gym.make("XTree-ScienceWorld-v0", fold="G2", valid_actions=True, jvm=sciworld_jvm)
    try:
        _, info_a = env.reset(seed=11)
        assert info_a["task"] in folds.HELD_OUT_TYPES
        assert info_a["variation"] in folds.split_variations(info_a["task"], "test")
        assert "look around" in info_a["valid_actions"]
        _, info_b = env.reset(seed=11)
        assert (info_a["task"], info_a["variation"]) == (info_b["task"], info_b["variation"])
        obs, reward, terminated, truncated, info = env.step("look around")
        assert " is called " in obs and not (terminated or truncated)
        assert info["xtree"]["token"] == "observe<room>" and "valid_actions" in info and reward == 0.0
    finally:
        env.close()


def test_refused_actions_are_flagged_by_the_env(sciworld_env) -> None:
    from xtree_gym.envs.scienceworld import INVALID_REPLIES

    env = sciworld_env
    env.reset(options={"task": "boil", "variation": 0})

    def flags(action: str) -> tuple[str, bool, bool]:
        obs, *_, info = env.step(action)
        return obs, info["invalid_action"], info["xtree"]["invalid"]

    obs, *flagged = flags("fly to the moon")
    assert obs.startswith(INVALID_REPLIES[0]) and flagged == [True, True]
    obs, *flagged = flags("open door to kitchen")
    assert obs == "The door is now open." and flagged == [False, False]
    obs, *flagged = flags("focus on door")  # a disambiguation prompt is a question, not a refusal
    assert obs.startswith("Ambiguous request") and flagged == [False, False]
    obs, *flagged = flags("look around")  # not a number: the simulator refuses the answer
    assert obs.startswith(INVALID_REPLIES[1]) and flagged == [True, True]


def test_constructor_rejects_bad_arguments_before_starting_a_jvm() -> None:
    from xtree_gym.envs.scienceworld import ScienceWorldEnv

    with pytest.raises(EnvConfigError, match="unknown ScienceWorld task"):
        ScienceWorldEnv(task="boill")
    with pytest.raises(EnvConfigError, match="split"):
        ScienceWorldEnv(split="validation")
    with pytest.raises(EnvConfigError, match="out of range"):
        ScienceWorldEnv(task="boil", variation=30)
    with pytest.raises(EnvConfigError, match="not in fold G2"):
        ScienceWorldEnv(task="boil", fold="G2")
    with pytest.raises(EnvConfigError, match="step_limit"):
        ScienceWorldEnv(step_limit=0)
    with pytest.raises(EnvConfigError, match="without a task"):  # raised before any JVM starts
        ScienceWorldEnv(lazy=True).reset(options={"variation": 3})


def test_group_never_mixes_tasks(sciworld_jvm) -> None:
    from xtree_gym.envs.scienceworld import ScienceWorldGroup

    group = ScienceWorldGroup(3, fold="G1", seed=5, jvm=sciworld_jvm, step_limit=5)
    try:
        seen = set()
        for _ in range(4):
            observations, infos = group.reset()
            pairs = {(i["task"], i["variation"]) for i in infos}
            assert pairs == {(group.task, group.variation)}
            assert len({i["goal"] for i in infos}) == 1 and len(set(observations)) == 1
            assert group.task in folds.FOLD_TYPES
            assert group.variation in folds.split_variations(group.task, "test")
            seen.add(group.task)
            _, _, _, _, step_infos = group.step(["look around", None, "look around"])
            assert step_infos[1] == {"skipped": True}
            assert {i["task"] for i in step_infos if "task" in i} == {group.task}
        assert len(seen) >= 2  # the group draws a new task per reset, and all members follow it
    finally:
        group.close()


def test_killed_jvm_truncates_then_recovers(sciworld_jvm, sciworld_env) -> None:
    from xtree_gym.envs.scienceworld import ScienceWorldEnv

    env = ScienceWorldEnv(task="find-animal", variation=0, step_limit=10, jvm=sciworld_jvm)
    try:
        env.reset()
        sciworld_env.reset(options={"task": "boil", "variation": 1})  # a second env on the same JVM
        old_pid, old_gen = sciworld_jvm.pid, sciworld_jvm.generation
        os.kill(old_pid, signal.SIGKILL)
        obs, reward, terminated, truncated, info = env.step("look around")
        assert truncated and not terminated and obs == "" and reward == 0.0
        assert "died" in info["fault"] and info["xtree"]["token"] == "observe<room>"
        assert sciworld_jvm.alive and sciworld_jvm.pid != old_pid and sciworld_jvm.generation == old_gen + 1
        with pytest.raises(EnvConfigError, match="after a simulator fault"):
            env.step("look around")  # the episode is gone: one clear error until the next reset
        # The other env's episode is gone too; it says so, and its next reset works.
        *_, truncated2, info2 = sciworld_env.step("look around")
        assert truncated2 and "restarted" in info2["fault"]
        for e in (env, sciworld_env):
            obs, info = e.reset(options={"task": "find-animal", "variation": 0})
            assert obs.startswith("This room is called")
            assert e.step("look around")[4]["xtree"]["token"] == "observe<room>"
    finally:
        env.close()


def test_hung_step_is_killed_by_the_watchdog(sciworld_jvm) -> None:
    from xtree_gym.envs.scienceworld import ScienceWorldEnv

    # A 1 ms budget: every real step overruns it, which exercises the hang path on the real JVM.
    env = ScienceWorldEnv(task="boil", variation=0, step_timeout=0.001, load_timeout=120, jvm=sciworld_jvm)
    try:
        env.step_timeout = 60.0  # let reset's own free actions through
        env.reset()
        env.step_timeout = 0.001
        *_, truncated, info = env.step("look around")
        assert truncated and "timeout" in info["fault"]
        assert sciworld_jvm.alive
        env.step_timeout = 60.0
        env.reset()
        *_, info = env.step("look around")
        assert "fault" not in info
    finally:
        env.close()


def test_lone_surrogate_is_an_invalid_action_and_the_episode_goes_on(sciworld_env) -> None:
    # "\ud83d" (half of an emoji) cannot be encoded for py4j: an invalid action, not a "JVM died" fault
    env = sciworld_env
    env.reset(options={"task": "boil", "variation": 0})
    obs, reward, terminated, truncated, info = env.step("open door to " + chr(0xD83D))
    assert info["invalid_action"] and info["xtree"]["invalid"] and "fault" not in info
    assert (reward, terminated, truncated) == (0.0, False, False) and obs.startswith("No known action")
    obs, *_, info = env.step("open door to kitchen")
    assert obs == "The door is now open." and not info["invalid_action"]


def test_no_step_after_the_episode_ended(sciworld_env) -> None:
    actions, _infos, last = _replay(sciworld_env, "boil", 0)
    assert last[2] and last[4]["won"]
    with pytest.raises(EnvConfigError, match="after the episode ended"):
        sciworld_env.step(actions[-1])


def _play_fixed(env, task: str, variation: int, actions: list[str], meanwhile=None) -> list[str]:
    """Observations of ``actions`` played on a fresh load; ``meanwhile(k)`` runs before action k."""
    env.reset(options={"task": task, "variation": variation})
    seen = []
    for k, action in enumerate(actions):
        if meanwhile is not None:
            meanwhile(k)
        seen.append(env.step(action)[0])
    return seen


def test_an_episode_keeps_its_own_simulator_state_beside_another_env(sciworld_jvm, sciworld_env) -> None:
    """Issue 33: the simulator has one random generator and one object-id counter per JVM, and every load
    reseeds them. An env's turn runs on its own copy, so another env's load and steps in between leave
    the episode's state exactly where it would be alone."""
    from xtree_gym.envs.scienceworld import ScienceWorldEnv

    actions = ["look around", "open door to kitchen", "look around"]
    _play_fixed(sciworld_env, "find-animal", 0, actions)
    alone = sciworld_jvm.sim_state()  # read right after the env's own last turn
    other = ScienceWorldEnv(step_limit=None, jvm=sciworld_jvm)
    try:

        def other_env_plays(k: int) -> None:
            if k == 1:
                other.reset(options={"task": "boil", "variation": 3})  # reseeds the JVM's generator
            if k == 2:
                other.step("look around")

        _play_fixed(sciworld_env, "find-animal", 0, actions, meanwhile=other_env_plays)
        beside = sciworld_jvm.sim_state()
        other.step("look around")
        assert sciworld_jvm.sim_state() != beside  # the other env plays on its own state, not this one's
    finally:
        other.close()
    assert beside == alone


@pytest.mark.slow
def test_bees_fly_the_same_beside_another_env(sciworld_jvm, sciworld_env) -> None:
    """Behaviour, not state: grow-fruit's bees draw from the JVM's one random generator. The same 300+
    actions give the same observations alone and with another env loading and stepping in the same JVM
    (before per-env simulator state, 3 of them differed: the bees were elsewhere)."""
    from xtree_gym.envs.scienceworld import ScienceWorldEnv

    sciworld_env.reset(options={"task": "grow-fruit", "variation": 0, "gold_path": True})
    plan = [x for a in sciworld_env.gold_actions() for x in (a, "look around", "wait1", "look around")]
    alone = _play_fixed(sciworld_env, "grow-fruit", 0, plan)
    other = ScienceWorldEnv(step_limit=None, jvm=sciworld_jvm)
    try:

        def other_env_plays(k: int) -> None:
            if k == 3:
                other.reset(options={"task": "find-animal", "variation": 7})
            elif k > 3 and not other._done:
                other.step("look around")

        beside = _play_fixed(sciworld_env, "grow-fruit", 0, plan, meanwhile=other_env_plays)
    finally:
        other.close()
    assert len(alone) == len(beside) == len(plan) > 300
    diff = [k for k, (a, b) in enumerate(zip(alone, beside)) if a != b]
    assert diff == [], (diff, plan[diff[0] - 2 : diff[0] + 1], alone[diff[0]], beside[diff[0]])
