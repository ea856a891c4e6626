"""Streaming matcher cost per step (ns), against the naive re-scan baseline, on a real tree.

    python benchmarks/bench_matcher.py [--tree TREE.json] [--steps 200000]

Without ``--tree`` it uses the authors' released WebArena tree (256 nodes) when ../shared is
there, else a tree mined from the package's ScienceWorld sample. The token stream is drawn
from the tree's own expansions (so matches happen) mixed with unknown tokens.
"""

from __future__ import annotations

import argparse
import random
import time
from pathlib import Path

from xtree_gym import XTree
from xtree_gym.mining.matching import naive_find_matches


def load_tree(path: str | None) -> XTree:
    if path:
        return XTree.load(path)
    shared = Path(__file__).resolve().parents[2] / "shared/reference/xtree-site/trees/webarena.json"
    if shared.is_file():
        return XTree.load(shared)
    from importlib.resources import files

    from xtree_gym import mine, read_corpus

    sample = files("xtree_gym") / "data/scienceworld_gold_sample.jsonl.gz"
    return mine(read_corpus(str(sample)).trajectories, "scienceworld", domain="scienceworld")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--tree")
    ap.add_argument("--steps", type=int, default=200_000)
    args = ap.parse_args()
    tree = load_tree(args.tree)
    rng = random.Random(0)
    stream: list[str] = []
    while len(stream) < args.steps:
        if rng.random() < 0.8:
            stream.extend(rng.choice(tree.nodes).expansion)
        else:
            stream.append("unknown<token>")
    stream = stream[: args.steps]
    m = tree.matcher()
    t0 = time.perf_counter_ns()
    n_matches = 0
    for tok in stream:
        n_matches += len(m.feed(tok))
    per_step = (time.perf_counter_ns() - t0) / len(stream)
    # Baseline: re-scan a window of the last max-length tokens every step (what a naive wrapper does).
    window = max(n.length for n in tree.nodes)
    patterns = [(n.id, n.expansion) for n in tree.nodes]
    k = min(len(stream), 2000)
    t0 = time.perf_counter_ns()
    for i in range(k):
        naive_find_matches(patterns, stream[max(0, i - window + 1) : i + 1])
    naive = (time.perf_counter_ns() - t0) / k
    print(f"tree: {len(tree)} nodes, max length {window}; stream: {len(stream)} steps, {n_matches} matches")
    print(f"streaming matcher: {per_step:,.0f} ns/step")
    print(f"naive window re-scan: {naive:,.0f} ns/step  (ratio {naive / per_step:.0f}x)")


if __name__ == "__main__":
    main()
