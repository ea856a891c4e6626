"""The trees (banks) the RLVR and OPSD experiments read: mined, random-tree and random-span controls.

Each builder saves the tree file the trainer loads (``GRPOConfig.tree``) and returns its path.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from xtree_gym.corpus import Trajectory
from xtree_gym.mining import mine, trajectory_tokens
from xtree_gym.mining.config import MinerConfig
from xtree_gym.mining.tree import Node, XTree
from xtree_gym.rewards.instances import random_tree


def save(tree: XTree, path: Path) -> str:
    """Save ``tree`` at ``path`` (folders made); returns the path as the trainer's ``tree`` field wants it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tree.save(path)
    return str(path)


def mined_tree(corpus: Sequence[Trajectory], domain: str, path: Path, **overrides: Any) -> tuple[XTree, str]:
    """The X-Tree of ``corpus`` with the domain's paper preset (plus ``overrides``), saved at ``path``."""
    tree = mine(corpus, MinerConfig.preset(domain, **overrides), domain=domain, name=f"{domain}-xtree")
    return tree, save(tree, path)


def random_tree_like(
    corpus: Sequence[Trajectory], tree: XTree, domain: str, path: Path, seed: int = 0
) -> tuple[XTree, str]:
    """Table 20's random tree: as many merges as ``tree``, each a uniform draw among the candidate pairs."""
    rt = random_tree(
        corpus, len(tree), tree.miner_config or domain, seed=seed, domain=domain, name="random-tree"
    )
    return rt, save(rt, path)


def chain_nodes(spans: Sequence[Sequence[str]], prefix: str = "R") -> list[Node]:
    """Left-deep chains over token spans: ``[a, b, c]`` becomes ``R0=(a, b)`` and ``R1=(R0, c)``.

    Equal prefixes share their node, so the result is a valid tree file (children before parents).

    Example:
        >>> [(n.id, n.children, n.depth) for n in chain_nodes([["a", "b", "c"], ["a", "b"]])]
        [('R0', ('a', 'b'), 1), ('R1', ('R0', 'c'), 2)]
    """
    by_exp: dict[tuple[str, ...], Node] = {}
    nodes: list[Node] = []
    for span in spans:
        left: str = span[0]
        depth = 0
        for k in range(2, len(span) + 1):
            exp = tuple(span[:k])
            if exp not in by_exp:
                node = Node(f"{prefix}{len(nodes)}", (left, span[k - 1]), depth + 1, k, exp, count=0)
                by_exp[exp] = node
                nodes.append(node)
            left, depth = by_exp[exp].id, by_exp[exp].depth
    return nodes


def random_span_tree(
    corpus: Sequence[Trajectory], tree: XTree, domain: str, path: Path, seed: int = 0
) -> tuple[XTree, str]:
    """Table 20's random spans: one corpus span per X-Tree node, same length, at a uniform position.

    Each span is stored as a left-deep chain (:func:`chain_nodes`), so its prefixes are nodes too;
    the counts are recomputed on the corpus by the tree's own matcher.
    """
    toks = [t for t in trajectory_tokens(corpus, domain) if t]
    rng = np.random.default_rng(seed)
    spans = []
    for n in tree.nodes:
        fits = [t for t in toks if len(t) >= n.length]
        t = fits[int(rng.integers(len(fits)))]
        start = int(rng.integers(len(t) - n.length + 1))
        spans.append(t[start : start + n.length])
    nodes = chain_nodes(spans)
    rs = XTree(nodes, environment=tree.environment, config=(tree.miner_config or MinerConfig()).to_dict())
    counts = dict.fromkeys((n.id for n in nodes), 0)
    for t in toks:
        for m in rs.find_matches(t):
            counts[m.node if isinstance(m.node, str) else m.node.id] += 1
    for n in nodes:
        n.count = counts[n.id]
    rs.extra["control"] = {"kind": "random_spans", "seed": seed, "spans": len(spans)}
    return rs, save(rs, path)


def match_count(tree: XTree, corpus: Sequence[Trajectory], domain: str) -> int:
    """Node occurrences the bonus can match over ``corpus`` (Table 20's "#Match")."""
    return sum(len(tree.find_matches(t)) for t in trajectory_tokens(corpus, domain))
