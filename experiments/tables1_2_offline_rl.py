"""Tables 1–2: offline node RL (Eq. 2) on node instances of a gold corpus, X-Tree vs its controls.

The paper's Tables 1–2 are on WebArena (Qwen2.5-7B, 7,974 agent trajectories, per-site success on
live WebArena servers). Those need the user's own corpus and servers; this script runs the same
arms on any corpus in our format (default: the ScienceWorld gold corpus) through
``xtree_gym.agents.sft_offline.offline_trainer.OfflineTrainer`` and the ``XTree-NodeReplay-v0`` env, and reports the
replay reward and win rate (node completed). For WebArena pass ``--set corpus=YOUR.jsonl --set
domain=browsergym --set base.model=...`` and evaluate each checkpoint with ``xtree eval`` on your servers.

Arms (Table 2's rows): X-Tree full (Eq. 2), plain mixing (no completion bonus), curriculum by depth,
binary outcome reward, whole trajectories (no tree), random spans, random tree.

    python -m experiments.tables1_2_offline_rl --smoke   # CPU, ~3-6 min: tiny-random, 1 step per arm
    python -m experiments.tables1_2_offline_rl --full --set base.model=/models/sft-checkpoint/model
        # GPUs: Table 7's first column (805 steps, n 2, 6 nodes per step, lr 5e-7, 16k-token completions),
        # 7 arms on 8×80 GB GPUs, ~half a day per arm at 7B
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._banks import mined_tree
from ._corpora import SCIWORLD_GOLD, SCIWORLD_SAMPLE, scienceworld_corpus, subsample
from ._results import Report, markdown_table, page, script_main
from ._rlvr import arm_row, curves_figure, delta, pm, run_arms

NAME = "tables1_2_offline_rl"
LABELS = {"full": "X-Tree Full (Eq. 2)", "plain": "X-Tree plain mixing", "curriculum": "X-Tree curriculum d=1→2…",
          "outcome": "binary outcome reward", "whole": "whole (no tree)", "random_span": "random span",
          "random_tree": "random tree"}  # fmt: skip
ARMS: dict[str, dict[str, Any]] = {
    "full": {"instances": "xtree", "reward": "hier"},
    "plain": {"instances": "xtree", "reward": "plain"},
    "curriculum": {"instances": "xtree", "reward": "hier", "curriculum": "depth"},
    "outcome": {"instances": "xtree", "reward": "outcome"},
    "whole": {"instances": "whole", "reward": "hier"},
    "random_span": {"instances": "random-span", "reward": "hier"},
    "random_tree": {"instances": "random-tree", "reward": "hier"},
}


@dataclass(frozen=True)
class Config:
    """Corpus, its domain, the trainer's base config, seeds, window."""

    corpus: str = ""
    """Gold corpus in our format ("" = the ScienceWorld gold corpus, else the packaged sample)."""
    domain: str = "scienceworld"
    """Its canonicalizer and mining preset."""
    trajectories: int = 0
    """Replay instances from only this many trajectories (0 = all; the tree is mined from all of them)."""
    base: dict[str, Any] = field(
        default_factory=lambda: {"model": "Qwen2.5-7B-Instruct", "dtype": "bfloat16"}
    )
    """OfflineConfig fields shared by every arm (its defaults are Table 7's first column)."""
    seeds: tuple[int, ...] = (0,)
    """Seeds per arm."""
    window: int = 50
    """Steps averaged for the final replay reward / win rate."""


SMOKE = Config(trajectories=10, base={"model": "tiny-random", "steps": 1, "tasks_per_step": 2, "n": 2, "max_new_tokens": 16,
                     "lr": 1e-3}, window=1)  # fmt: skip
FULL = Config()


def run(cfg: Config, out: Path) -> Report:
    from xtree_gym.corpus import read_corpus

    if cfg.corpus:
        corpus, path = list(read_corpus(cfg.corpus)), cfg.corpus
    else:
        corpus, _ = scienceworld_corpus()
        path = str(SCIWORLD_GOLD if SCIWORLD_GOLD.is_file() else SCIWORLD_SAMPLE)
    tree, tp = mined_tree(corpus, cfg.domain, out / "tree.json")
    if cfg.trajectories:  # instances from a subsample: the smoke's replay set stays small
        from xtree_gym.corpus import write_corpus

        path = str(out / "corpus.jsonl")
        write_corpus(path, subsample(corpus, cfg.trajectories, 0))
    base = {**cfg.base, "corpus": path, "corpus_domain": cfg.domain, "tree": tp}
    runs = run_arms(base, ARMS, cfg.seeds, out)
    rows = {a: arm_row(runs[a], cfg.window) for a in ARMS}
    results = {"corpus": path, "tree_nodes": len(tree), "rows": rows, "runs": runs}
    md = page(
        f"# Tables 1–2: offline node RL on {Path(path).name} ({cfg.domain}), {cfg.base['model']}",
        markdown_table(["method", "replay win rate (%)", "Δ vs X-Tree Full", "replay reward"],
                       [[LABELS[a], pm(r["train_success"]), delta(r, rows["full"]) if a != "full" else "—",
                         r["reward"]["mean"]] for a, r in rows.items()], digits=3),
        f"Tree: {len(tree)} nodes. Win rate: share of replayed node instances completed, last {cfg.window} "
        "step(s). WebArena's per-site success (Table 1) needs your own WebArena corpus and servers.",
    )  # fmt: skip
    return Report(results, md, {"curves": curves_figure(runs, LABELS, key="reward")})


main = script_main(NAME, __doc__ or "", SMOKE, FULL, run)

if __name__ == "__main__":
    raise SystemExit(main())
