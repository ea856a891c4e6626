"""Turns per second: envs in this process, in local workers, and on ``xtree serve`` servers (loopback).

    python benchmarks/bench_env_servers.py                     # EchoEnv: 8 tasks x n 2, 20 turns, 4 at once
    python benchmarks/bench_env_servers.py --tasks 16 --turns 30 --servers 2

The same rollout (same env, tasks, scripted responses and number of episodes at once) runs three
ways -- ``workers=0``, ``workers=LIVE`` and ``env_servers=URLS`` -- and each prints its turns/s (a
worker's spawn and a session's opening are inside the timing). The
EchoEnv does next to nothing per step, so the figure is the transport's cost per turn (one round trip
either way); a real env's own step time comes on top of it, the same for all three.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def start_server(env_id: str, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    """An ``xtree serve`` subprocess on an ephemeral loopback port, and its URL once /health answers."""
    import httpx

    with open(log, "w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "xtree_gym", "serve", env_id, "--port", "0"], stderr=err
        )
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        found = re.search(r"at (http://127\.0\.0\.1:\d+)", log.read_text())
        if found:
            try:
                if httpx.get(found.group(1) + "/health", timeout=2).status_code == 200:
                    return proc, found.group(1)
            except httpx.HTTPError:
                pass
        time.sleep(0.2)
    proc.kill()
    raise SystemExit(f"xtree serve did not start: {log.read_text()}")


def play(env_id: str, tasks: int, n: int, turns: int, live: int, **where: object) -> tuple[int, float]:
    """(turns played, seconds) of one rollout."""
    from xtree_gym.agents.model.generation import ScriptedGenerator
    from xtree_gym.agents.play.rollout import rollout
    from xtree_gym.agents.play.testing import EchoHarness
    from xtree_gym.agents.types import TaskSpec

    specs = [TaskSpec("echo", seed=s) for s in range(tasks)]
    gen = ScriptedGenerator(["<action>hello</action>"], cycle=True)
    t0 = time.perf_counter()
    eps = rollout(env_id, specs, gen, EchoHarness(), n=n, max_steps=turns, max_live=live, **where)  # type: ignore[arg-type]
    return sum(len(e.turns) for e in eps), time.perf_counter() - t0


def main() -> None:
    from xtree_gym.agents.play.testing import ECHO_ENV

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tasks", type=int, default=8)
    ap.add_argument("--n", type=int, default=2)
    ap.add_argument("--turns", type=int, default=20)
    ap.add_argument("--live", type=int, default=4, help="episodes at once (each way the same)")
    ap.add_argument("--servers", type=int, default=2)
    args = ap.parse_args()
    live = args.live
    load = f"EchoEnv, {args.tasks} tasks x n {args.n}, {args.turns} turns each, {live} episodes at once"
    print(f"load: {load}")
    with tempfile.TemporaryDirectory() as tmp:
        procs = [start_server(ECHO_ENV, Path(tmp) / f"s{i}.log") for i in range(args.servers)]
        try:
            runs = {
                "in-process (workers=0)": {"workers": 0},
                f"local workers (workers={live})": {"workers": live},
                f"served ({args.servers} x xtree serve, loopback)": {"env_servers": [u for _, u in procs]},
            }
            for name, where in runs.items():
                played, secs = play(ECHO_ENV, args.tasks, args.n, args.turns, live, **where)
                print(f"{name:42s} {played:5d} turns in {secs:6.2f} s = {played / secs:8.1f} turns/s")
        finally:
            for proc, _ in procs:
                proc.kill()
                proc.wait(10)


if __name__ == "__main__":
    main()
