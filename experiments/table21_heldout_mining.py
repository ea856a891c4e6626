"""Table 21: the ScienceWorld tree re-mined without the held-out (G2) task types, and RLVR on G2 with it.

Top: how the tree changes when the 10 G2 task types leave the mining corpus (nodes, nodes kept/new/gone
by expansion, bonus matches over the G2 types' gold episodes). Bottom: training on G2's ``train`` fold
(the 19 seen types) with outcome only, the original tree and the re-mined tree, everything else fixed;
held-out success is measured on G2 when ``eval_every`` is set (full size).

    python -m experiments.table21_heldout_mining --smoke   # CPU, ~2-5 min: tiny-random, 1 step per arm
    python -m experiments.table21_heldout_mining --full --set base.model=/models/Qwen2.5-1.5B-Instruct
        # GPUs: 3 arms × 3 seeds of Table 7's 1.5B recipe with eval_fold G2 (8×80 GB GPUs per run)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xtree_gym.agents.grpo.remine import node_diff
from xtree_gym.envs.sciworld_folds import HELD_OUT_TYPES

from ._banks import match_count, mined_tree
from ._corpora import scienceworld_corpus
from ._results import Report, markdown_table, script_main
from ._rlvr import SCIENCEWORLD_FULL, SCIENCEWORLD_SMOKE, ArmsConfig, arms_report

NAME = "table21_heldout_mining"
LABELS = {"outcome": "outcome only", "xtree": "+ X-Tree (original)",
          "xtree_remined": "+ X-Tree (re-mined w/o G2)"}  # fmt: skip


@dataclass(frozen=True)
class Config(ArmsConfig):
    """Base trainer config (trains on fold ``train``, evaluates on G2), seeds, window."""

    base: dict[str, Any] = field(
        default_factory=lambda: {**SCIENCEWORLD_FULL, "task_split": "train", "eval_fold": "G2"}
    )
    """GRPOConfig fields shared by every arm."""


SMOKE = Config.smoke({**SCIENCEWORLD_SMOKE, "task_split": "train"})
FULL = Config()


def run(cfg: Config, out: Path) -> Report:
    corpus, source = scienceworld_corpus()
    held = set(HELD_OUT_TYPES)
    kept = [t for t in corpus if t.task not in held]
    g2 = [t for t in corpus if t.task in held]
    tree, tp = mined_tree(corpus, "scienceworld", out / "tree.json")
    retree, rp = mined_tree(kept, "scienceworld", out / "tree_without_g2.json")
    diff = node_diff(tree, retree)
    top: dict[str, Any] = {
        "original": {"corpus": len(corpus), "nodes": len(tree), "g2_matches": match_count(tree, g2, "scienceworld")},
        "remined": {"corpus": len(kept), "nodes": len(retree), "g2_matches": match_count(retree, g2, "scienceworld")},
        "diff": diff, "held_out_types": sorted(held), "g2_episodes": len(g2),
    }  # fmt: skip
    arms = {"outcome": {"shaping": "none"}, "xtree": {"shaping": "xtree", "tree": tp},
            "xtree_remined": {"shaping": "xtree", "tree": rp}}  # fmt: skip
    o, r = top["original"], top["remined"]
    trees = markdown_table(["tree", "mining corpus", "nodes", "matches on G2 types' episodes", "kept / new / gone"],
                           [["original", o["corpus"], o["nodes"], o["g2_matches"], "—"],
                            ["re-mined w/o G2 types", r["corpus"], r["nodes"], r["g2_matches"],
                             f"{diff['stayed']} / {diff['came']} / {diff['went']}"]])  # fmt: skip
    return arms_report(
        cfg, arms, out, {"trees": top}, tail={"source": source}, labels=LABELS,
        title=f"# Table 21: mining without the held-out task types (ScienceWorld, {cfg.base['model']})",
        above=[trees],
        header=["reward", "train success (%)", "Δ vs outcome", "G2 held-out (%)"],
        note=f"Corpus: {source}; the {len(held)} G2 task types have {len(g2)} gold episodes in it.",
    )  # fmt: skip


main = script_main(NAME, __doc__ or "", SMOKE, FULL, run)

if __name__ == "__main__":
    raise SystemExit(main())
