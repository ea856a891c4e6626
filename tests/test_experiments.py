"""The experiment scripts' ``--smoke`` sizes: each writes its table, and the table says what was measured.

Mining scripts run on the packaged ScienceWorld sample (or ../shared's gold corpus) and, when the
WebShop catalogue is present, a small collected WebShop corpus.
"""

from __future__ import annotations

import doctest
import importlib
import json
from pathlib import Path

import pytest

from experiments import _corpora, _results

MODULES = ["_results", "_runner", "_corpora", "_banks", "_rlvr", "table5_mining_size", "table6_trees", "tables13_14_case_study",
           "figure5_tiling", "table15_advice_miniwob"]  # fmt: skip
TRAINER_SCRIPTS = ["figure3_sciworld_rlvr", "table3_n_scaling", "table20_bank_ablation", "table21_heldout_mining",
                   "figure4_opsd", "table5_webshop_rlvr", "table4_warm_starts", "integrated_recipe"]  # fmt: skip


def _run(name: str, out: Path, capsys: pytest.CaptureFixture[str]) -> tuple[dict, str]:
    mod = importlib.import_module(f"experiments.{name}")
    assert mod.main(["--smoke", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    table = (out / "table.md").read_text(encoding="utf-8")
    assert table.strip() in printed  # the script prints the table it wrote
    return json.loads((out / "results.json").read_text(encoding="utf-8")), table


def _png(path: Path) -> None:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 2000, path


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name: str) -> None:
    res = doctest.testmod(importlib.import_module(f"experiments.{name}"))
    assert res.failed == 0


def test_table5_mining_size(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    res, table = _run("table5_mining_size", tmp_path, capsys)
    rows = res["corpora"]["scienceworld"]["rows"]
    assert [r["trajectories"] for r in rows] == [20, 60]
    for r in rows:
        assert r["nodes_min"] <= r["nodes_mean"] <= r["nodes_max"] <= 80  # the preset's cap
        assert len(r["per_seed"]) == 2 and all(s["bound"] in ("cap", "compression") for s in r["per_seed"])
        assert f"| {r['trajectories']} | {r['nodes_mean']:.1f} | {r['nodes_min']}–{r['nodes_max']} |" in table
    assert rows[0]["nodes_mean"] < rows[1]["nodes_mean"]  # more trajectories, more recurring pairs
    _png(tmp_path / "nodes_vs_size.png")


def test_table6_trees(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    res, table = _run("table6_trees", tmp_path, capsys)
    sw = res["columns"]["scienceworld"]
    tree = json.loads((tmp_path / "tree_scienceworld.json").read_text())
    assert len(tree["nodes"]) == sw["nodes"] > 0 and sw["cap"] == 80 and sw["min_task_types"] == 2
    assert sw["corpus"] == len(_corpora.scienceworld_corpus()[0])
    assert f"| nodes mined (bound by) | {sw['nodes']} ({sw['bound']})" in table
    assert "| mining corpus (trajectories) |" in table and "7974" in table  # the paper's WebArena column
    if _corpora.webshop_data_dir() is not None:
        assert res["columns"]["webshop"]["corpus"] == 60 and res["columns"]["webshop"]["cap"] == 60
    _png(tmp_path / "trees.png")


def test_tables13_14_case_study(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    res, table = _run("tables13_14_case_study", tmp_path, capsys)
    rows = res["scienceworld"]["rows"]
    assert len(rows) == 4
    assert [r["depth"] for r in rows] == sorted((r["depth"] for r in rows), reverse=True)
    for r in rows:
        _node_id, children = r["node"].split("=")
        assert "+" in children and r["occurrences"] > 0
        assert len(r["grounded"].split("; ")) == min(r["length"], 8) + (r["length"] > 8)
        assert f"| {r['node']} | {r['depth']} | {r['occurrences']} |" in table
    if "webshop" in res:
        shares = [r["success"] for r in res["webshop"]["rows"]]
        assert shares[0] >= shares[-1] and all(0.0 <= s <= 1.0 for s in shares)


def test_figure5_tiling(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    res, table = _run("figure5_tiling", tmp_path, capsys)
    assert res["task"] == "use-thermometer" and 12 <= res["steps"] <= 30
    covered = [i for r in res["rows"] for i in range(r["steps"][0], r["steps"][1] + 1)]
    assert covered == list(range(res["steps"]))  # the tiling covers every step once, in order
    assert res["nodes"] + res["primitives"] == res["tokens"] < res["steps"]
    assert f"{res['steps']} steps → {res['tokens']} tokens" in table
    _png(tmp_path / "figure5.png")


def test_bad_size_flag_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    from experiments import table5_mining_size

    with pytest.raises(SystemExit) as exc:
        table5_mining_size.main([])  # neither --smoke nor --full
    assert exc.value.code == 2 and "--smoke" in capsys.readouterr().err


def test_markdown_cell_escaping() -> None:
    assert _results.markdown_table(["a"], [["x|y"]]).splitlines()[-1] == "| x\\|y |"


# ----------------------------------------------------------------------------- banks (no trainer)


def test_random_span_tree_is_a_valid_tree_with_the_xtree_lengths(tmp_path: Path) -> None:
    from experiments._banks import match_count, mined_tree, random_span_tree
    from xtree_gym.mining.tree import XTree

    corpus = _corpora.subsample(_corpora.scienceworld_corpus()[0], 60, 0)
    tree, _ = mined_tree(corpus, "scienceworld", tmp_path / "t.json")
    spans, path = random_span_tree(corpus, tree, "scienceworld", tmp_path / "s.json", seed=3)
    loaded = XTree.load(path)  # the file passes the tree format's consistency check
    tops = {tuple(n.expansion) for n in loaded.nodes}
    assert max(len(e) for e in tops) == max(n.length for n in tree.nodes)
    assert sum(n.count for n in loaded.nodes) == match_count(loaded, corpus, "scienceworld") > 0
    again, _ = random_span_tree(corpus, tree, "scienceworld", tmp_path / "s2.json", seed=3)
    assert [n.expansion for n in again.nodes] == [n.expansion for n in spans.nodes]  # seeded


@pytest.mark.parametrize("name", TRAINER_SCRIPTS)
def test_full_sizes_are_valid_trainer_configs(name: str) -> None:
    """The documented --full configs resolve as GRPOConfigs (a typo in a field would fail here, not on a GPU)."""
    from xtree_gym.agents.grpo.config import GRPOConfig

    mod = importlib.import_module(f"experiments.{name}")
    cfg = GRPOConfig(**mod.FULL.base).resolved()
    assert cfg.steps >= 100 and cfg.n >= 8 and cfg.model != "tiny-random"
    smoke = GRPOConfig(**mod.SMOKE.base).resolved()
    assert smoke.model == "tiny-random" and smoke.steps <= 2


def test_set_override_errors_are_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    from experiments import table5_mining_size

    assert table5_mining_size.main(["--smoke", "--set", "nosuchfield=1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --set 'nosuchfield'") and "Traceback" not in err


def test_arms_report_is_one_layout_for_every_training_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The shared tail of the arms × seeds tables: rows, per-arm stats and tail in results, one row per arm."""
    from experiments import _rlvr

    trained: list[tuple[str, int, str]] = []

    def fake_arms(base: dict, arms: dict, seeds: tuple, out: Path) -> dict:
        trained.extend((a, s, base["model"]) for a in arms for s in seeds)
        win = {"outcome": 0.25, "xtree": 0.75}
        return {a: [{"seed": s, "steps": [{"step": 0, "win_rate": win[a], "reward": win[a], "lambda_g": 0.5,
                                           "bonus": 1.0, "opsd": 2.0 * s}]} for s in seeds] for a in arms}  # fmt: skip

    monkeypatch.setattr(_rlvr, "run_arms", fake_arms)
    cfg = _rlvr.ArmsConfig.smoke(seeds=(0, 1))
    rep = _rlvr.arms_report(
        cfg, {"outcome": {}, "xtree": {"shaping": "xtree"}}, tmp_path, {"tree": {"nodes": 3}},
        labels={"outcome": "outcome only", "xtree": "+ X-Tree"}, title="# T", above=["block"],
        header=["reward", "nodes", "train", "Δ", "held-out", "opsd"], before=lambda a: [3 if a == "xtree" else "–"],
        after=lambda a, r, s: [s["opsd"][a]], stats={"opsd": lambda rs: max(x["opsd"] for r in rs for x in r["steps"])},
        tail={"source": "here"}, base={**cfg.base, "model": "warm"}, note="Note.",
    )  # fmt: skip
    assert trained == [(a, s, "warm") for a in ("outcome", "xtree") for s in (0, 1)]  # arm-major, from `base`
    assert list(rep.results) == ["tree", "rows", "opsd", "runs", "source"]
    assert rep.results["opsd"] == {"outcome": 2.0, "xtree": 2.0}
    assert rep.results["rows"]["xtree"]["train_success"]["mean"] == 0.75
    lines = rep.table.split("\n")
    assert lines[:4] == ["# T", "", "block", ""] and lines[-2:] == ["", "Note."]
    assert "| + X-Tree | 3 | 75.0 ± 0.0 | +50.0 | — | 2.0 |" in lines
    assert "| outcome only | – | 25.0 ± 0.0 | — | — | 2.0 |" in lines
    assert set(rep.figures) == {"curves"}


# ----------------------------------------------------------------------------- trainer smokes


def _arm_steps(res: dict, arm: str) -> list[dict]:
    return [s for run in res["runs"][arm] for s in run["steps"]]


@pytest.mark.jvm
def test_figure3_sciworld_rlvr(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    res, table = _run("figure3_sciworld_rlvr", tmp_path, capsys)
    out, xt = _arm_steps(res, "outcome"), _arm_steps(res, "xtree")
    assert len(out) == len(xt) == 1 and all(s["tokens"] > 0 for s in out + xt)
    assert all(s["bonus"] == 0.0 for s in out)  # outcome only: no bonus reaches the reward
    assert all(s["bonus"] > 0.0 and 0.0 < s["lambda_g"] <= 0.75 for s in xt)  # all-fail groups: λ_g = λ0
    assert (tmp_path / "runs" / "xtree-s0" / "metrics.jsonl").is_file()
    row = res["rows"]["xtree"]
    assert f"| + X-Tree bonus | {_results.fmt(row['train_success']['mean'] * 100)} ±" in table
    _png(tmp_path / "curves.png")


@pytest.mark.slow
@pytest.mark.jvm
def test_table3_n_scaling(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    res, table = _run("table3_n_scaling", tmp_path, capsys)
    for n in (2, 4):
        steps = _arm_steps(res, f"xtree-n{n}")
        assert steps[0]["episodes"] == n  # one task per step × n rollouts
        assert table.count(f"\n| {n} |") <= 1 and f"| {n} |" in table


@pytest.mark.slow
@pytest.mark.jvm
def test_table20_bank_ablation(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    res, table = _run("table20_bank_ablation", tmp_path, capsys)
    banks = res["banks"]
    assert banks["random_tree"]["nodes"] == banks["xtree"]["nodes"]
    for k, label in (("random_spans", "Random spans"), ("random_tree", "Random tree"), ("xtree", "X-Tree")):
        assert f"| {label} | {banks[k]['nodes']} | {banks[k]['matches']} |" in table
    assert all(s["bonus"] == 0.0 for s in _arm_steps(res, "outcome"))


@pytest.mark.slow
@pytest.mark.jvm
def test_table21_heldout_mining(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    res, table = _run("table21_heldout_mining", tmp_path, capsys)
    t = res["trees"]
    assert t["remined"]["corpus"] < t["original"]["corpus"] and len(t["held_out_types"]) == 10
    assert t["diff"]["stayed"] + t["diff"]["came"] == t["remined"]["nodes"]
    assert f"| re-mined w/o G2 types | {t['remined']['corpus']} | {t['remined']['nodes']} |" in table


@pytest.mark.slow
@pytest.mark.jvm
def test_figure4_opsd(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    res, table = _run("figure4_opsd", tmp_path, capsys)
    assert res["opsd_term"]["rlvr"] == 0.0
    assert any(
        res["opsd_term"][a] != 0.0 for a in ("xtree", "written", "scrambled")
    )  # the term reached the loss
    assert "hand-written stand-in" in table


@pytest.mark.slow
def test_table16_sft_rows(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    res, table = _run("table16_sft_rows", tmp_path, capsys)
    acc = {f: e["accounting"] for f, e in res["formats"].items()}
    assert (
        acc["standard"]["supervised_actions"]
        == acc["node"]["supervised_actions"]
        == acc["span"]["supervised_actions"]
    )
    assert (
        acc["node"]["rows"] == acc["span"]["rows"] < acc["standard"]["rows"]
    )  # span is length-matched to node
    assert acc["node"]["tokens"] < acc["standard"]["tokens"]
    for e in res["formats"].values():
        assert e["sft"]["final_loss"] < e["sft"]["initial_loss"]  # SFT learned its own rows
    assert f"| X-Tree node rows | {acc['node']['rows']} | {acc['node']['supervised_actions']} |" in table


@pytest.mark.slow
def test_tables1_2_offline_rl(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    res, table = _run("tables1_2_offline_rl", tmp_path, capsys)
    assert set(res["rows"]) == {
        "full",
        "plain",
        "curriculum",
        "outcome",
        "whole",
        "random_span",
        "random_tree",
    }
    assert all(len(r["steps"]) == 1 for runs in res["runs"].values() for r in runs)
    assert "| X-Tree Full (Eq. 2) |" in table and "WebArena" in table


@pytest.mark.slow
@pytest.mark.browser
def test_table15_advice_miniwob(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    res, table = _run("table15_advice_miniwob", tmp_path, capsys)
    assert res["tree_nodes"] > 0 and set(res["arms"]) == {"none", "xtree", "scrambled"}
    for arm in res["arms"].values():
        assert arm["tasks"]["login-user"]["episodes"] == 1
    assert "| X-Tree advice |" in table


@pytest.mark.slow
@pytest.mark.jvm
def test_integrated_recipe(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    res, table = _run("integrated_recipe", tmp_path, capsys)
    assert res["warm_start"]["final_loss"] < res["warm_start"]["initial_loss"]
    both = _arm_steps(res, "all")
    assert (
        all(s["bonus"] > 0 for s in both) and res["max_abs_opsd_term"]["all"] > 0
    )  # bonus and OPSD together
    assert res["max_abs_opsd_term"]["bonus"] == 0.0 and all(
        s["bonus"] == 0.0 for s in _arm_steps(res, "opsd")
    )
    assert "all three" in table


@pytest.mark.slow
def test_webshop_rlvr_scripts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    if _corpora.webshop_data_dir() is None:
        pytest.skip(
            "the WebShop catalogue is not present ($XTREE_WEBSHOP_DATA or ../shared/reference/webshop)"
        )
    res, table = _run("table5_webshop_rlvr", tmp_path / "t5", capsys)
    assert res["nodes"]["xtree-50"] > 0 and f"| 50 | {res['nodes']['xtree-50']} |" in table
    res, table = _run("table4_warm_starts", tmp_path / "t4", capsys)
    n40 = res["sizes"]["40"] if "40" in res["sizes"] else res["sizes"][40]
    assert n40["sft"]["final_loss"] < n40["sft"]["initial_loss"] and "| 40 |" in table
