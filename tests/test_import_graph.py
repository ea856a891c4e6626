"""No import circles: every module of xtree_gym only looks down (static graph, plus fresh imports)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

PKG = Path(__file__).resolve().parent.parent / "xtree_gym"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def import_graph() -> dict[str, set[str]]:
    """module -> the package modules it imports, at top level or inside functions (not TYPE_CHECKING)."""
    mods = {_module_name(p): p for p in PKG.rglob("*.py")}

    def owner(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for mod, path in mods.items():
        pkg = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        deps: set[str] = set()

        def visit(node: ast.AST, mod: str = mod, pkg: str = pkg, deps: set[str] = deps) -> None:
            if isinstance(node, ast.If) and _is_type_checking(node.test):
                for child in node.orelse:
                    visit(child)
                return
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = pkg
                    for _ in range(node.level - 1):
                        up = up.rpartition(".")[0]
                    base = f"{up}.{base}" if base else up
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
            else:
                targets = []
            for t in targets:
                o = owner(t)
                if o and o != mod:
                    deps.add(o)
            for child in ast.iter_child_nodes(node):
                visit(child)

        visit(ast.parse(path.read_text(encoding="utf-8")))
        graph[mod] = deps
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan).

    Example:
        >>> circles({"a": {"b"}, "b": {"a"}, "c": {"a"}})
        [['a', 'b']]
    """
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            strong(v)
    return out


def test_circle_finder_sees_a_circle() -> None:
    assert circles({"m": {"f"}, "f": {"m"}, "t": set()}) == [["f", "m"]]
    assert circles({"m": {"f", "t"}, "f": {"b"}, "t": {"b"}, "b": set()}) == []


def test_no_import_circles_in_the_package() -> None:
    graph = import_graph()
    assert "xtree_gym.mining_base" in graph["xtree_gym.mining_fast"]
    assert circles(graph) == []


def test_the_mining_rooms_only_look_down() -> None:
    graph = import_graph()
    floors = [["mining_base"], ["mining_reference", "mining_fast"], ["tree", "columnar"], ["mining"]]
    for i, floor in enumerate(floors):
        same_or_above = {f"xtree_gym.{m}" for f in floors[i:] for m in f}
        for m in floor:
            assert not graph[f"xtree_gym.{m}"] & same_or_above, (m, graph[f"xtree_gym.{m}"] & same_or_above)


def test_the_rooms_import_in_dependency_order_in_a_fresh_interpreter() -> None:
    rooms = ["mining_base", "mining_reference", "mining_fast", "tree", "columnar", "mining", "arrow_io"]
    code = "; ".join(f"import xtree_gym.{m}" for m in rooms)
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=PKG.parent)
    assert run.returncode == 0, run.stderr
