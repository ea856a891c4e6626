"""Committed results stay current: each results/ folder names the commit and config that made it, and the
cheap ones are regenerated here and compared with what is committed (a code change that moves a number
fails until the result is re-run: ``python -m experiments.NAME`` with the command in its provenance.json)."""

from __future__ import annotations

import importlib
import json
import shlex
from pathlib import Path
from typing import Any

import pytest

from experiments import _corpora

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results"
CHEAP = ("figure5_tiling", "table5_mining_size", "table6_trees", "tables13_14_case_study")
"""Regenerated at their committed size (each under ~10 s on one core)."""
REDUCED = {"minigrid_claim_reduced": "minigrid_claim.run"}
"""Reduced committed results of expensive experiments: folder -> experiment module."""
NEEDS_WEBSHOP = {"table5_mining_size", "table6_trees", "tables13_14_case_study"}
VOLATILE = {"code", "machine", "timing", "seconds", "cpu_seconds", "cpu_seconds_per_run", "wall_seconds"}
"""Keys that record the commit, the machine and the clock, not the result."""


def stable(x: Any) -> Any:
    """``x`` without the :data:`VOLATILE` keys, at any depth."""
    if isinstance(x, dict):
        return {k: stable(v) for k, v in x.items() if k not in VOLATILE}
    if isinstance(x, list):
        return [stable(v) for v in x]
    return x


def test_every_results_folder_records_its_commit_and_config() -> None:
    folders = sorted(p for p in RESULTS.iterdir() if (p / "results.json").is_file())  # finished folders
    assert folders
    for folder in folders:
        prov = json.loads((folder / "provenance.json").read_text(encoding="utf-8"))
        assert len(prov["commit"]) == 40 and prov["config"], folder.name
        assert prov["command"].startswith("python -m experiments."), folder.name


def _regenerate(folder: str, module: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    if folder in NEEDS_WEBSHOP and _corpora.webshop_data_dir() is None:
        pytest.skip(
            "the WebShop catalogue is not present ($XTREE_WEBSHOP_DATA or ../shared/reference/webshop)"
        )
    prov = json.loads((RESULTS / folder / "provenance.json").read_text(encoding="utf-8"))
    args = shlex.split(prov["command"])[3:]  # after "python -m experiments.NAME"
    args = [a for i, a in enumerate(args) if a != "--out" and (i == 0 or args[i - 1] != "--out")]
    monkeypatch.chdir(ROOT)
    out = tmp_path / folder
    assert importlib.import_module(f"experiments.{module}").main([*args, "--out", str(out)]) == 0
    return out


@pytest.mark.parametrize("folder", CHEAP + tuple(REDUCED))
def test_committed_result_is_what_the_code_gives(
    folder: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if folder in REDUCED:
        pytest.importorskip("minigrid")
    out = _regenerate(folder, REDUCED.get(folder, folder), tmp_path, monkeypatch)
    committed = RESULTS / folder
    new = json.loads((out / "results.json").read_text(encoding="utf-8"))
    old = json.loads((committed / "results.json").read_text(encoding="utf-8"))
    assert stable(new) == stable(old), (
        f"results/{folder} is stale: re-run it (command in its provenance.json)"
    )
    if folder not in REDUCED:  # the claim check's table states its timing
        assert (out / "table.md").read_text(encoding="utf-8") == (committed / "table.md").read_text(
            encoding="utf-8"
        )
