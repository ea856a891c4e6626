"""Figure 4 / Table 23: OPSD on ScienceWorld with four teacher contexts — the X-Tree card, a written
bank file, an empty context and a scrambled card — next to RLVR without OPSD.

Only the self-teacher's privileged context changes (``GRPOConfig.opsd``): ``xtree`` (the card the
tree's skill bank retrieves for the task), a text file (the paper's LLM-written bank: gpt-oss-120b on
ScienceWorld; we ship no LLM-written file — ``experiments/banks/scienceworld_written_bank.txt`` is a
hand-written stand-in, pass yours with ``--set written_bank=PATH``), ``empty`` and ``scrambled``.

    python -m experiments.figure4_opsd --smoke   # CPU, ~3-6 min: tiny-random, 1 step per arm
    python -m experiments.figure4_opsd --full --set base.model=/models/Qwen2.5-1.5B-Instruct --set written_bank=bank.txt
        # GPUs: 5 arms × 3 seeds of Table 7's 1.5B OPSD recipe (8×80 GB GPUs per run; the live teacher
        # adds one forward pass per row)
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._banks import mined_tree
from ._corpora import scienceworld_corpus
from ._results import experiment_main, markdown_table, provenance, write_results
from ._rlvr import SCIENCEWORLD_FULL, SCIENCEWORLD_SMOKE, arm_row, curves_figure, delta, pm, run_arms

NAME = "figure4_opsd"
HERE = Path(__file__).resolve().parent
LABELS = {"rlvr": "RLVR (no OPSD)", "xtree": "OPSD + X-Tree card", "written": "OPSD + written bank file",
          "empty": "OPSD + empty context", "scrambled": "OPSD + scrambled card"}  # fmt: skip


@dataclass(frozen=True)
class Config:
    """Base trainer config, the written bank file, seeds, window."""

    base: dict[str, Any] = field(default_factory=lambda: {**SCIENCEWORLD_FULL, "opsd_c": 0.01})
    """GRPOConfig fields shared by every arm (outcome reward; OPSD's c and β at the paper's values)."""
    written_bank: str = str(HERE / "banks" / "scienceworld_written_bank.txt")
    """The bank file the ``written`` arm's teacher reads (plain text, the same for every task)."""
    seeds: tuple[int, ...] = (0, 1, 2)
    """Training seeds per arm."""
    window: int = 10
    """Steps averaged for the final training success."""


SMOKE = Config(base={**SCIENCEWORLD_SMOKE, "steps": 1}, seeds=(0,), window=1)
FULL = Config()


def run(cfg: Config, out: Path) -> dict[str, Any]:
    t0 = time.perf_counter()
    corpus, source = scienceworld_corpus()
    tree, tp = mined_tree(corpus, "scienceworld", out / "tree.json")
    arms = {
        "rlvr": {"opsd": "none"},
        "xtree": {"opsd": "xtree", "tree": tp},
        "written": {"opsd": cfg.written_bank},
        "empty": {"opsd": "empty"},
        "scrambled": {"opsd": "scrambled", "tree": tp},
    }
    runs = run_arms(cfg.base, arms, cfg.seeds, out)
    rows = {a: arm_row(runs[a], cfg.window) for a in arms}
    opsd = {a: sum(s.get("opsd", 0.0) for r in runs[a] for s in r["steps"]) / max(1, sum(len(r["steps"]) for r in runs[a]))
            for a in arms}  # fmt: skip
    results = {"tree": {"nodes": len(tree), "source": source}, "written_bank": cfg.written_bank, "rows": rows,
               "opsd_term": opsd, "runs": runs, **provenance(cfg, t0)}  # fmt: skip
    md = "\n".join([
        f"# Figure 4 / Table 23: OPSD teacher contexts on ScienceWorld, {cfg.base['model']} "
        f"({len(cfg.seeds)} seed(s), {cfg.base['steps']} steps)\n",
        markdown_table(["teacher context", "train success (%)", "Δ vs RLVR", "held-out (%)", "mean OPSD term"],
                       [[LABELS[a], pm(r["train_success"]), delta(r, rows["rlvr"]) if a != "rlvr" else "—",
                         pm(r["eval_success"]), opsd[a]] for a, r in rows.items()], digits=4),
        "",
        f"Tree: {len(tree)} nodes from {source}. Written bank: `{Path(cfg.written_bank).name}`"
        + (" (the hand-written stand-in, not an LLM-written bank)." if "written_bank" in Path(cfg.written_bank).name else "."),
    ])  # fmt: skip
    write_results(out, results, md, {"curves": curves_figure(runs, LABELS)})
    return results


def main(argv: list[str] | None = None) -> int:
    return experiment_main(NAME, __doc__ or "", SMOKE, FULL, run, argv)


if __name__ == "__main__":
    raise SystemExit(main())
