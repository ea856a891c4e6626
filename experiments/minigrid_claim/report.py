"""The claim check's numbers: per (arm, n) summary, the markdown table, the learning-curve figure."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from xtree_gym._io import atomic_write_text
from xtree_gym.render.figures import save_png

if TYPE_CHECKING:
    from .run import ClaimConfig

LABELS = {"outcome": "outcome only", "xtree": "+ X-Tree bonus", "random_tree": "+ random-tree bonus"}


def moving(x: list[float], w: int) -> list[float]:
    """Trailing mean over the last ``w`` values (fewer at the start).

    Example:
        >>> moving([0.0, 1.0, 1.0, 0.0], 2)
        [0.0, 0.5, 1.0, 0.5]
    """
    return [float(np.mean(x[max(0, i - w + 1) : i + 1])) for i in range(len(x))]


def episodes_to(curve: list[float], target: float, w: int, per_update: int) -> int | None:
    """Episodes until the ``w``-update moving success first reaches ``target`` (None: never).

    A target of 0 is reached by any run at once, so it counts only when the curve is above 0.

    Example:
        >>> episodes_to([0.0, 0.2, 0.6, 0.8], 0.5, 2, 32)  # moving: 0, .1, .4, .7
        128
        >>> episodes_to([0.0, 0.0], 0.0, 1, 32) is None
        True
    """
    for i, m in enumerate(moving(curve, w)):
        if m >= target and m > 0:
            return (i + 1) * per_update
    return None


def _stats(xs: list[float]) -> dict[str, float]:
    a = np.array(xs, dtype=float)
    return {"mean": float(a.mean()), "std": float(a.std(ddof=1)) if len(a) > 1 else 0.0,
            "min": float(a.min()), "max": float(a.max())}  # fmt: skip


def summarize(cfg: ClaimConfig, runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (n, arm): episodes to the outcome arm's final success, final success, λ_g."""
    rows = []
    w = cfg.window
    for n in cfg.group_sizes:
        final = {
            arm: [float(np.mean(r["curve"]["success"][-w:])) for r in runs if r["n"] == n and r["arm"] == arm]
            for arm in cfg.arms
        }
        target = float(np.mean(final["outcome"]))
        for arm in cfg.arms:
            mine = [r for r in runs if r["n"] == n and r["arm"] == arm]
            reach = [episodes_to(r["curve"]["success"], target, w, r["episodes_per_update"]) for r in mine]
            got = [e for e in reach if e is not None]
            lam = np.array([r["curve"]["lambda_g"] for r in mine])
            k = max(1, lam.shape[1] // 10)
            rows.append({
                "n": n, "arm": arm, "seeds": len(mine), "target_success": target,
                "episodes_to_target": reach, "episodes_to_target_median": float(np.median(got)) if got else None,
                "reached": len(got),
                "final_train_success": _stats(final[arm]),
                "eval_success": _stats([r["eval_success"] for r in mine]),
                "mean_train_success": _stats([float(np.mean(r["curve"]["success"])) for r in mine]),
                "lambda_g_first10pct": float(lam[:, :k].mean()), "lambda_g_last10pct": float(lam[:, -k:].mean()),
                "lambda_g_mean": float(lam.mean()),
                "no_signal_groups": float(np.mean([np.mean(r["curve"]["no_signal"]) for r in mine])),
                "all_fail_groups": float(np.mean([np.mean(r["curve"]["all_fail"]) for r in mine])),
                "mean_bonus": float(np.mean([np.mean(r["curve"]["bonus"]) for r in mine])),
            })  # fmt: skip
    return rows


def _pm(s: dict[str, float]) -> str:
    return f"{s['mean']:.2f} ± {s['std']:.2f}"


def table(cfg: ClaimConfig, results: dict[str, Any]) -> str:
    """The markdown table (one row per n and arm) with the run's provenance underneath."""
    total = cfg.updates * cfg.batch_episodes
    lines = [
        f"# MiniGrid claim check: {cfg.env_id}, max_steps {cfg.max_steps}",
        "",
        f"{len(cfg.seeds)} seeds per cell; {cfg.updates} updates x {cfg.batch_episodes} episodes = {total} "
        f"training episodes per run. Target = the outcome-only arm's final training success at that n "
        f"(mean over seeds of the last {cfg.window} updates). Success ± sample std over seeds.",
        "",
        "| n | arm | episodes to target (median, reached/seeds) | final train success | held-out success "
        "| mean train success | λ_g first 10 % → last 10 % | no-signal groups |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in results["summary"]:
        med = row["episodes_to_target_median"]
        reach = "never" if med is None else f"{med:.0f}"
        lines.append(
            f"| {row['n']} | {LABELS[row['arm']]} | {reach} ({row['reached']}/{row['seeds']}) "
            f"| {_pm(row['final_train_success'])} | {_pm(row['eval_success'])} | {_pm(row['mean_train_success'])} "
            f"| {row['lambda_g_first10pct']:.2f} → {row['lambda_g_last10pct']:.2f} | {row['no_signal_groups']:.2f} |"
        )
    tr, c, t = results["trees"], results["corpus"], results["timing"]
    lines += [
        "",
        "Target success per n: "
        + ", ".join(
            f"n={r['n']}: {r['target_success']:.3f}" for r in results["summary"] if r["arm"] == "outcome"
        ),
        "",
        f"Mining corpus: {c['episodes']} scripted-solver episodes ({c['successes']} successes), "
        f"mean length {c['mean_length']:.1f}. X-Tree: {tr['xtree']['nodes']} nodes, lengths "
        f"{tr['xtree']['length_histogram']}; random tree (seed {tr['random_tree']['seed']}): "
        f"{tr['random_tree']['nodes']} nodes, lengths {tr['random_tree']['length_histogram']}.",
        "",
        f"λ_g is Eq. 3's weight from each group's win rate (λ0 = {cfg.lambda0}, w_ref = {cfg.w_ref}); the "
        "outcome arm's λ_g is what Eq. 3 would have used (it adds no bonus). No-signal groups: share of "
        "groups whose rewards were all equal (zero advantage, no gradient).",
        "",
        f"Time: {t['wall_seconds']:.0f} s wall, {t['cpu_seconds_runs']:.0f} s CPU in the runs, "
        f"load average at the end {t['loadavg_end'][0]:.1f} on {t['cpus']} CPUs.",
        "",
    ]
    return "\n".join(lines)


def _save_png(fig: Any, path: Path) -> None:
    save_png(fig, path, dpi=110, tight=False)


def figure(cfg: ClaimConfig, results: dict[str, Any], path: Path) -> None:
    """Success (top) and λ_g (bottom) vs training episodes, one column per n, mean ± std over seeds."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = len(cfg.group_sizes)
    fig, axes = plt.subplots(2, cols, figsize=(3.2 * cols, 5.4), sharex=True, squeeze=False)
    colors = {"outcome": "tab:gray", "xtree": "tab:green", "random_tree": "tab:orange"}
    x = np.arange(1, cfg.updates + 1) * cfg.batch_episodes
    for j, n in enumerate(cfg.group_sizes):
        for arm in cfg.arms:
            mine = [r for r in results["runs"] if r["n"] == n and r["arm"] == arm]
            for row, key in ((0, "success"), (1, "lambda_g")):
                ys = np.array([moving(r["curve"][key], cfg.window) for r in mine])
                m, s = ys.mean(0), ys.std(0)
                ax = axes[row][j]
                ax.plot(x, m, color=colors[arm], label=LABELS[arm], lw=1.6)
                ax.fill_between(x, m - s, m + s, color=colors[arm], alpha=0.15, lw=0)
        axes[0][j].set_title(f"n = {n}")
        axes[1][j].set_xlabel("training episodes")
        axes[0][j].set_ylim(-0.02, 1.02)
        axes[1][j].set_ylim(-0.02, cfg.lambda0 + 0.05)
    axes[0][0].set_ylabel(f"success (moving {cfg.window} updates)")
    axes[1][0].set_ylabel("λ_g (mean over groups)")
    axes[0][0].legend(fontsize=7, loc="upper left")
    fig.suptitle(f"GRPO on {cfg.env_id}: {len(cfg.seeds)} seeds, mean ± std", fontsize=10)
    fig.tight_layout()
    _save_png(fig, path)
    plt.close(fig)


def write_report(cfg: ClaimConfig, results: dict[str, Any], out_dir: Path) -> None:
    """``table.md`` and ``curves.png`` in ``out_dir``."""
    atomic_write_text(out_dir / "table.md", table(cfg, results))
    figure(cfg, results, out_dir / "curves.png")
    assert all(math.isfinite(r["lambda_g_mean"]) for r in results["summary"])
