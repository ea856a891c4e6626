"""``xtree collect scienceworld``: gold replay into the corpus format of train-gold.jsonl (real simulator)."""

from __future__ import annotations

import json

import pytest

from xtree_gym.canon import get_canonicalizer
from xtree_gym.collect.scienceworld import collect_gold, plan_episodes, summarize
from xtree_gym.corpus import read_corpus

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
            "--per-task",
            "1",
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
    assert "1 successful" in capsys.readouterr().out
