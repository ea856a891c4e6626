"""XTreeBonus overhead per step, in ns, against the bare env in the same run (target: < 5 µs).

Times are CPU time of this process (``time.process_time_ns``), so other load on the machine
does not inflate them. The env is trivial and fast: it replays recorded token sequences, building a fresh ``info`` dict
each step as a real env does, so what is measured is the wrapper (streaming match, ledger,
info keys, reward). Tokens and tree are the ScienceWorld gold corpus and the tree mined from it
(``../shared``); without it a synthetic corpus is used.

    python benchmarks/bench_bonus.py [--steps 300000] [--repeats 5]
    python benchmarks/bench_bonus.py --instances    # instance and ablation figures (needs ../shared)

Prints ns/step for the bare env and each wrapper mode, the overhead (best of ``--repeats``) and
how many nodes completed per step. ``--instances`` prints, for the ScienceWorld gold corpus, the
node-instance counts by depth for the mined tree and each control, and the Eq. 3 bonus surface.
"""

from __future__ import annotations

import argparse
import random
import time
from pathlib import Path
from typing import Any

import gymnasium as gym

from xtree_gym.corpus import Step, Trajectory, read_corpus
from xtree_gym.mining import mine, trajectory_tokens
from xtree_gym.mining.config import MinerConfig
from xtree_gym.wrappers.reward import InvalidActionPenalty, XTreeBonus

GOLD = Path(__file__).resolve().parents[2] / "shared" / "data" / "scienceworld" / "train-gold.jsonl"


class FastReplay(gym.Env):
    """Replays episodes of tokens; one episode per reset, cycling through the list."""

    observation_space = action_space = gym.spaces.Text(8)

    def __init__(self, episodes: list[list[str]]) -> None:
        self.episodes = episodes
        self.k = -1
        self.ep: list[str] = []
        self.i = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict]:
        self.k = (self.k + 1) % len(self.episodes)
        self.ep, self.i = self.episodes[self.k], 0
        return "", {"task": "t"}

    def step(self, action: Any) -> tuple[str, float, bool, bool, dict]:
        tok = self.ep[self.i]
        self.i += 1
        return "", 0.0, self.i == len(self.ep), False, {"xtree": {"token": tok}, "won": False}


def corpus() -> tuple[list[list[str]], Any, str]:
    if GOLD.is_file():
        c = read_corpus(GOLD)
        tokens = trajectory_tokens(c.trajectories, "scienceworld")
        return (
            tokens,
            mine(c.trajectories, "scienceworld", domain="scienceworld"),
            "ScienceWorld gold (826 episodes)",
        )
    rng = random.Random(0)
    motifs = [["open<door>", "navigate<room>"], ["take<x>", "focus<x>", "put<container>"], ["look<room>"]]
    eps = [[t for _ in range(10) for t in rng.choice(motifs)] for _ in range(400)]
    trajs = [Trajectory(str(i), [Step(t, token=t) for t in e], True) for i, e in enumerate(eps)]
    return eps, mine(trajs, MinerConfig(min_freq=5, eta=0.5, cap=40)), "synthetic (400 episodes)"


class FeedOnly(gym.Wrapper):
    """The streaming matcher alone (what XTreeBonus cannot do without), to split the overhead."""

    def __init__(self, env: gym.Env, tree: Any) -> None:
        super().__init__(env)
        self.m = tree.matcher()

    def reset(self, **kw: Any) -> tuple[Any, dict]:
        self.m.reset()
        return self.env.reset(**kw)

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict]:
        out = self.env.step(action)
        self.m.feed(out[4]["xtree"]["token"])
        return out


def per_step_ns(env: gym.Env, n_steps: int) -> float:
    """CPU time of this process per step (process_time: other processes' load does not count)."""
    env.reset()
    step, reset = env.step, env.reset
    t0 = time.process_time_ns()
    for _ in range(n_steps):
        if step(None)[2]:
            reset()
    return (time.process_time_ns() - t0) / n_steps


def instance_figures() -> None:
    """Instance counts (Appendix E's figures, on ScienceWorld gold) and the bonus surface (Table 20)."""
    import statistics

    from xtree_gym.rewards import sequence_bonus
    from xtree_gym.rewards.instances import depth_histogram, length_histogram, make_instances, random_tree

    c = read_corpus(GOLD)
    tokens = trajectory_tokens(c.trajectories, "scienceworld")
    trajs = c.trajectories
    t0 = time.perf_counter()
    tree = mine(trajs, "scienceworld", domain="scienceworld")
    print(
        f"mined tree: {len(tree)} nodes in {time.perf_counter() - t0:.1f} s; depth histogram {tree.depth_histogram()}"
    )
    t0 = time.perf_counter()
    rand = random_tree(trajs, len(tree), "scienceworld", seed=0, domain="scienceworld")
    print(
        f"random tree: {len(rand)} nodes in {time.perf_counter() - t0:.1f} s; depth histogram {rand.depth_histogram()}"
    )
    for label, t in (("mined", tree), ("random", rand)):
        two = sum(n.length == 2 for n in t) / len(t)
        matches = [len(t.find_matches(tok)) for tok in tokens]
        bonus = [sequence_bonus(t, tok).total for tok in tokens]
        print(
            f"  {label:6s}: {two:.0%} two-primitive nodes; {sum(matches)} occurrences in the corpus "
            f"({statistics.mean(matches):.1f}/episode); depth-design bonus per gold episode "
            f"{statistics.mean(bonus):.2f} (nesting on)"
        )
    for kind in ("node", "nested", "random_span", "random_tree", "whole"):
        t0 = time.perf_counter()
        inst = make_instances(kind, trajs, tree, seed=0, domain="scienceworld")
        lengths = length_histogram(inst)
        shown = (
            lengths
            if len(lengths) <= 12
            else f"mean {statistics.mean(i.length for i in inst):.1f}, max {max(lengths)}"
        )
        print(
            f"{kind:12s} {len(inst):6d} instances in {time.perf_counter() - t0:5.1f} s; "
            f"depth {depth_histogram(inst)}; length {shown}"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=300_000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--instances", action="store_true", help="print instance and ablation figures instead")
    args = ap.parse_args()
    if args.instances:
        instance_figures()
        return
    episodes, tree, name = corpus()
    print(f"corpus: {name}; tree: {len(tree)} nodes; {args.steps} steps x best of {args.repeats}")
    modes = {
        "bare env": lambda: FastReplay(episodes),
        "matcher.feed only": lambda: FeedOnly(FastReplay(episodes), tree),
        "XTreeBonus record": lambda: XTreeBonus(FastReplay(episodes), tree),
        "XTreeBonus count_invalid=True": lambda: XTreeBonus(FastReplay(episodes), tree, count_invalid=True),
        "XTreeBonus weight=0.75": lambda: XTreeBonus(FastReplay(episodes), tree, weight=0.75),
        "XTreeBonus running": lambda: XTreeBonus(FastReplay(episodes), tree, weight="running"),
        "XTreeBonus webshop design": lambda: XTreeBonus(
            FastReplay(episodes), tree, bonus="webshop", weight=1.0
        ),
        "InvalidActionPenalty": lambda: InvalidActionPenalty(FastReplay(episodes)),
    }
    best: dict[str, float] = {}
    for _ in range(args.repeats):  # interleaved, so drifting machine load hits every mode alike
        for label, make in modes.items():
            ns = per_step_ns(make(), args.steps)
            best[label] = min(best.get(label, ns), ns)
    bare = best["bare env"]
    print(f"{'mode':28s} {'ns/step':>9s} {'overhead ns':>12s} {'x bare':>7s}")
    for label, ns in best.items():
        print(f"{label:28s} {ns:9.0f} {ns - bare:12.0f} {ns / bare:7.2f}")
    probe = XTreeBonus(FastReplay(episodes), tree)
    probe.reset()
    done_nodes = 0
    for _ in range(args.steps):
        *_, term, _, info = probe.step(None)
        done_nodes += len(info["xtree"]["completed"])
        if term:
            probe.reset()
    print(f"nodes completed per step: {done_nodes / args.steps:.2f}")
    worst = max(ns - bare for label, ns in best.items() if label.startswith("XTreeBonus"))
    print(
        f"target < 5000 ns overhead: {'met' if worst < 5000 else 'NOT met'} (worst XTreeBonus mode {worst:.0f} ns)"
    )


if __name__ == "__main__":
    main()
