"""``xtree collect scienceworld``: gold replay into the corpus format of train-gold.jsonl (real simulator)."""

from __future__ import annotations

import json

import pytest

from xtree_gym.canon import get_canonicalizer
from xtree_gym.collect.scienceworld import collect_gold, plan_episodes, plan_shortfall, summarize
from xtree_gym.corpus import read_corpus
from xtree_gym.envs import sciworld_folds as folds

pytestmark = pytest.mark.jvm


def test_plan_spreads_variations_like_the_shared_corpus() -> None:
    pairs = plan_episodes(
        "train", 40, tasks=["find-animal", "power-component", "mendelian-genetics-known-plant"]
    )
    by_task: dict[str, list[int]] = {}
    for task, variation in pairs:
        by_task.setdefault(task, []).append(variation)
    assert by_task["find-animal"] == list(range(0, 120, 3))  # 150 train variations, stride 3
    assert by_task["power-component"] == list(range(10))  # fewer than 40: all of them
    assert by_task["mendelian-genetics-known-plant"] == [0, 15, 30, 45]  # capped at 4
    assert len(plan_episodes("train", 40)) == 826  # the size of train-gold.jsonl


def test_plan_says_which_episodes_it_leaves_out() -> None:
    """Issue 33: ``--per-task 5`` plans 147 of 150 episodes; the shortfall names all 3 and why."""
    short = plan_shortfall("train", 5)
    assert len(plan_episodes("train", 5)) + sum(k for _, k, _ in short) == 30 * 5
    assert [(t, k) for t, k, _ in short] == [
        ("identify-life-stages-2", 1),
        ("mendelian-genetics-known-plant", 1),
        ("mendelian-genetics-unknown-plant", 1),
    ]
    assert "only 4 variations" in short[0][2] and all("--slow-cap 4" in why for _, _, why in short[1:])
    assert plan_shortfall("train", None, slow_cap=None) == []  # everything asked for is planned
    # every cap and split size, for every task: planned + left out == asked for
    for per_task in (1, 7, 40, None):
        for cap in (0, 2, None):
            pairs = plan_episodes("dev", per_task, slow_cap=cap)
            asked = sum(per_task or len(folds.split_variations(t, "dev")) for t in folds.TASK_NAMES)
            assert len(pairs) + sum(k for _, k, _ in plan_shortfall("dev", per_task, slow_cap=cap)) == asked


def test_records_match_the_shared_corpus_format(sciworld_env, shared_dir, tmp_path) -> None:
    shared_path = shared_dir / "data" / "scienceworld" / "train-gold.jsonl"
    with open(shared_path, encoding="utf-8") as fh:
        shared = {r["id"]: r for r in map(json.loads, fh)}
    records = list(collect_gold([("find-animal", 0), ("chemistry-mix", 0)], env=sciworld_env))
    for rec in records:
        ref = shared[rec["id"]]
        assert set(rec) == set(ref)
        assert set(rec["steps"][0]) == set(ref["steps"][0]) | {"token", "slots"}
        assert rec["success"] and rec["score"] == 100
        assert (rec["goal"], rec["initial_observation"]) == (ref["goal"], ref["initial_observation"])
        assert sum(s["reward"] for s in rec["steps"]) == 100
    # Written with the corpus writer it reads back, and the stored tokens are the canonicalizer's.
    from xtree_gym.corpus import write_corpus

    write_corpus(tmp_path / "c.jsonl", records)
    corpus = read_corpus(tmp_path / "c.jsonl")
    canon = get_canonicalizer("scienceworld")
    for traj in corpus:
        assert [s.token for s in traj.steps] == [
            canon(s.action, canon.corpus_context(traj, i)).token for i, s in enumerate(traj.steps)
        ]


def test_an_episode_that_misses_is_kept_as_a_failure(sciworld_env, monkeypatch) -> None:
    real = sciworld_env.gold_actions
    monkeypatch.setattr(sciworld_env, "gold_actions", lambda: real()[:3])  # the gold path, cut short
    (rec,) = collect_gold([("find-animal", 5)], env=sciworld_env)
    assert len(rec["steps"]) == 3 and rec["success"] is False and rec["score"] < 100
    assert "failure kept: scienceworld/find-animal/train/5" in summarize([rec])


def test_cli_writes_a_canonicalized_corpus(tmp_path, capsys) -> None:
    from xtree_gym.cli import main

    out = tmp_path / "gold.jsonl"
    code = main(
        [
            "collect",
            "scienceworld",
            "--tasks",
            "find-animal",
            "mendelian-genetics-known-plant",
            "--per-task",
            "1",
            "--slow-cap",
            "0",
            "--workers",
            "1",
            "-o",
            str(out),
        ]
    )
    assert code == 0
    (traj,) = read_corpus(out)
    assert traj.id == "scienceworld/find-animal/train/0" and traj.success
    assert all(s.token and s.slots is not None for s in traj.steps)
    printed = capsys.readouterr()
    assert "1 successful" in printed.out and "(2 asked for)" in printed.out
    # the episode left out is named, with its reason, in the summary and on stderr
    line = "mendelian-genetics-known-plant: 1 episode not written: --slow-cap 0"
    assert line in printed.out and line in printed.err and "1 of 2 episodes asked for" in printed.err
