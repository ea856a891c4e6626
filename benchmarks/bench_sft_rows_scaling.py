"""Peak memory and time of ``xtree sft-rows --format standard`` as one trajectory grows.

Each size runs in its own process (``python -m xtree_gym sft-rows``) on a synthetic ScienceWorld
trajectory of N steps (the ``rlvmr`` harness, which lists every earlier action up to its
``history_cap``), and the benchmark prints peak RSS, wall time, output size and µs per row, each
also as a ratio to the smallest size measured in the same run. Rows stream to the file and every
prompt is bounded by the cap, so RSS stays flat and time per row stays flat once N passes the cap;
the second block runs the same sizes with ``--history-cap N`` (no bound: each prompt lists every
earlier step), which is what the rows cost before the cap: quadratic output and time.

    python benchmarks/bench_sft_rows_scaling.py [--sizes 1000 5000 10000 100000] [--uncapped 1000 5000 10000]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the checkout's xtree_gym, here and in the child processes


def write_corpus(path: Path, n: int) -> None:
    from xtree_gym.corpus import Step, Trajectory, write_corpus

    steps = [
        Step(f"look at thing {i}", observation=f"You see thing {i}.", token="look<thing>") for i in range(n)
    ]
    traj = Trajectory(
        "long", steps, True, env="scienceworld", task="t", goal="g", extra={"initial_observation": "A room."}
    )
    write_corpus(path, [traj])


def run_once(corpus: Path, out: Path, cap: int | None) -> dict[str, float]:
    """One ``xtree sft-rows`` process: its peak RSS (MiB, from wait4), wall seconds and output MiB."""
    argv = [
        sys.executable,
        "-m",
        "xtree_gym",
        "sft-rows",
        str(corpus),
        "--format",
        "standard",
        "-o",
        str(out),
    ]
    if cap is not None:
        argv += ["--history-cap", str(cap)]
    t0 = time.perf_counter()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    if status != 0:
        raise SystemExit(f"sft-rows failed on {corpus} (status {status})")
    return {"rss_mib": usage.ru_maxrss / 1024, "wall_s": wall, "out_mib": out.stat().st_size / 2**20}


def block(title: str, sizes: list[int], uncapped: bool, work: Path) -> None:
    print(f"\n{title}")
    print(
        f"{'steps':>8} {'RSS MiB':>9} {'x':>6} {'wall s':>8} {'us/row':>8} {'x':>6} {'out MiB':>9} {'x':>7}"
    )
    base: dict[str, float] | None = None
    for n in sizes:
        corpus = work / f"c{n}.jsonl"
        if not corpus.exists():
            write_corpus(corpus, n)
        r = run_once(corpus, work / f"rows{n}.jsonl", n if uncapped else None)
        per_row = 1e6 * r["wall_s"] / n
        base = base or {**r, "per_row": per_row}
        print(
            f"{n:>8} {r['rss_mib']:>9.0f} {r['rss_mib'] / base['rss_mib']:>6.2f} {r['wall_s']:>8.1f} "
            f"{per_row:>8.0f} {per_row / base['per_row']:>6.2f} {r['out_mib']:>9.1f} "
            f"{r['out_mib'] / base['out_mib']:>7.1f}"
        )
        (work / f"rows{n}.jsonl").unlink()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[1000, 5000, 10000, 30000])
    p.add_argument("--uncapped", type=int, nargs="*", default=[1000, 5000, 10000])
    a = p.parse_args()
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        block("bounded (default history_cap 1000): ratios to the first size", a.sizes, False, work)
        if a.uncapped:
            block("unbounded (--history-cap N, the rows before the cap)", a.uncapped, True, work)
    print(json.dumps({"load_at_start": round(load, 1), "cpus": os.cpu_count()}))


if __name__ == "__main__":
    main()
