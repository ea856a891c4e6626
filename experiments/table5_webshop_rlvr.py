"""Table 5 (training side): WebShop RLVR with trees mined from N random trajectories of the corpus.

Each arm's tree is mined from a random N-trajectory subsample of the collected WebShop corpus
(``table5_mining_size`` measures the node counts alone); everything else is fixed. The outcome-only arm
is the reference row.

    python -m experiments.table5_webshop_rlvr --smoke   # CPU, ~2-4 min: tiny-random, N = 50, 1 step per arm
    python -m experiments.table5_webshop_rlvr --full --set base.model=/models/Qwen2.5-1.5B-Instruct
        # GPUs: 6 arms × 3 seeds of Table 7's 1.5B WebShop recipe (8×80 GB GPUs per run)
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._banks import mined_tree
from ._corpora import subsample, webshop_corpus
from ._results import experiment_main, markdown_table, provenance, write_results
from ._rlvr import WEBSHOP_FULL, WEBSHOP_SMOKE, arm_row, curves_figure, delta, pm, run_arms

NAME = "table5_webshop_rlvr"


@dataclass(frozen=True)
class Config:
    """Mining sizes, corpus size, base trainer config, seeds, window."""

    sizes: tuple[int, ...] = (50, 100, 200, 500, 1824)
    """Mining-corpus sizes N."""
    corpus_episodes: int = 1824
    """Collected WebShop corpus size (the paper's ETO corpus: 1,824)."""
    base: dict[str, Any] = field(default_factory=lambda: dict(WEBSHOP_FULL))
    """GRPOConfig fields shared by every arm."""
    seeds: tuple[int, ...] = (0, 1, 2)
    """Training seeds per arm."""
    window: int = 10
    """Steps averaged for the final training success."""
    subsample_seed: int = 0
    """Seed of the N-trajectory draws."""


SMOKE = Config(sizes=(50,), corpus_episodes=200, base={**WEBSHOP_SMOKE, "steps": 1}, seeds=(0,), window=1)
FULL = Config()


def run(cfg: Config, out: Path) -> dict[str, Any]:
    t0 = time.perf_counter()
    corpus = webshop_corpus(cfg.corpus_episodes)
    arms: dict[str, dict[str, Any]] = {"outcome": {"shaping": "none"}}
    nodes = {}
    for n in cfg.sizes:
        tree, path = mined_tree(subsample(corpus, n, cfg.subsample_seed), "webshop", out / f"tree_{n}.json")
        nodes[f"xtree-{n}"] = len(tree)
        arms[f"xtree-{n}"] = {"shaping": "xtree", "tree": path}
    runs = run_arms(cfg.base, arms, cfg.seeds, out)
    rows = {a: arm_row(runs[a], cfg.window) for a in arms}
    results = {"corpus": len(corpus), "nodes": nodes, "rows": rows, "runs": runs, **provenance(cfg, t0)}
    md = "\n".join([
        f"# Table 5: WebShop mining-corpus size, {cfg.base['model']} ({len(cfg.seeds)} seed(s), {cfg.base['steps']} steps)\n",
        markdown_table(["# Traj", "nodes", "train success (%)", "Δ vs outcome", "held-out (%)"],
                       [["outcome only" if a == "outcome" else a.split("-")[1], nodes.get(a, "–"), pm(r["train_success"]),
                         delta(r, rows["outcome"]) if a != "outcome" else "—", pm(r["eval_success"])]
                        for a, r in rows.items()]),
        "",
        f"Trees mined from random subsamples of {len(corpus)} collected scripted-shopper episodes.",
    ])  # fmt: skip
    write_results(out, results, md, {"curves": curves_figure(runs, {})})
    return results


def main(argv: list[str] | None = None) -> int:
    return experiment_main(NAME, __doc__ or "", SMOKE, FULL, run, argv)


if __name__ == "__main__":
    raise SystemExit(main())
