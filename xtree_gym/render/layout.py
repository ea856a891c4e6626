"""Geometry shared by the HTML report and the PNG figures: tiled trajectories, the hierarchy, colours."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Cell:
    """One node instance inside a tiled trajectory: steps ``start .. end - 1``, drawn in column ``depth``."""

    node_id: str
    start: int
    end: int
    depth: int


def decompose(tree: Any, node_id: str, start: int) -> list[Cell]:
    """Every node instance inside one occurrence of ``node_id`` at ``start`` (itself first).

    Example:
        >>> from types import SimpleNamespace as N
        >>> nodes = {"S0": N(children=("a", "b"), length=2, depth=1), "S1": N(children=("S0", "c"), length=3, depth=2)}
        >>> [(c.node_id, c.start, c.end) for c in decompose(nodes, "S1", 4)]
        [('S1', 4, 7), ('S0', 4, 6)]
    """
    node = tree[node_id]
    out = [Cell(node_id, start, start + node.length, node.depth)]
    left, right = node.children
    left_len = tree[left].length if left in tree else 1
    if left in tree:
        out += decompose(tree, left, start)
    if right in tree:
        out += decompose(tree, right, start + left_len)
    return out


def tiled_cells(tree: Any, tokens: list[str]) -> tuple[list[Any], list[Cell]]:
    """The top-level tiling of ``tokens`` and every node instance under each tiled node."""
    segments = tree.tile(tokens)
    cells: list[Cell] = []
    for seg in segments:
        if seg.is_node:
            cells += decompose(tree, seg.symbol, seg.start)
    return segments, cells


def hierarchy_layout(tree: Any) -> tuple[dict[str, tuple[int, int]], list[tuple[str, str]]]:
    """Positions for the merge DAG: ``symbol -> (column, row)`` with column = depth, and parent->child edges.

    Primitives used as a child sit in column 0, in order of first use; nodes keep merge order in
    their column.

    Example:
        >>> from types import SimpleNamespace as N
        >>> class T(list):
        ...     nodes = property(lambda self: list(self))
        ...     def __contains__(self, s): return any(n.id == s for n in self)
        >>> t = T([N(id="S0", children=("a", "b"), depth=1), N(id="S1", children=("S0", "a"), depth=2)])
        >>> hierarchy_layout(t)
        ({'a': (0, 0), 'b': (0, 1), 'S0': (1, 0), 'S1': (2, 0)}, [('S0', 'a'), ('S0', 'b'), ('S1', 'S0'), ('S1', 'a')])
    """
    pos: dict[str, tuple[int, int]] = {}
    rows: dict[int, int] = {}  # column -> next free row
    ids = {n.id for n in tree.nodes}
    for n in tree.nodes:
        for c in n.children:
            if c not in ids and c not in pos:
                pos[c] = (0, rows.get(0, 0))
                rows[0] = rows.get(0, 0) + 1
    edges = []
    for n in tree.nodes:
        pos[n.id] = (n.depth, rows.get(n.depth, 0))
        rows[n.depth] = rows.get(n.depth, 0) + 1
        edges += [(n.id, c) for c in n.children]
    return pos, edges


def node_hue(index: int) -> int:
    """A hue in degrees for the ``index``-th node: golden-angle steps keep neighbours apart.

    Example:
        >>> [node_hue(i) for i in range(4)]
        [200, 337, 115, 252]
    """
    return int((200 + index * 137.508) % 360)


def hsl_to_rgb(h: float, s: float, lightness: float) -> tuple[float, float, float]:
    """HSL (degrees, 0..1, 0..1) to RGB in 0..1, for matplotlib.

    Example:
        >>> tuple(round(x, 2) for x in hsl_to_rgb(0, 1, 0.5))
        (1.0, 0.0, 0.0)
    """
    import colorsys

    return colorsys.hls_to_rgb(h / 360.0, lightness, s)


def pick_trajectories(usage: Any, tree: Any, k: int) -> list[int]:
    """Up to ``k`` trajectories to show: most distinct tiled nodes first, one per family, successes first."""
    scored = []
    for i, toks in enumerate(usage.tokens):
        if not toks or len(toks) > 60:
            continue
        segs = tree.tile(toks)
        distinct = len({s.symbol for s in segs if s.is_node})
        scored.append((not usage.trajectories[i].success, -distinct, len(toks), usage.trajectories[i].id, i))
    scored.sort()
    chosen: list[int] = []
    seen: set[str] = set()
    for *_, i in scored:
        fam = usage.trajectories[i].task or f"#{i}"
        if fam in seen:
            continue
        seen.add(fam)
        chosen.append(i)
        if len(chosen) == k:
            break
    return chosen
