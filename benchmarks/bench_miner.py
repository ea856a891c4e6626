"""Miner speed and memory: our fast miner vs the reference miner vs Hugging Face ``tokenizers``.

Corpora of N trajectories (~30 actions each) are built from planted skills plus noise. Each
measurement runs in its own subprocess (so its peak RSS is its own) on one core
(``RAYON_NUM_THREADS=1`` for tokenizers). Settings are the frequency-only config the issue
asks for: p_len = p_succ = 0, eta = 0, the same number of merges for every engine.

    python benchmarks/bench_miner.py --sizes 10000 100000 1000000 --merges 256

Prints one table with seconds, peak RSS and the ratios against the baselines of the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

import numpy as np

N_PRIMITIVES = 60
N_SKILLS = 40
N_TASKS = 20


def make_corpus(n: int, seed: int = 0) -> tuple[list[list[str]], list[bool], list[str]]:
    """n trajectories of ~30 tokens: planted skills (length 3-8) interleaved with noise tokens."""
    rng = np.random.default_rng(seed)
    skills = [rng.integers(0, N_PRIMITIVES, size=rng.integers(3, 9)) for _ in range(N_SKILLS)]
    noise = [rng.integers(0, N_PRIMITIVES, size=rng.integers(1, 4)) for _ in range(400)]
    chunks = skills + noise
    lens = np.array([len(c) for c in chunks])
    table = np.concatenate(chunks)
    starts = np.r_[0, np.cumsum(lens)[:-1]]
    # Each trajectory: 6 chunks, a skill with probability 0.6 (skill popularity is Zipf-like).
    is_skill = rng.random((n, 6)) < 0.6
    skill_p = 1.0 / np.arange(1, N_SKILLS + 1)
    skill_ids = rng.choice(N_SKILLS, size=(n, 6), p=skill_p / skill_p.sum())
    noise_ids = N_SKILLS + rng.integers(0, len(noise), size=(n, 6))
    ids = np.where(is_skill, skill_ids, noise_ids)
    chunk_len = lens[ids]  # (n, 6)
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
        from xtree_gym.config import MinerConfig
        from xtree_gym.mining import EncodedCorpus, reference_mine
        from xtree_gym.mining_fast import fast_mine

        cfg = MinerConfig(p_len=0, p_succ=0, eta=0, cap=merges, max_len=10**6, min_freq=2)
        t0 = time.perf_counter()
        enc = EncodedCorpus.from_tokens(seqs, success, tasks)
        del seqs
        result = fast_mine(enc, cfg) if engine == "fast" else reference_mine(enc, cfg)
        secs = time.perf_counter() - t0
        n_merges = len(result)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # MiB (Linux reports KiB)
    return {"seconds": secs, "peak_mib": peak, "merges": n_merges, "tokens": n_tokens}


def measure(engine: str, n: int, merges: int) -> dict[str, float]:
    env = dict(os.environ, RAYON_NUM_THREADS="1", OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    cmd = [sys.executable, __file__, "--worker", engine, "--n", str(n), "--merges", str(merges)]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--merges", type=int, default=256)
    ap.add_argument(
        "--reference-max", type=int, default=10_000, help="largest size the reference miner runs on"
    )
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--n", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(run_worker(args.worker, args.n, args.merges)))
        return
    print(f"{'N traj':>9} {'tokens':>11} {'engine':>11} {'merges':>6} {'seconds':>8} {'peak MiB':>9}  ratio")
    for n in args.sizes:
        rows = {"fast": measure("fast", n, args.merges), "tokenizers": measure("tokenizers", n, args.merges)}
        if n <= args.reference_max:
            rows["reference"] = measure("reference", n, args.merges)
        base = rows["fast"]["seconds"]
        for engine, r in rows.items():
            if engine == "fast":
                ratio = f"fast/tokenizers = {base / rows['tokenizers']['seconds']:.2f}x"
            elif engine == "reference":
                ratio = f"reference/fast = {r['seconds'] / base:.1f}x"
            else:
                ratio = ""
            print(
                f"{n:>9} {int(r['tokens']):>11} {engine:>11} {int(r['merges']):>6} "
                f"{r['seconds']:>8.2f} {r['peak_mib']:>9.0f}  {ratio}"
            )


if __name__ == "__main__":
    main()
