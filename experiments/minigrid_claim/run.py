"""The claim check: outcome-only vs +X-Tree bonus vs +random-tree bonus, GRPO on MiniGrid, n ∈ {2,4,8,16}.

Run from the repository root::

    python -m experiments.minigrid_claim --smoke          # seconds; what the tests run
    python -m experiments.minigrid_claim --full           # the committed results (see docs/experiments.md)

Steps: (1) a demonstration corpus from a noisy scripted solver (successes and failures, labelled
by the env's own reward); (2) the X-Tree mined from it with xtree_gym's miner, and a random tree
with the same node count, chosen among seeded random trees for the closest length histogram;
(3) one GRPO run per (arm, n, seed) (:mod:`.train`), two worker processes at most; (4) the report
(:mod:`.report`): ``results/minigrid_claim/{results.json, table.md, curves.png, tree.json,
random_tree.json, corpus.jsonl}``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import multiprocessing
import os
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xtree_gym._io import atomic_write_text
from xtree_gym.config import MinerConfig
from xtree_gym.corpus import Trajectory, write_corpus
from xtree_gym.errors import ConfigError
from xtree_gym.instances import random_tree
from xtree_gym.mining import mine
from xtree_gym.progress import Progress
from xtree_gym.tree import XTree

from .solver import demo_corpus
from .train import RunSpec, train_run

ARMS = ("outcome", "xtree", "random_tree")


@dataclass(frozen=True)
class ClaimConfig:
    """Everything the claim check runs at; ``--smoke`` and ``--full`` are two instances."""

    env_id: str = "MiniGrid-DoorKey-5x5-v0"
    """MiniGrid env: random play rarely wins it (≈1 % at 100 steps)."""
    max_steps: int = 100
    """Episode step limit."""
    group_sizes: tuple[int, ...] = (2, 4, 8, 16)
    """GRPO group sizes n (Table 3's grid)."""
    seeds: tuple[int, ...] = (0, 1, 2, 3, 4)
    """Training seeds per (arm, n)."""
    arms: tuple[str, ...] = ARMS
    """Which arms to run."""
    batch_episodes: int = 16
    """Episodes per update, for every n (so n=2 has 8 groups, n=16 has 1)."""
    updates: int = 64
    """Updates per run: the run sees ``updates · batch_episodes`` episodes."""
    lr: float = 2e-3
    """Adam learning rate."""
    epochs: int = 4
    """Clipped-loss passes per batch (cheap next to the rollouts; the clip keeps them near the old policy)."""
    hidden: int = 64
    """Policy MLP width."""
    lambda0: float = 0.75
    """Eq. 3 λ0 (Table 7)."""
    w_ref: float = 0.4
    """Eq. 3 w_ref (ScienceWorld's value, Table 7; the depth b_v design and nesting rule go with it)."""
    eval_episodes: int = 64
    """Held-out episodes sampled from each final policy."""
    demo_episodes: int = 80
    """Demonstrations in the mining corpus."""
    demo_noise: tuple[float, ...] = (0.0, 0.3, 0.6, 1.0)
    """Random-action rates the demonstrations cycle through (1.0: pure random play, mostly failures)."""
    miner: dict[str, Any] = field(
        default_factory=lambda: {"cap": 24, "min_freq": 5, "max_len": 8, "eta": 0.5}
    )
    """MinerConfig fields for both trees."""
    random_tree_draws: int = 20
    """Seeded random trees drawn (each merge asked for the X-Tree node's length); the closest histogram wins."""
    window: int = 5
    """Updates in the moving average of training success (curves, final success, episodes-to-target)."""
    workers: int = 2
    """Worker processes (at most 2: the machine is shared)."""

    def __post_init__(self) -> None:
        bad = [n for n in self.group_sizes if n < 2 or self.batch_episodes % n]
        if bad:
            raise ConfigError(
                f"group sizes {bad} do not divide batch_episodes = {self.batch_episodes} (or are < 2)",
                fix="use group sizes >= 2 that divide batch_episodes",
            )
        unknown = sorted(set(self.arms) - set(ARMS))
        if unknown:
            raise ConfigError(f"unknown arms {unknown}", fix=f"use some of {list(ARMS)}")
        if not 1 <= self.workers <= 2:
            raise ConfigError(f"workers = {self.workers}", fix="use 1 or 2 (the machine is shared)")
        if "outcome" not in self.arms:
            raise ConfigError("the outcome arm is missing", fix="it sets the target success rate; keep it")


SMOKE = ClaimConfig(
    max_steps=30, group_sizes=(2, 4), seeds=(0,), batch_episodes=8, updates=3, eval_episodes=8,
    demo_episodes=24, random_tree_draws=3, window=2, workers=1,
    miner={"cap": 8, "min_freq": 3, "max_len": 6, "eta": 0.5},
)  # fmt: skip
FULL = ClaimConfig()


def length_histogram(tree: XTree) -> dict[int, int]:
    """Node count per node length (primitives)."""
    return dict(sorted(Counter(n.length for n in tree.nodes).items()))


def _hist_distance(a: dict[int, int], b: dict[int, int]) -> int:
    return sum(abs(a.get(k, 0) - b.get(k, 0)) for k in set(a) | set(b))


def build_trees(cfg: ClaimConfig, corpus: list[Trajectory]) -> tuple[XTree, XTree, list[int]]:
    """The mined X-Tree and the matched random tree; also each random draw's histogram distance."""
    mcfg = MinerConfig(**cfg.miner)
    tree = mine(corpus, mcfg, name="minigrid-xtree")
    want = length_histogram(tree)
    lengths = [n.length for n in tree.nodes]  # merge order: draw i is asked for node i's length
    best: XTree | None = None
    dists: list[int] = []
    for k in range(cfg.random_tree_draws):
        cand = random_tree(corpus, len(tree), mcfg, seed=k, name="minigrid-random-tree", lengths=lengths)
        d = _hist_distance(length_histogram(cand), want) + 100 * abs(len(cand) - len(tree))
        dists.append(d)
        if best is None or d < dists[int(best.extra["control"]["seed"])]:
            best = cand
    assert best is not None
    return tree, best, dists


def _run(args: tuple[RunSpec, dict[str, Any] | None]) -> dict[str, Any]:
    import torch

    torch.set_num_threads(1)  # one core per worker: the machine is shared
    spec, tree_dict = args
    tree = None if tree_dict is None else XTree.from_dict(tree_dict)
    t_cpu = time.process_time()
    out = train_run(spec, tree)
    out["cpu_seconds"] = time.process_time() - t_cpu
    return out


def specs(cfg: ClaimConfig) -> list[RunSpec]:
    """Every (arm, n, seed) run, in a fixed order."""
    return [
        RunSpec(
            arm,
            n,
            seed,
            cfg.env_id,
            cfg.max_steps,
            cfg.batch_episodes,
            cfg.updates,
            cfg.lr,
            cfg.epochs,
            cfg.hidden,
            cfg.lambda0,
            cfg.w_ref,
            cfg.eval_episodes,
        )
        for seed in cfg.seeds  # seed-major: a run stopped early still has whole seeds of every cell
        for n in cfg.group_sizes
        for arm in cfg.arms
    ]


def _key(r: dict[str, Any] | RunSpec) -> tuple[str, int, int]:
    return (r["arm"], r["n"], r["seed"]) if isinstance(r, dict) else (r.arm, r.n, r.seed)


def load_done(path: Path, cfg: ClaimConfig) -> dict[tuple[str, int, int], dict[str, Any]]:
    """Runs already in ``runs.jsonl`` made with this config (a resumed run skips them)."""
    done: dict[tuple[str, int, int], dict[str, Any]] = {}
    if not path.exists():
        return done
    want = json.dumps(dataclasses.asdict(cfg), sort_keys=True)
    for line in path.read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        if json.dumps(rec.get("config"), sort_keys=True) == want:
            done[_key(rec["run"])] = rec["run"]
    return done


def run_all(
    cfg: ClaimConfig, out_dir: Path, *, progress: bool = True, resume: bool = False
) -> dict[str, Any]:
    """The whole check; writes ``out_dir`` and returns the results dict.

    Each finished run is appended to ``out_dir/runs.jsonl``; ``resume`` keeps the runs found there
    (same config) and runs only the rest.
    """
    import minigrid  # noqa: F401  (registers the MiniGrid envs)

    from .report import summarize, write_report

    t0 = time.perf_counter()
    corpus = demo_corpus(cfg.env_id, cfg.max_steps, cfg.demo_episodes, cfg.demo_noise)
    tree, rtree, dists = build_trees(cfg, corpus)
    trees = {"xtree": tree.to_dict(), "random_tree": rtree.to_dict()}
    out_dir.mkdir(parents=True, exist_ok=True)
    log = out_dir / "runs.jsonl"
    done = load_done(log, cfg) if resume else {}
    runs: list[dict[str, Any]] = list(done.values())
    todo = [(s, trees.get(s.arm)) for s in specs(cfg) if _key(s) not in done]
    conf = dataclasses.asdict(cfg)
    bar = Progress(total=len(todo), desc="minigrid claim runs", enabled=progress)
    with (
        open(log, "a" if resume else "w", encoding="utf-8") as fh,  # append-only log: each line whole
        multiprocessing.get_context("fork").Pool(cfg.workers) as pool,
    ):
        for r in pool.imap_unordered(_run, todo):
            runs.append(r)
            fh.write(json.dumps({"config": conf, "run": r}) + "\n")
            fh.flush()
            bar.update()
    bar.close()
    runs.sort(key=lambda r: (cfg.group_sizes.index(r["n"]), cfg.arms.index(r["arm"]), r["seed"]))
    results = {
        "config": dataclasses.asdict(cfg),
        "corpus": {
            "episodes": len(corpus),
            "successes": sum(t.success for t in corpus),
            "mean_length": sum(len(t.steps) for t in corpus) / len(corpus),
        },
        "trees": {
            "xtree": {
                "nodes": len(tree),
                "length_histogram": length_histogram(tree),
                "depths": tree.depth_histogram(),
            },
            "random_tree": {
                "nodes": len(rtree),
                "length_histogram": length_histogram(rtree),
                "depths": rtree.depth_histogram(),
                "seed": rtree.extra["control"]["seed"],
                "histogram_distance_per_draw": dists,
            },
        },
        "summary": summarize(cfg, runs),
        "runs": runs,
        "timing": {
            "wall_seconds": time.perf_counter() - t0,
            "cpu_seconds_runs": sum(r["cpu_seconds"] for r in runs),
            "loadavg_end": list(os.getloadavg()),
            "cpus": os.cpu_count(),
        },
    }
    write_corpus(out_dir / "corpus.jsonl", corpus)
    tree.save(out_dir / "tree.json")
    rtree.save(out_dir / "random_tree.json")
    atomic_write_text(out_dir / "results.json", json.dumps(results, indent=1) + "\n")
    write_report(cfg, results, out_dir)
    return results


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m experiments.minigrid_claim", description=__doc__.split("\n")[0]
    )
    size = p.add_mutually_exclusive_group(required=True)
    size.add_argument("--smoke", action="store_true", help="a seconds-long run (what the tests run)")
    size.add_argument("--full", action="store_true", help="the committed size (see docs/experiments.md)")
    p.add_argument(
        "--out", default=None, help="output folder (default results/minigrid_claim, smoke: …_smoke)"
    )
    p.add_argument("--workers", type=int, default=None, help="worker processes, 1 or 2")
    p.add_argument("--resume", action="store_true", help="keep the runs already in OUT/runs.jsonl")
    a = p.parse_args(argv)
    cfg = SMOKE if a.smoke else FULL
    try:
        if a.workers is not None:
            cfg = dataclasses.replace(cfg, workers=a.workers)
        out = Path(a.out or ("results/minigrid_claim_smoke" if a.smoke else "results/minigrid_claim"))
        res = run_all(cfg, out, resume=a.resume)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print((out / "table.md").read_text(encoding="utf-8"))
    t = res["timing"]
    print(f"wrote {out}/ in {t['wall_seconds']:.0f} s wall, {t['cpu_seconds_runs']:.0f} s CPU in the runs")
    return 0
