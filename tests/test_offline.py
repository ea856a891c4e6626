"""Offline node RL (§3.2, Eq. 2): instance sets per control flag, curriculum, Eq. 2 on scripted completions,
and ``xtree train offline`` on the GRPO trainer with tiny-random (ScienceWorld gold sample corpus)."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from importlib.resources import files
from pathlib import Path

import pytest

from xtree_gym.agents.harness.replay import ReplayHarness
from xtree_gym.agents.sft_offline.offline import (
    INSTANCE_SETS,
    OfflineConfig,
    build_instances,
    curriculum_phase,
    instance_summary,
    instance_tasks,
)
from xtree_gym.envs.node_replay import NodeReplayEnv
from xtree_gym.errors import ConfigError

SAMPLE = Path(str(files("xtree_gym") / "data/scienceworld_gold_sample.jsonl.gz"))


@pytest.fixture(scope="module")
def sw(tmp_path_factory):
    """60 short episodes (<= 14 steps: short prompts, fast tests) of the packaged ScienceWorld gold sample
    and the tree mined from all 278 of it."""
    from xtree_gym.corpus import read_corpus, write_corpus
    from xtree_gym.mining import mine

    d = tmp_path_factory.mktemp("offline")
    trajs = read_corpus(SAMPLE).trajectories
    mine(trajs, "scienceworld", domain="scienceworld").save(d / "tree.json")
    write_corpus(d / "gold.jsonl", [t for t in trajs if len(t.steps) <= 14][:60])
    return d / "gold.jsonl", d / "tree.json"


def _cfg(sw, tmp_path, **kw):
    corpus, tree = sw
    return OfflineConfig(corpus=str(corpus), tree=str(tree), corpus_domain="scienceworld",
                         output_dir=str(tmp_path / "run"), **kw)  # fmt: skip


def test_each_control_flag_builds_its_instance_set(sw, tmp_path):
    sets = {name: build_instances(_cfg(sw, tmp_path, instances=name)) for name in INSTANCE_SETS}
    node, span, rtree, whole = sets["xtree"], sets["random-span"], sets["random-tree"], sets["whole"]
    assert {i.kind for i in node} == {"node"} and all(i.node and i.depth >= 1 for i in node)
    assert {i.kind for i in span} == {"random_span"} and {i.kind for i in rtree} == {"random_tree"}
    assert {i.kind for i in whole} == {"whole"} and len(whole) == 60
    s_node, s_span = instance_summary(node), instance_summary(span)
    assert (
        s_span["instances"] == s_node["instances"] and s_span["lengths"] == s_node["lengths"]
    )  # length-matched
    assert [(i.trajectory_id, i.start) for i in span] != [(i.trajectory_id, i.start) for i in node]
    assert {i.node for i in rtree} != {i.node for i in node} or [i.id for i in rtree] != [i.id for i in node]
    assert all(i.length == len(i.gold) and i.start == len(i.prefix) for s in sets.values() for i in s)
    # same corpus + seed -> the same set
    again = build_instances(_cfg(sw, tmp_path, instances="random-span"))
    assert [i.id for i in again] == [i.id for i in span]


def test_bad_flags_are_one_clear_error(sw, tmp_path):
    for kw, match in [({"instances": "nodes"}, "instances"), ({"reward": "flat"}, "reward"),
                      ({"curriculum": "length"}, "curriculum"), ({"shaping": "xtree"}, "replay env")]:  # fmt: skip
        with pytest.raises(ConfigError, match=match):
            _cfg(sw, tmp_path, **kw).resolved()
    with pytest.raises(ConfigError, match="need a tree"):
        dataclasses.replace(_cfg(sw, tmp_path), tree=None).resolved()
    dataclasses.replace(_cfg(sw, tmp_path, instances="whole"), tree=None).resolved()  # whole needs none


def test_table7_defaults():
    cfg = OfflineConfig(corpus="c.jsonl", tree="t.json").resolved()
    assert (cfg.n, cfg.steps, cfg.tasks_per_step, cfg.lr, cfg.kl_coef) == (2, 805, 6, 5e-7, 0.0)
    assert (cfg.temperature, cfg.invalid_penalty, cfg.alpha, cfg.gamma) == (0.7, 0.0, 0.3, 0.5)
    assert (cfg.instances, cfg.reward, cfg.curriculum, cfg.env) == (
        "xtree",
        "hier",
        "none",
        "XTree-NodeReplay-v0",
    )


def test_help_shows_the_docs_of_inherited_fields(capsys):
    """``xtree train offline --help``: fields from GRPOConfig keep their text; overridden ones show OfflineConfig's."""
    import dataclasses as dc

    from xtree_gym.agents.grpo.config import GRPOConfig, field_docs
    from xtree_gym.cli import main

    docs = field_docs(OfflineConfig)
    assert {f.name for f in dc.fields(OfflineConfig)} == set(docs)  # every flag has help text
    assert docs["micro_batch_tokens"] == field_docs(GRPOConfig)["micro_batch_tokens"]  # inherited only
    assert docs["lr"] == "AdamW learning rate (Table 7: 5e-7)." != field_docs(GRPOConfig)["lr"]  # overridden
    with pytest.raises(SystemExit):
        main(["train", "offline", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--micro-batch-tokens MICRO_BATCH_TOKENS Token budget of one micro-batch" in text
    assert "--lr LR AdamW learning rate (Table 7: 5e-7)." in text


def test_curriculum_goes_depth_by_depth(sw, tmp_path):
    insts = build_instances(_cfg(sw, tmp_path))
    counts = instance_summary(insts)["depths"]
    steps = sum(counts.values())  # one step per instance: each depth gets exactly its count
    phases = [curriculum_phase(s, steps, counts) for s in range(1, steps + 1)]
    assert phases == sorted(phases) and Counter(phases) == counts  # shallow first, shares ∝ counts
    for step in (1, steps):
        depth = curriculum_phase(step, steps, counts)
        pool = [i for i, inst in enumerate(insts) if inst.depth == depth]
        tasks = instance_tasks(insts, pool, 6, seed=0, step=step)
        assert {insts[t.reset_options["index"]].depth for t in tasks} == {depth}
        assert len({t.reset_options["index"] for t in tasks}) == min(
            6, len(pool)
        )  # no repeat while the pool lasts


def _play(env: NodeReplayEnv, harness: ReplayHarness, index: int, responses: list[str]) -> float:
    """The rollout loop by hand: render, parse, step; returns the episode's summed reward."""
    from xtree_gym.agents.harness.base import HarnessState

    obs, _ = env.reset(options={"index": index})
    total, k, done = 0.0, 0, False
    while not done:
        messages = harness.render(HarnessState(goal="", observation=obs))
        assert obs in messages[0]["content"]  # the gold prefix reaches the prompt
        parsed = harness.parse(responses[k])
        obs, r, term, trunc, _ = env.step(parsed.action or "")
        total, k, done = total + float(r), k + 1, term or trunc
    return total


@pytest.mark.parametrize("mode", ["hier", "plain", "outcome"])
def test_rewards_equal_eq2_on_scripted_completions(sw, tmp_path, mode):
    insts = build_instances(_cfg(sw, tmp_path))
    env = NodeReplayEnv(instances=insts, reward=mode)
    h = ReplayHarness()
    i = next(k for k, inst in enumerate(insts) if inst.length >= 3 and inst.depth >= 2)
    inst = insts[i]
    gold = [h.format_response(a, "following the recorded path") for a in inst.gold_actions]
    wrong = h.format_response("teleport to the moon")
    full, early, miss = _play(env, h, i, gold), _play(env, h, i, [gold[0], wrong]), _play(env, h, i, [wrong])
    ell, d = inst.length, inst.depth
    expected = {  # Eq. 2: (1 − α)·matched/ℓ + α·(1 + γ·d)·c, α 0.3, γ 0.5; and the two controls
        "hier": (0.7 + 0.3 * (1 + 0.5 * d), 0.7 / ell, 0.0),
        "plain": (1.0, 1 / ell, 0.0),
        "outcome": (1.0, 0.0, 0.0),
    }[mode]
    assert (full, early, miss) == pytest.approx(expected)


# ----------------------------------------------------------------------------- on the trainer


def _small(sw, tmp_path, **kw):
    base = {"model": "tiny-random", "steps": 2, "tasks_per_step": 2, "max_new_tokens": 8, "progress": False,
            "tensorboard": False, "lr": 1e-3}  # fmt: skip
    return _cfg(sw, tmp_path, **{**base, **kw})


def test_trainer_rewards_are_eq2_and_reach_the_update(sw, tmp_path):
    import torch

    from xtree_gym.agents.model.generation import ScriptedGenerator
    from xtree_gym.agents.sft_offline.offline_trainer import OfflineTrainer

    trainer = OfflineTrainer(_small(sw, tmp_path, steps=1))
    tasks = trainer.sample_tasks(1)
    h = trainer.harness
    script = {}
    for g, t in enumerate(tasks):
        inst = trainer.instances[t.reset_options["index"]]
        script[(g, 0)] = [h.format_response(a) for a in inst.gold_actions]  # full match
        script[(g, 1)] = [h.format_response("teleport to the moon")]  # first-step miss
    trainer.generator_factory = lambda tr, step, seed: ScriptedGenerator(script, tokenizer=tr.tokenizer)
    episodes = trainer.collect(tasks, 1)
    rewards = trainer.rewards(episodes).rewards
    for ep, r in zip(episodes, rewards):
        inst = trainer.instances[tasks[ep.group].reset_options["index"]]
        want = 0.7 + 0.3 * (1 + 0.5 * inst.depth) if ep.member == 0 else 0.0
        assert r == pytest.approx(want)
        assert len(ep.turns) == (inst.length if ep.member == 0 else 1)  # stopped at the first mismatch
        assert ep.success == (ep.member == 0)  # a win is a completed node
    before = [p.detach().clone() for p in trainer.policy.parameters()]
    stats = trainer.learn(episodes)
    assert stats["loss"] != 0.0
    assert any(not torch.equal(a, b) for a, b in zip(before, trainer.policy.parameters()))


_SLOW = pytest.mark.slow  # the instance sets of every flag are checked fast above; these also train on each


@pytest.mark.parametrize("flags", [[], ["--curriculum", "depth"], pytest.param(["--instances", "random-span"], marks=_SLOW),
                                   pytest.param(["--instances", "random-tree"], marks=_SLOW),
                                   pytest.param(["--instances", "whole", "--reward", "outcome"], marks=_SLOW),
                                   pytest.param(["--reward", "plain"], marks=_SLOW)])  # fmt: skip
def test_xtree_train_offline_runs_two_steps(sw, tmp_path, capsys, flags):
    from xtree_gym.cli import main

    corpus, tree = sw
    out = tmp_path / "run"
    argv = ["train", "offline", "--tree", str(tree), "--corpus", str(corpus), "--domain", "scienceworld",
            "--model", "tiny-random", "-o", str(out), "--steps", "2", "--tasks-per-step", "2",
            "--max-new-tokens", "8", "--no-progress", "--no-tensorboard", *flags]  # fmt: skip
    assert main(argv) == 0
    summary = json.loads(capsys.readouterr().out.splitlines()[0])
    kind = INSTANCE_SETS[flags[1] if flags and flags[0] == "--instances" else "xtree"]
    assert summary["kinds"] == {kind: summary["instances"]}
    lines = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert [x["step"] for x in lines] == [1, 2] and all(x["episodes"] == 4 for x in lines)
    assert (out / "checkpoint-000002" / "model").is_dir() and (out / "instances.jsonl").is_file()
