"""Inline SVG charts for the HTML report (no library, no network): bars, success-vs-base, hierarchy."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import Any

from .layout import hierarchy_layout, node_hue


def _e(x: object) -> str:
    return escape(str(x), quote=True)


def bar_chart(data: Sequence[tuple[str, int]], title: str, *, width: int = 380, height: int = 210) -> str:
    """Vertical bars with the value on top and the label below.

    Example:
        >>> svg = bar_chart([("1", 3), ("2", 5)], "depth")
        >>> svg.count("<rect"), "depth" in svg
        (2, True)
    """
    left, bottom, top = 36, 34, 26
    n = max(1, len(data))
    vmax = max([v for _, v in data] + [1])
    slot = (width - left - 8) / n
    h = height - bottom - top
    parts = [
        f'<svg class="chart" role="img" width="{width}" height="{height}" viewBox="0 0 {width} {height}"'
        f"><title>{_e(title)}</title>",
        f'<text x="{width / 2:.0f}" y="16" text-anchor="middle" class="ttl">{_e(title)}</text>',
        f'<line x1="{left}" y1="{top + h}" x2="{width - 8}" y2="{top + h}" class="axis"/>',
    ]
    for i, (label, v) in enumerate(data):
        bh = h * v / vmax
        x = left + i * slot + slot * 0.12
        bw = slot * 0.76
        y = top + h - bh
        parts.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{bw:.1f}" height="{bh:.1f}" class="bar">')
        parts.append(f"<title>{_e(label)}: {v}</title></rect>")
        parts.append(
            f'<text x="{x + bw / 2:.1f}" y="{y - 3:.1f}" text-anchor="middle" class="val">{v}</text>'
        )
        parts.append(
            f'<text x="{x + bw / 2:.1f}" y="{top + h + 14:.1f}" text-anchor="middle" class="lbl">{_e(label)}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def success_vs_base(rows: Sequence[tuple[str, float, int]], base: float, *, width: int = 640) -> str:
    """One row per node: a bar from the base rate to the node's success (green above, red below).

    ``rows`` are ``(node id, success, occurrences)``, drawn in the given order.

    Example:
        >>> svg = success_vs_base([("S0", 0.9, 10), ("S1", 0.2, 4)], 0.5)
        >>> svg.count('class="up"'), svg.count('class="down"')
        (1, 1)
    """
    row_h, left, right, top = 15, 64, 110, 30
    height = top + row_h * len(rows) + 24
    span = width - left - right

    def x(rate: float) -> float:
        return left + span * rate

    parts = [
        f'<svg class="chart" role="img" width="{width}" height="{height}" viewBox="0 0 {width} {height}"'
        f"><title>success vs base rate</title>",
        f'<text x="{left}" y="14" class="ttl">node success (share of occurrences in successful'
        f" trajectories) against the base rate {base:.1%}</text>",
    ]
    for k in range(0, 11, 2):
        parts.append(
            f'<line x1="{x(k / 10):.1f}" y1="{top - 6}" x2="{x(k / 10):.1f}" y2="{height - 20}" class="grid"/>'
        )
        parts.append(
            f'<text x="{x(k / 10):.1f}" y="{height - 6}" text-anchor="middle" class="lbl">{k * 10}%</text>'
        )
    for i, (nid, rate, count) in enumerate(rows):
        y = top + i * row_h
        a, b = sorted((x(base), x(rate)))
        cls = "up" if rate >= base else "down"
        parts.append(f'<text x="{left - 6}" y="{y + 10}" text-anchor="end" class="lbl">{_e(nid)}</text>')
        parts.append(
            f'<rect x="{a:.1f}" y="{y + 2}" width="{max(b - a, 1.5):.1f}" height="{row_h - 4}" class="{cls}">'
        )
        parts.append(f"<title>{_e(nid)}: {rate:.1%} over {count} occurrences</title></rect>")
        parts.append(f'<text x="{width - right + 6}" y="{y + 10}" class="lbl">{rate:.0%} · {count}</text>')
    parts.append(
        f'<line x1="{x(base):.1f}" y1="{top - 6}" x2="{x(base):.1f}" y2="{height - 20}" class="base"/></svg>'
    )
    return "".join(parts)


def hierarchy(tree: Any, *, col_w: int = 90, prim_w: int = 200, row_h: int = 17) -> str:
    """The merge DAG: primitives left, one column per depth, an edge from each node to its two children."""
    pos, edges = hierarchy_layout(tree)
    index = {n.id: i for i, n in enumerate(tree.nodes)}
    cols = max((c for c, _ in pos.values()), default=0) + 1
    rows = max((r for _, r in pos.values()), default=0) + 1
    width, height = 20 + prim_w + (cols - 1) * col_w, 20 + rows * row_h

    def xy(sym: str) -> tuple[float, float]:
        c, r = pos[sym]
        return (10 + prim_w + (c - 1) * col_w if c else 10), 14 + r * row_h

    parts = [
        f'<svg class="chart hier" role="img" width="{width}" height="{height}" viewBox="0 0 {width} {height}"'
        f'><title>merge hierarchy</title><g class="edges">'
    ]
    for parent, child in edges:
        (x1, y1), (x2, y2) = xy(parent), xy(child)
        x2 += prim_w - 10 if child not in index else 36
        mid = (x1 + x2) / 2
        parts.append(
            f'<path d="M{x1:.0f},{y1:.0f} C{mid:.0f},{y1:.0f} {mid:.0f},{y2:.0f} {x2:.0f},{y2:.0f}"'
            f' data-from="{_e(parent)}" data-to="{_e(child)}"/>'
        )
    parts.append("</g>")
    for sym, _ in sorted(pos.items(), key=lambda kv: kv[1]):
        x, y = xy(sym)
        if sym in index:
            n = tree[sym]
            parts.append(
                f'<g class="hnode" data-node="{_e(sym)}"><title>{_e(sym)}: depth {n.depth}, length {n.length},'
                f" count {n.count}\n{_e(' -> '.join(n.expansion))}</title>"
                f'<rect x="{x - 2:.0f}" y="{y - 11:.0f}" width="38" height="14" rx="3"'
                f' style="fill:hsl({node_hue(index[sym])},60%,82%)"/>'
                f'<text x="{x + 17:.0f}" y="{y:.0f}" text-anchor="middle">{_e(sym)}</text></g>'
            )
        else:
            label = sym if len(sym) <= 30 else sym[:29] + "…"
            parts.append(
                f'<text x="{x + prim_w - 12:.0f}" y="{y:.0f}" text-anchor="end" class="prim">'
                f"<title>{_e(sym)}</title>{_e(label)}</text>"
            )
    parts.append("</svg>")
    return "".join(parts)
