"""Table 20: what the bonus reads — outcome only, random spans, a random tree, the X-Tree (ScienceWorld).

Random spans: one corpus span per X-Tree node, same length, uniform position (stored as a left-deep
chain, so its prefixes are nodes too). Random tree: as many merges as the X-Tree, each pair drawn
uniformly among the miner's candidates (``xtree_gym.rewards.instances.random_tree``). "#Match" counts the
node occurrences each bank matches over the mining corpus.

    python -m experiments.table20_bank_ablation --smoke   # CPU, ~2-5 min: tiny-random, 1 step per arm
    python -m experiments.table20_bank_ablation --full --set base.model=/models/Qwen2.5-1.5B-Instruct
        # GPUs: 4 arms × 3 seeds of Table 7's 1.5B recipe (8×80 GB GPUs per run)
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._banks import match_count, mined_tree, random_span_tree, random_tree_like
from ._corpora import scienceworld_corpus
from ._results import Report, script_main
from ._rlvr import ArmsConfig, arms_report

NAME = "table20_bank_ablation"
LABELS = {"outcome": "Empty (outcome-only)", "random_spans": "Random spans", "random_tree": "Random tree",
          "xtree": "X-Tree"}  # fmt: skip


@dataclass(frozen=True)
class Config(ArmsConfig):
    """Base trainer config, seeds, window and the controls' seed."""

    control_seed: int = 0
    """Seed of the random-spans and random-tree draws."""


SMOKE = Config.smoke()
FULL = Config()


def run(cfg: Config, out: Path) -> Report:
    corpus, source = scienceworld_corpus()
    tree, xt = mined_tree(corpus, "scienceworld", out / "tree.json")
    spans, sp = random_span_tree(corpus, tree, "scienceworld", out / "random_spans.json", cfg.control_seed)
    rtree, rt = random_tree_like(corpus, tree, "scienceworld", out / "random_tree.json", cfg.control_seed)
    banks = {"random_spans": (spans, sp), "random_tree": (rtree, rt), "xtree": (tree, xt)}
    arms: dict[str, dict[str, Any]] = {"outcome": {"shaping": "none"}}
    arms.update({k: {"shaping": "xtree", "tree": p} for k, (_, p) in banks.items()})
    matches = {k: match_count(t, corpus, "scienceworld") for k, (t, _) in banks.items()}
    return arms_report(
        cfg, arms, out, {"banks": {k: {"nodes": len(t), "matches": matches[k]} for k, (t, _) in banks.items()}},
        labels=LABELS, title=f"# Table 20: bank ablation, ScienceWorld, {cfg.size()}",
        header=["bank", "nodes", "# Match", "train success (%)", "Δ vs outcome", "held-out (%)"],
        before=lambda a: [len(banks[a][0]) if a in banks else "–", matches.get(a, "–")],
        note=f"Banks built from {source}. # Match: node occurrences over that corpus.",
    )  # fmt: skip


main = script_main(NAME, __doc__ or "", SMOKE, FULL, run)

if __name__ == "__main__":
    raise SystemExit(main())
