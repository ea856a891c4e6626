"""The MiniGrid claim check: the smoke run end to end, and the trainer's pieces on live envs."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch

pytest.importorskip("minigrid")

from experiments.minigrid_claim.run import SMOKE, ClaimConfig, build_trees, length_histogram, main
from experiments.minigrid_claim.solver import demo_corpus
from experiments.minigrid_claim.train import (
    RunSpec,
    batch_rewards,
    make_envs,
    make_policy,
    obs_dim,
    rollout,
    train_run,
    update,
)
from xtree_gym.agents.advantages import grouped_advantages
from xtree_gym.errors import ConfigError

SPEC = RunSpec("xtree", 2, 0, "MiniGrid-DoorKey-5x5-v0", 30, 4, 2, 1e-2, 1, 16, 0.75, 0.4, 4)


@pytest.fixture(scope="module")
def corpus_and_trees():
    corpus = demo_corpus(SMOKE.env_id, SMOKE.max_steps, SMOKE.demo_episodes, SMOKE.demo_noise)
    return corpus, *build_trees(SMOKE, corpus)


def test_smoke_run_writes_every_number(tmp_path, capsys) -> None:
    assert main(["--smoke", "--out", str(tmp_path)]) == 0
    res = json.loads((tmp_path / "results.json").read_text())
    cells = {(r["n"], r["arm"]) for r in res["summary"]}
    assert cells == {(n, a) for n in SMOKE.group_sizes for a in SMOKE.arms}
    assert len(res["runs"]) == len(SMOKE.group_sizes) * len(SMOKE.arms) * len(SMOKE.seeds)
    for r in res["runs"]:
        assert len(r["curve"]["success"]) == len(r["curve"]["lambda_g"]) == SMOKE.updates
        assert all(0.0 <= lam <= SMOKE.lambda0 for lam in r["curve"]["lambda_g"])
        if r["arm"] == "outcome":
            assert all(b == 0.0 for b in r["curve"]["bonus"])
    assert any(b > 0 for r in res["runs"] if r["arm"] != "outcome" for b in r["curve"]["bonus"])
    table = (tmp_path / "table.md").read_text()
    assert "+ X-Tree bonus" in table and "| 4 | + random-tree bonus |" in table
    assert (tmp_path / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "wrote" in capsys.readouterr().out


def test_random_tree_matches_the_xtree(corpus_and_trees) -> None:
    corpus, tree, rtree, dists = corpus_and_trees
    assert sum(t.success for t in corpus) > 0 and sum(not t.success for t in corpus) > 0  # both labels
    assert len(rtree) == len(tree) > 0
    seed = rtree.extra["control"]["seed"]
    assert dists[seed] == min(dists)
    assert [n.expansion for n in rtree.nodes] != [n.expansion for n in tree.nodes]
    assert sum(length_histogram(rtree).values()) == sum(length_histogram(tree).values())


def test_bonus_reaches_the_loss_and_moves_the_weights(corpus_and_trees) -> None:
    """An all-fail group: outcome-only has zero advantage (no change); the bonus gives a gradient."""
    _, tree, _, _ = corpus_and_trees
    envs = make_envs(SPEC, tree, 4)
    torch.manual_seed(0)
    policy = make_policy(obs_dim(envs[0]), 16, 7)
    eps = rollout(policy, envs, [1, 1, 2, 2], torch.Generator().manual_seed(0))
    assert all(len(e.actions) == len(e.obs) == len(e.logps) > 0 for e in eps)
    assert all(e.bonus >= 0 for e in eps)
    for e in eps:  # force the all-fail case the claim is about
        e.reward, e.won = 0.0, False
    e0, e1 = eps[0], eps[1]
    e0.bonus, e1.bonus = 3.0, 0.0
    for arm, moves in (("outcome", False), ("xtree", True)):
        rewards, lams = batch_rewards(eps, 2, arm, 0.75, 0.4)
        assert lams == [0.75, 0.75]
        adv = grouped_advantages(rewards, [0, 0, 1, 1])
        before = [p.detach().clone() for p in policy.parameters()]
        opt = torch.optim.Adam(policy.parameters(), lr=1e-2)
        update(policy, opt, eps, adv, epochs=1)
        changed = any(not torch.equal(b, p) for b, p in zip(before, policy.parameters()))
        assert changed is moves, arm
    assert rewards[:2] == [2.25, 0.0]


def test_same_seed_same_run() -> None:
    a = train_run(dataclasses.replace(SPEC, arm="outcome"), None)
    b = train_run(dataclasses.replace(SPEC, arm="outcome"), None)
    assert a["curve"] == b["curve"] and a["eval_success"] == b["eval_success"]


def test_bad_config_is_one_clear_error() -> None:
    with pytest.raises(ConfigError, match="do not divide"):
        ClaimConfig(group_sizes=(3,), batch_episodes=32)
    with pytest.raises(ConfigError, match="workers"):
        ClaimConfig(workers=4)
