"""Paired sign-flip tests for arm pairs the claim check's table does not list, from a committed folder.

    python -m experiments.minigrid_claim.pairs results/minigrid_claim_doorkey5 xtree_gated:subgoal xtree_gated:xtree

Reads ``OUT/results.json`` (its config and every run) and prints, per group size and pair, the mean
difference, ahead/tied/behind and the p-value of final, held-out and AUC success -- the same
:func:`report.paired` that writes ``table.md``'s comparisons.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from .config import ClaimConfig
from .report import paired


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("folder", type=Path, help="a results folder of `python -m experiments.minigrid_claim`")
    p.add_argument("pairs", nargs="+", help="ARM:BASELINE, e.g. xtree_gated:subgoal")
    a = p.parse_args(argv)
    results = json.loads((a.folder / "results.json").read_text(encoding="utf-8"))
    cfg = ClaimConfig.from_dict(results["config"])
    for n in cfg.group_sizes:
        for pair in a.pairs:
            arm, _, base = pair.partition(":")
            c = paired(cfg, results["runs"], n, arm, base)
            if c is None:
                print(f"n={n} {pair}: no seeds with both arms")
                continue
            cells = [
                f"{k} {c[k]['mean_diff']:+.3f} ({c[k]['ahead']}/{c[k]['tied']}/{c[k]['behind']}, p={c[k]['p']:.2g})"
                for k in ("final", "eval", "auc")
            ]
            print(f"n={n} {arm} vs {base} ({c['seeds']} seeds): " + "; ".join(cells))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
