"""The claim check: outcome-only vs bonus arms, GRPO on MiniGrid, per (arm, n, seed).

Run from the repository root::

    python -m experiments.minigrid_claim --smoke          # seconds; what the tests run
    python -m experiments.minigrid_claim --full           # the first claim check (3 arms, n 2..16, 5 seeds)
    python -m experiments.minigrid_claim --grid --env doorkey5 --seeds 100-114 --group-sizes 2,16
    python -m experiments.minigrid_claim --grid --env doorkey8 --arms outcome,xtree,subgoal --resume

Steps: (1) a demonstration corpus from a noisy scripted solver (successes and failures, labelled
by the env's own reward); (2) the X-Tree mined from it, the random tree(s) (one closest draw, or a
fresh exact-histogram draw per seed) and the subgoal value (:mod:`.controls`); (3) one GRPO run per
(arm, n, seed) (:mod:`.train`), two worker processes at most, each finished run appended to
``runs.jsonl`` and written to ``curves/ARM-nN-sSEED.csv``; (4) the report (:mod:`.report`):
``results.json, table.md, curves.png, provenance.json, tree.json, random_tree*.json, corpus.jsonl.gz``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import multiprocessing
import os
import sys
import time
from pathlib import Path
from typing import Any

from experiments._results import code_commit
from experiments._runner import RunLog
from xtree_gym.corpus import Trajectory, write_corpus
from xtree_gym.corpus.io import atomic_write_text
from xtree_gym.errors import ConfigError
from xtree_gym.mining import mine
from xtree_gym.mining.config import MinerConfig
from xtree_gym.mining.tree import XTree
from xtree_gym.progress import Progress
from xtree_gym.rewards.contrastive import corpus_values
from xtree_gym.rewards.instances import random_tree
from xtree_gym.rewards.modes import CONTRASTIVE_MODES, max_episode_bonus

from .config import ARM_SPECS, ARMS, ENVS, FULL, GRID, SMOKE, SUBGOALS_BY_ENV, ClaimConfig
from .controls import exact_random_tree, layout_split, length_histogram, subgoal_value
from .report import compare, summarize, write_curves, write_report
from .solver import demo_corpus
from .train import RunSpec, train_run

__all__ = ["ARMS", "FULL", "GRID", "SMOKE", "ClaimConfig", "build_trees", "length_histogram", "main"]


def _hist_distance(a: dict[int, int], b: dict[int, int]) -> int:
    return sum(abs(a.get(k, 0) - b.get(k, 0)) for k in set(a) | set(b))


def build_trees(cfg: ClaimConfig, corpus: list[Trajectory]) -> tuple[XTree, XTree, list[int]]:
    """The mined X-Tree and the closest-histogram random tree of ``random_tree_draws``; each draw's distance."""
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


def random_trees(cfg: ClaimConfig, corpus: list[Trajectory], tree: XTree, closest: XTree) -> dict[int, XTree]:
    """The random tree of each training seed: the one closest draw, or a fresh exact draw per seed.

    Built whenever an arm's bonus source is the random tree (``random_tree``, ``random_tree_contrastive_gated``).
    """
    if not any(ARM_SPECS[arm][0] == "random_tree" for arm in cfg.arms):
        return {}
    if cfg.random_tree_mode == "closest":
        return {s: closest for s in cfg.seeds}
    mcfg = MinerConfig(**cfg.miner)
    return {s: exact_random_tree(corpus, tree, mcfg, s, cfg.random_tree_draws) for s in cfg.seeds}


def _run(args: tuple[RunSpec, dict[str, Any] | None]) -> dict[str, Any]:
    import torch

    torch.set_num_threads(1)  # one core per worker: the machine is shared
    spec, tree_dict = args
    tree = None if tree_dict is None else XTree.from_dict(tree_dict)
    t_cpu = time.process_time()
    out = train_run(spec, tree)
    out["cpu_seconds"] = time.process_time() - t_cpu
    return out


def specs(cfg: ClaimConfig, extra: dict[str, Any] | None = None) -> list[RunSpec]:
    """Every (arm, n, seed) run, in a fixed order; ``extra`` adds the data-dependent RunSpec fields."""
    base = {
        "env_id": cfg.env_id, "max_steps": cfg.max_steps, "batch_episodes": cfg.batch_episodes,
        "updates": cfg.updates, "lr": cfg.lr, "epochs": cfg.epochs, "hidden": cfg.hidden,
        "lambda0": cfg.lambda0, "w_ref": cfg.w_ref, "eval_episodes": cfg.eval_episodes,
        "bonus_margin": cfg.bonus_margin, "anneal_end": cfg.anneal_end, "remine_every": cfg.remine_every,
        "remine_buffer": cfg.remine_buffer, "miner": tuple(sorted(cfg.miner.items())), **(extra or {}),
    }  # fmt: skip
    return [
        RunSpec(arm=arm, n=n, seed=seed, **base)
        for seed in cfg.seeds  # seed-major: a run stopped early still has whole seeds of every cell
        for n in cfg.group_sizes
        for arm in cfg.arms
    ]


def _key(r: dict[str, Any] | RunSpec) -> tuple[str, int, int]:
    return (r["arm"], r["n"], r["seed"]) if isinstance(r, dict) else (r.arm, r.n, r.seed)


RUN_FIELDS = ("seeds", "arms", "group_sizes", "workers")
"""Config fields that choose which runs to do, not how a run goes: a resumed log may differ in them."""


def _run_config(cfg: ClaimConfig) -> str:
    return json.dumps(
        {k: v for k, v in dataclasses.asdict(cfg).items() if k not in RUN_FIELDS}, sort_keys=True
    )


def run_log(path: Path, cfg: ClaimConfig) -> RunLog:
    """``runs.jsonl`` (the shared runner's log), keyed by (arm, n, seed); a logged run counts as done
    when it was made with this config up to the run choice (:data:`RUN_FIELDS`)."""
    want = _run_config(cfg)

    def same(config: Any) -> bool:
        try:
            return _run_config(ClaimConfig.from_dict(config or {})) == want
        except (TypeError, ConfigError):
            return False

    return RunLog(path, dataclasses.asdict(cfg), key=lambda line: _key(line["run"]), same=same)


def load_done(path: Path, cfg: ClaimConfig) -> dict[Any, dict[str, Any]]:
    """Runs already in ``runs.jsonl`` made with this config up to the run choice (a resumed run skips them)."""
    return run_log(path, cfg).done()


def _prepare(cfg: ClaimConfig) -> dict[str, Any]:
    """Corpus, trees, subgoal value and seed split: everything the runs share, and its description."""
    corpus = demo_corpus(cfg.env_id, cfg.max_steps, cfg.demo_episodes, cfg.demo_noise)
    tree, closest, dists = build_trees(cfg, corpus)
    rtrees = random_trees(cfg, corpus, tree, closest)
    if any(ARM_SPECS[a][1] in CONTRASTIVE_MODES for a in cfg.arms):
        for t in [tree, *rtrees.values()]:  # each tree's own contrastive b_v, from the same corpus
            t.extra["node_values"] = dict(sorted(corpus_values(t, corpus).items()))
    extra: dict[str, Any] = {
        "max_bonus": max_episode_bonus(tree),
        "subgoal_value": subgoal_value(corpus, tree, len(cfg.subgoal_tokens())),
        "subgoals": cfg.subgoal_tokens(),
    }
    split: dict[str, Any] = {"heldout": cfg.heldout}
    if cfg.heldout == "layouts":
        found = layout_split(cfg.env_id, cfg.max_steps, cfg.train_pool, cfg.eval_episodes)
        extra["train_seeds"], extra["eval_seeds"] = (
            tuple(found.pop("train_seeds")),
            tuple(found.pop("eval_seeds")),
        )
        split.update(
            found, train_seed_count=len(extra["train_seeds"]), eval_seed_first=extra["eval_seeds"][0]
        )
    info = {
        "corpus": {"episodes": len(corpus), "successes": sum(t.success for t in corpus),
                   "mean_length": sum(len(t.steps) for t in corpus) / len(corpus)},
        "trees": {
            "xtree": {"nodes": len(tree), "length_histogram": length_histogram(tree),
                      "depths": tree.depth_histogram(), "max_episode_bonus": extra["max_bonus"],
                      "node_values": _top_values(tree)},
            "random_tree": {"mode": cfg.random_tree_mode, "per_seed": {
                str(s): {"nodes": len(t), "length_histogram": length_histogram(t), "seed": t.extra["control"]["seed"],
                         "tries": t.extra["control"].get("tries")} for s, t in rtrees.items()},
                "closest_histogram_distance_per_draw": dists},
            "subgoal": {"subgoals": list(extra["subgoals"]), "value_each": extra["subgoal_value"],
                        "reason": SUBGOALS_BY_ENV.get(cfg.env_id, ((), ""))[1]},
        },
        "split": split,
    }  # fmt: skip
    return {"corpus": corpus, "tree": tree, "rtrees": rtrees, "extra": extra, "info": info}


def _top_values(tree: XTree, k: int = 8) -> list[dict[str, Any]]:
    """The ``k`` nodes of highest contrastive value, with their expansions (what the tree pays for)."""
    vals = tree.extra.get("node_values") or {}
    top = sorted(vals.items(), key=lambda kv: (-kv[1], kv[0]))[:k]
    return [{"node": v, "value": round(w, 4), "expansion": list(tree[v].expansion)} for v, w in top if w > 0]


def _tree_for(arm: str, seed: int, prep: dict[str, Any]) -> dict[str, Any] | None:
    source = ARM_SPECS[arm][0]
    if source == "xtree":
        return dict(prep["tree"].to_dict())
    if source == "random_tree":
        return dict(prep["rtrees"][seed].to_dict())
    return None  # outcome, subgoal, remine: no tree on the env


def run_all(
    cfg: ClaimConfig,
    out_dir: Path,
    *,
    progress: bool = True,
    resume: bool = False,
    argv: list[str] | None = None,
) -> dict[str, Any]:
    """The whole check; writes ``out_dir`` and returns the results dict.

    Each finished run is appended to ``out_dir/runs.jsonl`` and written to ``out_dir/curves/``;
    ``resume`` keeps the runs found there (same config up to seeds, arms, group sizes) and runs the rest.
    """
    import minigrid  # noqa: F401  (registers the MiniGrid envs)

    t0 = time.perf_counter()
    code = code_commit()  # the code the runs start from (provenance.json)
    prep = _prepare(cfg)
    out_dir.mkdir(parents=True, exist_ok=True)
    log = run_log(out_dir / "runs.jsonl", cfg)
    done = log.done() if resume else {}
    plan = specs(cfg, prep["extra"])
    runs: list[dict[str, Any]] = [done[_key(s)] for s in plan if _key(s) in done]
    todo = [(s, _tree_for(s.arm, s.seed, prep)) for s in plan if _key(s) not in done]
    conf = dataclasses.asdict(cfg)
    bar = Progress(total=len(todo), desc="minigrid claim runs", enabled=progress)
    with log.writer(resume) as write, multiprocessing.get_context("fork").Pool(cfg.workers) as pool:
        for r in pool.imap_unordered(_run, todo):
            runs.append(r)
            write(r)
            write_curves(out_dir / "curves", [r])
            bar.update()
    bar.close()
    runs.sort(key=lambda r: (cfg.group_sizes.index(r["n"]), cfg.arms.index(r["arm"]), r["seed"]))
    write_curves(out_dir / "curves", runs)
    results = {
        "config": conf,
        "code": code,
        **prep["info"],
        "summary": summarize(cfg, runs),
        "comparisons": compare(cfg, runs),
        "runs": runs,
        "timing": {
            "wall_seconds": time.perf_counter() - t0,
            "cpu_seconds_runs": sum(r["cpu_seconds"] for r in runs),
            "loadavg_end": list(os.getloadavg()),
            "cpus": os.cpu_count(),
        },
    }
    write_corpus(out_dir / "corpus.jsonl.gz", prep["corpus"])
    prep["tree"].save(out_dir / "tree.json")
    for seed, t in sorted(prep["rtrees"].items()):
        t.save(
            out_dir
            / ("random_tree.json" if cfg.random_tree_mode == "closest" else f"random_tree_s{seed}.json")
        )
        if cfg.random_tree_mode == "closest":
            break
    atomic_write_text(out_dir / "results.json", json.dumps(results, indent=1) + "\n")
    write_report(cfg, results, out_dir, argv)
    return results


def _ints(text: str) -> tuple[int, ...]:
    """``"100-104,200"`` -> (100, 101, 102, 103, 104, 200).

    Example:
        >>> _ints("100-102,7")
        (100, 101, 102, 7)
    """
    out: list[int] = []
    try:
        for part in text.split(","):
            lo, sep, hi = part.strip().partition("-")
            out.extend(range(int(lo), int(hi) + 1) if sep else [int(lo)])
    except ValueError:
        raise ConfigError(f"{text!r} is not a list of integers", fix="write e.g. 100-114 or 2,16") from None
    return tuple(out)


def config_from_args(a: argparse.Namespace) -> ClaimConfig:
    """The size preset with the command line's choices applied (one ConfigError when a choice is bad)."""
    cfg = SMOKE if a.smoke else GRID if a.grid else FULL
    over: dict[str, Any] = {}
    if a.env:
        env_id, steps = ENVS.get(a.env, (a.env, a.max_steps or cfg.max_steps))
        if a.env not in ENVS and not env_id.startswith("MiniGrid-"):
            raise ConfigError(f"--env {a.env!r}", fix=f"use one of {sorted(ENVS)} or a MiniGrid-… id")
        over.update(env_id=env_id, max_steps=steps)
    if a.max_steps:
        over["max_steps"] = a.max_steps
    if a.seeds:
        over["seeds"] = _ints(a.seeds)
    if a.group_sizes:
        over["group_sizes"] = _ints(a.group_sizes)
    if a.arms:
        over["arms"] = tuple(x.strip() for x in a.arms.split(",") if x.strip())
    for name in ("updates", "workers", "remine_every", "remine_buffer"):
        if getattr(a, name) is not None:
            over[name] = getattr(a, name)
    return dataclasses.replace(cfg, **over)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m experiments.minigrid_claim", description=__doc__.split("\n")[0]
    )
    size = p.add_mutually_exclusive_group()
    size.add_argument("--smoke", action="store_true", help="a seconds-long run (what the tests run)")
    size.add_argument("--full", action="store_true", help="the first claim check's size (default)")
    size.add_argument(
        "--grid", action="store_true", help="issue 23's grid: every arm, n 2 and 16, seeds 100-114"
    )
    p.add_argument("--env", default=None, help=f"{', '.join(sorted(ENVS))} or a MiniGrid env id")
    p.add_argument("--seeds", default=None, help="training seeds, e.g. 100-114 or 100,101")
    p.add_argument("--group-sizes", default=None, help="GRPO group sizes, e.g. 2,16")
    p.add_argument("--arms", default=None, help=f"comma-separated, from {', '.join(ARMS)}")
    p.add_argument("--updates", type=int, default=None, help="updates per run (the budget per run)")
    p.add_argument("--max-steps", type=int, default=None, help="episode step limit (default per env)")
    p.add_argument("--out", default=None, help="output folder (default results/minigrid_claim[_smoke|_ENV])")
    p.add_argument("--workers", type=int, default=None, help="worker processes, 1 or 2")
    p.add_argument(
        "--remine-every", type=int, default=None, help="arms remine, self_mined: updates between re-mines"
    )
    p.add_argument(
        "--remine-buffer", type=int, default=None, help="arms remine, self_mined: episodes in the window"
    )
    p.add_argument("--resume", action="store_true", help="keep the runs already in OUT/runs.jsonl")
    a = p.parse_args(argv)
    try:
        cfg = config_from_args(a)
        default = "results/minigrid_claim_smoke" if a.smoke else "results/minigrid_claim"
        if a.grid:
            default = f"results/minigrid_claim_{a.env or 'doorkey5'}"
        out = Path(a.out or default)
        res = run_all(cfg, out, resume=a.resume, argv=sys.argv[1:] if argv is None else list(argv))
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print((out / "table.md").read_text(encoding="utf-8"))
    t = res["timing"]
    print(f"wrote {out}/ in {t['wall_seconds']:.0f} s wall, {t['cpu_seconds_runs']:.0f} s CPU in the runs")
    return 0
