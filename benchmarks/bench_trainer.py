"""GRPO trainer throughput on CPU: tokens/s of the optimizer step and the rollout's share of wall time.

Runs ``xtree train rlvr`` steps in-process on the real WebShop env (the three-product demo
catalogue, or ``--data-dir``) with ``tiny-random`` (or ``--model``), and reports per step:

* ``update tok/s`` — trained completion tokens / seconds of rewards → rows → forward/backward → AdamW;
* ``rollout share`` — rollout seconds / (rollout + update) seconds;
* the same for a re-run with OPSD on (one more forward per micro-batch: the teacher).

    python benchmarks/bench_trainer.py [--steps 3] [--n 4] [--tasks 2] [--model tiny-random]

Wall times depend on machine load: the script prints ``uptime``'s load average with them. The
first step includes one-time warm-up (allocator, kernels) and is reported but not averaged.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
from pathlib import Path
from typing import Any

from xtree_gym.agents.grpo.config import GRPOConfig
from xtree_gym.agents.grpo.trainer import GRPOTrainer


def run(cfg: GRPOConfig) -> list[dict[str, Any]]:
    trainer = GRPOTrainer(cfg)
    return trainer.train()


def report(name: str, lines: list[dict[str, Any]]) -> None:
    for m in lines:
        share = m["rollout_seconds"] / max(m["rollout_seconds"] + m["update_seconds"], 1e-9)
        print(
            f"{name} step {m['step']}: {m['tokens']} trained / {m['row_tokens']} read tokens, update {m['update_seconds']:.2f} s "
            f"({m['update_tokens_per_s']:.0f} tok/s), rollout {m['rollout_seconds']:.2f} s (share {share:.0%})"
        )
    rest = lines[1:] or lines
    tok = sum(m["tokens"] for m in rest)
    upd = sum(m["update_seconds"] for m in rest)
    roll = sum(m["rollout_seconds"] for m in rest)
    read = sum(m["row_tokens"] for m in rest)
    print(
        f"{name}: update {tok / upd:.0f} trained tok/s, {read / upd:.0f} read tok/s (mean over steps {rest[0]['step']}-{rest[-1]['step']}), "
        f"rollout share {roll / (roll + upd):.0%}, median step {statistics.median(m['seconds'] for m in rest):.2f} s"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--n", type=int, default=2)
    ap.add_argument("--tasks", type=int, default=2)
    ap.add_argument("--model", default="tiny-random")
    ap.add_argument("--max-new-tokens", type=int, default=24)
    ap.add_argument("--data-dir", default=None, help="WebShop data folder (default: the demo catalogue)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data = args.data_dir
        if data is None:
            from xtree_gym.envs.webshop_data import write_demo_data

            data = str(write_demo_data(Path(tmp) / "shop"))
        base = dict(
            env="webshop",
            model=args.model,
            env_kwargs={"data_dir": data},
            task_split="all",
            max_steps=5,
            steps=args.steps,
            tasks_per_step=args.tasks,
            n=args.n,
            oracle_mix=0.5,
            lr=1e-4,
            max_new_tokens=args.max_new_tokens,
            progress=False,
            tensorboard=False,
            save_every=10**6,
            keep_checkpoints=1,
        )
        report("grpo", run(GRPOConfig(**base, output_dir=f"{tmp}/grpo")))
        report("grpo+opsd", run(GRPOConfig(**base, output_dir=f"{tmp}/opsd", opsd="empty")))
    print(f"load average (1, 5, 15 min): {os.getloadavg()}  cores: {os.cpu_count()}")


if __name__ == "__main__":
    main()
