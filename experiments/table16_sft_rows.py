"""Table 16: SFT on standard rows vs length-matched random spans vs X-Tree node rows, with the token accounting.

All three formats supervise the same gold actions of the ScienceWorld corpus; only the cut differs
(``xtree_gym.agents.sft_offline.rows``): one row per step (standard), one row per tiling token of the X-Tree
(node, App. D), or the node rows' lengths in a seeded random order (span: the length-matched control).
The accounting (rows, supervised actions, tokens, tokens per action, prompt share) is measured with the
policy's tokenizer; each format then warm-starts a policy (``xtree_gym.agents.sft_offline.sft.train_sft``) and we
report its target-token loss before and after on its own rows.

    python -m experiments.table16_sft_rows --smoke   # CPU, ~1 min: 40 trajectories, tiny-random, 1 epoch
    python -m experiments.table16_sft_rows --full --set model=/models/Qwen2.5-1.5B-Instruct
        # accounting: minutes on CPU (826 gold episodes); SFT: Table 6's warm start (5 epochs, lr 1e-5,
        # batch 256, 4,096 tokens) on 8×80 GB GPUs, ~1 h per format at 1.5B. The paper's success rates
        # (G0/G1) come from evaluating each warm start: `xtree eval` on the checkpoint.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from xtree_gym.agents.sft_offline.rows import FORMATS, build_rows, summarize, write_rows

from ._banks import mined_tree
from ._corpora import scienceworld_corpus, subsample
from ._results import Report, markdown_table, new_figure, page, script_main

NAME = "table16_sft_rows"
LABELS = {
    "standard": "standard (one row per step)",
    "span": "length-matched random spans",
    "node": "X-Tree node rows",
}


@dataclass(frozen=True)
class Config:
    """Corpus size, tokenizer/model and the SFT settings."""

    trajectories: int = 0
    """Trajectories of the gold corpus whose rows are built (0 = all); the tree is mined from all of them."""
    model: str = "Qwen2.5-1.5B-Instruct"
    """Policy (its tokenizer does the accounting): an HF folder, ``smollm2`` or ``tiny-random``."""
    train: bool = True
    """Run SFT on each format (False: accounting only)."""
    epochs: int = 5
    """SFT epochs (Table 6: 5)."""
    lr: float = 1e-5
    """SFT learning rate (Table 6: 1e-5)."""
    batch_size: int = 256
    """Rows per optimizer step (Table 6: 256)."""
    max_len: int = 4096
    """Longest row in tokens (Table 6: 4,096 on ScienceWorld)."""
    warm_start: int = 0
    """SFT on the rows of only this many trajectories (0 = all; the paper's ScienceWorld warm start: 200)."""
    seed: int = 0
    """Seed of the span cuts, the subsample and SFT."""


SMOKE = Config(
    trajectories=4, model="tiny-random", epochs=1, lr=1e-3, batch_size=64, max_len=2048, warm_start=1
)
FULL = Config(warm_start=200)


def run(cfg: Config, out: Path) -> Report:
    from xtree_gym.agents.model.loading import load_tokenizer
    from xtree_gym.agents.sft_offline.sft import SFTConfig, train_sft

    corpus, source = scienceworld_corpus()
    tree, _ = mined_tree(corpus, "scienceworld", out / "tree.json")  # the whole corpus's tree, as in training
    if cfg.trajectories:
        corpus = subsample(corpus, cfg.trajectories, cfg.seed)
    tok = load_tokenizer(cfg.model)
    formats: dict[str, Any] = {}
    for fmt in ("standard", "span", "node"):
        assert fmt in FORMATS
        rows = build_rows(corpus, fmt, tree=tree, domain="scienceworld", tokenizer=tok, seed=cfg.seed)
        path = out / f"rows_{fmt}.jsonl.gz"
        write_rows(path, rows)
        entry: dict[str, Any] = {"accounting": summarize(rows)}
        if cfg.train:
            res = train_sft(SFTConfig(rows=str(path), model=cfg.model, epochs=cfg.epochs, lr=cfg.lr,
                                      batch_size=cfg.batch_size, max_len=cfg.max_len, seed=cfg.seed, warm_start=cfg.warm_start,
                                      output_dir=str(out / "runs" / fmt), progress=False, tensorboard=False))  # fmt: skip
            entry["sft"] = {
                k: res.get(k) for k in ("initial_loss", "final_loss", "skipped_rows", "step", "tokens")
            }
        formats[fmt] = entry
    results = {"corpus": {"source": source, "trajectories": len(corpus)}, "tree_nodes": len(tree),
               "formats": formats}  # fmt: skip
    std = formats["standard"]["accounting"]["tokens"] or 1
    rows_md = []
    for fmt, e in formats.items():
        a, s = e["accounting"], e.get("sft", {})
        rows_md.append([LABELS[fmt], a["rows"], a["supervised_actions"], a["tokens"], a["tokens_per_action"],
                        a["prompt_share"], f"{100 * (a['tokens'] or 0) / std:.0f}%", s.get("initial_loss"),
                        s.get("final_loss"), "—", "—"])  # fmt: skip
    md = page(
        f"# Table 16: SFT row formats on ScienceWorld ({len(corpus)} gold trajectories, {cfg.model})",
        markdown_table(["rows", "# rows", "supervised actions", "tokens", "tokens / action", "prompt share",
                        "tokens vs standard", "loss before", "loss after", "G0 (%)", "G1 (%)"], rows_md, digits=3),
        f"Tree: {len(tree)} nodes mined from the whole corpus ({source}). Loss: target-token mean NLL "
        f"of the format's own rows (those of the {cfg.warm_start or len(corpus)} warm-start trajectories) before and after {cfg.epochs} epoch(s) of SFT. G0/G1: evaluate each "
        "warm start with `xtree eval` (GPU size; not run here).",
    )  # fmt: skip
    fig, axes = new_figure(4.5, 3.0)
    ax = axes[0][0]
    names = list(formats)
    ax.bar(
        names, [formats[f]["accounting"]["tokens"] or 0 for f in names], color=["#999", "#e8a33d", "#3fa46a"]
    )
    ax.set_ylabel("SFT tokens (prompt + target)")
    return Report(results, md, {"tokens": fig})


main = script_main(NAME, __doc__ or "", SMOKE, FULL, run)

if __name__ == "__main__":
    raise SystemExit(main())
