"""Per-rank memory of the GRPO trainer: 1 process vs FSDP over 2 processes (CPU, gloo), same global batch.

A random Qwen2-shaped model (``--hidden`` 512, ``--layers`` 8: 25.4M parameters, the tiny tokenizer)
is written to a temp folder and trained by the real :class:`~xtree_gym.agents.grpo.trainer.GRPOTrainer`
with a KL reference (``kl_coef`` 0.05) and an EMA teacher (OPSD ``empty``, ``opsd_teacher ema``),
float32: once as one process, once under the documented launch line
``accelerate launch --config_file xtree_gym/agents/accelerate/fsdp.yaml --num_processes 2``.
Each rank measures

* **peak**: its resident-set high-water mark (psutil, sampled every 2 ms) over the trainer's set-up
  (policy + reference + teacher) and ONE update on its share of ``--rows`` rows, minus its resident
  set just before the set-up (the libraries and the process group are not counted; glibc's mmap
  threshold is fixed at 128 KiB in both runs so that freed tensors leave the resident set);
* **params + optimizer**: the bytes of the policy's parameters and AdamW state this rank holds after
  the update (local shards under FSDP), and the reference's and teacher's parameter bytes.

The last lines are the ratios ``FSDP rank / 1 process`` (the issue's goal: <= 0.6 at world 2).

    python benchmarks/bench_fsdp_memory.py [--hidden 512] [--layers 8] [--rows 8]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_trainer_memory import PeakRSS  # the same sampler as the one-process memory benchmark

ROOT = Path(__file__).resolve().parents[1]


def write_model(folder: Path, hidden: int, layers: int) -> int:
    """A random Qwen2-shaped causal LM with the tiny tokenizer, saved as a folder; returns its parameter count."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from xtree_gym.agents.model.loading import tiny_tokenizer

    tok = tiny_tokenizer()
    config = Qwen2Config(  # type: ignore[call-arg]
        vocab_size=len(tok), hidden_size=hidden, intermediate_size=3 * hidden, num_hidden_layers=layers,
        num_attention_heads=8, num_key_value_heads=4, tie_word_embeddings=True,
        eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id, bos_token_id=None,
    )  # fmt: skip
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(config)
    model.generation_config.eos_token_id = tok.eos_token_id
    model.generation_config.pad_token_id = tok.pad_token_id
    model.save_pretrained(str(folder))
    tok.save_pretrained(str(folder))
    return sum(p.numel() for p in model.parameters())


def rows(n: int, vocab: int) -> list[Any]:
    """``n`` rows of 96 tokens (the last 32 trained), advantages ±1, seeded ids."""
    import random

    from xtree_gym.agents.grpo.rows import Row

    rng = random.Random(0)
    out = []
    for i in range(n):
        ids = [rng.randrange(20, vocab) for _ in range(96)]
        target = [False] * 64 + [True] * 32
        out.append(Row(ids, target, [0.0] * 96, advantage=1.0 if i % 2 else -1.0, teacher_prefix=ids[:8]))
    return out


def tensor_bytes(tensors: Any) -> int:
    return sum((t.to_local() if hasattr(t, "to_local") else t).numel() * t.element_size() for t in tensors)


def rank_run(out: Path, model: str, n_rows: int) -> None:
    """One rank: set up the trainer, take one update on this rank's rows, write ``out/rank{R}.json``."""
    import psutil

    from xtree_gym.agents.grpo.config import GRPOConfig
    from xtree_gym.agents.grpo.policy import make_accelerator
    from xtree_gym.agents.grpo.trainer import GRPOTrainer
    from xtree_gym.agents.run.scaleout import inner_optimizer

    acc = make_accelerator()
    rank, world = acc.process_index, acc.num_processes
    cfg = GRPOConfig(env="XTree-Countdown-v0", model=model, kl_coef=0.05, opsd="empty", opsd_teacher="ema",
                     output_dir=str(out / f"run-{world}"), progress=False, tensorboard=False,
                     micro_batch_tokens=4096, lr=1e-4)  # fmt: skip
    acc.wait_for_everyone()
    base = psutil.Process().memory_info().rss
    with PeakRSS() as peak:
        tr = GRPOTrainer(cfg, accelerator=acc)
        mine = rows(n_rows, len(tr.tokenizer))[rank::world]
        tr.update(mine)
    opt = inner_optimizer(tr.optimizer)
    state = [v for s in opt.state.values() for v in s.values() if hasattr(v, "element_size") and v.dim()]
    body = {
        "rank": rank, "world": world, "kind": tr.parallel["kind"], "peak_bytes": peak.peak - base,
        "param_bytes": tensor_bytes(tr.policy.parameters()), "optimizer_bytes": tensor_bytes(state),
        "ref_bytes": tensor_bytes(tr.ref.parameters()) if tr.ref is not None else 0,
        "teacher_bytes": tensor_bytes(tr.ema.parameters()) if tr.ema is not None else 0,
    }  # fmt: skip
    (out / f"rank{rank}-of-{world}.json").write_text(json.dumps(body))
    acc.wait_for_everyone()


def run_world(world: int, me: list[str]) -> None:
    """Run the script and arguments ``me`` as 1 process, or as ``world`` FSDP processes (accelerate, gloo).

    A fixed mmap threshold: glibc's dynamic one would keep freed tensors in its heap, and the resident set would
    count memory the process no longer uses (the same setting for every run).
    """
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "MALLOC_MMAP_THRESHOLD_": "131072"}
    if world == 1:
        cmd = [sys.executable, *me]
    else:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = str(s.getsockname()[1])
        launcher = shutil.which("accelerate") or str(Path(sys.executable).with_name("accelerate"))
        cmd = [launcher, "launch", "--config_file", str(ROOT / "xtree_gym/agents/accelerate/fsdp.yaml"),
               "--num_processes", str(world), "--mixed_precision", "no", "--main_process_port", port, *me]  # fmt: skip
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if proc.returncode:
        sys.exit(proc.stderr[-3000:])


def launch(world: int, out: Path, model: str, n_rows: int) -> list[dict[str, Any]]:
    run_world(
        world,
        [str(Path(__file__).resolve()), "--rank-run", str(out), "--model", model, "--rows", str(n_rows)],
    )
    return [json.loads((out / f"rank{r}-of-{world}.json").read_text()) for r in range(world)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--rows", type=int, default=8)
    ap.add_argument("--rank-run", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--model", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.rank_run:
        rank_run(Path(args.rank_run), args.model, args.rows)
        return
    tmp = Path(tempfile.mkdtemp(prefix="bench-fsdp-"))
    try:
        n = write_model(tmp / "model", args.hidden, args.layers)
        print(
            f"model: {n / 1e6:.1f}M parameters (float32 {n * 4 / 2**20:.0f} MiB); {args.rows} rows; load {os.getloadavg()[0]:.2f}"
        )
        results = {w: launch(w, tmp, str(tmp / "model"), args.rows) for w in (1, 2)}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    mib = 2**20
    print(
        f"{'run':<14}{'rank':>5}{'peak MiB':>10}{'params MiB':>12}{'AdamW MiB':>11}{'ref MiB':>9}{'teacher MiB':>13}"
    )
    for w, ranks in results.items():
        for r in ranks:
            name = "1 process" if w == 1 else f"FSDP x{w}"
            print(f"{name:<14}{r['rank']:>5}{r['peak_bytes'] / mib:>10.1f}{r['param_bytes'] / mib:>12.1f}"
                  f"{r['optimizer_bytes'] / mib:>11.1f}{r['ref_bytes'] / mib:>9.1f}{r['teacher_bytes'] / mib:>13.1f}")  # fmt: skip
    one = results[1][0]
    two = results[2]
    assert two[0]["kind"] == "fsdp", two[0]["kind"]
    state1 = one["param_bytes"] + one["optimizer_bytes"]
    worst_state = max(r["param_bytes"] + r["optimizer_bytes"] for r in two)
    worst_peak = max(r["peak_bytes"] for r in two)
    print(f"params + optimizer per rank, FSDP x2 / 1 process: {worst_state / state1:.2f}x")
    print(
        f"peak (load + reference + teacher + one update) per rank, FSDP x2 / 1 process: {worst_peak / one['peak_bytes']:.2f}x"
    )


if __name__ == "__main__":
    main()
