"""Table 5 (training side): WebShop RLVR with trees mined from N random trajectories of the corpus.

Each arm's tree is mined from a random N-trajectory subsample of the collected WebShop corpus
(``table5_mining_size`` measures the node counts alone); everything else is fixed. The outcome-only arm
is the reference row.

    python -m experiments.table5_webshop_rlvr --smoke   # CPU, ~2-4 min: tiny-random, N = 50, 1 step per arm
    python -m experiments.table5_webshop_rlvr --full --set base.model=/models/Qwen2.5-1.5B-Instruct
        # GPUs: 6 arms × 3 seeds of Table 7's 1.5B WebShop recipe (8×80 GB GPUs per run)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._banks import mined_tree
from ._corpora import subsample, webshop_corpus
from ._results import Report, script_main
from ._rlvr import WEBSHOP_FULL, WEBSHOP_SMOKE, ArmsConfig, arms_report

NAME = "table5_webshop_rlvr"


@dataclass(frozen=True)
class Config(ArmsConfig):
    """Base trainer config, seeds, window, mining sizes, corpus size."""

    base: dict[str, Any] = field(default_factory=lambda: dict(WEBSHOP_FULL))
    """GRPOConfig fields shared by every arm."""
    sizes: tuple[int, ...] = (50, 100, 200, 500, 1824)
    """Mining-corpus sizes N."""
    corpus_episodes: int = 1824
    """Collected WebShop corpus size (the paper's ETO corpus: 1,824)."""
    subsample_seed: int = 0
    """Seed of the N-trajectory draws."""


SMOKE = Config.smoke(WEBSHOP_SMOKE, sizes=(50,), corpus_episodes=200)
FULL = Config()


def run(cfg: Config, out: Path) -> Report:
    corpus = webshop_corpus(cfg.corpus_episodes)
    arms: dict[str, dict[str, Any]] = {"outcome": {"shaping": "none"}}
    nodes = {}
    for n in cfg.sizes:
        tree, path = mined_tree(subsample(corpus, n, cfg.subsample_seed), "webshop", out / f"tree_{n}.json")
        nodes[f"xtree-{n}"] = len(tree)
        arms[f"xtree-{n}"] = {"shaping": "xtree", "tree": path}
    return arms_report(
        cfg, arms, out, {"corpus": len(corpus), "nodes": nodes}, before=lambda a: [nodes.get(a, "–")],
        labels={a: "outcome only" if a == "outcome" else a.split("-")[1] for a in arms}, curve_labels={},
        title=f"# Table 5: WebShop mining-corpus size, {cfg.size()}",
        header=["# Traj", "nodes", "train success (%)", "Δ vs outcome", "held-out (%)"],
        note=f"Trees mined from random subsamples of {len(corpus)} collected scripted-shopper episodes.",
    )  # fmt: skip


main = script_main(NAME, __doc__ or "", SMOKE, FULL, run)

if __name__ == "__main__":
    raise SystemExit(main())
