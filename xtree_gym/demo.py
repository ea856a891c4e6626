"""``xtree demo``: mine an X-Tree, then watch it pay skill bonuses live on the real ScienceWorld simulator.

1. mine a tree from the packaged gold sample (278 episodes over the 30 task types) with the paper's
   ScienceWorld preset -- the same tree, byte for byte, on every run and machine;
2. print the tree summary, its most widely shared nodes and one episode tiled by the tree (the paper's
   Figure 5 as text);
3. start the simulator (one JVM, ``-Xmx1g``) and play a few episodes live through
   :class:`~xtree_gym.wrappers.reward.XTreeBonus`, printing each node as the episode completes it and
   the bonus it earns -- the online half of the method.

The live episodes replay the sample's recorded actions, so their steps, nodes and bonuses are the same
every run too (no timings are printed). ``--collect`` instead replays fresh gold paths from the
simulator and mines those (ScienceWorld's gold paths vary from load to load, so that tree varies).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from .corpus.records import Trajectory, trajectory_from_dict

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


DEMO_TASKS = ("find-animal", "chemistry-mix", "boil")
"""Task types the live part plays by default: short episodes that complete deep nodes."""


def sample_corpus() -> list[Trajectory]:
    """The packaged gold sample (``xtree_gym/data/scienceworld_gold_sample.jsonl.gz``), canonicalized."""
    from importlib.resources import as_file, files

    from .canon.corpus import canonicalize_corpus
    from .corpus.records import read_corpus

    with as_file(files("xtree_gym") / "data" / "scienceworld_gold_sample.jsonl.gz") as path:
        trajectories = read_corpus(path).trajectories
    return canonicalize_corpus(trajectories, "scienceworld", in_place=True, show_progress=False)


def live_episodes(
    trajectories: Sequence[Trajectory], tasks: Sequence[str], per_task: int = 1
) -> list[Trajectory]:
    """The sample episodes to replay live: the ``per_task`` shortest successful ones of each task type.

    Example:
        >>> from xtree_gym import Step, Trajectory
        >>> ts = [Trajectory(f"{k}{n}", [Step("a")] * n, True, task=k) for k, n in [("x", 3), ("x", 2), ("y", 5)]]
        >>> [t.id for t in live_episodes(ts, ["y", "x"])]
        ['y5', 'x2']
    """
    chosen: list[Trajectory] = []
    for task in tasks:
        pool = sorted(
            (t for t in trajectories if t.task == task and t.success), key=lambda t: (len(t.steps), t.id)
        )
        chosen.extend(pool[:per_task])
    return chosen


def play_live(env: Any, tree: Any, episode: Trajectory, say: Any) -> dict[str, Any]:
    """Replay ``episode``'s actions on ``env`` (a ScienceWorldEnv) through XTreeBonus, narrating each node.

    Returns ``{"score", "matched", "episode_bonus", "invalid"}`` for the episode.
    """
    from .wrappers.reward import XTreeBonus

    wrapped = XTreeBonus(env, tree, bonus="depth", weight="record")
    variation = episode.extra.get("variation")
    _, info = wrapped.reset(options={"task": episode.task, "variation": variation})
    say(
        f"live: {episode.task} variation {variation}, {len(episode.steps)} actions replayed through XTreeBonus"
    )
    x: dict[str, Any] = {"matched": (), "episode_bonus": 0.0}
    invalid = 0
    for t, step in enumerate(episode.steps, start=1):
        _, _, terminated, truncated, info = wrapped.step(step.action)
        x = info["xtree"]
        invalid += bool(x.get("invalid"))
        if x["completed"]:
            nodes = ", ".join(f"{n} (d{tree[n].depth})" for n in x["completed"])
            say(
                f"  step {t:>3}  {step.action[:38]:<38} {x['token']:<22} completes {nodes}; "
                f"bonus +{x['bonus']:.3f}, episode {x['episode_bonus']:.3f}"
            )
        if terminated or truncated:
            break
    score = int(info.get("score", 0))
    say(
        f"  end: score {score}{' (won)' if score >= 100 else ''}, {t} steps ({invalid} invalid), "
        f"{len(x['matched'])} node(s) matched, episode bonus {x['episode_bonus']:.3f}"
    )
    return {
        "score": score,
        "matched": tuple(x["matched"]),
        "episode_bonus": x["episode_bonus"],
        "invalid": invalid,
    }


def check_demo_dependencies() -> None:
    """Fail before any work when the simulator cannot run: the package (extra) and ``java``."""
    import importlib.util

    from .envs.sciworld_jvm import java_available
    from .errors import DependencyError, missing_dependency

    if importlib.util.find_spec("scienceworld") is None:
        raise missing_dependency("scienceworld", "scienceworld", "xtree demo")
    if not java_available():
        raise DependencyError(
            "the demo runs the ScienceWorld simulator, which needs `java` on PATH",
            fix="install a Java 11+ runtime (Debian: apt-get install default-jre-headless)",
        )


def _collected(
    per_task: int, tasks: Sequence[str] | None, include_slow: bool, workers: int, env: Any, say: Any
) -> list[Trajectory]:
    from .collect.scienceworld import collect_gold, plan_episodes, summarize
    from .envs import sciworld_folds as folds

    names = (
        list(tasks)
        if tasks
        else [t for t in folds.TASK_NAMES if include_slow or t not in folds.SLOW_GOLD_TYPES]
    )
    pairs = plan_episodes("train", per_task, tasks=names, slow_cap=1)
    say(
        f"collecting {len(pairs)} fresh gold episodes over {len(names)} task types (train split) on the simulator"
    )
    records = list(collect_gold(pairs, "train", workers=1 if env is not None else workers, env=env))
    say(summarize(records))
    return [trajectory_from_dict(r) for r in records]


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
    collect: bool = False,
) -> dict[str, Any]:
    """Mine, print, play live. Returns ``{"trajectories", "tree", "episode", "live"}``.

    ``tasks``/``per_task`` choose the live episodes (default :data:`DEMO_TASKS`, one each); with
    ``collect`` they choose the gold episodes collected and mined instead. ``env``: reuse a simulator.
    """
    from .envs import sciworld_folds as folds
    from .mining.miner import mine

    out_stream = stream or sys.stdout
    # An id such as "1-1" resolves; a typo is refused now, not silently replaced by another episode.
    show_task = folds.resolve_task(show_task) if show_task else None
    names = [folds.resolve_task(t) for t in tasks] if tasks else None

    def say(text: str = "") -> None:
        print(text, file=out_stream, flush=True)

    if env is None:
        check_demo_dependencies()
    if collect:
        trajectories = _collected(per_task, names, include_slow, workers, env, say)
    else:
        trajectories = sample_corpus()
        say(
            f"ScienceWorld demo: mining the packaged gold sample ({len(trajectories)} episodes, "
            f"{len({t.task for t in trajectories})} task types)"
        )
    tree = mine(trajectories, "scienceworld", name="scienceworld-demo")
    say(format_tree(tree))
    episode = pick_episode(trajectories, tree, show_task)
    say("")
    say(format_tiling(tree, episode))
    live: list[dict[str, Any]] = []
    if not collect:
        say("")
        own = env is None
        if own:
            from .envs.scienceworld import ScienceWorldEnv

            say("starting the ScienceWorld simulator (one JVM, -Xmx1g) ...")
            env = ScienceWorldEnv(step_limit=None)
        try:
            for ep in live_episodes(trajectories, names or DEMO_TASKS, per_task):
                live.append(play_live(env, tree, ep, say))
        finally:
            if own:
                env.close()
    if out:
        from .corpus.outfolder import make_output_folder, output_folder
        from .corpus.records import write_corpus

        d = Path(out)
        with output_folder(d, option="--out"):  # a link found where a file goes is refused
            make_output_folder(d, option="--out")
            write_corpus(d / "corpus.jsonl", trajectories)
            tree.save(d / "tree.json")
        say(f"\nwrote {d / 'corpus.jsonl'} and {d / 'tree.json'}")
    return {"trajectories": trajectories, "tree": tree, "episode": episode, "live": live}


def _handler(args: argparse.Namespace) -> int:
    check_demo_dependencies()  # before any work, and before any worker process starts
    tasks = [t for chunk in (args.tasks or []) for t in chunk.split(",") if t] or None
    run_demo(
        per_task=args.per_task,
        tasks=tasks,
        include_slow=args.include_slow,
        workers=args.workers,
        out=args.out,
        show_task=args.show,
        collect=args.collect,
    )
    return 0


def register_cli(subparsers: Any, collect_subparsers: Any) -> None:
    p = subparsers.add_parser(
        "demo",
        help="mine a tree from the packaged ScienceWorld sample, print it, and watch it pay bonuses live",
        description=__doc__.split("\n\n")[0].replace("``", "") if __doc__ else None,
    )
    p.add_argument("--per-task", type=int, default=1, help="episodes per task type (default 1)")
    p.add_argument(
        "--tasks",
        nargs="+",
        default=None,
        help=f"task types (names or ids) to play live (default: {', '.join(DEMO_TASKS)}); with --collect, to collect",
    )
    p.add_argument(
        "--collect",
        action="store_true",
        help="mine fresh gold episodes collected from the simulator instead of the sample (varies by run)",
    )
    p.add_argument(
        "--include-slow",
        action="store_true",
        help="--collect: also the two mendelian-genetics tasks (1 each)",
    )
    p.add_argument("--workers", type=int, default=2, help="--collect: simulator processes (default 2)")
    p.add_argument("--show", default="boil", help="tile an episode of this task type (default boil)")
    p.add_argument("--out", default=None, help="directory to write corpus.jsonl and tree.json into")
    p.set_defaults(func=_handler)
