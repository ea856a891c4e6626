"""The report's figures as PNG files for papers (matplotlib, Agg backend, imported only when called).

Files written by :func:`write_figures`: ``depth_histogram.png``, ``length_histogram.png``,
``hierarchy.png``, ``success_vs_base.png`` (when a corpus with failures is given) and
``tiling_<k>.png`` for each shown trajectory. PNGs carry no timestamp, so the same inputs give the
same bytes.
"""

from __future__ import annotations

import io
import os
from collections import Counter
from pathlib import Path
from typing import Any

from ..corpus.io import atomic_write_bytes
from ..corpus.outfolder import make_output_folder, output_folder
from ..errors import missing_dependency
from .layout import hierarchy_layout, hsl_to_rgb, node_hue, pick_trajectories, tiled_cells
from .stats import CorpusUsage


def _figure(w: float, h: float) -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg", force=False)
        from matplotlib.figure import Figure
    except ImportError:
        raise missing_dependency("matplotlib", "render", "xtree plot") from None
    return Figure(figsize=(w, h), dpi=150)


def save_png(fig: Any, path: str | os.PathLike[str], *, dpi: float | None = None, tight: bool = True) -> None:
    """Write a matplotlib figure as PNG, atomically and without the timestamp that would change the bytes.

    Every PNG the toolkit writes goes through here (tree figures, learning curves, experiment plots).
    """
    buf = io.BytesIO()
    extra: dict[str, Any] = {"bbox_inches": "tight"} if tight else {}
    fig.savefig(buf, format="png", metadata={"Software": None}, dpi=dpi or "figure", **extra)
    atomic_write_bytes(path, buf.getvalue())


def _histogram(values: list[int], title: str, xlabel: str) -> Any:
    fig = _figure(4.0, 2.8)
    ax = fig.add_subplot()
    counts = sorted(Counter(values).items())
    xs, ys = [k for k, _ in counts], [v for _, v in counts]
    ax.bar(xs, ys, color="#5b8def")
    for x, y in zip(xs, ys):
        ax.annotate(str(y), (x, y), ha="center", va="bottom", fontsize=7)
    ax.set_xticks(xs)
    ax.set_title(title, fontsize=10)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("nodes")
    return fig


def success_figure(tree: Any, usage: CorpusUsage) -> Any | None:
    """Success of each node against the base rate (None when no node has a success rate)."""
    rows = [
        (n.id, r, usage.nodes[n.id].occurrences)
        for n in tree.nodes
        if (r := usage.nodes[n.id].success) is not None
    ]
    if not rows:
        return None
    rows.sort(key=lambda r: (-r[1], -r[2], r[0]))
    fig = _figure(6.0, max(2.5, 0.16 * len(rows) + 1.0))
    ax = fig.add_subplot()
    base = usage.base_rate
    ys = range(len(rows))
    lefts = [min(base, r) for _, r, _ in rows]
    widths = [max(abs(r - base), 0.004) for _, r, _ in rows]
    colors = ["#3fa46a" if r >= base else "#d9534f" for _, r, _ in rows]
    ax.barh(list(ys), widths, left=lefts, color=colors, height=0.7)
    ax.axvline(base, color="#222", linestyle="--", linewidth=1)
    ax.set_yticks(list(ys), [r[0] for r in rows], fontsize=6)
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.set_xlabel(f"share of occurrences in successful trajectories (base rate {base:.0%})")
    return fig


def hierarchy_figure(tree: Any) -> Any:
    """The merge DAG: primitives at depth 0, one column per depth."""
    pos, edges = hierarchy_layout(tree)
    index = {n.id: i for i, n in enumerate(tree.nodes)}
    rows = max((r for _, r in pos.values()), default=0) + 1
    cols = max((c for c, _ in pos.values()), default=0) + 1
    fig = _figure(1.6 * cols + 1.5, 0.17 * rows + 0.8)
    ax = fig.add_subplot()
    for parent, child in edges:
        (c1, r1), (c2, r2) = pos[parent], pos[child]
        ax.plot([c2, c1], [r2, r1], color="#8a94a3", alpha=0.35, linewidth=0.6)
    for sym, (c, r) in pos.items():
        if sym in index:
            face = hsl_to_rgb(node_hue(index[sym]), 0.6, 0.82)
            ax.text(
                c,
                r,
                sym,
                ha="center",
                va="center",
                fontsize=6,
                bbox={"boxstyle": "round", "fc": face, "lw": 0},
            )
        else:
            ax.text(c, r, sym, ha="right", va="center", fontsize=6, family="monospace")
    ax.set_xlim(-1.6, cols - 0.4)
    ax.set_ylim(rows, -1)
    ax.set_xticks(range(cols), ["primitive"] + [f"depth {d}" for d in range(1, cols)], fontsize=7)
    ax.set_yticks([])
    for side in ("left", "right", "top"):
        ax.spines[side].set_visible(False)
    return fig


def tiling_figure(tree: Any, usage: CorpusUsage, i: int) -> Any:
    """Figure-5 style: steps as rows (raw action, token), node instances as boxes to the right by depth."""
    traj, toks = usage.trajectories[i], usage.tokens[i]
    segments, cells = tiled_cells(tree, toks)
    index = {n.id: k for k, n in enumerate(tree.nodes)}
    depth_max = max((c.depth for c in cells), default=0)
    n = len(toks)
    fig = _figure(7.5 + 0.5 * depth_max, 0.24 * n + 1.2)
    ax = fig.add_subplot()
    for seg in segments:
        face = hsl_to_rgb(node_hue(index[seg.symbol]), 0.55, 0.93) if seg.is_node else (0.96, 0.96, 0.96)
        ax.axhspan(seg.start - 0.5, seg.end - 0.5, color=face, zorder=0)
    for r, (step, tok) in enumerate(zip(traj.steps, toks)):
        action = step.action if len(step.action) <= 48 else step.action[:47] + "…"
        ax.text(-7.2, r, f"{r:>2} {action}", va="center", fontsize=6.5)
        ax.text(-2.6, r, tok, va="center", fontsize=6.5, family="monospace")
    for c in cells:
        face = hsl_to_rgb(node_hue(index[c.node_id]), 0.6, 0.75)
        ax.add_patch(_rect(c.depth - 0.45, c.start - 0.42, 0.9, c.end - c.start - 0.16, face))
        ax.text(c.depth, (c.start + c.end - 1) / 2, c.node_id, ha="center", va="center", fontsize=6.5)
    ax.set_xlim(-7.3, depth_max + 0.6)
    ax.set_ylim(n - 0.5, -0.5)
    ax.set_xticks(range(1, depth_max + 1), [f"d{d}" for d in range(1, depth_max + 1)], fontsize=7)
    ax.set_yticks([])
    ok = "success" if traj.success else "failure"
    goal = traj.goal if len(traj.goal) <= 110 else traj.goal[:109] + "…"
    ax.set_title(f"{traj.id} ({traj.task or 'no task type'}, {ok})\n{goal}", fontsize=7.5, loc="left")
    return fig


def _rect(x: float, y: float, w: float, h: float, face: Any) -> Any:
    from matplotlib.patches import FancyBboxPatch

    return FancyBboxPatch(
        (x, y), w, h, boxstyle="round,pad=0,rounding_size=0.08", fc=face, ec="white", lw=0.8
    )


def write_figures(
    tree: Any, out_dir: str | os.PathLike[str], usage: CorpusUsage | None = None, max_trajectories: int = 4
) -> list[Path]:
    """Write every figure into ``out_dir``; returns the paths written, in a fixed order.

    A link found where a figure goes is refused, never written through (:func:`output_folder`).
    """
    out = Path(out_dir)
    figs: list[tuple[str, Any]] = [
        ("depth_histogram.png", _histogram([n.depth for n in tree.nodes], "nodes per depth", "depth")),
        (
            "length_histogram.png",
            _histogram([n.length for n in tree.nodes], "nodes per length", "primitives"),
        ),
        ("hierarchy.png", hierarchy_figure(tree)),
    ]
    if usage is not None:
        fig = success_figure(tree, usage) if usage.base_rate < 1.0 else None
        if fig is not None:
            figs.append(("success_vs_base.png", fig))
        for k, i in enumerate(pick_trajectories(usage, tree, max_trajectories)):
            figs.append((f"tiling_{k}.png", tiling_figure(tree, usage, i)))
    written = []
    with output_folder(out):
        make_output_folder(out)
        for name, fig in figs:
            save_png(fig, out / name)
            written.append(out / name)
    return written
