"""Table 4: resource-matched WebShop runs — warm start on N samples, then outcome vs + X-Tree mined from
exactly those N samples (no extra data for the tree).

Per warm-start size N: SFT (``train_sft``, standard rows) on N trajectories of the collected WebShop
corpus; the X-Tree is mined from the same N; both RLVR arms start from that checkpoint.

    python -m experiments.table4_warm_starts --smoke   # CPU, ~3-6 min: tiny-random, N = 40, 1 SFT epoch, 1 RL step
    python -m experiments.table4_warm_starts --full --set base.model=/models/Qwen2.5-1.5B-Instruct
        # GPUs: per N, a Table 6 warm start (5 epochs, lr 1e-5, batch 256, 8,192 tokens) + 2 arms × 3 seeds
        # of Table 7's 1.5B WebShop RLVR (8×80 GB GPUs)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._banks import mined_tree
from ._corpora import subsample, webshop_corpus
from ._results import Report, markdown_table, page, script_main
from ._rlvr import WEBSHOP_FULL, WEBSHOP_SMOKE, arm_row, delta, pm, run_arms

NAME = "table4_warm_starts"


@dataclass(frozen=True)
class Config:
    """Warm-start sizes, corpus, SFT and RLVR settings."""

    sizes: tuple[int, ...] = (500, 1016, 1824)
    """Warm-start (and mining) sizes N."""
    corpus_episodes: int = 1824
    """Collected WebShop corpus size."""
    base: dict[str, Any] = field(default_factory=lambda: dict(WEBSHOP_FULL))
    """GRPOConfig fields shared by every RLVR run (``model`` is the SFT's start weights)."""
    sft: dict[str, Any] = field(
        default_factory=lambda: {"epochs": 5, "lr": 1e-5, "batch_size": 256, "max_len": 8192}
    )
    """SFTConfig fields of the warm start (Table 6)."""
    seeds: tuple[int, ...] = (0, 1, 2)
    """RLVR seeds per arm."""
    window: int = 10
    """Steps averaged for the final training success."""


SMOKE = Config(sizes=(40,), corpus_episodes=100, base={**WEBSHOP_SMOKE, "steps": 1},
               sft={"epochs": 1, "lr": 1e-3, "batch_size": 64, "max_len": 4096}, seeds=(0,), window=1)  # fmt: skip
FULL = Config()


def warm_start(corpus: list[Any], model: str, sft: dict[str, Any], out: Path) -> tuple[str, dict[str, Any]]:
    """SFT on the standard rows of ``corpus``; returns the checkpoint's model folder and the SFT summary."""
    from xtree_gym.agents.model.loading import load_tokenizer
    from xtree_gym.agents.run.checkpoint import find_checkpoint
    from xtree_gym.agents.sft_offline.rows import build_rows, write_rows
    from xtree_gym.agents.sft_offline.sft import SFTConfig, train_sft

    rows = build_rows(corpus, "standard", domain="webshop", tokenizer=load_tokenizer(model))
    write_rows(out / "rows.jsonl.gz", rows)
    res = train_sft(SFTConfig(rows=str(out / "rows.jsonl.gz"), model=model, output_dir=str(out / "sft"),
                              progress=False, tensorboard=False, **sft))  # fmt: skip
    return str(find_checkpoint(out / "sft") / "model"), {
        k: res.get(k) for k in ("initial_loss", "final_loss")
    }


def run(cfg: Config, out: Path) -> Report:
    corpus = webshop_corpus(cfg.corpus_episodes)
    table, per_n = [], {}
    for n in cfg.sizes:
        part = subsample(corpus, n, 0)
        d = out / f"n{n}"
        model, sft = warm_start(part, cfg.base["model"], cfg.sft, d)
        tree, tp = mined_tree(part, "webshop", d / "tree.json")
        arms = {"outcome": {"shaping": "none"}, "xtree": {"shaping": "xtree", "tree": tp}}
        runs = run_arms({**cfg.base, "model": model}, arms, cfg.seeds, d)
        rows = {a: arm_row(runs[a], cfg.window) for a in arms}
        per_n[n] = {"sft": sft, "nodes": len(tree), "rows": rows, "runs": runs}
        table.append([n, len(tree), sft["final_loss"], pm(rows["outcome"]["train_success"]),
                      pm(rows["xtree"]["train_success"]), delta(rows["xtree"], rows["outcome"]),
                      pm(rows["outcome"]["eval_success"]), pm(rows["xtree"]["eval_success"])])  # fmt: skip
    results = {"corpus": len(corpus), "sizes": per_n}
    return Report(results, page(
        f"# Table 4: resource-matched warm starts on WebShop, {cfg.base['model']}",
        markdown_table(["warm start (N)", "X-Tree nodes (from the same N)", "SFT loss after", "outcome train (%)",
                        "+X-Tree train (%)", "Δ", "outcome held-out (%)", "+X-Tree held-out (%)"], table, digits=3),
        f"N trajectories of {len(corpus)} collected scripted-shopper episodes; the SFT rows and the tree use the same N.",
    ))  # fmt: skip


main = script_main(NAME, __doc__ or "", SMOKE, FULL, run)

if __name__ == "__main__":
    raise SystemExit(main())
