"""Tokens per supervised action for standard / node / span SFT rows (X-Tree App. D: 1,766 vs 446, 4.0×).

On ``--episodes`` random episodes (seeded) of the ScienceWorld gold corpus in ../shared, with the
tree mined from the whole corpus (preset and canonicalizer ``scienceworld``), builds the three row
formats with the SmolLM2 tokenizer and prints one JSON line per format plus the ratio
standard/node next to the paper's 4.0×.

``--replay`` (default on) first replays each sampled episode in the real simulator to record what
RLVMR's prompt lists each turn (the action templates and the objects in view), so the standard
rows carry the full prompt; ``--no-replay`` leaves those lists empty (shorter prompts).

    JAVA_TOOL_OPTIONS=-Xmx1g python benchmarks/bench_sft_tokens.py [--episodes 300] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# ../shared beside the checkout (a git worktree under wt/ finds it one level further up)
SHARED = next(
    (p for p in (ROOT.parent / "shared", ROOT.parent.parent / "shared") if p.is_dir()), ROOT.parent / "shared"
)
PAPER = {"standard": 1766, "node": 446, "ratio": 4.0}


def replay_views(trajs: list[Any], harness: Any) -> int:
    """Record ``harness.env_view`` before every step of each trajectory (in ``extra["info"]`` of the step before)."""
    from xtree_gym.envs.scienceworld import ScienceWorldEnv
    from xtree_gym.progress import Progress

    env = ScienceWorldEnv(step_limit=None)
    bar = Progress(total=len(trajs), desc="replay", enabled=True)
    diverged = 0
    try:
        for t in trajs:
            env.reset(options={"task": t.task, "variation": int(t.extra["variation"])})
            t.extra["initial_info"] = harness.env_view(env)
            for s in t.steps:
                _, _, term, trunc, info = env.step(s.action)
                s.extra["info"] = harness.env_view(env)
                diverged += bool(info.get("invalid_action"))
                if term or trunc:
                    break
            bar.update()
    finally:
        bar.close()
        env.close()
    return diverged


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", default=str(SHARED / "data" / "scienceworld" / "train-gold.jsonl"))
    ap.add_argument("--episodes", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tokenizer", default="smollm2")
    ap.add_argument("--replay", action=argparse.BooleanOptionalAction, default=True)
    ap.add_argument("--standard-harness", default="rlvmr")
    ap.add_argument(
        "--node-harness", default="node", help="harness of the node/span rows (rlvmr: the standard context)"
    )
    ap.add_argument(
        "--formats", nargs="+", default=["standard", "node", "span"], choices=["standard", "node", "span"]
    )
    args = ap.parse_args(argv)

    from xtree_gym.agents.model.loading import load_tokenizer
    from xtree_gym.agents.sft_offline.rows import build_rows, load_harness, summarize
    from xtree_gym.corpus import read_corpus
    from xtree_gym.mining import mine

    if not Path(args.corpus).is_file():
        print(f"skip: no corpus at {args.corpus} (the ScienceWorld gold corpus lives in ../shared)")
        return 0
    corpus = read_corpus(args.corpus).trajectories
    tree = mine(corpus, "scienceworld", domain="scienceworld")
    print(f"mined {len(tree)} nodes from {len(corpus)} episodes", file=sys.stderr, flush=True)
    sample = random.Random(args.seed).sample(corpus, min(args.episodes, len(corpus)))
    standard_h = load_harness(args.standard_harness)
    t0 = time.perf_counter()
    diverged = replay_views(sample, standard_h) if args.replay else 0
    replay_s = time.perf_counter() - t0
    tok = load_tokenizer(args.tokenizer)
    out: dict[str, Any] = {}
    for fmt in args.formats:
        t0 = time.perf_counter()
        harness = standard_h if fmt == "standard" else load_harness(args.node_harness)
        rows = build_rows(sample, fmt, tree=tree, harness=harness, domain="scienceworld", tokenizer=tok,
                          seed=args.seed, progress=True)  # fmt: skip
        s = summarize(rows)
        s.update(format=fmt, harness=harness.name, seconds=round(time.perf_counter() - t0, 1))
        out[fmt] = s
        print(json.dumps(s), flush=True)
    per = {f: out[f]["tokens_per_action"] if f in out else None for f in ("standard", "node", "span")}
    ratio = per["standard"] / per["node"] if per["standard"] and per["node"] else None
    print(json.dumps({
        "episodes": len(sample), "seed": args.seed, "tree_nodes": len(tree), "tokenizer": args.tokenizer,
        "replay": args.replay, "replay_seconds": round(replay_s, 1), "replay_refused_steps": diverged,
        "standard_per_action": per["standard"], "node_per_action": per["node"], "span_per_action": per["span"],
        "ratio_standard_node": None if ratio is None else round(ratio, 2), "node_harness": args.node_harness,
        "paper": PAPER,
    }))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
