"""XTree-NodeReplay-v0 on real ScienceWorld gold trajectories: replay, stop on mismatch, Eq. 2 at the end."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from xtree_gym.envs import register_envs
from xtree_gym.envs.node_replay import NodeReplayEnv, render_history
from xtree_gym.errors import EnvConfigError
from xtree_gym.rewards import node_completion_reward
from xtree_gym.rewards.instances import node_instances, write_instances
from xtree_gym.wrappers.reward import XTreeBonus


@pytest.fixture(scope="module")
def sw_files(tmp_path_factory, sw_gold_tokenized, sw_gold_tree):
    """A 120-episode tokenized gold corpus and the full gold tree, as files."""
    from xtree_gym.corpus import write_corpus

    d = tmp_path_factory.mktemp("replay")
    write_corpus(d / "gold.jsonl", sw_gold_tokenized[:120])
    sw_gold_tree.save(d / "tree.json")
    return d / "gold.jsonl", d / "tree.json"


@pytest.fixture(scope="module")
def replay_env(sw_files):
    register_envs()
    corpus, tree = sw_files
    return gym.make("XTree-NodeReplay-v0", corpus=str(corpus), tree=str(tree)).unwrapped


def test_gym_make_builds_the_tilings_instances(replay_env, sw_gold_tokenized, sw_gold_tree):
    expected = node_instances(sw_gold_tokenized[:120], sw_gold_tree)
    assert [i.id for i in replay_env.instances] == [i.id for i in expected]
    from_objects = NodeReplayEnv(corpus=sw_gold_tokenized[:120], tree=sw_gold_tree, kind="nested")
    assert len(from_objects.instances) > len(expected)
    assert {i.kind for i in from_objects.instances} == {"nested"}


def test_gold_actions_replay_the_recorded_observations(replay_env):
    for index in range(0, len(replay_env.instances), 17):
        inst = replay_env.instances[index]
        obs, info = replay_env.reset(options={"index": index})
        assert obs == render_history(inst) and info["matched"] == 0 and info["instance"] == inst.id
        assert obs.endswith(inst.prefix[-1]["observation"] if inst.prefix else inst.initial_observation)
        for j, gold in enumerate(inst.gold):
            obs, reward, term, trunc, info = replay_env.step(gold["action"])
            assert obs.endswith(f"Action: {gold['action']}\nObservation: {gold['observation']}")
            assert info["xtree"]["token"] == gold["token"] and info["match"]
            assert term == (j == inst.length - 1) and not trunc
        assert reward == pytest.approx(0.7 + 0.3 * (1 + 0.5 * inst.depth)) and info["complete"]


def test_a_mismatch_ends_the_rollout_without_inventing_an_observation(replay_env):
    inst = next(i for i in replay_env.instances if i.length >= 4)
    replay_env.reset(options={"instance": inst.id})
    replay_env.step(inst.gold[0]["action"])
    obs, reward, term, _, info = replay_env.step("Thought: wrong turn.\nAction: teleport to the moon")
    assert term and not info["complete"] and info["matched"] == 1 and not info["match"]
    assert reward == pytest.approx(0.7 * 1 / inst.length)
    assert obs == render_history(inst, 1)  # what the policy had already seen, nothing new
    assert info["gold_action"] == inst.gold[1]["action"]
    with pytest.raises(EnvConfigError, match="after the episode ended"):
        replay_env.step(inst.gold[2]["action"])


def test_env_reward_equals_the_pure_function_on_random_policies(replay_env):
    rng = np.random.default_rng(0)
    for _ in range(150):
        _, info = replay_env.reset(seed=int(rng.integers(1 << 30)))
        inst = replay_env.instance
        actions, reward, done = [], 0.0, False
        while not done:
            gold = inst.gold[len(actions)]["action"]
            a = gold if rng.random() < 0.8 else "look around " + gold  # a near miss
            if rng.random() < 0.3:
                a = "  Thought: ok.  Action:  " + a.replace(" ", "   ")  # thought + whitespace still match
            actions.append(a)
            _, reward, done, _, info = replay_env.step(a)
        assert reward == pytest.approx(node_completion_reward(actions, inst.gold_actions, inst.depth))
        assert info["matched"] == len(actions) - (0 if info["complete"] else 1)


def test_instances_from_jsonl_last_mode_and_sequential_order(tmp_path, replay_env):
    path = tmp_path / "inst.jsonl"
    write_instances(path, replay_env.instances[:5])
    env = NodeReplayEnv(instances=str(path), order="sequential", obs_mode="last", alpha=0.5, gamma=1.0)
    ids = [env.reset()[1]["instance"] for _ in range(6)]
    assert ids == [i.id for i in replay_env.instances[:5]] + [replay_env.instances[0].id]
    inst = env.instances[1]
    obs, _ = env.reset(options={"index": 1})
    assert obs == (inst.prefix[-1]["observation"] if inst.prefix else inst.initial_observation)
    obs, *_ = env.step(inst.gold[0]["action"])
    assert obs == inst.gold[0]["observation"]
    for g in inst.gold[1:]:
        _, reward, *_ = env.step(g["action"])
    assert reward == pytest.approx(0.5 + 0.5 * (1 + inst.depth))


def test_reward_wrappers_compose_with_the_replay_env(replay_env, sw_gold_tree):
    env = XTreeBonus(NodeReplayEnv(instances=replay_env.instances[:20], order="sequential"), sw_gold_tree)
    env.reset()
    inst = env.unwrapped.instance
    for g in inst.gold:
        *_, info = env.step(g["action"])
    assert inst.node in info["xtree"]["matched"]


def test_bad_arguments_raise_one_clear_error(replay_env):
    with pytest.raises(EnvConfigError, match="needs instances="):
        NodeReplayEnv()
    with pytest.raises(EnvConfigError, match="kind"):
        NodeReplayEnv(instances=replay_env.instances, kind="span")
    with pytest.raises(EnvConfigError, match="no node instances"):
        NodeReplayEnv(instances=[])
    env = NodeReplayEnv(instances=replay_env.instances[:3])
    with pytest.raises(EnvConfigError, match="out of range"):
        env.reset(options={"index": 3})
    with pytest.raises(EnvConfigError, match="no instance"):
        env.reset(options={"instance": "nope"})
