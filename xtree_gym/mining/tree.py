"""The X-Tree: nodes in merge order, the tree file (a superset of the authors' format), tiling.

A tree file is one JSON object::

    {"format": "...", "format_version": 1, "environment": "...",
     "corpus": {"name", "n_trajectories", "n_successful", "successful_only", ...},
     "n_primitives": 84, "n_nodes": 80, "config": {...}, "bound": "cap" | "compression",
     "compression_ratio": 1.9, "primitive_counts": {token: count},
     "nodes": [{"id": "S0", "children": [left, right], "depth", "length", "expansion", "count",
                "success", "example", "score", "success_count", "task_types"}]}

The authors' released trees (``../shared/reference/xtree-site/trees``) lack the last keys and
load with the same :meth:`XTree.load`.
"""

from __future__ import annotations

import itertools
import json
import os
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..corpus.io import JSONProblem, atomic_write_text, finite_number, input_problem, loads_strict
from ..errors import TreeFormatError
from .base import Merge
from .config import MinerConfig
from .matching import Match, StreamingMatcher, find_matches

if TYPE_CHECKING:
    from ..corpus.encoded import EncodedCorpus
    from ..corpus.records import Trajectory

FORMAT_VERSION = 1
FORMAT_TEXT = (
    'xtree_gym tree file: {"environment", "corpus", "n_primitives", "n_nodes", "config", "nodes": [...]} '
    '(the X-Tree authors\' format) plus "format_version", "bound", "compression_ratio", "primitive_counts"; '
    'each node {"id", "children": [left, right], "depth", "length", "expansion", "count" (pair frequency at '
    'merge), "success" (share of those occurrences in successful trajectories; null when the corpus held '
    'successful trajectories only), "example" (one raw occurrence), "score" (X-Score at merge), '
    '"success_count", "task_types"}.'
)
_AUTHOR_CONFIG = {  # the authors' config key -> MinerConfig field
    "max_skills": "cap",
    "min_frequency": "min_freq",
    "mdl_lambda": "eta",
    "max_skill_len": "max_len",
    "min_success_rate": "min_succ",
    "min_families": "min_task_types",
}


@dataclass
class Node:
    """A mined skill: a binary merge of two symbols (primitive tokens or earlier nodes)."""

    id: str
    children: tuple[str, str]
    depth: int
    length: int
    expansion: tuple[str, ...]
    count: int
    success: float | None = None
    example: list[str] | None = None
    score: float | None = None
    success_count: int | None = None
    task_types: list[str] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "id": self.id,
            "children": list(self.children),
            "depth": self.depth,
            "length": self.length,
            "expansion": list(self.expansion),
            "count": self.count,
            "success": self.success,
            "example": self.example,
        }
        if self.score is not None:
            d["score"] = self.score
        if self.success_count is not None:
            d["success_count"] = self.success_count
        if self.task_types is not None:
            d["task_types"] = self.task_types
        d.update(self.extra)
        return d


@dataclass(frozen=True)
class Segment:
    """One symbol of a tiling: a node id or a primitive token over primitives ``start .. end - 1``."""

    symbol: str
    start: int
    end: int
    is_node: bool

    @property
    def length(self) -> int:
        return self.end - self.start


class XTree:
    """Nodes in merge order, with tiling, matching and the tree file.

    Example:
        >>> from xtree_gym import MinerConfig, Step, Trajectory, mine
        >>> trajs = [Trajectory(str(i), [Step("x", token=t) for t in "abcab"], True) for i in range(6)]
        >>> tree = mine(trajs, MinerConfig(min_freq=3, eta=0.5, cap=5))
        >>> [(n.id, n.children, n.count) for n in tree]
        [('S0', ('a', 'b'), 12), ('S1', ('S0', 'c'), 6), ('S2', ('S1', 'S0'), 6)]
        >>> [(s.symbol, s.start, s.end) for s in tree.tile(["a", "b", "z", "a", "b", "c"])]
        [('S0', 0, 2), ('z', 2, 3), ('S1', 3, 6)]
    """

    def __init__(
        self,
        nodes: Sequence[Node],
        *,
        environment: str = "",
        corpus: dict[str, Any] | None = None,
        config: dict[str, Any] | None = None,
        n_primitives: int | None = None,
        bound: str | None = None,
        compression_ratio: float | None = None,
        primitive_counts: dict[str, int] | None = None,
        extra: dict[str, Any] | None = None,
    ) -> None:
        self.nodes: list[Node] = list(nodes)
        self.environment = environment
        self.corpus: dict[str, Any] = dict(corpus or {})
        self.config: dict[str, Any] = dict(config or {})
        self.bound = bound
        self.compression_ratio = compression_ratio
        self.primitive_counts = dict(primitive_counts or {})
        self.extra = dict(extra or {})
        self._by_id: dict[str, Node] = {}  # node id -> node
        for n in self.nodes:
            if n.id in self._by_id:
                raise TreeFormatError(f"duplicate node id {n.id!r}", fix="node ids must be unique")
            self._by_id[n.id] = n
        prims = {t for n in self.nodes for t in n.expansion} | set(self.primitive_counts)
        self.primitives: list[str] = sorted(prims)
        self.n_primitives = n_primitives if n_primitives is not None else len(self.primitives)
        # (left symbol, right symbol) -> (merge rank, node id); first merge wins on a repeat
        self._ranks: dict[tuple[str, str], tuple[int, str]] = {}
        for rank, n in enumerate(self.nodes):
            self._ranks.setdefault((n.children[0], n.children[1]), (rank, n.id))
        self._patterns = [(n.id, n.expansion) for n in self.nodes]

    # -- container protocol ----------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.nodes)

    def __iter__(self) -> Iterator[Node]:
        return iter(self.nodes)

    def __getitem__(self, node_id: str) -> Node:
        try:
            return self._by_id[node_id]
        except KeyError:
            raise KeyError(f"no node {node_id!r} in this tree ({len(self)} nodes, S0..)") from None

    def __contains__(self, node_id: object) -> bool:
        return node_id in self._by_id

    @property
    def miner_config(self) -> MinerConfig | None:
        """The :class:`MinerConfig` the tree was mined with, when the file says."""
        try:
            return MinerConfig.from_dict(self.config)
        except Exception:  # released trees carry partial configs
            return None

    # -- building ------------------------------------------------------------------------------
    @classmethod
    def from_merges(
        cls,
        merges: Sequence[Merge],
        enc: EncodedCorpus,
        config: MinerConfig,
        trajectories: Sequence[Trajectory],
        name: str = "",
    ) -> XTree:
        """Build the tree from a miner's merges over ``enc`` (encoded from ``trajectories``)."""
        examples = []
        for m, length in zip(merges, merge_lengths(merges, len(enc.vocab))):
            ti, start = m.first
            examples.append([s.action for s in trajectories[ti].steps[start : start + length]])
        facts = CorpusFacts(
            vocab=list(enc.vocab),
            task_names=list(enc.task_names),
            n_trajectories=len(trajectories),
            n_successful=int(enc.success.sum()),
            primitive_counts=np.bincount(enc.flat, minlength=len(enc.vocab)).tolist(),
            envs=_env_names(trajectories),
        )
        return cls.from_facts(merges, facts, examples, config, name=name)

    @classmethod
    def from_facts(
        cls,
        merges: Sequence[Merge],
        facts: CorpusFacts,
        examples: Sequence[list[str]],
        config: MinerConfig,
        name: str = "",
    ) -> XTree:
        """Build the tree from merges, what the file says of the corpus, and each node's example actions."""
        n_prim = len(facts.vocab)
        names = list(facts.vocab)  # symbol id -> printable name
        depth = [0] * n_prim
        exp: list[tuple[str, ...]] = [(t,) for t in facts.vocab]
        successful_only = facts.n_successful == facts.n_trajectories
        nodes = []
        for k, m in enumerate(merges):
            nid = f"S{k}"
            names.append(nid)
            depth.append(1 + max(depth[m.left], depth[m.right]))
            exp.append(exp[m.left] + exp[m.right])
            nodes.append(
                Node(
                    id=nid,
                    children=(names[m.left], names[m.right]),
                    depth=depth[-1],
                    length=len(exp[-1]),
                    expansion=exp[-1],
                    count=m.count,
                    success=None if successful_only else m.success_count / m.count,
                    example=list(examples[k]),
                    score=m.score,
                    success_count=m.success_count,
                    task_types=[facts.task_names[i] for i in m.task_types],
                )
            )
        n_tokens = sum(facts.primitive_counts)
        merged_away = sum(m.count for m in merges)  # each merge turns `count` pairs into one symbol
        envs = facts.envs
        corpus = {
            "name": name,
            "n_trajectories": facts.n_trajectories,
            "n_successful": facts.n_successful,
            "successful_only": successful_only,
            "n_steps": n_tokens,
            "n_task_types": len(facts.task_names),
            "envs": envs,
        }
        cfg = config.to_dict()
        cfg.update({alias: cfg[f] for alias, f in _AUTHOR_CONFIG.items()})
        return cls(
            nodes,
            environment=envs[0] if len(envs) == 1 else ",".join(envs),
            corpus=corpus,
            config=cfg,
            n_primitives=n_prim,
            bound="cap" if len(merges) >= config.cap else "compression",
            compression_ratio=(n_tokens / (n_tokens - merged_away)) if n_tokens > merged_away else 1.0,
            primitive_counts={facts.vocab[i]: c for i, c in enumerate(facts.primitive_counts) if c},
        )

    # -- file ----------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "format": FORMAT_TEXT,
            "format_version": FORMAT_VERSION,
            "environment": self.environment,
            "corpus": self.corpus,
            "n_primitives": self.n_primitives,
            "n_nodes": len(self.nodes),
            "config": self.config,
            "bound": self.bound,
            "compression_ratio": self.compression_ratio,
            "primitive_counts": self.primitive_counts,
        }
        d.update(self.extra)
        d["nodes"] = [n.to_dict() for n in self.nodes]
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1, ensure_ascii=False) + "\n"

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the tree file atomically; the same tree always gives the same bytes."""
        atomic_write_text(path, self.to_json())

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> XTree:
        """Read a tree file (ours or the authors' released format)."""
        p = Path(path)
        problem = input_problem(p, "tree file")
        if problem:
            raise TreeFormatError(problem, fix="pass a tree file written by `xtree mine`")
        try:
            data = loads_strict(p.read_bytes().decode("utf-8"))
        except UnicodeDecodeError as exc:
            line = p.read_bytes()[: exc.start].count(b"\n") + 1
            raise TreeFormatError(
                f"not UTF-8 text ({exc.reason} at byte {exc.start})",
                where=f"{p}:{line}",
                fix="pass a tree file written by `xtree mine`",
            ) from None
        except JSONProblem as exc:
            raise TreeFormatError(
                exc.problem,
                where=f"{p}:{exc.lineno}" if exc.lineno else str(p),
                fix="pass a tree file written by `xtree mine`",
            ) from None
        return cls.from_dict(data, source=str(p))

    @classmethod
    def from_dict(cls, data: Any, source: str = "<dict>") -> XTree:
        if not isinstance(data, dict) or not isinstance(data.get("nodes"), list):
            raise TreeFormatError("no 'nodes' list at the top level", where=source, fix="pass a tree file")
        _check_version(data, source)
        _check_top_types(data, source)
        nodes = [_node_from_dict(nd, i, source) for i, nd in enumerate(data["nodes"])]
        known = {"format", "format_version", "environment", "corpus", "n_primitives", "n_nodes", "config"}
        known |= {"bound", "compression_ratio", "primitive_counts", "nodes"}
        config = dict(data.get("config") or {})
        for alias, f in _AUTHOR_CONFIG.items():
            if alias in config and f not in config:
                config[f] = config[alias]
        tree = cls(
            nodes,
            environment=data.get("environment", ""),
            corpus=data.get("corpus"),
            config=config,
            n_primitives=data.get("n_primitives"),
            bound=data.get("bound"),
            compression_ratio=data.get("compression_ratio"),
            primitive_counts=data.get("primitive_counts"),
            extra={k: v for k, v in data.items() if k not in known},
        )
        _check_consistent(tree, source)
        return tree

    # -- tiling and matching -------------------------------------------------------------------
    def tile(self, tokens: Sequence[str]) -> list[Segment]:
        """Top-level tiling: apply the merges in order (BPE encoding); unmatched tokens stay primitives."""
        syms: list[tuple[str, int, int, bool]] = [(t, i, i + 1, False) for i, t in enumerate(tokens)]
        while len(syms) > 1:
            best: tuple[int, str] | None = None
            for a, b in itertools.pairwise(syms):
                r = self._ranks.get((a[0], b[0]))
                if r is not None and (best is None or r[0] < best[0]):
                    best = r
            if best is None:
                break
            node = self[best[1]]
            left, right = node.children
            out: list[tuple[str, int, int, bool]] = []
            i = 0
            while i < len(syms):
                if i + 1 < len(syms) and syms[i][0] == left and syms[i + 1][0] == right:
                    out.append((node.id, syms[i][1], syms[i + 1][2], True))
                    i += 2
                else:
                    out.append(syms[i])
                    i += 1
            syms = out
        return [Segment(s, a, b, n) for s, a, b, n in syms]

    def encode(self, tokens: Sequence[str]) -> list[str]:
        """The symbols of :meth:`tile` (node ids and leftover primitive tokens)."""
        return [s.symbol for s in self.tile(tokens)]

    def find_matches(self, tokens: Sequence[str]) -> list[Match]:
        """Every occurrence of every node expansion in ``tokens`` (nested and overlapping ones too)."""
        return find_matches(self._patterns, tokens)

    def matcher(self) -> StreamingMatcher:
        """A fresh streaming matcher over this tree's nodes (one per episode stream)."""
        return StreamingMatcher(self._patterns)

    # -- summaries -----------------------------------------------------------------------------
    def depth_histogram(self) -> dict[int, int]:
        return dict(sorted(Counter(n.depth for n in self.nodes).items()))

    def summary(self) -> dict[str, Any]:
        """Counts a user reads after mining: nodes, depths, compression, what stopped the miner."""
        return {
            "n_nodes": len(self.nodes),
            "n_primitives": self.n_primitives,
            "depth_histogram": self.depth_histogram(),
            "max_depth": max((n.depth for n in self.nodes), default=0),
            "max_length": max((n.length for n in self.nodes), default=0),
            "compression_ratio": self.compression_ratio,
            "bound": self.bound,
            "corpus": self.corpus,
        }

    def hierarchy_lines(self) -> list[str]:
        """An indented view: each root node (not a child of another) with its children below it.

        Walked with an explicit stack, so a chain thousands of nodes deep prints instead of
        exhausting Python's recursion limit.
        """
        children_ids = {c for n in self.nodes for c in n.children if c in self._by_id}
        lines: list[str] = []
        for root in self.nodes:
            if root.id in children_ids:
                continue
            stack: list[tuple[str, int]] = [(root.id, 0)]
            while stack:
                sym, indent = stack.pop()
                n = self._by_id.get(sym)
                if n is None:
                    lines.append(f"{'  ' * indent}{sym}")
                    continue
                succ = "-" if n.success is None else f"{n.success:.2f}"
                lines.append(f"{'  ' * indent}{n.id}  d={n.depth} l={n.length} count={n.count} succ={succ}")
                stack.extend((c, indent + 1) for c in reversed(n.children))  # left child first
        return lines


@dataclass
class CorpusFacts:
    """What a tree file records of the corpus it was mined from (all a sharded miner gathers)."""

    vocab: list[str]
    """Primitive id -> token, sorted."""
    task_names: list[str]
    n_trajectories: int
    n_successful: int
    primitive_counts: list[int]
    """Primitive id -> occurrences."""
    envs: list[str]
    """Sorted distinct env names."""


def merge_lengths(merges: Sequence[Merge], n_prim: int) -> list[int]:
    """Primitives under each merge's new symbol.

    Example:
        >>> merge_lengths([Merge(0, 1, 2, 3, 3, (0,), 1.0, (0, 0)), Merge(2, 2, 3, 2, 2, (0,), 1.0, (0, 0))], 2)
        [2, 4]
    """
    lens = [1] * n_prim
    for m in merges:
        lens.append(lens[m.left] + lens[m.right])
    return lens[n_prim:]


def _env_names(trajectories: Any) -> list[str]:
    """Sorted distinct env names; a columnar corpus answers from its column (no per-row objects)."""
    names = getattr(trajectories, "env_names", None)
    return names() if callable(names) else sorted({t.env for t in trajectories})


def _node_from_dict(nd: Any, index: int, source: str) -> Node:
    where = f"{source}: nodes[{index}]"
    if not isinstance(nd, dict):
        raise TreeFormatError("node is not an object", where=where, fix="each node is a JSON object")
    try:
        children = nd["children"]
        if not (isinstance(children, list) and len(children) == 2):
            raise TreeFormatError(f"children is {children!r}, expected [left, right]", where=where)
        known = {"id", "children", "depth", "length", "expansion", "count", "success", "example"}
        known |= {"score", "success_count", "task_types"}
        _check_node_fields(nd, where)
        return Node(
            id=str(nd["id"]),
            children=(str(children[0]), str(children[1])),
            depth=int(nd["depth"]),
            length=int(nd["length"]),
            expansion=tuple(str(t) for t in nd["expansion"]),
            count=int(nd.get("count") or 0),
            success=None if nd.get("success") is None else float(nd["success"]),
            example=nd.get("example"),
            score=nd.get("score"),
            success_count=nd.get("success_count"),
            task_types=nd.get("task_types"),
            extra={k: v for k, v in nd.items() if k not in known},
        )
    except KeyError as exc:
        raise TreeFormatError(
            f"node lacks key {exc.args[0]!r}", where=where, fix="see the tree format"
        ) from None
    except (TypeError, ValueError) as exc:
        raise TreeFormatError(f"bad node field ({exc})", where=where, fix="see the tree format") from None


def _check_version(data: dict[str, Any], source: str) -> None:
    """``format_version`` absent (the authors' files) or the integer 1; anything else says what it is."""
    if "format_version" not in data:
        return
    v = data["format_version"]
    fix = f"this xtree_gym writes and reads format_version {FORMAT_VERSION}"
    if (
        isinstance(v, bool)
        or not isinstance(v, (int, float))
        or (isinstance(v, float) and not v.is_integer())
    ):
        raise TreeFormatError(
            f"format_version is {v!r} ({type(v).__name__}), expected the integer {FORMAT_VERSION}",
            where=source,
            fix=fix,
        )
    if v > FORMAT_VERSION:
        raise TreeFormatError(
            f"format_version {v!r} is newer than this xtree_gym reads ({FORMAT_VERSION})",
            where=source,
            fix="upgrade xtree_gym",
        )
    if v < 1:
        raise TreeFormatError(
            f"format_version {v!r} is not a version (they start at 1)", where=source, fix=fix
        )


def _check_top_types(data: dict[str, Any], source: str) -> None:
    """The top-level fields a reader relies on have the types the format says (null allowed)."""
    fix = "see the tree format (xtree_gym.mining.tree.FORMAT_TEXT)"
    for key, typ, name in (
        ("config", dict, "an object"),
        ("corpus", dict, "an object"),
        ("primitive_counts", dict, "an object"),
        ("environment", str, "a string"),
        ("bound", str, "a string"),
    ):
        v = data.get(key)
        if v is not None and not isinstance(v, typ):
            raise TreeFormatError(
                f"{key} is {type(v).__name__} {v!r:.60}, expected {name}", where=source, fix=fix
            )
    for tok, c in (data.get("primitive_counts") or {}).items():
        if isinstance(c, bool) or not isinstance(c, int) or c < 0:
            raise TreeFormatError(
                f"primitive_counts[{tok!r}] is {c!r}, expected a count >= 0", where=source, fix=fix
            )
    n_prim = data.get("n_primitives")
    if n_prim is not None and (isinstance(n_prim, bool) or not isinstance(n_prim, int) or n_prim < 0):
        raise TreeFormatError(f"n_primitives is {n_prim!r}, expected a count >= 0", where=source, fix=fix)
    ratio = data.get("compression_ratio")
    if ratio is not None and not (finite_number(ratio) and ratio >= 1.0):
        raise TreeFormatError(
            f"compression_ratio is {ratio!r}, expected a number >= 1", where=source, fix=fix
        )
    n_nodes = data.get("n_nodes")
    if n_nodes is not None and n_nodes != len(data["nodes"]):
        raise TreeFormatError(
            f"n_nodes is {n_nodes!r} but the file lists {len(data['nodes'])} nodes",
            where=source,
            fix="the file was truncated or edited: re-mine it, or set n_nodes to the length of nodes",
        )


def _is_count(v: Any, low: int = 0) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= low


def _check_node_fields(nd: dict[str, Any], where: str) -> None:
    """Counts are integers >= 0 (depth, length >= 1), rates finite in [0, 1], lists of strings."""
    fix = "see the tree format (xtree_gym.mining.tree.FORMAT_TEXT)"
    for key, low in (("depth", 1), ("length", 2)):
        if not _is_count(nd[key], low):
            raise TreeFormatError(f"{key} is {nd[key]!r}, expected an integer >= {low}", where=where, fix=fix)
    for key in ("count", "success_count"):
        if nd.get(key) is not None and not _is_count(nd[key]):
            raise TreeFormatError(f"{key} is {nd[key]!r}, expected a count >= 0", where=where, fix=fix)
    succ = nd.get("success")
    if succ is not None and not (finite_number(succ) and 0.0 <= succ <= 1.0):
        raise TreeFormatError(f"success is {succ!r}, expected a rate in [0, 1] or null", where=where, fix=fix)
    score = nd.get("score")
    if score is not None and not finite_number(score):
        raise TreeFormatError(f"score is {score!r}, expected a finite number or null", where=where, fix=fix)
    for key in ("expansion", "example", "task_types"):
        v = nd.get(key)
        if (v is not None or key == "expansion") and not (
            isinstance(v, list) and all(isinstance(x, str) for x in v)
        ):
            raise TreeFormatError(f"{key} is {v!r:.60}, expected a list of strings", where=where, fix=fix)


def _check_consistent(tree: XTree, source: str) -> None:
    """Children must be earlier nodes or primitives, expansions and depths must agree with them."""
    seen: dict[str, tuple[str, ...]] = {}
    for n in tree.nodes:
        child_depth = [tree[c].depth if c in tree and c in seen else 0 for c in n.children]
        if n.depth != 1 + max(child_depth):
            raise TreeFormatError(
                f"node {n.id}: depth {n.depth}, but its children give {1 + max(child_depth)}",
                where=source,
                fix="depth is 1 + the deeper child's depth (a primitive has depth 0)",
            )
        parts: list[str] = []
        for c in n.children:
            parts.extend(seen.get(c, (c,)) if c in tree else (c,))
            if c in tree and c not in seen:
                raise TreeFormatError(f"node {n.id} uses {c}, which is defined later", where=source)
        if tuple(parts) != n.expansion or n.length != len(n.expansion):
            raise TreeFormatError(f"node {n.id}: expansion does not match its children", where=source)
        seen[n.id] = n.expansion
