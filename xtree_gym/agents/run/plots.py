"""PNG figures of training runs: learning curves, and λ_g against the win rate (X-Tree Fig. 7).

Reads only ``RUN/metrics.jsonl``; several runs share each panel (one line per run, labelled by
the folder name), so ablations compare at a glance. Needs matplotlib (``xtree_gym[render]``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ...errors import missing_dependency
from ...render.figures import save_png
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
    from ...errors import ConfigError

    for i, line in enumerate(lines, start=1):
        step = line.get("step", 0)  # absent: numbered by position; present, it must be an integer
        if isinstance(step, bool) or not isinstance(step, int):
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


def _axes_style(ax: Any) -> None:
    """Integer steps on x; plain numbers on y (no ``1e-3`` or ``+0.25`` offset label to decode)."""
    from matplotlib.ticker import MaxNLocator, ScalarFormatter

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    fmt = ScalarFormatter(useOffset=False)
    fmt.set_scientific(False)
    ax.yaxis.set_major_formatter(fmt)


def _shaping(run: str | Path) -> str | None:
    """The run's ``shaping`` from its ``config.json`` (None when there is none or it cannot be read)."""
    import json

    try:
        value = json.loads((Path(run) / "config.json").read_text(encoding="utf-8")).get("shaping")
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, str) else None


def plot_runs(runs: Sequence[str | Path], output: str | Path) -> list[Path]:
    """Write ``learning_curves.png`` and ``lambda_vs_win_rate.png`` into ``output``.

    A PNG path in ``output`` that is (a link to) a run's ``metrics.jsonl`` or ``config.json`` is refused
    before anything is written (:func:`~xtree_gym.corpus.io.protect_inputs`), and so is a link to any
    other file (:func:`~xtree_gym.corpus.outfolder.output_folder`).
    """
    from ...corpus.io import protect_inputs
    from ...corpus.outfolder import output_folder

    inputs = [Path(r) / name for r in runs for name in ("metrics.jsonl", "config.json")]
    with protect_inputs(inputs), output_folder(output):
        return _plot_runs(runs, output)


def _plot_runs(runs: Sequence[str | Path], output: str | Path) -> list[Path]:
    from ...corpus.outfolder import make_output_folder

    plt = _pyplot()
    out = Path(output)
    make_output_folder(out)
    data = {Path(r).name or str(r): _checked(read_metrics(r), r) for r in runs}
    shaping = {Path(r).name or str(r): _shaping(r) for r in runs}
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
        _axes_style(ax)
    for ax in list(axes.flat)[len(keys) :]:
        ax.axis("off")
    if data:
        axes.flat[0].legend(fontsize=7)
    fig.tight_layout()
    curves = out / "learning_curves.png"
    save_png(fig, curves, dpi=110, tight=False)
    plt.close(fig)

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.5))
    notes = []
    for name, lines in data.items():
        xs, win = series(lines, "win_rate")
        lam_xs, lam = series(lines, "lambda_g")
        left.plot(xs, win, marker="o" if len(xs) < 20 else None, label=f"{name} win rate")
        if lam and shaping[name] != "none":
            left.plot(lam_xs, lam, linestyle="--", marker="o" if len(lam) < 20 else None, label=f"{name} λ_g")
            win_at = dict(zip(xs, win))
            pairs = [(win_at[x], y) for x, y in zip(lam_xs, lam) if x in win_at]
            right.scatter([p[0] for p in pairs], [p[1] for p in pairs], s=12, label=name)
        else:
            notes.append(f"{name}: shaping {shaping[name] or 'off'}, so no λ_g (outcome reward only)")
    if notes:
        right.text(
            0.5, 0.5, "\n".join(notes), ha="center", va="center", fontsize=8, transform=right.transAxes
        )
    left.set_xlabel("step")
    left.set_title("win rate and λ_g over training")
    left.legend(fontsize=7)
    _axes_style(left)
    right.set_xlabel("group win rate (step mean)")
    right.set_ylabel("λ_g (step mean)")
    right.set_title("λ_g against win rate (Fig. 7)")
    fig.tight_layout()
    lam_png = out / "lambda_vs_win_rate.png"
    save_png(fig, lam_png, dpi=110, tight=False)
    plt.close(fig)
    return [curves, lam_png]
