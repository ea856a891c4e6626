"""Table 6: the X-Tree of each corpus, mined with the paper's per-benchmark settings.

Rows as in the paper (mining hyper-parameters, then the corpus and what mining produced); one column
per corpus we mine — ScienceWorld gold episodes and a collected WebShop corpus — next to the paper's
column for the same benchmark. WebArena's column is the paper's only: its corpus needs the user's own
WebArena servers (and 7,974 agent trajectories); ``xtree mine corpus.jsonl --preset webarena`` mines it.

    python -m experiments.table6_trees --smoke    # ~3 s: packaged ScienceWorld sample, 60 WebShop episodes
    python -m experiments.table6_trees --full     # ~1.5 min on 1 CPU: 826 gold episodes, 1,824 WebShop episodes

Writes ``tree_<corpus>.json`` (the tree files) beside the table and a depth/length histogram figure.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from xtree_gym.mining import mine, trajectory_tokens
from xtree_gym.mining.config import MinerConfig
from xtree_gym.mining.tree import XTree

from ._corpora import scienceworld_corpus, webshop_corpus, webshop_data_dir
from ._results import Report, markdown_table, new_figure, script_main

NAME = "table6_trees"

PAPER: dict[str, dict[str, Any]] = {
    "webarena": {"corpus": 7974, "primitives": 139, "nodes": "256 (cap)"},
    "scienceworld": {"corpus": 1673, "primitives": 84, "nodes": "80 (cap)"},
    "webshop": {"corpus": 1824, "primitives": 17, "nodes": "48 (compression)"},
}
"""Table 6's corpus rows as printed in the paper (its hyper-parameter rows are our presets)."""


@dataclass(frozen=True)
class Config:
    """Which corpora to mine and how big the collected WebShop corpus is."""

    webshop_episodes: int = 1824
    """Scripted-shopper episodes to collect (0: no WebShop column)."""
    webshop_seed: int = 0
    """Seed of the WebShop collection."""


SMOKE = Config(webshop_episodes=60)
FULL = Config()


def mine_trees(cfg: Config) -> dict[str, tuple[XTree, list[Any], str]]:
    """corpus name -> (tree, corpus, source); WebShop only when its catalogue is present."""
    corpus, source = scienceworld_corpus()
    out = {
        "scienceworld": (
            mine(corpus, "scienceworld", domain="scienceworld", name="scienceworld"),
            corpus,
            source,
        )
    }
    if cfg.webshop_episodes and webshop_data_dir() is not None:
        ws = webshop_corpus(cfg.webshop_episodes, cfg.webshop_seed)
        out["webshop"] = (
            mine(ws, "webshop", domain="webshop", name="webshop"),
            ws,
            "scripted shoppers (mixed)",
        )
    return out


def column(tree: XTree, corpus: list[Any], domain: str) -> dict[str, Any]:
    """The numbers of one Table 6 column for a mined tree."""
    cfg = tree.miner_config or MinerConfig()
    toks = trajectory_tokens(corpus, domain)
    return {
        "p_len_p_succ": f"{cfg.p_len:g}, {cfg.p_succ:g}", "eps": cfg.eps, "eta": cfg.eta, "cap": cfg.cap,
        "max_len": cfg.max_len, "min_freq": cfg.min_freq, "min_succ": cfg.min_succ,
        "min_task_types": cfg.min_task_types, "corpus": len(corpus),
        "successes": sum(bool(t.success) for t in corpus), "steps": sum(len(t) for t in toks),
        "primitives": len({x for t in toks for x in t}), "nodes": len(tree), "bound": tree.bound,
        "depths": tree.depth_histogram(), "lengths": dict(sorted(Counter(n.length for n in tree.nodes).items())),
        "compression": tree.compression_ratio,
    }  # fmt: skip


ROWS = [
    ("p_ℓ, p_s", "p_len_p_succ"), ("floor ε", "eps"), ("η", "eta"), ("cap", "cap"), ("max. length (primitives)", "max_len"),
    ("min. pair frequency", "min_freq"), ("min. success", "min_succ"), ("min. task types per node", "min_task_types"),
]  # fmt: skip


def table(results: dict[str, Any]) -> str:
    cols = results["columns"]
    names = list(cols)
    header = ["setting", *[f"{n} (ours)" for n in names], *[f"{n} (paper)" for n in ("webarena", *names)]]
    presets = {n: MinerConfig.preset(n).to_dict() for n in ("webarena", *names)}

    def paper_setting(n: str, key: str) -> Any:
        p = presets[n]
        return f"{p['p_len']:g}, {p['p_succ']:g}" if key == "p_len_p_succ" else p[key]

    rows = [
        [label, *[cols[n][key] for n in names], *[paper_setting(n, key) for n in ("webarena", *names)]]
        for label, key in ROWS
    ]
    rows += [
        ["mining corpus (trajectories)", *[cols[n]["corpus"] for n in names], *[PAPER[n]["corpus"] for n in ("webarena", *names)]],
        ["primitive types", *[cols[n]["primitives"] for n in names], *[PAPER[n]["primitives"] for n in ("webarena", *names)]],
        ["nodes mined (bound by)", *[f"{cols[n]['nodes']} ({cols[n]['bound']})" for n in names],
         *[PAPER[n]["nodes"] for n in ("webarena", *names)]],
        ["successful trajectories", *[cols[n]["successes"] for n in names], "—", *["—" for _ in names]],
        ["compression (steps / tiles)", *[f"{cols[n]['compression']:.2f}" for n in names], "—", *["—" for _ in names]],
    ]  # fmt: skip
    src = "; ".join(f"{n}: {results['sources'][n]}" for n in names)
    return "\n".join([
        "# Table 6: X-Tree construction per benchmark\n",
        markdown_table(header, rows, digits=3), "",
        f"Corpora: {src}. Our corpora are not the paper's (AgentTraj-L for ScienceWorld, ETO for WebShop): "
        "the settings rows are the same, the corpus rows differ. WebArena needs the user's own corpus and servers.",
    ])  # fmt: skip


def figure(trees: dict[str, XTree]) -> Any:
    fig, axes = new_figure(3.6 * len(trees), 5.0, ncols=len(trees), nrows=2)
    for j, (name, tree) in enumerate(trees.items()):
        for i, (key, label) in enumerate((("depth", "depth"), ("length", "length (primitives)"))):
            c = sorted(Counter(getattr(n, key) for n in tree.nodes).items())
            ax = axes[i][j]
            ax.bar([k for k, _ in c], [v for _, v in c], color="#5b8def")
            ax.set_xlabel(label)
            ax.set_ylabel("nodes")
        axes[0][j].set_title(f"{name}: {len(tree)} nodes ({tree.bound})", fontsize=9)
    fig.tight_layout()
    return fig


def run(cfg: Config, out: Path) -> Report:
    mined = mine_trees(cfg)
    results = {
        "columns": {n: column(tree, corpus, n) for n, (tree, corpus, _) in mined.items()},
        "sources": {n: src for n, (_, _, src) in mined.items()},
        "paper": PAPER,
    }
    out.mkdir(parents=True, exist_ok=True)
    for n, (tree, _, _) in mined.items():
        tree.save(out / f"tree_{n}.json")
    return Report(results, table(results), {"trees": figure({n: t for n, (t, _, _) in mined.items()})})


main = script_main(NAME, __doc__ or "", SMOKE, FULL, run)

if __name__ == "__main__":
    raise SystemExit(main())
