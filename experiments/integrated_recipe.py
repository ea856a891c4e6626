"""All three integrations in one run (the paper never combines them): X-Tree as data, reward and context.

1. data: SFT warm start on X-Tree node rows (App. D: one row per tiling token) of the ScienceWorld
   gold corpus (``xtree_gym.agents.sft_offline.sft``);
2. reward + context: from that checkpoint, GRPO with the adaptive X-Tree bonus (Eq. 3) and the OPSD term
   (Eq. 4) whose teacher reads the X-Tree card, in the same run (``shaping: xtree`` + ``opsd: xtree``).

Reference arms from the same warm start: outcome only, bonus only, OPSD only — so the table shows what
the combination adds over each integration alone.

    python -m experiments.integrated_recipe --smoke   # CPU, ~4-8 min: 6 trajectories, tiny-random, 1 SFT epoch, 1 RL step
    python -m experiments.integrated_recipe --full --set base.model=/models/Qwen2.5-1.5B-Instruct
        # GPUs: Table 6's warm start on 200 trajectories' node rows (8×80 GB, ~1 h at 1.5B), then 4 arms × 3
        # seeds of Table 7's ScienceWorld RLVR (8×80 GB GPUs per run, ~1 day each at 100 steps)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._banks import mined_tree
from ._corpora import scienceworld_corpus, subsample
from ._results import Report, script_main
from ._rlvr import ArmsConfig, arms_report

NAME = "integrated_recipe"
LABELS = {"outcome": "node-row warm start → outcome only", "bonus": "→ + X-Tree bonus",
          "opsd": "→ + OPSD (X-Tree card)", "all": "→ + X-Tree bonus + OPSD (all three)"}  # fmt: skip


@dataclass(frozen=True)
class Config(ArmsConfig):
    """RLVR settings (``base.model`` is the warm start's start weights) and the warm start's."""

    warm_start: int = 200
    """Trajectories whose node rows the warm start trains on (the paper's ScienceWorld warm start: 200)."""
    sft: dict[str, Any] = field(
        default_factory=lambda: {"epochs": 5, "lr": 1e-5, "batch_size": 256, "max_len": 4096}
    )
    """SFTConfig fields (Table 6)."""


SMOKE = Config.smoke(warm_start=4, sft={"epochs": 1, "lr": 1e-3, "batch_size": 64, "max_len": 2048})
FULL = Config()


def warm_start_node_rows(
    corpus: list[Any], tree: Any, model: str, sft: dict[str, Any], out: Path
) -> tuple[str, dict[str, Any]]:
    """SFT on the node rows of ``corpus``; returns the checkpoint's model folder and the SFT summary."""
    from xtree_gym.agents.model.loading import load_tokenizer
    from xtree_gym.agents.run.checkpoint import find_checkpoint
    from xtree_gym.agents.sft_offline.rows import build_rows, summarize, write_rows
    from xtree_gym.agents.sft_offline.sft import SFTConfig, train_sft

    rows = build_rows(corpus, "node", tree=tree, domain="scienceworld", tokenizer=load_tokenizer(model))
    write_rows(out / "node_rows.jsonl.gz", rows)
    res = train_sft(SFTConfig(rows=str(out / "node_rows.jsonl.gz"), model=model, output_dir=str(out / "sft"),
                              progress=False, tensorboard=False, **sft))  # fmt: skip
    info = {"rows": summarize(rows), **{k: res.get(k) for k in ("initial_loss", "final_loss")}}
    return str(find_checkpoint(out / "sft") / "model"), info


def max_abs_opsd(runs: list[dict[str, Any]]) -> float:
    """The largest |OPSD term| of any step of an arm's runs (0 without OPSD)."""
    return max((abs(s.get("opsd", 0.0)) for r in runs for s in r["steps"]), default=0.0)


def run(cfg: Config, out: Path) -> Report:
    corpus, source = scienceworld_corpus()
    tree, tp = mined_tree(corpus, "scienceworld", out / "tree.json")
    model, sft = warm_start_node_rows(
        subsample(corpus, cfg.warm_start, 0), tree, cfg.base["model"], cfg.sft, out
    )
    arms = {
        "outcome": {"shaping": "none"},
        "bonus": {"shaping": "xtree", "tree": tp},
        "opsd": {"opsd": "xtree", "tree": tp},
        "all": {"shaping": "xtree", "opsd": "xtree", "tree": tp},
    }
    warm = (f"Warm start: {sft['rows']['rows']} node rows of {cfg.warm_start} gold trajectories "
            f"({sft['rows']['supervised_actions']} actions), SFT loss {sft['initial_loss']:.3f} → {sft['final_loss']:.3f}.")  # fmt: skip
    return arms_report(
        cfg, arms, out, {"tree": {"nodes": len(tree), "source": source}, "warm_start": sft},
        base={**cfg.base, "model": model}, labels=LABELS, digits=4, stats={"max_abs_opsd_term": max_abs_opsd},
        title=f"# Integrated recipe: X-Tree as data + reward + context (ScienceWorld, {cfg.base['model']})",
        above=[warm],
        header=["run", "train success (%)", "Δ vs outcome", "held-out (%)", "λ_g", "bonus", "max |OPSD term|"],
        after=lambda a, r, s: [r["lambda_g"]["mean"], r["bonus"]["mean"], s["max_abs_opsd_term"][a]],
        note=f"Tree: {len(tree)} nodes from {source}; all four arms start from the same warm start.",
    )  # fmt: skip


main = script_main(NAME, __doc__ or "", SMOKE, FULL, run)

if __name__ == "__main__":
    raise SystemExit(main())
