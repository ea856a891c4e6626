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

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._banks import mined_tree
from ._corpora import scienceworld_corpus
from ._results import Report, script_main
from ._rlvr import SCIENCEWORLD_FULL, ArmsConfig, arms_report

NAME = "figure4_opsd"
HERE = Path(__file__).resolve().parent
LABELS = {"rlvr": "RLVR (no OPSD)", "xtree": "OPSD + X-Tree card", "written": "OPSD + written bank file",
          "empty": "OPSD + empty context", "scrambled": "OPSD + scrambled card"}  # fmt: skip


@dataclass(frozen=True)
class Config(ArmsConfig):
    """Base trainer config, seeds, window, and the written bank file."""

    base: dict[str, Any] = field(default_factory=lambda: {**SCIENCEWORLD_FULL, "opsd_c": 0.01})
    """GRPOConfig fields shared by every arm (outcome reward; OPSD's c and β at the paper's values)."""
    written_bank: str = str(HERE / "banks" / "scienceworld_written_bank.txt")
    """The bank file the ``written`` arm's teacher reads (plain text, the same for every task)."""


SMOKE = Config.smoke()
FULL = Config()


def mean_opsd(runs: list[dict[str, Any]]) -> float:
    """The OPSD term per training step, over an arm's runs (0 without OPSD)."""
    return sum(s.get("opsd", 0.0) for r in runs for s in r["steps"]) / max(
        1, sum(len(r["steps"]) for r in runs)
    )


def run(cfg: Config, out: Path) -> Report:
    corpus, source = scienceworld_corpus()
    tree, tp = mined_tree(corpus, "scienceworld", out / "tree.json")
    arms = {
        "rlvr": {"opsd": "none"},
        "xtree": {"opsd": "xtree", "tree": tp},
        "written": {"opsd": cfg.written_bank},
        "empty": {"opsd": "empty"},
        "scrambled": {"opsd": "scrambled", "tree": tp},
    }
    stand_in = "written_bank" in Path(cfg.written_bank).name
    return arms_report(
        cfg, arms, out, {"tree": {"nodes": len(tree), "source": source}, "written_bank": cfg.written_bank},
        labels=LABELS, ref="rlvr", digits=4, stats={"opsd_term": mean_opsd},
        title=f"# Figure 4 / Table 23: OPSD teacher contexts on ScienceWorld, {cfg.size()}",
        header=["teacher context", "train success (%)", "Δ vs RLVR", "held-out (%)", "mean OPSD term"],
        after=lambda a, _, s: [s["opsd_term"][a]],
        note=f"Tree: {len(tree)} nodes from {source}. Written bank: `{Path(cfg.written_bank).name}`"
        + (" (the hand-written stand-in, not an LLM-written bank)." if stand_in else "."),
    )  # fmt: skip


main = script_main(NAME, __doc__ or "", SMOKE, FULL, run)

if __name__ == "__main__":
    raise SystemExit(main())
