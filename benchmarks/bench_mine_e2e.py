"""``xtree mine`` as a process, by corpus shape, against Hugging Face ``tokenizers`` in the same run.

For each shape (short ~5 steps, medium ~14, long ~62 a trajectory; planted skills + noise from
``bench_miner.make_corpus``) and each size, on the same JSONL file:

* the whole ``python -m xtree_gym mine FILE -o tree.json`` process and the ``tokenizers`` script
  process (reads the file with ``json.loads`` line by line, trains ``BpeTrainer``): wall and CPU
  seconds, peak RSS, best of ``--repeat`` runs each, both pinned to one core (``taskset -c 0``);
* the phases of the same run inside one fresh process (the imports ``xtree mine`` does, then
  read+encode, mine, write), CPU seconds (``time.process_time``), best of ``--repeat``.

The package is byte-compiled first (``compileall``, as ``pip install`` does), so start-up never
includes compiling sources (it would where ``PYTHONDONTWRITEBYTECODE`` is set and no ``__pycache__`` exists).

Settings: frequency-only (p_len = p_succ = eta = 0), 200 merges, min_freq 2. The ratio column is
``xtree / tokenizers`` of CPU seconds (the fair one on a shared machine) and of wall seconds.

    python benchmarks/bench_mine_e2e.py --sizes 100000 --shapes short medium long
    python benchmarks/bench_mine_e2e.py --sizes 1000000 --shapes medium --repeat 1
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_miner import TOKENIZERS_SCRIPT, run_process, write_jsonl

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
SHAPES = {"short": 1, "medium": 3, "long": 13}  # pieces of ~4.7 actions a trajectory
MINE_ARGS = ["--p-len", "0", "--p-succ", "0", "--eta", "0", "--max-len", "1000000", "--min-freq", "2"]
MINE_ARGS += ["--min-succ", "0", "--min-task-types", "1"]

PHASES = """
import sys, time
t0 = time.process_time()
from xtree_gym.cli import build_parser
import xtree_gym.mining.cli, xtree_gym.mining.miner
from xtree_gym.mining.miner import load_for_mining
from xtree_gym.mining.fast import fast_mine
from xtree_gym.mining.config import MinerConfig
from xtree_gym.mining.tree import XTree
build_parser(("xtree_gym.mining.cli",))
t1 = time.process_time()
corpus = load_for_mining([sys.argv[1]])
enc = corpus.encode()
t2 = time.process_time()
cfg = MinerConfig.preset("scienceworld", p_len=0, p_succ=0, eta=0, cap=int(sys.argv[3]), max_len=10**6,
                         min_freq=2, min_succ=0, min_task_types=1)
merges = fast_mine(enc, cfg)
t3 = time.process_time()
if hasattr(corpus, "prefetch"):
    corpus.prefetch([m.first[0] for m in merges])
XTree.from_merges(merges, enc, cfg, corpus).save(sys.argv[2])
t4 = time.process_time()
print(f'{{"interp": {t0:.4f}, "import": {t1 - t0:.4f}, "read": {t2 - t1:.4f}, "mine": {t3 - t2:.4f}, '
      f'"write": {t4 - t3:.4f}, "reader": "{type(corpus).__name__}"}}')
"""


def best(runs: list[dict[str, float]]) -> dict[str, float]:
    """Fewest seconds and CPU seconds over the runs (each its own minimum), largest peak RSS."""
    out = dict(runs[0])
    out["seconds"] = min(r["seconds"] for r in runs)
    out["cpu"] = min(r["cpu"] for r in runs)
    out["peak_mib"] = max(r["peak_mib"] for r in runs)
    return out


def measure(path: Path, merges: int, repeat: int, work: Path) -> dict[str, dict[str, float]]:
    env_path = os.environ.get("PYTHONPATH", "")
    os.environ["PYTHONPATH"] = ROOT + (os.pathsep + env_path if env_path else "")
    tree = work / "tree.json"
    xtree = [sys.executable, "-m", "xtree_gym", "mine", str(path), "-o", str(tree), "--cap", str(merges)]
    rows: dict[str, list[dict[str, float]]] = {"xtree": [], "tokenizers": [], "phases": []}
    for _ in range(repeat):  # interleaved, so a load change hits both
        tree.unlink(missing_ok=True)
        rows["xtree"].append(run_process([*xtree, *MINE_ARGS]))
        rows["tokenizers"].append(
            run_process([sys.executable, "-c", TOKENIZERS_SCRIPT, str(path), str(merges)])
        )
        tree.unlink(missing_ok=True)
        t0 = time.perf_counter()
        ph = run_process([sys.executable, "-c", PHASES, str(path), str(tree), str(merges)])
        phases = json.loads(ph["last"])
        phases["wall"] = time.perf_counter() - t0
        rows["phases"].append(phases)
    out = {"xtree": best(rows["xtree"]), "tokenizers": best(rows["tokenizers"])}
    ph_rows = rows["phases"]
    out["phases"] = {k: min(r[k] for r in ph_rows) for k in ph_rows[0] if k != "reader"}
    out["phases"]["reader"] = ph_rows[0]["reader"]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[100_000])
    ap.add_argument("--shapes", nargs="+", choices=sorted(SHAPES), default=["short", "medium", "long"])
    ap.add_argument("--merges", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=3, help="runs of each process (best is shown)")
    ap.add_argument("--data-dir", default=os.path.join(tempfile.gettempdir(), "xtree_bench_mine_e2e"))
    args = ap.parse_args()
    data = Path(args.data_dir)
    data.mkdir(parents=True, exist_ok=True)
    compileall.compile_dir(os.path.join(ROOT, "xtree_gym"), quiet=1)
    head = f"{'shape':>7} {'N':>8} {'MB':>6} {'what':>11} {'wall s':>7} {'cpu s':>7} {'peak MiB':>8}  ratio (cpu; wall)"
    print(head)
    for n in args.sizes:
        for shape in args.shapes:
            path = data / f"{shape}_{n}.jsonl"
            if not path.exists():
                write_jsonl(path, n, SHAPES[shape])
            load = "{:.1f} {:.1f} {:.1f}".format(*os.getloadavg())
            with tempfile.TemporaryDirectory() as work:
                r = measure(path, args.merges, args.repeat, Path(work))
            x, t, ph = r["xtree"], r["tokenizers"], r["phases"]
            mb = path.stat().st_size / 1e6
            ratio = f"{x['cpu'] / t['cpu']:.2f}x; {x['seconds'] / t['seconds']:.2f}x tokenizers"
            print(f"# {shape}, {n} trajectories, load average before: {load}", flush=True)
            print(
                f"{shape:>7} {n:>8} {mb:>6.0f} {'xtree mine':>11} {x['seconds']:>7.2f} {x['cpu']:>7.2f} "
                f"{x['peak_mib']:>8.0f}  {ratio}"
            )
            print(
                f"{shape:>7} {n:>8} {mb:>6.0f} {'tokenizers':>11} {t['seconds']:>7.2f} {t['cpu']:>7.2f} "
                f"{t['peak_mib']:>8.0f}"
            )
            print(
                f"{'':>7} phases, cpu s ({ph['reader']}): interpreter {ph['interp']:.3f}, imports+parser "
                f"{ph['import']:.3f}, read+encode {ph['read']:.3f}, mine {ph['mine']:.3f}, write {ph['write']:.3f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
