"""PNG figures of training runs: learning curves, and λ_g against the win rate (X-Tree Fig. 7).

Reads only ``RUN/metrics.jsonl``; several runs share each panel (one line per run, labelled by
the folder name), so ablations compare at a glance. Needs matplotlib (``xtree_gym[render]``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import missing_dependency
from ..render.figures import save_png
from .metrics import read_metrics

CURVES = ("reward", "win_rate", "loss", "kl", "entropy", "invalid_rate", "bonus", "eval_success_rate")
"""Metrics drawn as learning curves (missing ones are skipped)."""


def series(lines: Sequence[dict[str, Any]], key: str) -> tuple[list[int], list[float]]:
    """``(steps, values)`` of one metric, skipping lines without it.

    Example:
        >>> series([{"step": 1, "kl": 0.5}, {"step": 2}, {"step": 3, "kl": 0.25}], "kl")
        ([1, 3], [0.5, 0.25])
    """
    xs: list[int] = []
    ys: list[float] = []
    for line in lines:
        value = line.get(key)
        if isinstance(value, (int, float)):
            xs.append(int(line.get("step", len(xs) + 1)))
            ys.append(float(value))
    return xs, ys


def _checked(lines: list[dict[str, Any]], run: str | Path) -> list[dict[str, Any]]:
    """``lines`` when every ``step`` is an integer; else one :class:`ConfigError` naming the line."""
    from ..errors import ConfigError

    for i, line in enumerate(lines, start=1):
        step = line.get("step")
        if step is not None and (isinstance(step, bool) or not isinstance(step, int)):
            raise ConfigError(
                f"step = {step!r} is not an integer",
                where=f"{Path(run) / 'metrics.jsonl'}: record {i}",
                fix="plot a run folder written by `xtree train` (its metrics.jsonl numbers every step)",
            )
    return lines


def _pyplot() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise missing_dependency("matplotlib", "render", "xtree plot-run") from exc
    return plt


def plot_runs(runs: Sequence[str | Path], output: str | Path) -> list[Path]:
    """Write ``learning_curves.png`` and ``lambda_vs_win_rate.png`` into ``output``."""
    plt = _pyplot()
    out = Path(output)
    out.mkdir(parents=True, exist_ok=True)
    data = {Path(r).name or str(r): _checked(read_metrics(r), r) for r in runs}
    keys = [k for k in CURVES if any(series(lines, k)[0] for lines in data.values())]
    cols = 2
    rows = max(1, (len(keys) + cols - 1) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(10, 3 * rows), squeeze=False)
    for ax, key in zip(axes.flat, keys):
        for name, lines in data.items():
            xs, ys = series(lines, key)
            ax.plot(xs, ys, marker="o" if len(xs) < 20 else None, label=name)
        ax.set_title(key)
        ax.set_xlabel("step")
    for ax in list(axes.flat)[len(keys) :]:
        ax.axis("off")
    if data:
        axes.flat[0].legend(fontsize=7)
    fig.tight_layout()
    curves = out / "learning_curves.png"
    save_png(fig, curves, dpi=110, tight=False)
    plt.close(fig)

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.5))
    for name, lines in data.items():
        xs, win = series(lines, "win_rate")
        _, lam = series(lines, "lambda_g")
        left.plot(xs, win, label=f"{name} win rate")
        left.plot(xs[: len(lam)], lam, linestyle="--", label=f"{name} λ_g")
        right.scatter(win[: len(lam)], lam, s=12, label=name)
    left.set_xlabel("step")
    left.set_title("win rate and λ_g over training")
    left.legend(fontsize=7)
    right.set_xlabel("group win rate (step mean)")
    right.set_ylabel("λ_g (step mean)")
    right.set_title("λ_g against win rate (Fig. 7)")
    fig.tight_layout()
    lam_png = out / "lambda_vs_win_rate.png"
    save_png(fig, lam_png, dpi=110, tight=False)
    plt.close(fig)
    return [curves, lam_png]
