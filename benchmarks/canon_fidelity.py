"""Agreement of xtree_gym's canonicalizers with the X-Tree authors' released raw -> token pairs.

Usage:  python benchmarks/canon_fidelity.py [PATH/TO/xtree-site] [--disagreements]

Prints one row per (environment, source) and a total per environment: all pairs, and the
"determinable" pairs whose context the released data carry (see xtree_gym/canon/fidelity.py).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from xtree_gym.canon.fidelity import format_table, load_reference_pairs, measure

DEFAULT_SITE = Path(__file__).resolve().parents[2] / "shared" / "reference" / "xtree-site"


def _throughput(gold: Path) -> None:
    """ScienceWorld canonicalization speed on the gold corpus, against the catch-all baseline."""
    import json

    from xtree_gym.canon import catch_all, get_canonicalizer

    if not gold.is_file():
        return
    actions = [s["action"] for line in gold.open() for s in json.loads(line)["steps"]]
    from xtree_gym.canon.scienceworld import _classify, _match_templates

    canon = get_canonicalizer("scienceworld")
    _match_templates.cache_clear()  # start cold: the fidelity pass above filled the caches
    _classify.cache_clear()
    t0 = time.perf_counter()
    for a in actions:
        catch_all(a)
    base = time.perf_counter() - t0
    t0 = time.perf_counter()
    for a in actions:
        canon(a)
    ours = time.perf_counter() - t0
    print(
        f"ScienceWorld gold actions: {len(actions)} in {ours * 1000:.0f} ms ({len(actions) / ours:,.0f}/s); "
        f"{ours / base:.1f}x the catch-all baseline ({base * 1000:.0f} ms)"
    )


def main(argv: list[str]) -> int:
    args = [a for a in argv if not a.startswith("--")]
    site = Path(args[0]) if args else DEFAULT_SITE
    if not site.is_dir():
        print(f"reference data not found at {site}; pass the xtree-site folder", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    pairs = load_reference_pairs(site)
    result = measure(pairs)
    dt = time.perf_counter() - t0
    print(format_table(result))
    print(f"\n{len(pairs)} pairs canonicalized in {dt * 1000:.0f} ms ({len(pairs) / dt:,.0f} pairs/s)")
    _throughput(site.parent.parent / "data" / "scienceworld" / "train-gold.jsonl")
    if "--disagreements" in argv:
        for (env, source), a in sorted(result.items()):
            if source == "all":
                continue
            for raw, expected, ours, det in a.disagreements:
                print(
                    f"{env:<13}{source:<14} {raw!r}: authors {expected}, ours {ours}{'' if det else ' (no context)'}"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
