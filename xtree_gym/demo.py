"""``xtree demo``: the whole pipeline on the real ScienceWorld simulator, in a few minutes.

1. start the simulator (a JVM per worker, ``-Xmx1g``);
2. replay one gold episode per task type live (``--per-task`` for more), canonicalizing every action;
3. mine an X-Tree with the ScienceWorld preset (``mine(trajectories, "scienceworld")``);
4. print the tree summary and its largest nodes;
5. print one episode tiled by the tree -- the paper's Figure 5 as text: one row per step (raw action
   and token), one band per top-level segment.

The two mendelian-genetics tasks are skipped unless ``--include-slow`` (their gold paths take ~30 s
each to generate, and their steps are 5-10x slower than the others').
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from .corpus import Trajectory, trajectory_from_dict

BAND_OPEN, BAND_MID, BAND_CLOSE, BAND_ONE, PRIMITIVE = "[", "|", "]", "=", "."


def tiling_rows(tree: Any, trajectory: Trajectory) -> list[tuple[int, str, str, str]]:
    """Rows of the tiled episode: (step, band cell, token, raw action); bands follow ``tree.tile``.

    The band cell of a node segment reads ``[S3 d2`` on its first step, ``|`` inside and ``]`` on its
    last (``=S3 d1`` when it covers one step, which a node never does); a primitive left untiled is ``.``.

    Example:
        >>> from xtree_gym import MinerConfig, Step, Trajectory, mine
        >>> trajs = [Trajectory(str(i), [Step(a, token=a) for a in "abcab"], True) for i in range(6)]
        >>> tree = mine(trajs, MinerConfig(min_freq=3, eta=0.5, cap=1))
        >>> [row[1] for row in tiling_rows(tree, trajs[0])]
        ['[S0 d1', ']', '.', '[S0 d1', ']']
    """
    tokens = [s.token or "" for s in trajectory.steps]
    rows: list[tuple[int, str, str, str]] = []
    for seg in tree.tile(tokens):
        for i in range(seg.start, seg.end):
            if not seg.is_node:
                band = PRIMITIVE
            elif seg.end - seg.start == 1:
                band = f"{BAND_ONE}{seg.symbol} d{tree[seg.symbol].depth}"
            elif i == seg.start:
                band = f"{BAND_OPEN}{seg.symbol} d{tree[seg.symbol].depth}"
            else:
                band = BAND_CLOSE if i == seg.end - 1 else BAND_MID
            rows.append((i, band, tokens[i], trajectory.steps[i].action))
    return rows


def format_tiling(tree: Any, trajectory: Trajectory) -> str:
    """The tiled episode as a text table, with a one-line symbol sequence on top."""
    segments = tree.tile([s.token or "" for s in trajectory.steps])
    n_nodes = sum(1 for s in segments if s.is_node)
    covered = sum(s.end - s.start for s in segments if s.is_node)
    head = [
        f"episode {trajectory.id} ({trajectory.task}, success={trajectory.success}): "
        f"{len(trajectory.steps)} steps -> {len(segments)} symbols; {n_nodes} node segments cover {covered} steps",
        "symbols: " + " ".join(s.symbol for s in segments),
        "",
        f"{'step':>4}  {'band':<10} {'token':<28} raw action",
    ]
    body = [
        f"{i:>4}  {band:<10} {token:<28} {action}" for i, band, token, action in tiling_rows(tree, trajectory)
    ]
    return "\n".join(head + body)


def format_tree(tree: Any, top: int = 10) -> str:
    """Summary counts plus the ``top`` most widely shared nodes (task types, then length, then count)."""
    s = tree.summary()
    depth = ", ".join(f"d{d}:{k}" for d, k in s["depth_histogram"].items()) or "-"
    lines = [
        f"tree: {s['n_nodes']} nodes over {s['n_primitives']} primitive tokens; max depth {s['max_depth']}, "
        f"max length {s['max_length']}; compression {s['compression_ratio']:.2f}x; stopped by {s['bound']}",
        f"depths: {depth}",
    ]
    if tree.nodes and all(n.success is None for n in tree.nodes):
        lines.append(
            "(succ -: the corpus holds successful episodes only, so the tree records no success rates)"
        )
    ranked = sorted(tree.nodes, key=lambda n: (-len(n.task_types or []), -n.length, -n.count, n.id))[:top]
    for n in ranked:
        succ = "-" if n.success is None else f"{n.success:.2f}"
        types = len(n.task_types or [])
        lines.append(
            f"  {n.id:<4} len {n.length} count {n.count:>3} succ {succ} types {types:>2}: {' '.join(n.expansion)}"
        )
    return "\n".join(lines)


def pick_episode(trajectories: Sequence[Trajectory], tree: Any, task: str | None = None) -> Trajectory:
    """The episode to show: of ``task`` if present, else the successful one using the most distinct nodes."""
    pool = [t for t in trajectories if task is None or t.task == task] or list(trajectories)

    def key(t: Trajectory) -> tuple[int, int, int, str]:
        nodes = [s.symbol for s in tree.tile([s.token or "" for s in t.steps]) if s.is_node]
        short = len(t.steps) <= 40  # a table a reader can take in
        return (int(t.success), len(set(nodes)) if short else 0, len(nodes) if short else 0, t.id)

    return max(pool, key=key)


def run_demo(
    *,
    per_task: int = 1,
    tasks: Sequence[str] | None = None,
    include_slow: bool = False,
    workers: int = 2,
    out: str | None = None,
    show_task: str | None = None,
    env: Any = None,
    stream: IO[str] | None = None,
) -> dict[str, Any]:
    """Collect, mine, print. Returns ``{"trajectories", "tree", "episode"}`` (``env``: reuse a simulator)."""
    from .collect.scienceworld import collect_gold, plan_episodes, summarize
    from .envs import sciworld_folds as folds
    from .mining import mine

    out_stream = stream or sys.stdout
    # An id such as "1-1" resolves; a typo is refused now, not silently replaced by another episode.
    show_task = folds.resolve_task(show_task) if show_task else None

    def say(text: str = "") -> None:
        print(text, file=out_stream, flush=True)

    names = (
        list(tasks)
        if tasks
        else [t for t in folds.TASK_NAMES if include_slow or t not in folds.SLOW_GOLD_TYPES]
    )
    pairs = plan_episodes("train", per_task, tasks=names, slow_cap=1)
    skipped = [t for t in folds.SLOW_GOLD_TYPES if t not in names]
    say(f"ScienceWorld demo: {len(pairs)} gold episodes over {len(names)} task types (train split)")
    if skipped:
        say(f"  skipped (slow gold generation; add --include-slow): {', '.join(skipped)}")
    t0 = time.monotonic()
    records = list(collect_gold(pairs, "train", workers=1 if env is not None else workers, env=env))
    say(f"collected in {time.monotonic() - t0:.1f}s: {summarize(records)}")
    trajectories = [trajectory_from_dict(r) for r in records]
    t1 = time.monotonic()
    tree = mine(trajectories, "scienceworld", name="scienceworld-demo")
    say(f"mined in {time.monotonic() - t1:.2f}s with the ScienceWorld preset")
    say(format_tree(tree))
    if len(tree) < 10:
        say(
            f"note: only {len(tree)} nodes -- with {len(trajectories)} episodes few pairs reach the preset's "
            "min_freq / min_task_types; try --per-task 3 or more"
        )
    episode = pick_episode(trajectories, tree, show_task)
    say("")
    say(format_tiling(tree, episode))
    if out:
        from .corpus import write_corpus

        d = Path(out)
        d.mkdir(parents=True, exist_ok=True)
        write_corpus(d / "corpus.jsonl", records)
        tree.save(d / "tree.json")
        say(f"\nwrote {d / 'corpus.jsonl'} and {d / 'tree.json'}")
    return {"trajectories": trajectories, "tree": tree, "episode": episode}


def _handler(args: argparse.Namespace) -> int:
    from .envs.sciworld_jvm import java_available
    from .errors import DependencyError

    if not java_available():
        raise DependencyError("the demo runs the ScienceWorld simulator, which needs `java` on PATH")
    tasks = [t for chunk in (args.tasks or []) for t in chunk.split(",") if t] or None
    run_demo(
        per_task=args.per_task,
        tasks=tasks,
        include_slow=args.include_slow,
        workers=args.workers,
        out=args.out,
        show_task=args.show,
    )
    return 0


def register_cli(subparsers: Any, collect_subparsers: Any) -> None:
    p = subparsers.add_parser(
        "demo",
        help="collect ScienceWorld gold episodes live, mine a tree, print it and one tiled episode",
        description=__doc__.split("\n\n")[0].replace("``", "") if __doc__ else None,
    )
    p.add_argument("--per-task", type=int, default=1, help="gold episodes per task type (default 1)")
    p.add_argument("--tasks", nargs="+", default=None, help="only these task types (names or ids)")
    p.add_argument(
        "--include-slow", action="store_true", help="also the two mendelian-genetics tasks (1 each)"
    )
    p.add_argument("--workers", type=int, default=2, help="simulator processes (default 2)")
    p.add_argument("--show", default="boil", help="tile an episode of this task type (default boil)")
    p.add_argument("--out", default=None, help="directory to write corpus.jsonl and tree.json into")
    p.set_defaults(func=_handler)
