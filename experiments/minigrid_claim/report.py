"""The claim check's numbers: per (arm, n) summary, paired sign-flip tests, the tables, the figure, the curves.

Metrics per run: final training success (mean of the last ``window`` updates), held-out success,
area under the success curve (mean success over all updates, 0..1), episodes until the moving
success first reaches each fixed threshold (``thresholds``; a run that never does counts as
``budget + one update`` in the paired test). Arms are compared per n by the paired sign-flip test
over seeds (:func:`sign_flip_p`, exact up to 20 seeds).
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path
from typing import Any

import numpy as np

from experiments._results import write_provenance
from xtree_gym.corpus.io import atomic_write_text
from xtree_gym.render.figures import save_png

from .config import ARM_SPECS, ClaimConfig

LABELS = {
    "outcome": "outcome only", "xtree": "+ X-Tree bonus", "random_tree": "+ random-tree bonus",
    "xtree_normalized": "+ X-Tree, normalized (a)", "xtree_gated": "+ X-Tree, gated (b)",
    "xtree_annealed": "+ X-Tree, annealed (c)", "subgoal": "+ subgoal shaping", "remine": "+ in-loop tree",
    "xtree_contrastive_gated": "+ X-Tree, contrastive gated", "xtree_contrastive_normalized":
    "+ X-Tree, contrastive normalized", "xtree_potential": "+ X-Tree, potential-based",
    "random_tree_contrastive_gated": "+ random tree, contrastive gated",
    "self_mined": "+ self-mined tree (own episodes)",
}  # fmt: skip
COLORS = {
    "outcome": "tab:gray", "xtree": "tab:green", "random_tree": "tab:orange", "xtree_normalized": "tab:blue",
    "xtree_gated": "tab:purple", "xtree_annealed": "tab:cyan", "subgoal": "tab:red", "remine": "tab:brown",
    "xtree_contrastive_gated": "tab:olive", "xtree_contrastive_normalized": "tab:pink", "xtree_potential": "black",
    "random_tree_contrastive_gated": "gold", "self_mined": "darkgreen",
}  # fmt: skip
CONTROLS = ("random_tree", "subgoal", "remine", "self_mined")
"""Arms also compared with the X-Tree arm (does the mined structure beat them?)."""


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


def sign_flip_p(diffs: list[float], draws: int = 200_000) -> float:
    """Two-sided paired sign-flip test of mean(diffs) = 0: exact over all 2^k sign patterns (k <= 20).

    Example (4 positive differences: only all-plus and all-minus reach |mean| = 1, p = 2/16):
        >>> sign_flip_p([1.0, 1.0, 1.0, 1.0])
        0.125
        >>> sign_flip_p([1.0, -1.0]), sign_flip_p([])
        (1.0, 1.0)
    """
    d = np.asarray(diffs, dtype=float)
    if len(d) == 0 or not np.any(d):
        return 1.0
    obs = abs(d.mean()) - 1e-12
    if len(d) <= 20:
        signs = np.array(list(itertools.product((1.0, -1.0), repeat=len(d))))
    else:  # seeded Monte Carlo beyond 2^20 patterns
        signs = np.random.default_rng(0).choice((1.0, -1.0), size=(draws, len(d)))
    return float(np.mean(np.abs(signs @ d) / len(d) >= obs))


def run_metrics(r: dict[str, Any], w: int, thresholds: tuple[float, ...]) -> dict[str, Any]:
    """One run's final / held-out success, AUC and episodes to each threshold (None: never)."""
    s = r["curve"]["success"]
    per = r["episodes_per_update"]
    return {"final": float(np.mean(s[-w:])), "eval": float(r["eval_success"]), "auc": float(np.mean(s)),
            "budget": len(s) * per, **{f"to_{t:g}": episodes_to(s, t, w, per) for t in thresholds}}  # fmt: skip


def _stats(xs: list[float]) -> dict[str, float]:
    a = np.array(xs, dtype=float)
    return {"mean": float(a.mean()), "std": float(a.std(ddof=1)) if len(a) > 1 else 0.0,
            "min": float(a.min()), "max": float(a.max())}  # fmt: skip


def summarize(cfg: ClaimConfig, runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (n, arm) with runs: success, AUC, episodes to thresholds, λ_g, bonus, CPU seconds."""
    rows = []
    for n in cfg.group_sizes:
        for arm in cfg.arms:
            mine = [r for r in runs if r["n"] == n and r["arm"] == arm]
            if not mine:
                continue
            m = [run_metrics(r, cfg.window, cfg.thresholds) for r in mine]
            lam = np.array([r["curve"]["lambda_g"] for r in mine])
            k = max(1, lam.shape[1] // 10)
            row: dict[str, Any] = {
                "n": n, "arm": arm, "seeds": len(mine), "seed_list": [r["seed"] for r in mine],
                "final_train_success": _stats([x["final"] for x in m]),
                "eval_success": _stats([x["eval"] for x in m]),
                "auc": _stats([x["auc"] for x in m]),
                "lambda_g_first10pct": float(lam[:, :k].mean()), "lambda_g_last10pct": float(lam[:, -k:].mean()),
                "lambda_g_mean": float(lam.mean()),
                "no_signal_groups": float(np.mean([np.mean(r["curve"]["no_signal"]) for r in mine])),
                "all_fail_groups": float(np.mean([np.mean(r["curve"]["all_fail"]) for r in mine])),
                "mean_bonus": float(np.mean([np.mean(r["curve"]["bonus"]) for r in mine])),
                "cpu_seconds_per_run": float(np.mean([r.get("cpu_seconds", r["seconds"]) for r in mine])),
            }  # fmt: skip
            for t in cfg.thresholds:
                reach = [x[f"to_{t:g}"] for x in m]
                got = [e for e in reach if e is not None]
                row[f"episodes_to_{t:g}"] = reach
                row[f"episodes_to_{t:g}_median"] = float(np.median(got)) if got else None
                row[f"reached_{t:g}"] = len(got)
            rows.append(row)
    return rows


def paired(
    cfg: ClaimConfig, runs: list[dict[str, Any]], n: int, arm: str, base: str
) -> dict[str, Any] | None:
    by = {(r["arm"], r["seed"]): run_metrics(r, cfg.window, cfg.thresholds) for r in runs if r["n"] == n}
    seeds = sorted(s for (a, s) in by if a == arm and (base, s) in by)
    if not seeds:
        return None
    out: dict[str, Any] = {"n": n, "arm": arm, "vs": base, "seeds": len(seeds)}
    keys = ["final", "eval", "auc"] + [f"to_{t:g}" for t in cfg.thresholds]
    for key in keys:

        def val(a: str, s: int, key: str = key) -> float:
            v = by[(a, s)][key]
            return float(by[(a, s)]["budget"] + by[(a, s)]["budget"] / cfg.updates) if v is None else float(v)

        d = [val(arm, s) - val(base, s) for s in seeds]
        if key.startswith("to_"):
            d = [-x for x in d]  # fewer episodes is better: positive = arm ahead
        out[key] = {"mean_diff": float(np.mean(d)), "ahead": sum(x > 0 for x in d), "tied": sum(x == 0 for x in d),
                    "behind": sum(x < 0 for x in d), "p": sign_flip_p(d)}  # fmt: skip
    return out


def compare(cfg: ClaimConfig, runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Paired comparisons per n: every arm vs outcome; the controls also vs the X-Tree arm; ``self_mined`` also
    vs the subgoals and the solver-valued tree (issue 42's three pairs)."""
    pairs = [(a, "outcome") for a in cfg.arms if a != "outcome"]
    if "xtree" in cfg.arms:
        pairs += [(a, "xtree") for a in cfg.arms if a in CONTROLS]
    if "random_tree_contrastive_gated" in cfg.arms and "xtree_contrastive_gated" in cfg.arms:
        pairs.append(("xtree_contrastive_gated", "random_tree_contrastive_gated"))
    if "self_mined" in cfg.arms:
        pairs += [("self_mined", b) for b in ("subgoal", "xtree_contrastive_gated") if b in cfg.arms]
    out = [paired(cfg, runs, n, a, b) for n in cfg.group_sizes for a, b in pairs]
    return [c for c in out if c is not None]


MINED = tuple(a for a, (source, _) in ARM_SPECS.items() if source == "xtree")
"""Arms whose bonus comes from the mined X-Tree alone (no hand naming)."""


def best_mined(cfg: ClaimConfig, results: dict[str, Any]) -> list[dict[str, Any]]:
    """Per n: the mined arm of highest mean held-out success, paired against outcome, the random trees, subgoals."""
    out = []
    for n in cfg.group_sizes:
        rows = [r for r in results["summary"] if r["n"] == n and r["arm"] in MINED]
        if not rows:
            continue
        best = max(rows, key=lambda r: (r["eval_success"]["mean"], r["final_train_success"]["mean"]))["arm"]
        bases = [
            b for b in ("outcome", "random_tree", "random_tree_contrastive_gated", "subgoal") if b in cfg.arms
        ]
        for b in bases:
            c = paired(cfg, results["runs"], n, best, b)
            if c is not None:
                out.append(c)
    return out


def _pair_line(c: dict[str, Any], cfg: ClaimConfig) -> str:
    f = c["final"]
    cells = [f"{f['mean_diff']:+.3f} ({f['ahead']}/{f['tied']}/{f['behind']}, p={f['p']:.3g})"]
    cells += [f"{c[k]['mean_diff']:+.3f} (p={c[k]['p']:.3g})" for k in ("eval", "auc")]
    cells += [
        f"{0.0 - c[f'to_{t:g}']['mean_diff'] + 0.0:+.0f} (p={c[f'to_{t:g}']['p']:.3g})"
        for t in cfg.thresholds
    ]
    return (
        f"| {c['n']} | {c['arm']} | {c['vs']} | {c['seeds']} | "
        + " | ".join(cells)
        + f" | {verdict(c, 'eval')} |"
    )


def verdict(c: dict[str, Any], key: str, alpha: float = 0.05) -> str:
    """``favours ARM`` / ``favours BASE`` when p < alpha, else ``no difference detected``.

    Example:
        >>> verdict({"arm": "xtree", "vs": "outcome", "final": {"mean_diff": 0.2, "p": 0.01}}, "final")
        'favours xtree'
    """
    s = c[key]
    if s["p"] >= alpha:
        return "no difference detected"
    return f"favours {c['arm'] if s['mean_diff'] > 0 else c['vs']}"


def _pm(s: dict[str, float]) -> str:
    return f"{s['mean']:.2f} ± {s['std']:.2f}"


def _reach(row: dict[str, Any], t: float) -> str:
    med = row[f"episodes_to_{t:g}_median"]
    return f"{'never' if med is None else f'{med:.0f}'} ({row[f'reached_{t:g}']}/{row['seeds']})"


def table(cfg: ClaimConfig, results: dict[str, Any]) -> str:
    """The markdown report: one row per n and arm, the paired tests, the provenance of the inputs."""
    total = cfg.updates * cfg.batch_episodes
    th = ", ".join(f"{t:g}" for t in cfg.thresholds)
    lines = [
        f"# MiniGrid claim check: {cfg.env_id}, max_steps {cfg.max_steps}",
        "",
        f"Seeds {list(cfg.seeds)}; {cfg.updates} updates x {cfg.batch_episodes} episodes = {total} training "
        f"episodes per run. Final = mean training success of the last {cfg.window} updates; AUC = mean "
        f"training success over the run; episodes to {th} = first update whose {cfg.window}-update moving "
        "success reaches it (median over the seeds that did, reached/seeds). Success ± sample std over seeds.",
        "",
        "| n | arm | final train success | held-out success | AUC | "
        + " | ".join(f"episodes to {t:g}" for t in cfg.thresholds)
        + " | λ first → last 10 % | mean Σ bonus | no-signal groups | CPU s/run |",
        "|---|---|---|---|---|" + "---|" * len(cfg.thresholds) + "---|---|---|---|",
    ]
    for row in results["summary"]:
        lines.append(
            f"| {row['n']} | {LABELS[row['arm']]} | {_pm(row['final_train_success'])} | {_pm(row['eval_success'])} "
            f"| {_pm(row['auc'])} | "
            + " | ".join(_reach(row, t) for t in cfg.thresholds)
            + f" | {row['lambda_g_first10pct']:.2f} → {row['lambda_g_last10pct']:.2f} | {row['mean_bonus']:.2f} "
            f"| {row['no_signal_groups']:.2f} | {row['cpu_seconds_per_run']:.0f} |"
        )
    lines += ["", "## Paired sign-flip tests over seeds (two-sided; Δ = arm − baseline, episodes: fewer = ahead)", "",
              "| n | arm | vs | seeds | Δ final (ahead/tied/behind, p) | Δ held-out (p) | Δ AUC (p) | "
              + " | ".join(f"Δ episodes to {t:g} (p)" for t in cfg.thresholds) + " | verdict (held-out, p < 0.05) |",
              "|---|---|---|---|---|---|---|" + "---|" * len(cfg.thresholds) + "---|"]  # fmt: skip
    head = lines[-2:]
    lines += [_pair_line(c, cfg) for c in results["comparisons"]]
    best = best_mined(cfg, results)
    if best:
        lines += ["", "## Best mined design per n (highest mean held-out success among the X-Tree arms)", "",
                  *head, *(_pair_line(c, cfg) for c in best)]  # fmt: skip
    lines += ["", *_inputs(cfg, results), ""]
    return "\n".join(lines)


def _random_tree_text(tr: dict[str, Any]) -> str:
    rt = tr["random_tree"]["per_seed"]
    if not rt:
        return "not run"
    same = all(v["length_histogram"] == tr["xtree"]["length_histogram"] for v in rt.values())
    draws = (
        "one draw shared by every seed"
        if tr["random_tree"]["mode"] == "closest"
        else f"{len(rt)} draws, one per seed"
    )
    return f"{draws}, length histogram {'equal to' if same else 'differing from'} the X-Tree's"


def _inputs(cfg: ClaimConfig, results: dict[str, Any]) -> list[str]:
    tr, c, t, sp = results["trees"], results["corpus"], results["timing"], results["split"]
    held = (f"held-out layouts: training seeds from {sp['train_seed_count']} seeds over {sp['train_layouts']} "
            f"layouts, evaluation on {sp['eval_layouts']} other layouts ({sp['shared_layouts']} shared)"
            if sp["heldout"] == "layouts" else "held-out seeds 20000+ (layouts may repeat training ones)")  # fmt: skip
    return [
        f"Mining corpus: {c['episodes']} scripted-solver episodes ({c['successes']} successes), mean length "
        f"{c['mean_length']:.1f}. X-Tree: {tr['xtree']['nodes']} nodes, lengths {tr['xtree']['length_histogram']}, "
        f"largest reachable Σ b_v {tr['xtree']['max_episode_bonus']:.1f}. Random tree ({tr['random_tree']['mode']}): "
        + _random_tree_text(tr)
        + ". Subgoal shaping: "
        + f"{', '.join(tr['subgoal']['subgoals'])}, {tr['subgoal']['value_each']:.2f} each. {held}.",
        "",
        f"λ is the bonus weight of each arm's mode (Eq. 3's λ_g: λ0 = {cfg.lambda0}, w_ref = {cfg.w_ref}; the outcome "
        "arm's is what Eq. 3 would have used). No-signal groups: share of groups with zero advantage.",
        "",
        f"Time: {t['wall_seconds']:.0f} s wall, {t['cpu_seconds_runs']:.0f} s CPU in the runs, "
        f"load average at the end {t['loadavg_end'][0]:.1f} on {t['cpus']} CPUs.",
    ]


def figure(cfg: ClaimConfig, results: dict[str, Any], path: Path) -> None:
    """Success (top) and λ (bottom) vs training episodes, one column per n, mean ± std over seeds."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = len(cfg.group_sizes)
    fig, axes = plt.subplots(2, cols, figsize=(3.6 * cols, 5.6), sharex=True, squeeze=False)
    x = np.arange(1, cfg.updates + 1) * cfg.batch_episodes
    for j, n in enumerate(cfg.group_sizes):
        for arm in cfg.arms:
            mine = [r for r in results["runs"] if r["n"] == n and r["arm"] == arm]
            if not mine:
                continue
            for row, key in ((0, "success"), (1, "lambda_g")):
                ys = np.array([moving(r["curve"][key], cfg.window) for r in mine])
                m, s = ys.mean(0), ys.std(0)
                ax = axes[row][j]
                ax.plot(x, m, color=COLORS[arm], label=LABELS[arm], lw=1.4)
                ax.fill_between(x, m - s, m + s, color=COLORS[arm], alpha=0.10, lw=0)
        axes[0][j].set_title(f"n = {n}")
        axes[1][j].set_xlabel("training episodes")
        axes[0][j].set_ylim(-0.02, 1.02)
        axes[1][j].set_ylim(-0.02, cfg.lambda0 + 0.05)
    axes[0][0].set_ylabel(f"success (moving {cfg.window} updates)")
    axes[1][0].set_ylabel("bonus weight λ (mean over groups)")
    axes[0][0].legend(fontsize=6, loc="upper left")
    fig.suptitle(f"GRPO on {cfg.env_id}: seeds {len(cfg.seeds)}, mean ± std", fontsize=10)
    fig.tight_layout()
    save_png(fig, path, dpi=110, tight=False)
    plt.close(fig)


CURVE_KEYS = ("success", "lambda_g", "bonus", "all_fail", "no_signal", "length", "tree_nodes")


def write_curves(folder: Path, runs: list[dict[str, Any]]) -> None:
    """``folder/ARM-nN-sSEED.csv`` per run: one line per update (episodes seen, then :data:`CURVE_KEYS`)."""
    folder.mkdir(parents=True, exist_ok=True)
    for r in runs:
        cur = r["curve"]
        keys = [k for k in CURVE_KEYS if k in cur]
        rows = ["episodes," + ",".join(keys)]
        for i in range(len(cur["success"])):
            rows.append(f"{(i + 1) * r['episodes_per_update']}," + ",".join(f"{cur[k][i]:.6g}" for k in keys))
        atomic_write_text(folder / f"{r['arm']}-n{r['n']}-s{r['seed']}.csv", "\n".join(rows) + "\n")


def write_report(
    cfg: ClaimConfig, results: dict[str, Any], out_dir: Path, argv: list[str] | None = None
) -> None:
    """``table.md``, ``curves.png`` and ``provenance.json`` in ``out_dir`` (adds ``comparisons`` to results)."""
    results.setdefault("comparisons", compare(cfg, results["runs"]))
    atomic_write_text(out_dir / "table.md", table(cfg, results))
    figure(cfg, results, out_dir / "curves.png")
    write_provenance(out_dir, "experiments.minigrid_claim", results["config"], argv, results.get("code"))
    assert all(math.isfinite(r["lambda_g_mean"]) for r in results["summary"])
