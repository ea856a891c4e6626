"""Benchmark of XTree-WebShop-v0: start time, step time, search latency, memory over 1,000 episodes.

Run:  python benchmarks/bench_webshop.py [--data-dir DIR] [--episodes 1000]

Targets: start < 5 s, step < 20 ms, search < 50 ms, no RSS growth across episodes. Search is
also timed against a pure-Python BM25 over the same analyzed tokens, measured in the same run.
"""

from __future__ import annotations

import argparse
import math
import os
import random
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATA = ROOT.parent / "shared" / "reference" / "webshop"

_COLD_START = """
import time
t0 = time.perf_counter()
import gymnasium as gym
import xtree_gym.envs
xtree_gym.envs.register_envs()
env = gym.make("XTree-WebShop-v0", data_dir={data!r})
env.reset(seed=0)
print(time.perf_counter() - t0, time.process_time())
"""


def rss_mib() -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


def cold_start(data: str, runs: int = 3) -> list[tuple[float, float]]:
    out = []
    for _ in range(runs):
        res = subprocess.run(
            [sys.executable, "-c", _COLD_START.format(data=data)],
            capture_output=True,
            text=True,
            check=True,
            cwd=ROOT,
        )
        wall, cpu = res.stdout.strip().splitlines()[-1].split()
        out.append((float(wall), float(cpu)))
    return out


def naive_bm25(docs: list[list[str]], k1: float = 0.9, b: float = 0.4):
    """A plain-Python BM25 (Lucene idf) used as the in-run baseline for search latency."""
    n = len(docs)
    avg = sum(map(len, docs)) / n
    tfs = [Counter(d) for d in docs]
    df = Counter(t for tf in tfs for t in tf)

    def search(terms: list[str], k: int = 50) -> list[int]:
        scores = []
        for i, tf in enumerate(tfs):
            s = 0.0
            for t in terms:
                f = tf.get(t, 0)
                if f:
                    idf = math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5))
                    s += idf * f * (k1 + 1) / (f + k1 * (1 - b + b * len(docs[i]) / avg))
            if s > 0:
                scores.append((-s, i))
        return [i for _, i in sorted(scores)[:k]]

    return search


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data-dir", default=os.environ.get("XTREE_WEBSHOP_DATA", str(DEFAULT_DATA)))
    ap.add_argument("--episodes", type=int, default=1000)
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    from xtree_gym.envs.webshop import WebShopEnv

    cold = cold_start(args.data_dir)
    wall = statistics.median(w for w, _ in cold)
    cpu = statistics.median(c for _, c in cold)
    print(
        f"start (fresh process, imports + gym.make + reset): median {wall:.2f} s wall, {cpu:.2f} s CPU "
        f"(wall runs {', '.join(f'{w:.2f}' for w, _ in cold)}; target < 5 s, ratio {wall / 5:.2f}; "
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)"
    )

    rss0 = rss_mib()
    t0 = time.perf_counter()
    env = WebShopEnv(data_dir=args.data_dir, split="train")
    print(
        f"start (in process, data load + index): {time.perf_counter() - t0:.2f} s; RSS {rss0:.0f} -> {rss_mib():.0f} MiB"
    )
    t0 = time.perf_counter()
    WebShopEnv(data_dir=args.data_dir, split="test")
    print(f"second env in the same process (shared data): {1000 * (time.perf_counter() - t0):.1f} ms")

    bench_search(env)
    bench_episodes(env, args.episodes)
    return 0


def bench_search(env) -> None:
    """Instruction texts of 300 goals through bm25s, and 60 through the plain-Python baseline."""
    from xtree_gym.envs.webshop_search import document_text

    search = env.data.search
    queries = [g.instruction.split(", and price")[0] for g in random.Random(0).sample(env.goals, 300)]
    lat = []
    for q in queries:
        t = time.perf_counter()
        search.search(q)
        lat.append(1000 * (time.perf_counter() - t))
    base = naive_bm25([search.analyze(document_text(p)) for p in env.products])
    base_lat = []
    for q in queries[:60]:
        terms = search.analyze(q)
        t = time.perf_counter()
        base(terms)
        base_lat.append(1000 * (time.perf_counter() - t))
    print(
        f"search: mean {statistics.mean(lat):.2f} ms, p95 {pct(lat, 0.95):.2f} ms, max {max(lat):.2f} ms "
        f"(target < 50 ms); plain-Python BM25 baseline mean {statistics.mean(base_lat):.2f} ms "
        f"-> {statistics.mean(base_lat) / statistics.mean(lat):.0f}x faster"
    )


def bench_episodes(env, n_episodes: int) -> None:
    """Mixed-policy episodes: time every step (purchases apart) and watch RSS."""
    from xtree_gym.collect.webshop import plan, run_episode

    t = time.perf_counter()
    env.reset(seed=0)
    from xtree_gym.envs.webshop_reward import title_nouns

    title_nouns("Warm Up Tagger")
    print(f"first purchase pays the POS tagger load once per process: {time.perf_counter() - t:.2f} s")
    orig_step = env.step
    times: dict[str, list[float]] = {"browse": [], "buy": []}

    def timed_step(action: str):
        t = time.perf_counter()
        out = orig_step(action)
        times["buy" if action == "click[buy now]" else "browse"].append(1000 * (time.perf_counter() - t))
        return out

    env.step = timed_step  # type: ignore[method-assign]
    episodes = plan(n_episodes, env.goal_indices, "mixed", 0)
    rss_marks = {}
    wins = 0
    t_all = time.perf_counter()
    for i, (goal, variant, seed) in enumerate(episodes, 1):
        wins += run_episode(env, goal, variant, random.Random(seed))["success"]
        if i in (100, n_episodes // 2, n_episodes):
            rss_marks[i] = rss_mib()
    wall = time.perf_counter() - t_all
    allsteps = times["browse"] + times["buy"]
    print(f"{n_episodes} episodes ({len(allsteps)} steps) in {wall:.1f} s; success {wins / n_episodes:.3f}")
    print(
        f"step: mean {statistics.mean(allsteps):.2f} ms, p95 {pct(allsteps, 0.95):.2f} ms (target < 20 ms, "
        f"ratio {statistics.mean(allsteps) / 20:.3f}); browse mean {statistics.mean(times['browse']):.2f} ms, "
        f"buy (reward) mean {statistics.mean(times['buy']):.2f} ms p95 {pct(times['buy'], 0.95):.2f} ms"
    )
    marks = ", ".join(f"after {k}: {v:.1f} MiB" for k, v in rss_marks.items())
    first, last = rss_marks[min(rss_marks)], rss_marks[max(rss_marks)]
    print(f"RSS {marks}; growth from episode 100 to {n_episodes}: {last - first:+.1f} MiB")


if __name__ == "__main__":
    sys.exit(main())
