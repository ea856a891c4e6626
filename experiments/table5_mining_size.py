"""Table 5 (mining side): how many nodes a tree gets when mined from N random trajectories of a corpus.

The paper re-mines its WebShop tree from N ∈ {50, 100, 200, 500, 1,824} random ETO trajectories and
reports nodes (9, 11, 16, 24, 48) next to the RLVR success each tree reaches. This script measures the
mining columns on our corpora (WebShop: the scripted-shopper corpus, collected here; ScienceWorld: the
gold corpus), several subsample seeds per N; the success column needs training
(``experiments/table5_webshop_rlvr.py``).

    python -m experiments.table5_mining_size --smoke     # ~2 s: packaged ScienceWorld sample, 2 sizes
    python -m experiments.table5_mining_size --full      # ~2 min on 1 CPU: both corpora, 5 sizes, 5 seeds
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from xtree_gym.mining import mine

from ._corpora import scienceworld_corpus, subsample, webshop_corpus, webshop_data_dir
from ._results import Report, markdown_table, new_figure, script_main

NAME = "table5_mining_size"


@dataclass(frozen=True)
class Config:
    """Sizes, seeds and corpora of the mining-size sweep."""

    sizes: tuple[int, ...] = (50, 100, 200, 500, 1824)
    """Trajectories per subsample; a size above the corpus size means the whole corpus."""
    seeds: tuple[int, ...] = (0, 1, 2, 3, 4)
    """Subsample seeds per size (the paper reports one draw)."""
    corpora: tuple[str, ...] = ("webshop", "scienceworld")
    """Which corpora to sweep."""
    webshop_episodes: int = 1824
    """WebShop corpus size (the paper's ETO corpus has 1,824 trajectories)."""


SMOKE = Config(sizes=(20, 60), seeds=(0, 1), corpora=("scienceworld",), webshop_episodes=0)
FULL = Config()


def sweep(
    corpus: list[Any], preset: str, domain: str, sizes: tuple[int, ...], seeds: tuple[int, ...]
) -> list[dict[str, Any]]:
    """One row per size: node count per seed, their mean/min/max, and the bound that stopped mining."""
    rows = []
    for n in sizes:
        n_eff = min(n, len(corpus))
        per_seed: list[dict[str, Any]] = []
        for s in seeds if n_eff < len(corpus) else seeds[:1]:  # the whole corpus is one draw
            tree = mine(subsample(corpus, n_eff, s), preset, domain=domain)
            per_seed.append({"seed": s, "nodes": len(tree), "bound": tree.bound,
                             "max_depth": max(tree.depth_histogram(), default=0),
                             "compression": tree.compression_ratio})  # fmt: skip
        nodes = [r["nodes"] for r in per_seed]
        rows.append({
            "trajectories": n_eff, "requested": n, "per_seed": per_seed,
            "nodes_mean": statistics.fmean(nodes), "nodes_min": min(nodes), "nodes_max": max(nodes),
            "bounds": sorted({r["bound"] for r in per_seed}),
            "compression_mean": statistics.fmean(r["compression"] or 0.0 for r in per_seed),
        })  # fmt: skip
    return rows


def table(results: dict[str, Any]) -> str:
    parts = ["# Table 5 (mining side): nodes vs mining-corpus size\n"]
    for name, block in results["corpora"].items():
        rows = [
            [r["trajectories"], r["nodes_mean"], f"{r['nodes_min']}–{r['nodes_max']}", ", ".join(r["bounds"]),
             r["compression_mean"], "—"]
            for r in block["rows"]
        ]  # fmt: skip
        parts += [
            f"## {name}: {block['source']} ({block['size']} trajectories, {block['successes']} successes), "
            f"preset `{block['preset']}`\n",
            markdown_table(
                ["# Traj", "nodes (mean over seeds)", "range", "bound by", "compression", "RLVR success (%)"],
                rows,
            ),
            "",
        ]
    parts.append(
        "Nodes: mean over the subsample seeds (the full corpus is one draw). RLVR success needs the trainer: "
        "`python -m experiments.table5_webshop_rlvr`. Paper (WebShop, ETO corpus): 50→9, 100→11, 200→16, "
        "500→24, 1,824→48 nodes."
    )
    return "\n".join(parts)


def figure(results: dict[str, Any]) -> Any:
    fig, axes = new_figure(4.2, 3.0)
    ax = axes[0][0]
    for name, block in results["corpora"].items():
        xs = [r["trajectories"] for r in block["rows"]]
        ax.plot(xs, [r["nodes_mean"] for r in block["rows"]], marker="o", label=name)
        ax.fill_between(
            xs, [r["nodes_min"] for r in block["rows"]], [r["nodes_max"] for r in block["rows"]], alpha=0.15
        )
    ax.set_xscale("log")
    ax.set_xlabel("mining-corpus size (trajectories)")
    ax.set_ylabel("nodes")
    ax.legend(fontsize=8)
    return fig


def run(cfg: Config, out: Path) -> Report:
    corpora: dict[str, Any] = {}
    for name in cfg.corpora:
        if name == "webshop":
            if webshop_data_dir() is None:
                continue  # said in the table: no catalogue, no WebShop block
            corpus, source, preset, domain = (
                webshop_corpus(cfg.webshop_episodes),
                "scripted shoppers (mixed)",
                "webshop",
                "webshop",
            )
        else:
            corpus, source = scienceworld_corpus()
            preset = domain = "scienceworld"
        corpora[name] = {
            "source": source, "size": len(corpus), "successes": sum(t.success for t in corpus), "preset": preset,
            "rows": sweep(corpus, preset, domain, cfg.sizes, cfg.seeds),
        }  # fmt: skip
    results = {"corpora": corpora}
    return Report(results, table(results), {"nodes_vs_size": figure(results)})


main = script_main(NAME, __doc__ or "", SMOKE, FULL, run)

if __name__ == "__main__":
    raise SystemExit(main())
