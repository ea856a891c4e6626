"""Rollout throughput on CPU: turns/s and generated tokens/s, batched vs one episode at a time.

The same episodes are played twice in one run with the ``hf`` backend: once with every episode
live at once (one batched ``generate`` call per turn, left-padded), once with one episode live at
a time (batch of one). The env is :class:`~xtree_gym.agents.play.testing.EchoEnv` (microseconds a
step), so what is measured is prompt rendering, chat templating, generation and bookkeeping.
Sampling runs at temperature 1 with a fixed seed; wall-clock time, so run it on a quiet machine
and read the load average it prints beside the figures.

    python benchmarks/bench_rollout.py [--models tiny-random smollm2] [--episodes 8] [--turns 3] [--tokens 16] [--threads 1]
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

from xtree_gym.agents.model.generation import HFGenerator
from xtree_gym.agents.model.loading import load_model
from xtree_gym.agents.play.rollout import rollout
from xtree_gym.agents.play.testing import ECHO_ENV, EchoHarness
from xtree_gym.agents.types import TaskSpec


def measure(model: Any, tok: Any, episodes: int, turns: int, tokens: int, live: int) -> dict[str, float]:
    """Play ``episodes`` echo episodes of ``turns`` turns with at most ``live`` at once; wall-clock figures."""
    gen = HFGenerator(model, tok, temperature=1.0, max_new_tokens=tokens, seed=0, batch_size=max(live, 1))
    tasks = [TaskSpec("echo", seed=i) for i in range(episodes)]
    t0 = time.perf_counter()
    eps = rollout(ECHO_ENV, tasks, gen, EchoHarness(), tokenizer=tok, max_steps=turns, max_live=live)
    wall = time.perf_counter() - t0
    n_turns = sum(len(e.turns) for e in eps)
    n_tokens = sum(len(t.completion_ids) for e in eps for t in e.turns)
    return {
        "wall_s": wall,
        "turns": n_turns,
        "tokens": n_tokens,
        "turns_s": n_turns / wall,
        "tokens_s": n_tokens / wall,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["tiny-random", "smollm2"])
    ap.add_argument("--episodes", type=int, default=8)
    ap.add_argument("--turns", type=int, default=3)
    ap.add_argument("--tokens", type=int, default=16, help="max new tokens a turn")
    ap.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch CPU threads (1: spinning threads on a loaded box cost 10x)",
    )
    args = ap.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    print(
        f"load average: {os.getloadavg()[0]:.2f} (1 min), {os.cpu_count()} CPUs, torch threads {args.threads}"
    )
    print(f"{'model':12} {'mode':10} {'turns':>6} {'tokens':>7} {'wall s':>8} {'turns/s':>8} {'tok/s':>8}")
    for name in args.models:
        model, tok = load_model(name)
        measure(model, tok, 1, 1, 4, 1)  # warm-up: first-call costs are not throughput
        rows = {}
        for mode, live in (("batched", args.episodes), ("one-by-one", 1)):
            r = rows[mode] = measure(model, tok, args.episodes, args.turns, args.tokens, live)
            print(
                f"{name:12} {mode:10} {r['turns']:6d} {r['tokens']:7d} {r['wall_s']:8.2f} "
                f"{r['turns_s']:8.2f} {r['tokens_s']:8.1f}"
            )
        speedup = rows["batched"]["tokens_s"] / rows["one-by-one"]["tokens_s"]
        print(f"{name:12} batched / one-by-one generated tokens/s: {speedup:.2f}x")


if __name__ == "__main__":
    main()
