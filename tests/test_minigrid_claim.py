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
from xtree_gym.agents.grpo.advantages import grouped_advantages
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
    assert (tmp_path / "corpus.jsonl.gz").exists() and (tmp_path / "runs.jsonl").exists()
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


def test_random_tree_lengths_follow_the_request(corpus_and_trees) -> None:
    """``random_tree(lengths=)`` draws merge i among pairs of node i's length when the pool has one."""
    from experiments.minigrid_claim.run import _hist_distance
    from xtree_gym.mining.config import MinerConfig
    from xtree_gym.rewards.instances import random_tree

    corpus, tree, _, _ = corpus_and_trees
    cfg, want = MinerConfig(**SMOKE.miner), [n.length for n in tree.nodes]
    asked = [random_tree(corpus, len(tree), cfg, seed=s, lengths=want) for s in range(4)]
    plain = [random_tree(corpus, len(tree), cfg, seed=s) for s in range(4)]
    d_asked = sum(_hist_distance(length_histogram(t), length_histogram(tree)) for t in asked)
    d_plain = sum(_hist_distance(length_histogram(t), length_histogram(tree)) for t in plain)
    assert d_asked < d_plain
    assert asked[0].extra["control"]["lengths"] == want


# --- issue 23: controls, bonus-mode arms, held-out layouts, metrics, command line


def test_exact_random_tree_per_seed(corpus_and_trees) -> None:
    """Node count and length histogram exactly the X-Tree's; a different draw per seed; no success filter."""
    from experiments.minigrid_claim.controls import exact_random_tree
    from xtree_gym.mining.config import MinerConfig

    corpus, tree, _, _ = corpus_and_trees
    cfg = MinerConfig(**SMOKE.miner)
    assert cfg.min_succ == 0.0  # the candidate rule filters nothing by success
    a, b = (exact_random_tree(corpus, tree, cfg, seed=s, tries=400) for s in (100, 101))
    for t in (a, b):
        assert len(t) == len(tree) and length_histogram(t) == length_histogram(tree)
    assert [n.expansion for n in a.nodes] != [n.expansion for n in b.nodes]
    again = exact_random_tree(corpus, tree, cfg, seed=100, tries=400)
    assert [n.expansion for n in again.nodes] == [n.expansion for n in a.nodes]  # same seed, same tree
    with pytest.raises(ConfigError, match="no random tree matched"):
        exact_random_tree(corpus, tree, cfg, seed=100, tries=0)


def test_subgoal_value_is_on_the_xtree_scale(corpus_and_trees) -> None:
    from experiments.minigrid_claim.controls import subgoal_bonus, subgoal_value
    from xtree_gym.rewards import sequence_bonus

    corpus, tree, _, _ = corpus_and_trees
    v = subgoal_value(corpus, tree, 2)
    wins = [t for t in corpus if t.success]
    mean = sum(sequence_bonus(tree, [s.token for s in t.steps]).total for t in wins) / len(wins)
    assert v == pytest.approx(mean / 2) and v > 0
    solved = [t for t in wins if {"pickup<key>", "toggle<door>"} <= {s.token for s in t.steps}]
    assert (
        solved
        and subgoal_bonus([s.token for s in solved[0].steps], v, ("pickup<key>", "toggle<door>")) == 2 * v
    )


def test_layout_split_is_disjoint() -> None:
    import gymnasium as gym

    from experiments.minigrid_claim.controls import layout_key, layout_split

    got = layout_split("MiniGrid-DoorKey-5x5-v0", 30, 300, 8)
    assert got["shared_layouts"] == 0 and len(got["eval_seeds"]) == 8
    env = gym.make("MiniGrid-DoorKey-5x5-v0", max_steps=30)
    keys = {}
    for group in ("train_seeds", "eval_seeds"):
        found = set()
        for s in got[group]:
            env.reset(seed=s)
            found.add(layout_key(env))
        keys[group] = found
    assert keys["train_seeds"].isdisjoint(keys["eval_seeds"])
    assert min(got["eval_seeds"]) >= 20_000 and max(got["train_seeds"]) < 300
    assert len(keys["eval_seeds"]) == got["eval_layouts"] and len(keys["train_seeds"]) == got["train_layouts"]


def test_sign_flip_and_thresholds_by_hand() -> None:
    from experiments.minigrid_claim.report import run_metrics, sign_flip_p

    # sums of ±1 ±2 ±3 ±1 with |sum| >= 5: 7, 5, 5 and their negatives -> 6 of 16
    assert sign_flip_p([1.0, 2.0, 3.0, -1.0]) == pytest.approx(6 / 16)
    assert sign_flip_p([0.0, 0.0]) == 1.0
    r = {"curve": {"success": [0.0, 0.2, 0.2, 0.4, 0.6]}, "episodes_per_update": 16, "eval_success": 0.5}
    m = run_metrics(r, 2, (0.1, 0.3))  # moving(2): 0, .1, .2, .3, .5
    assert (m["to_0.1"], m["to_0.3"], m["final"], m["auc"]) == (
        32,
        64,
        pytest.approx(0.5),
        pytest.approx(0.28),
    )


def test_in_loop_tree_mines_only_own_rollouts() -> None:
    from experiments.minigrid_claim.train import Episode, InLoopTree

    spec = dataclasses.replace(SPEC, arm="remine", remine_every=2, miner=tuple(sorted(SMOKE.miner.items())))
    loop = InLoopTree(spec)
    chain = ["pickup<key>", "toggle<door>", "forward<empty>", "forward<goal>"]
    fails = [Episode([], [], [], 0.0, False, tokens=["left<wall>", "right<wall>"] * 3) for _ in range(4)]
    loop.observe(fails, 0)
    loop.observe(fails, 1)
    assert loop.tree is None  # no success in the buffer yet: no tree, no bonus
    wins = [Episode([], [], [], 0.9, True, tokens=chain) for _ in range(4)]
    loop.observe(wins, 2)
    assert loop.tree is None  # mined only every remine_every updates
    loop.observe(wins, 3)
    assert loop.tree is not None and len(loop.tree) > 0 and len(loop.buffer) == 16


def test_self_mined_arm_is_the_products_rule_on_own_episodes() -> None:
    """Arm ``self_mined``: outcome only until the first re-mine; then :func:`self_mine`'s tree and mode; with no
    success in the window the tree is mined but pays nothing (R_out alone), with both labels it pays the
    separating nodes' contrastive values under ``contrastive_gated``."""
    from experiments.minigrid_claim.train import Episode, InLoopTree, post_hoc_bonus

    spec = dataclasses.replace(
        SPEC, arm="self_mined", remine_every=2, miner=tuple(sorted(SMOKE.miner.items()))
    )
    loop = InLoopTree(spec)
    assert loop.mode == "none" and loop.tree is None
    chain = ["pickup<key>", "toggle<door>", "forward<empty>", "forward<goal>"]
    habit = ["left<wall>", "right<wall>"] * 3
    fails = [Episode([], [], [], 0.0, False, tokens=list(habit)) for _ in range(4)]
    loop.observe(fails, 0)
    loop.observe(fails, 1)
    assert loop.tree is not None and len(loop.tree) > 0 and loop.mode == "none"  # mined, but nothing to pay
    assert loop.log == [{"update": 2, "nodes": len(loop.tree), "bonus_mode": "none", "buffer_successes": 0,
                         "buffer_failures": 8}]  # fmt: skip
    post_hoc_bonus(spec, fails, loop)
    assert [e.bonus for e in fails] == [0.0] * 4
    mixed = [Episode([], [], [], 0.0, False, tokens=list(habit)) for _ in range(2)]
    assert batch_rewards(mixed, 2, "self_mined", 0.75, 0.4, loop.mode) == ([0.0, 0.0], [0.75])  # R_out alone
    wins = [Episode([], [], [], 0.9, True, tokens=chain + habit[:2]) for _ in range(4)]
    loop.observe(wins, 2)
    loop.observe(wins, 3)
    assert loop.mode == "contrastive_gated" and (loop.log[-1]["buffer_successes"], len(loop.log)) == (8, 2)
    assert loop.tree.corpus["n_trajectories"] == len(loop.buffer) == 16  # the window, nothing else
    post_hoc_bonus(spec, wins + fails, loop)
    assert [e.bonus for e in wins] == [1.0] * 4 and [e.bonus for e in fails] == [0.0] * 4
    lost = [
        Episode([], [], [], 0.0, False, tokens=chain + habit[:2]),
        Episode([], [], [], 0.0, False, tokens=habit),
    ]
    post_hoc_bonus(spec, lost, loop)  # an all-fail group: gated pays the node values, λ0 weight
    r, lam = batch_rewards(lost, 2, "self_mined", 0.75, 0.4, loop.mode)
    assert lam == [0.75] and r[1] == 0.0 and r[0] == pytest.approx(0.75 * lost[0].bonus) and lost[0].bonus > 0


def test_command_line_options(tmp_path, capsys) -> None:
    from experiments.minigrid_claim.config import ARMS
    from experiments.minigrid_claim.remines import main as main_remines
    from experiments.minigrid_claim.run import _ints

    assert _ints("100-102,7") == (100, 101, 102, 7)
    assert main(["--smoke", "--arms", "outcome,nope", "--out", str(tmp_path)]) == 2
    assert "unknown arms ['nope']" in capsys.readouterr().err
    assert main(["--smoke", "--env", "cartpole", "--out", str(tmp_path)]) == 2
    out = tmp_path / "all"
    argv = ["--smoke", "--arms", ",".join(ARMS), "--group-sizes", "2", "--seeds", "3", "--out", str(out)]
    assert main(argv) == 0
    res = json.loads((out / "results.json").read_text())
    assert {r["arm"] for r in res["runs"]} == set(ARMS) and {r["seed"] for r in res["runs"]} == {3}
    for arm in ARMS:
        lines = (out / "curves" / f"{arm}-n2-s3.csv").read_text().splitlines()
        assert lines[0].startswith("episodes,success,lambda_g") and len(lines) == 1 + SMOKE.updates
    assert {(c["arm"], c["vs"]) for c in res["comparisons"]} >= {
        ("xtree_gated", "outcome"),
        ("subgoal", "xtree"),
        ("self_mined", "subgoal"),
        ("self_mined", "xtree_contrastive_gated"),
    }
    assert main_remines([str(out)]) == 0  # the re-mine summary reads the same folder
    assert "n=2: 1 runs," in capsys.readouterr().out
    prov = json.loads((out / "provenance.json").read_text())
    assert prov["config"]["arms"] == list(ARMS) and "--seeds" in prov["command"]
    assert prov["commit"] is None or len(prov["commit"]) == 40


def test_the_gated_random_tree_arm_runs_without_the_plain_one(tmp_path) -> None:
    # the per-seed random trees were built only when `random_tree` itself was listed: KeyError
    out = tmp_path / "gated"
    arms = "outcome,random_tree_contrastive_gated"  # outcome: the baseline every config keeps
    assert main(["--smoke", "--arms", arms, "--group-sizes", "2", "--out", str(out)]) == 0
    res = json.loads((out / "results.json").read_text())
    runs = sorted((r["arm"], r["n"], r["seed"]) for r in res["runs"])
    assert runs == [("outcome", 2, 0), ("random_tree_contrastive_gated", 2, 0)]
    gated = next(r for r in res["runs"] if r["arm"] == "random_tree_contrastive_gated")
    assert len(gated["curve"]["bonus"]) == SMOKE.updates


def test_resume_keeps_only_runs_of_the_same_config(tmp_path) -> None:
    """``--resume`` reads the shared runner's ``runs.jsonl``: a run made with another lr is redone, one made
    with other seeds/arms (the run choice) is kept; what is written back is one whole line per run."""
    from experiments.minigrid_claim.run import load_done, run_log

    log = tmp_path / "runs.jsonl"
    other_lr = run_log(log, dataclasses.replace(SMOKE, lr=0.5))
    with other_lr.writer(resume=False) as write:
        write({"arm": "xtree", "n": 2, "seed": 0, "win": 0.1})
    with run_log(log, dataclasses.replace(SMOKE, seeds=(7, 8))).writer(resume=True) as write:
        write({"arm": "outcome", "n": 4, "seed": 7, "win": 0.2})
    assert load_done(log, SMOKE) == {("outcome", 4, 7): {"arm": "outcome", "n": 4, "seed": 7, "win": 0.2}}
    assert list(other_lr.done()) == [("xtree", 2, 0)]  # and the other way round
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    assert [set(x) for x in lines] == [{"config", "run"}] * 2 and lines[0]["config"]["lr"] == 0.5


def test_pairs_reprints_the_committed_comparisons(capsys):
    """``experiments.minigrid_claim.pairs`` recomputes a listed comparison exactly as ``results.json`` holds it."""
    import json
    from pathlib import Path

    from experiments.minigrid_claim.pairs import main

    folder = Path(__file__).resolve().parent.parent / "results" / "minigrid_claim_doorkey5"
    committed = json.loads((folder / "results.json").read_text(encoding="utf-8"))
    want = next(
        c for c in committed["comparisons"] if (c["n"], c["arm"], c["vs"]) == (16, "xtree_gated", "outcome")
    )
    assert main([str(folder), "xtree_gated:outcome"]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("n=16"))
    f = want["final"]
    assert f"final {f['mean_diff']:+.3f} ({f['ahead']}/{f['tied']}/{f['behind']}, p={f['p']:.2g})" in line


# --- issue 34: more envs (the solver reaches their success), their hand-named subgoals, the tree-derived arms


@pytest.mark.parametrize(
    "name", ["doorkey6", "unlock", "keycorridor", "unlockpickup", "multiroom", "redbluedoors", "keyinbox"]
)
def test_solver_wins_every_new_env(name: str) -> None:
    from experiments.minigrid_claim.config import ENVS, SUBGOALS_BY_ENV

    env_id, steps = ENVS[name]
    demos = demo_corpus(env_id, steps, 6, (0.0,))
    assert len(demos) == 6 and all(t.success for t in demos)  # noise 0: the scripted solver always wins
    subgoals, reason = SUBGOALS_BY_ENV[env_id]
    assert reason and subgoals == ClaimConfig(env_id=env_id).subgoal_tokens()
    tokens = {s.token for t in demos for s in t.steps}
    assert set(subgoals) <= tokens  # every named subgoal is something a solving episode does


def test_keyinbox_short_name_runs_the_registered_small_level(tmp_path) -> None:
    """``--env keyinbox`` is not a ``MiniGrid-`` id: the short name is enough, and the level is the 9 x 9 one."""
    import gymnasium as gym

    from experiments.minigrid_claim.config import KEYINBOX_ID

    out = tmp_path / "kib"
    argv = ["--smoke", "--env", "keyinbox", "--arms", "outcome,subgoal", "--group-sizes", "2", "--seeds", "3"]
    assert main([*argv, "--out", str(out)]) == 0
    res = json.loads((out / "results.json").read_text())
    assert res["config"]["env_id"] == KEYINBOX_ID and len(res["runs"]) == 2
    env = gym.make(KEYINBOX_ID, max_steps=10)
    assert (env.unwrapped.width, env.unwrapped.height) == (9, 9)


def test_contrastive_arms_pay_the_tree_values(corpus_and_trees) -> None:
    """The env's bonus under a contrastive arm is sequence_bonus with the tree's contrastive values;
    the potential arm pays only a truncated episode, the outcome alone to a terminated one."""
    from experiments.minigrid_claim.train import Episode, node_values
    from xtree_gym.rewards import sequence_bonus
    from xtree_gym.rewards.contrastive import corpus_values

    corpus, tree, _, _ = corpus_and_trees
    tree.extra["node_values"] = corpus_values(tree, corpus)
    spec = dataclasses.replace(SPEC, arm="xtree_contrastive_gated")
    values = node_values(spec, tree)
    assert values is not None and max(values.values.values()) == 1.0
    assert node_values(dataclasses.replace(SPEC, arm="xtree_gated"), tree) is None
    eps = rollout(make_policy(obs_dim(make_envs(spec, tree, 1)[0]), 16, 7), make_envs(spec, tree, 4),
                  [1, 1, 2, 2], torch.Generator().manual_seed(0))  # fmt: skip
    for e in eps:
        assert e.bonus == pytest.approx(sequence_bonus(tree, e.tokens, values, nesting=True).total)
    won = Episode([], [], [], 0.9, True, 2.0, terminated=True)
    lost = Episode([], [], [], 0.0, False, 2.0, terminated=False)
    rewards, _ = batch_rewards([won, lost], 2, "xtree_potential", 0.75, 0.4, max_bonus=4.0, margin=0.09)
    assert rewards == pytest.approx([0.9, 0.045])
