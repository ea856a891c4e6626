"""What the ``self_mined`` arm's re-mines saw: how often the agent's own window held no success.

    python -m experiments.minigrid_claim.remines results/minigrid_claim42_doorkey5

Reads ``OUT/results.json`` and prints, per group size: the runs, the re-mines, the share whose window held
no success (mode ``none``: no bonus, the arm *is* outcome-only until the next one), the runs whose bonus was
never on, and the held-out difference to outcome-only on the same seed, split by whether the bonus was on for
at least half of the re-mines.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any


def remine_summary(runs: list[dict[str, Any]], n: int, arm: str = "self_mined") -> dict[str, Any]:
    """The re-mine counts of ``arm``'s runs at group size ``n``, and their held-out Δ to ``outcome``.

    Example:
        >>> runs = [
        ...     {"arm": "self_mined", "n": 16, "seed": 1, "eval_success": 0.5,
        ...      "remines": [{"bonus_mode": "none"}, {"bonus_mode": "contrastive_gated"}]},
        ...     {"arm": "self_mined", "n": 16, "seed": 2, "eval_success": 0.0,
        ...      "remines": [{"bonus_mode": "none"}, {"bonus_mode": "none"}]},
        ...     {"arm": "outcome", "n": 16, "seed": 1, "eval_success": 0.25},
        ...     {"arm": "outcome", "n": 16, "seed": 2, "eval_success": 0.0},
        ... ]
        >>> s = remine_summary(runs, 16)
        >>> (s["runs"], s["remines"], s["none_share"], s["never_on"])
        (2, 4, 0.75, 1)
        >>> (s["mostly_on"], s["mostly_off"])
        ({'runs': 1, 'delta_heldout': 0.25}, {'runs': 1, 'delta_heldout': 0.0})
    """
    base = {r["seed"]: r["eval_success"] for r in runs if r["arm"] == "outcome" and r["n"] == n}
    mine = [r for r in runs if r["arm"] == arm and r["n"] == n]
    groups: dict[str, list[float]] = {"mostly_on": [], "mostly_off": []}
    modes_all: list[str] = []
    never_on = 0
    for r in mine:
        modes = [m["bonus_mode"] for m in r.get("remines", [])]
        modes_all += modes
        on = sum(m != "none" for m in modes)
        never_on += on == 0
        if r["seed"] in base:
            key = "mostly_on" if modes and 2 * on >= len(modes) else "mostly_off"
            groups[key].append(r["eval_success"] - base[r["seed"]])

    def cell(d: list[float]) -> dict[str, Any]:
        return {"runs": len(d), "delta_heldout": round(sum(d) / len(d), 4) if d else None}

    return {
        "n": n, "runs": len(mine), "remines": len(modes_all),
        "none_share": round(sum(m == "none" for m in modes_all) / len(modes_all), 4) if modes_all else None,
        "never_on": never_on, "mostly_on": cell(groups["mostly_on"]), "mostly_off": cell(groups["mostly_off"]),
    }  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("folder", type=Path, help="a results folder of `python -m experiments.minigrid_claim`")
    a = p.parse_args(argv)
    results = json.loads((a.folder / "results.json").read_text(encoding="utf-8"))
    for n in results["config"]["group_sizes"]:
        s = remine_summary(results["runs"], n)
        if not s["remines"]:
            print(f"n={n}: {s['runs']} runs, no re-mine (no self_mined run, or runs shorter than K updates)")
            continue
        on, off = s["mostly_on"], s["mostly_off"]
        print(
            f"n={n}: {s['runs']} runs, {s['remines']} re-mines, {s['none_share']:.0%} with no success in the window"
            f" (no bonus), {s['never_on']} runs never paid a bonus; held-out Δ vs outcome: bonus on ≥ half the"
            f" re-mines {on['delta_heldout']} ({on['runs']} runs), less {off['delta_heldout']} ({off['runs']} runs)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
