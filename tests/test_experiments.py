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

MODULES = [
    "_results",
    "_corpora",
    "table5_mining_size",
    "table6_trees",
    "tables13_14_case_study",
    "figure5_tiling",
]


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
