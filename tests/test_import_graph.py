"""No import circles (in xtree_gym and experiments/), and the layering: each package of xtree_gym imports only
from those below it."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

PKG = Path(__file__).resolve().parent.parent / "xtree_gym"
EXPERIMENTS = PKG.parent / "experiments"


def _module_name(path: Path, pkg: Path = PKG) -> str:
    parts = list(path.relative_to(pkg.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_main_guard(test: ast.expr) -> bool:
    """``if __name__ == "__main__":`` -- a script entry point is the top of the house, whatever it imports."""
    return (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and test.left.id == "__name__"
        and any(isinstance(c, ast.Constant) and c.value == "__main__" for c in test.comparators)
    )


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def import_graph(root: Path = PKG) -> dict[str, set[str]]:
    """module -> the package modules it imports, at top level or inside functions (not TYPE_CHECKING)."""
    mods = {_module_name(p, root): p for p in root.rglob("*.py")}

    def owner(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for mod, path in mods.items():
        pkg = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        deps: set[str] = set()

        def visit(node: ast.AST, mod: str = mod, pkg: str = pkg, deps: set[str] = deps) -> None:
            if isinstance(node, ast.If) and (_is_type_checking(node.test) or _is_main_guard(node.test)):
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
    assert "xtree_gym.mining.base" in graph["xtree_gym.mining.fast"]
    assert circles(graph) == []


LAYERS: list[set[str]] = [
    {"errors", "progress", "_lazy"},
    {"corpus"},
    {"canon"},
    {"mining"},
    {"reuserl"},
    {"rewards"},
    {"render"},
    {"envs", "wrappers"},
    {"collect"},
    {"agents.types"},
    {"agents.model", "agents.harness"},
    {"agents.run"},
    {"agents.play"},
    {"agents.grpo"},
    {"agents.sft_offline"},
    {"agents"},
    {"adapters"},
    {"cli", "demo"},
    {"__main__", ""},
]
"""The house, bottom to top: the data flow corpus -> canon -> mining -> rewards -> envs/wrappers ->
agents, with ReuseRL (the miner's sibling, which reuses its pair counts) beside the miner and the
renderers above what they draw. ``agents`` is a house of its own, following a GRPO step: the shapes,
then the policy and the harnesses, the run's files, playing episodes, GRPO, and training from a fixed
corpus on top. ``""`` is the package's own ``__init__``. A room may import its own
modules and any room below it, never one beside or above it (docs/architecture.md)."""


def room(module: str) -> str:
    """``xtree_gym.mining.tree`` -> ``mining``; ``xtree_gym`` -> ``""``; inside ``agents``, its sub-room.

    Example:
        >>> room("xtree_gym.mining.tree"), room("xtree_gym.errors"), room("xtree_gym")
        ('mining', 'errors', '')
        >>> room("xtree_gym.agents.grpo.trainer"), room("xtree_gym.agents.types"), room("xtree_gym.agents")
        ('agents.grpo', 'agents.types', 'agents')
    """
    parts = module.split(".")
    if len(parts) > 2 and parts[1] == "agents":
        return f"agents.{parts[2]}"
    return parts[1] if len(parts) > 1 else ""


def layer_violations(graph: dict[str, set[str]], layers: list[set[str]]) -> list[tuple[str, str]]:
    """``(module, dependency)`` pairs whose dependency sits in a room beside or above the module's.

    Example:
        >>> layer_violations({"p.a.x": {"p.b.y"}, "p.b.y": set()}, [{"a"}, {"b"}])
        [('p.a.x', 'p.b.y')]
        >>> layer_violations({"p.b.y": {"p.a.x"}, "p.a.x": set()}, [{"a"}, {"b"}])
        []
    """
    level = {r: i for i, rooms in enumerate(layers) for r in rooms}
    bad = []
    for mod, deps in sorted(graph.items()):
        for dep in sorted(deps):
            a, b = room(mod), room(dep)
            if a != b and level[b] >= level[a]:
                bad.append((mod, dep))
    return bad


def test_every_room_has_a_layer() -> None:
    rooms = {room(m) for m in import_graph()}
    assert rooms == set().union(*LAYERS), rooms ^ set().union(*LAYERS)


def test_each_package_imports_only_from_packages_below_it() -> None:
    assert layer_violations(import_graph(), LAYERS) == []


def test_the_layer_check_catches_an_upward_import() -> None:
    graph = import_graph()
    graph["xtree_gym.corpus.records"] = graph["xtree_gym.corpus.records"] | {"xtree_gym.mining.tree"}
    graph["xtree_gym.envs.webshop"] = graph["xtree_gym.envs.webshop"] | {"xtree_gym.wrappers.reward"}
    assert layer_violations(graph, LAYERS) == [
        ("xtree_gym.corpus.records", "xtree_gym.mining.tree"),
        ("xtree_gym.envs.webshop", "xtree_gym.wrappers.reward"),
    ]


def test_the_agents_rooms_hold_few_loose_modules() -> None:
    """At most 6 loose modules at ``agents/`` top, at most 15 per room, none over 800 lines."""
    agents = PKG / "agents"
    loose = sorted(p.name for p in agents.glob("*.py") if p.name != "__init__.py")
    assert 1 <= len(loose) <= 6, loose
    rooms = [d for d in agents.iterdir() if (d / "__init__.py").is_file()]
    assert {d.name for d in rooms} == {"model", "harness", "run", "play", "grpo", "sft_offline"}
    for d in rooms:
        assert len(list(d.glob("*.py"))) <= 15, d.name
        assert (d / "__init__.py").read_text(encoding="utf-8").startswith('"""'), d.name
    sizes = {
        p.relative_to(PKG).as_posix(): len(p.read_text(encoding="utf-8").splitlines())
        for p in agents.rglob("*.py")
    }
    assert len(sizes) >= 45 and max(sizes.values()) <= 800, max(sizes.items(), key=lambda kv: kv[1])


def test_the_agents_floors_catch_a_step_up() -> None:
    graph = import_graph()
    graph["xtree_gym.agents.model.generation"] = graph["xtree_gym.agents.model.generation"] | {
        "xtree_gym.agents.play.rollout"
    }
    graph["xtree_gym.agents.play.rollout"] = graph["xtree_gym.agents.play.rollout"] | {
        "xtree_gym.agents.grpo.rows"
    }
    assert layer_violations(graph, LAYERS) == [
        ("xtree_gym.agents.model.generation", "xtree_gym.agents.play.rollout"),
        ("xtree_gym.agents.play.rollout", "xtree_gym.agents.grpo.rows"),
    ]


def test_the_top_level_holds_only_the_entry_points() -> None:
    top = sorted(p.name for p in PKG.glob("*.py"))
    assert top == ["__init__.py", "__main__.py", "_lazy.py", "cli.py", "demo.py", "errors.py", "progress.py"]


def test_no_import_circles_in_the_experiments() -> None:
    graph = import_graph(EXPERIMENTS)
    assert "experiments._runner" in graph["experiments._rlvr"]  # the graph sees relative imports
    assert "experiments._results" in graph["experiments.minigrid_claim.run"]  # and absolute ones
    assert "experiments.minigrid_claim.run" not in graph["experiments.minigrid_claim.report"]
    assert circles(graph) == []


def test_the_mining_rooms_only_look_down() -> None:
    graph = import_graph()
    floors = [
        ["corpus.encoded"],
        ["mining.base"],
        ["mining.reference", "mining.fast"],
        ["mining.tree"],
        ["mining.miner"],
    ]
    for i, floor in enumerate(floors):
        same_or_above = {f"xtree_gym.{m}" for f in floors[i:] for m in f}
        for m in floor:
            assert not graph[f"xtree_gym.{m}"] & same_or_above, (m, graph[f"xtree_gym.{m}"] & same_or_above)


def test_the_rooms_import_in_dependency_order_in_a_fresh_interpreter() -> None:
    rooms = ["corpus.encoded", "mining.base", "mining.reference", "mining.fast", "mining.tree", "corpus.columnar",
             "mining.miner", "corpus.arrow_io", "rewards", "reuserl.mdl"]  # fmt: skip
    code = "; ".join(f"import xtree_gym.{m}" for m in rooms)
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=PKG.parent)
    assert run.returncode == 0, run.stderr


def test_old_module_paths_are_the_new_modules_objects() -> None:
    """Every path of the flat layout still imports, as a thin alias holding the same objects."""
    code = (
        "import importlib, xtree_gym\n"
        "from xtree_gym._lazy import OLD_PATHS\n"
        "for old, new in OLD_PATHS.items():\n"
        "    a, b = importlib.import_module(old), importlib.import_module(new)\n"
        "    names = [n for n in vars(b) if not n.startswith('__')]\n"
        "    assert names and all(getattr(a, n) is getattr(b, n) for n in names), old\n"
        "from xtree_gym.tree import XTree\n"
        "from xtree_gym.mining.tree import XTree as T\n"
        "assert XTree is T\n"
        "from xtree_gym.formats import read_trajectories\n"
        "from xtree_gym.mining import pair_counts, EncodedCorpus\n"
        "from xtree_gym.rewards import group_rewards, LAMBDA0, XTreeRewardFunction\n"
        "from xtree_gym.agents.trainer import GRPOTrainer\n"
        "from xtree_gym.agents.grpo.trainer import GRPOTrainer as G\n"
        "assert GRPOTrainer is G\n"
        "from xtree_gym.agents.sft_rows import build_rows\n"
        "from xtree_gym.agents import evaluate, config, losses, envproc, generation, rollout\n"
        "assert rollout.rollout is importlib.import_module('xtree_gym.agents.play.rollout').rollout\n"
        "print(len(OLD_PATHS))\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=PKG.parent)
    assert run.returncode == 0, run.stderr
    assert int(run.stdout) >= 20 + 40  # the core's 20, the agents' 40 (types stayed)


def unresolved_imports(root: Path = PKG) -> list[str]:
    """``file:line module`` for each import of a package module that names no file (or an old path).

    Everywhere in the file: at top level, inside functions and under ``TYPE_CHECKING`` -- a relative
    import left pointing at a moved module fails only when its function runs, so it is caught here.
    """
    mods = {_module_name(p, root): p for p in root.rglob("*.py")}
    bad = []
    for mod, path in sorted(mods.items()):
        pkg = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level:
                up = pkg
                for _ in range(node.level - 1):
                    up = up.rpartition(".")[0]
                base = f"{up}.{node.module}" if node.module else up
            elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == root.name:
                base = node.module or ""
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names if a.name.split(".")[0] == root.name]
                base = names[0] if names else root.name
            else:
                continue
            if base not in mods:
                bad.append(f"{path.relative_to(root.parent)}:{node.lineno} {base}")
    return bad


def test_every_package_import_names_a_module_that_exists() -> None:
    assert unresolved_imports() == []
    assert unresolved_imports(PKG.parent / "experiments") == []


def test_the_resolver_sees_a_stale_relative_import(tmp_path: Path) -> None:
    pkg = tmp_path / "xtree_gym"
    (pkg / "rewards").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "rewards" / "__init__.py").write_text("")
    (pkg / "rewards" / "adapters.py").write_text("def f():\n    from .canon import get_canonicalizer\n")
    assert unresolved_imports(pkg) == ["xtree_gym/rewards/adapters.py:2 xtree_gym.rewards.canon"]
