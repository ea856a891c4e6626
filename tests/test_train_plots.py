"""``xtree plot-run``: learning curves and λ_g vs win rate drawn from a run folder's metrics.jsonl."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from xtree_gym.cli import main


def _run(folder: Path, lines: list[dict]) -> Path:
    folder.mkdir(parents=True)
    (folder / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines) + "{cut by a cra")
    return folder


def test_plot_run_writes_both_figures(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("matplotlib")
    lines = [
        {
            "step": s,
            "reward": 0.1 * s,
            "win_rate": 0.1 * s,
            "lambda_g": 0.75 * max(0.0, 1 - 0.1 * s / 0.4),
            "loss": 1.0 / s,
            "kl": 0.01 * s,
            "entropy": 2.0,
            "invalid_rate": 0.5 / s,
            "bonus": 1.0,
        }
        for s in range(1, 7)
    ]
    lines[2]["eval_success_rate"] = 0.3
    a = _run(tmp_path / "xtree", lines)
    b = _run(tmp_path / "none", [{k: v for k, v in x.items() if k != "lambda_g"} for x in lines])
    assert main(["plot-run", str(a), str(b), "-o", str(tmp_path / "fig")]) == 0
    for name in ("learning_curves.png", "lambda_vs_win_rate.png"):
        png = tmp_path / "fig" / name
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000
    assert "wrote" in capsys.readouterr().out


def test_plot_run_without_metrics_is_one_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plot-run", str(tmp_path), "-o", str(tmp_path / "fig")]) == 1
    assert "holds no metrics.jsonl" in capsys.readouterr().err


def test_plots_have_integer_steps_plain_numbers_and_say_when_shaping_is_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("matplotlib")
    from matplotlib.ticker import MaxNLocator

    from xtree_gym.agents.run import plots

    figures = []
    monkeypatch.setattr(plots, "save_png", lambda fig, path, **kw: figures.append(fig))
    lines = [{"step": s, "reward": 1e-4 * s + 0.25, "win_rate": 0.0, "lambda_g": 0.75} for s in range(1, 3)]
    run = _run(tmp_path / "smoke", lines)
    (run / "config.json").write_text(json.dumps({"shaping": "none"}))
    plots.plot_runs([run], tmp_path / "fig")
    curves, lam = figures
    reward_ax = next(ax for ax in curves.axes if ax.get_title() == "reward")
    reward_ax.figure.canvas.draw()
    assert isinstance(reward_ax.xaxis.get_major_locator(), MaxNLocator)
    assert all(float(t).is_integer() for t in reward_ax.get_xticks())  # steps 1, 2: no 1.25
    assert reward_ax.yaxis.get_offset_text().get_text() == ""  # 0.2501 reads as itself, no "+2.5e-1"
    note = " ".join(t.get_text() for ax in lam.axes for t in ax.texts)
    assert "smoke: shaping none" in note and "no λ_g" in note
