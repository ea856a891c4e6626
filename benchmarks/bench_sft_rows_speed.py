"""Rows/s and tokens/s of ``xtree sft-rows --format standard`` against tokenizing every prompt whole.

On the ScienceWorld gold corpus in ../shared (826 episodes, 33.9k rows) with the SmolLM2 tokenizer
and the ``rlvmr`` harness:

1. ``line cache`` vs ``whole`` on a seeded subset (``--baseline-episodes``, default 120): the same
   rows built and written both ways in this process (whole = ``line_cache=False``, each prompt through
   ``apply_chat_template(tokenize=True)``, quadratic in episode length). Prints rows/s, tokens/s,
   CPU and wall seconds of each, the ratio, and whether the two files are byte-identical.
2. The whole corpus (``--episodes``, default all) as one ``xtree sft-rows`` process, the way a user
   runs it: wall and CPU seconds (tokenizer loading and start-up included), rows/s, tokens/s.

CPU seconds are the honest figure on a shared machine (wall time there depends on who else runs);
the load average is printed with both.

    python benchmarks/bench_sft_rows_speed.py [--baseline-episodes 120] [--episodes 826] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
SHARED = next(
    (p for p in (ROOT.parent / "shared", ROOT.parent.parent / "shared") if p.is_dir()), ROOT.parent / "shared"
)


def build(trajs: list[Any], tok: Any, out: Path, line_cache: bool) -> dict[str, Any]:
    """Build and write the standard rows of ``trajs``; rows, tokens, CPU and wall seconds."""
    from xtree_gym.agents.sft_offline.rows import RowSummary, iter_rows, write_rows

    summary = RowSummary()
    w, c = time.perf_counter(), time.process_time()
    rows = iter_rows(trajs, "standard", harness="rlvmr", tokenizer=tok, line_cache=line_cache)
    write_rows(out, (summary.add(r) for r in rows))
    cpu, wall = time.process_time() - c, time.perf_counter() - w
    s = summary.result()
    return {"rows": s["rows"], "tokens": s["tokens"], "cpu_s": round(cpu, 1), "wall_s": round(wall, 1),
            "rows_per_cpu_s": round(s["rows"] / cpu), "tokens_per_cpu_s": round(s["tokens"] / cpu)}  # fmt: skip


def cli_run(corpus: Path, out: Path) -> dict[str, Any]:
    """One ``xtree sft-rows --format standard --tokenizer smollm2`` process: wall and CPU seconds."""
    argv = [sys.executable, "-m", "xtree_gym", "sft-rows", str(corpus), "--format", "standard",
            "--tokenizer", "smollm2", "-o", str(out)]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    w = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    assert proc.stdout is not None
    printed = proc.stdout.read().decode()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - w
    if status != 0:
        raise SystemExit(f"xtree sft-rows failed (status {status})")
    s = json.loads(printed.strip().splitlines()[-1])
    cpu = usage.ru_utime + usage.ru_stime
    return {"rows": s["rows"], "tokens": s["tokens"], "cpu_s": round(cpu, 1), "wall_s": round(wall, 1),
            "rows_per_cpu_s": round(s["rows"] / cpu), "tokens_per_cpu_s": round(s["tokens"] / cpu),
            "out_mib": round(out.stat().st_size / 2**20), "rss_mib": round(usage.ru_maxrss / 1024)}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", default=str(SHARED / "data" / "scienceworld" / "train-gold.jsonl"))
    ap.add_argument("--baseline-episodes", type=int, default=120, help="subset built both ways (0: skip)")
    ap.add_argument("--episodes", type=int, default=0, help="episodes of the CLI run (0: all; -1: skip)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if not Path(args.corpus).is_file():
        print(f"skip: no corpus at {args.corpus} (the ScienceWorld gold corpus lives in ../shared)")
        return 0
    from xtree_gym.agents.model.loading import load_tokenizer
    from xtree_gym.corpus import read_corpus, write_corpus

    corpus = read_corpus([args.corpus]).trajectories
    print(json.dumps({"load_at_start": os.getloadavg(), "cpus": os.cpu_count()}), flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        if args.baseline_episodes:
            c = time.process_time()
            tok = load_tokenizer("smollm2")
            print(json.dumps({"tokenizer_load_cpu_s": round(time.process_time() - c, 1)}), flush=True)
            sample = random.Random(args.seed).sample(corpus, min(args.baseline_episodes, len(corpus)))
            fast = build(sample, tok, work / "fast.jsonl", True)
            whole = build(sample, tok, work / "whole.jsonl", False)
            same = (work / "fast.jsonl").read_bytes() == (work / "whole.jsonl").read_bytes()
            print(json.dumps({"subset_episodes": len(sample), "line_cache": fast, "whole": whole,
                              "cpu_ratio_whole_over_line_cache": round(whole["cpu_s"] / fast["cpu_s"], 1),
                              "byte_identical": same, "load": os.getloadavg()}), flush=True)  # fmt: skip
            (work / "whole.jsonl").unlink()
        if args.episodes >= 0:
            trajs, path = corpus, Path(args.corpus)
            if args.episodes:
                trajs, path = random.Random(args.seed).sample(corpus, args.episodes), work / "corpus.jsonl"
                write_corpus(path, trajs)
            run = cli_run(path, work / "rows.jsonl")
            print(json.dumps({"cli_episodes": len(trajs), **run, "load": os.getloadavg()}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
