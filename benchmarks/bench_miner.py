"""Miner speed and memory: our fast miner vs the reference miner vs Hugging Face ``tokenizers``.

Corpora of N trajectories (~25 actions each) are built from planted skills plus noise. Each
measurement runs in its own subprocess (so its peak RSS is its own), pinned to one core
(``taskset -c 0`` when available; ``RAYON_NUM_THREADS=1`` for tokenizers). Settings are the
frequency-only config the issue asks for: p_len = p_succ = 0, eta = 0, the same number of merges
for every engine.

Two comparisons:

* in-process: the miner on an already-encoded corpus vs ``BpeTrainer.train_from_iterator`` on
  already-built words (both timed inside the process, data made in memory);
* end to end: the whole ``python -m xtree_gym mine FILE -o tree.json`` process vs a ``tokenizers``
  script process on the same JSONL file (it reads the file with ``json.loads`` line by line, as a
  user would, maps tokens to characters and trains); wall time of the whole process, start-up included.

    python benchmarks/bench_miner.py --sizes 10000 100000 1000000 --merges 200

Prints one table with seconds, peak RSS and the ratios against the baselines of the same run, and
the machine load (``os.getloadavg``) before each size.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

N_PRIMITIVES = 60
N_SKILLS = 40
N_TASKS = 20


def make_corpus(n: int, seed: int = 0, chunks: int = 6) -> tuple[list[list[str]], list[bool], list[str]]:
    """n trajectories of ``chunks`` pieces (~4.7 tokens each): planted skills (length 3-8) and noise.

    ``chunks = 6`` gives the long corpus (~28 actions a trajectory), ``2`` the short one (~9), where
    start-up and reading weigh more against mining.
    """
    rng = np.random.default_rng(seed)
    skills = [rng.integers(0, N_PRIMITIVES, size=rng.integers(3, 9)) for _ in range(N_SKILLS)]
    noise = [rng.integers(0, N_PRIMITIVES, size=rng.integers(1, 4)) for _ in range(400)]
    pieces = skills + noise
    lens = np.array([len(c) for c in pieces])
    table = np.concatenate(pieces)
    starts = np.r_[0, np.cumsum(lens)[:-1]]
    # Each trajectory: 6 chunks, a skill with probability 0.6 (skill popularity is Zipf-like).
    is_skill = rng.random((n, chunks)) < 0.6
    skill_p = 1.0 / np.arange(1, N_SKILLS + 1)
    skill_ids = rng.choice(N_SKILLS, size=(n, chunks), p=skill_p / skill_p.sum())
    noise_ids = N_SKILLS + rng.integers(0, len(noise), size=(n, chunks))
    ids = np.where(is_skill, skill_ids, noise_ids)
    chunk_len = lens[ids]  # (n, chunks)
    traj_len = chunk_len.sum(axis=1)
    flat_chunks = ids.ravel()
    rep = np.repeat(starts[flat_chunks], lens[flat_chunks])
    within = np.arange(len(rep)) - np.repeat(
        np.cumsum(lens[flat_chunks]) - lens[flat_chunks], lens[flat_chunks]
    )
    flat = table[rep + within]
    vocab = [f"verb{i // 6}<role{i % 6}>" for i in range(N_PRIMITIVES)]
    offsets = np.r_[0, np.cumsum(traj_len)]
    flat_list = flat.tolist()
    seqs = [[vocab[t] for t in flat_list[a:b]] for a, b in zip(offsets[:-1].tolist(), offsets[1:].tolist())]
    # Success depends on carrying skill 0 (so the success term has something to see).
    has0 = (ids == 0).any(axis=1)
    success = (rng.random(n) < np.where(has0, 0.9, 0.5)).tolist()
    tasks = [f"task{t}" for t in rng.integers(0, N_TASKS, size=n).tolist()]
    return seqs, success, tasks


def run_worker(engine: str, n: int, merges: int) -> dict[str, float]:
    seqs, success, tasks = make_corpus(n)
    n_tokens = sum(len(s) for s in seqs)
    if engine == "tokenizers":
        from tokenizers import Tokenizer, models, trainers

        # tokens -> characters (a private-use block), one trajectory -> one word
        vocab = sorted({t for s in seqs for t in s})
        char = {t: chr(0xE000 + i) for i, t in enumerate(vocab)}
        words = ["".join(char[t] for t in s) for s in seqs]
        del seqs
        tok = Tokenizer(models.BPE())
        trainer = trainers.BpeTrainer(
            vocab_size=len(vocab) + merges,
            min_frequency=0,
            show_progress=False,
            initial_alphabet=list(char.values()),
            special_tokens=[],
        )
        t0 = time.perf_counter()
        tok.train_from_iterator(words, trainer=trainer, length=len(words))
        secs = time.perf_counter() - t0
        n_merges = len(tok.get_vocab()) - len(vocab)
    else:
        sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
        from xtree_gym.mining import EncodedCorpus, reference_mine
        from xtree_gym.mining.config import MinerConfig
        from xtree_gym.mining.fast import fast_mine

        cfg = MinerConfig(p_len=0, p_succ=0, eta=0, cap=merges, max_len=10**6, min_freq=2)
        t0 = time.perf_counter()
        enc = EncodedCorpus.from_tokens(seqs, success, tasks)
        del seqs
        result = fast_mine(enc, cfg) if engine == "fast" else reference_mine(enc, cfg)
        secs = time.perf_counter() - t0
        n_merges = len(result)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # MiB (Linux reports KiB)
    return {"seconds": secs, "peak_mib": peak, "merges": n_merges, "tokens": n_tokens}


def _env() -> dict[str, str]:
    return dict(os.environ, RAYON_NUM_THREADS="1", OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")


def _pinned(cmd: list[str]) -> list[str]:
    return ["taskset", "-c", "0", *cmd] if shutil.which("taskset") else cmd


def measure(engine: str, n: int, merges: int) -> dict[str, float]:
    cmd = [sys.executable, __file__, "--worker", engine, "--n", str(n), "--merges", str(merges)]
    out = subprocess.run(_pinned(cmd), env=_env(), capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def write_jsonl(path: Path, n: int, chunks: int = 6) -> None:
    """The benchmark corpus as a JSONL file (every step carries its token), written once and cached."""
    seqs, success, tasks = make_corpus(n, chunks=chunks)
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        for i, (seq, ok, task) in enumerate(zip(seqs, success, tasks)):
            steps = ",".join(
                f'{{"action": "{t[: t.index("<")]} the {t[t.index("<") + 1 : -1]}", '
                f'"observation": "Done.", "token": "{t}"}}'
                for t in seq
            )
            ok_s = "true" if ok else "false"
            fh.write(
                f'{{"id": "traj{i:07d}", "env": "bench", "task": "{task}", "goal": "", '
                f'"success": {ok_s}, "steps": [{steps}]}}\n'
            )
    tmp.replace(path)


TOKENIZERS_SCRIPT = """
import json, sys, time
from tokenizers import Tokenizer, models, trainers
path, merges = sys.argv[1], int(sys.argv[2])
seqs = []
with open(path, encoding="utf-8") as fh:
    for line in fh:
        if line.strip():
            seqs.append([s["token"] for s in json.loads(line)["steps"]])
vocab = sorted({t for s in seqs for t in s})
char = {t: chr(0xE000 + i) for i, t in enumerate(vocab)}
words = ["".join(char[t] for t in s) for s in seqs]
del seqs
tok = Tokenizer(models.BPE())
trainer = trainers.BpeTrainer(vocab_size=len(vocab) + merges, min_frequency=0, show_progress=False,
                              initial_alphabet=list(char.values()), special_tokens=[])
tok.train_from_iterator(words, trainer=trainer, length=len(words))
print(len(tok.get_vocab()) - len(vocab))
"""


def run_process(cmd: list[str]) -> dict[str, float]:
    """Wall seconds, CPU seconds and peak RSS (MiB) of one whole process, with its last output line."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        _pinned(cmd), env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    out = proc.stdout.read() if proc.stdout else ""
    err = proc.stderr.read() if proc.stderr else ""
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"{cmd[:4]} failed ({proc.returncode}): {err[-2000:]}")
    lines = out.strip().splitlines()
    return {
        "seconds": wall,
        "cpu": usage.ru_utime + usage.ru_stime,
        "peak_mib": usage.ru_maxrss / 1024,
        "last": lines[-1] if lines else "",
        "first": lines[0] if lines else "",
    }


def end_to_end(path: Path, merges: int, work: Path) -> dict[str, dict[str, float]]:
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    xtree = [sys.executable, "-m", "xtree_gym", "mine", str(path), "-o", str(work / "tree.json")]
    xtree += ["--p-len", "0", "--p-succ", "0", "--eta", "0", "--cap", str(merges), "--max-len", "1000000"]
    xtree += ["--min-freq", "2", "--min-succ", "0", "--min-task-types", "1"]
    env_path = os.environ.get("PYTHONPATH", "")
    os.environ["PYTHONPATH"] = root + (os.pathsep + env_path if env_path else "")
    rows = {"xtree mine": run_process(xtree)}
    rows["xtree mine"]["merges"] = len(json.loads((work / "tree.json").read_text())["nodes"])
    rows["tokenizers script"] = run_process([sys.executable, "-c", TOKENIZERS_SCRIPT, str(path), str(merges)])
    rows["tokenizers script"]["merges"] = int(rows["tokenizers script"]["last"])
    return rows


def _row(n: int, tokens: int, name: str, r: dict[str, float], ratio: str) -> str:
    cpu = f"{r['cpu']:>8.2f}" if "cpu" in r else f"{'':>8}"
    return (
        f"{n:>9} {tokens:>11} {name:>18} {int(r['merges']):>6} {r['seconds']:>8.2f} {cpu} "
        f"{r['peak_mib']:>9.0f}  {ratio}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--merges", type=int, default=200)
    ap.add_argument(
        "--reference-max", type=int, default=10_000, help="largest size the reference miner runs on"
    )
    ap.add_argument("--data-dir", default=os.path.join(tempfile.gettempdir(), "xtree_bench_miner"))
    ap.add_argument("--skip-in-process", action="store_true", help="only the end-to-end processes")
    ap.add_argument(
        "--chunks",
        type=int,
        nargs="+",
        default=[6, 2],
        help="corpus shapes, in pieces a trajectory (6: ~28 actions, 2: ~9; the end-to-end rows run each)",
    )
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--n", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(run_worker(args.worker, args.n, args.merges)))
        return
    data = Path(args.data_dir)
    data.mkdir(parents=True, exist_ok=True)
    print(
        f"{'N traj':>9} {'tokens':>11} {'engine':>18} {'merges':>6} {'wall s':>8} {'cpu s':>8} "
        f"{'peak MiB':>9}  ratio"
    )
    for n in args.sizes:
        load = "load average {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())
        print(f"# N = {n}: {load}", flush=True)
        tokens = 0
        if not args.skip_in_process:
            rows = {
                "fast": measure("fast", n, args.merges),
                "tokenizers": measure("tokenizers", n, args.merges),
            }
            if n <= args.reference_max:
                rows["reference"] = measure("reference", n, args.merges)
            base = rows["fast"]["seconds"]
            tokens = int(rows["fast"]["tokens"])
            for engine, r in rows.items():
                if engine == "fast":
                    ratio = f"fast/tokenizers = {base / rows['tokenizers']['seconds']:.2f}x"
                elif engine == "reference":
                    ratio = f"reference/fast = {r['seconds'] / base:.1f}x"
                else:
                    ratio = ""
                print(_row(n, tokens, f"in-process {engine}", r, ratio), flush=True)
        for chunks in args.chunks:
            path = data / f"corpus_{n}.jsonl" if chunks == 6 else data / f"corpus_{n}_c{chunks}.jsonl"
            if not path.exists():
                write_jsonl(path, n, chunks)
            with tempfile.TemporaryDirectory() as work:
                e2e = end_to_end(path, args.merges, Path(work))
            x, t = e2e["xtree mine"], e2e["tokenizers script"]
            mb = path.stat().st_size / 1e6
            print(f"# end to end, {chunks} pieces a trajectory, {mb:.0f} MB JSONL", flush=True)
            ratio = (
                f"xtree/tokenizers = {x['seconds'] / t['seconds']:.2f}x wall, {x['cpu'] / t['cpu']:.2f}x cpu"
            )
            print(_row(n, tokens, "process xtree mine", x, ratio))
            print(_row(n, tokens, "process tokenizers", t, ""), flush=True)


if __name__ == "__main__":
    main()
