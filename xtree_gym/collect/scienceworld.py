"""``xtree collect scienceworld``: replay ScienceWorld's gold action sequences into a canonicalized corpus.

For each chosen (task, variation) the simulator is loaded with ``generateGoldPath``, its gold actions
are replayed through :class:`~xtree_gym.envs.scienceworld.ScienceWorldEnv` (raw step, no valid-action
listing), and the episode stops as soon as the simulator reports completion or a negative score --
often one to three actions before the gold list ends. Bare-integer gold actions (``"0"``) answer the
simulator's disambiguation prompts and are replayed as they are. ``success`` is ``score == 100``;
episodes that end anywhere else (the mendelian-genetics tasks sometimes replay to -100) are kept and
marked as failures, never dropped. Every step carries its canonical ``token`` and ``slots``.

The record layout is that of ``train-gold.jsonl`` (``id, env, task, task_id, variation, split, goal,
initial_observation, success, score, steps[{action, observation, reward, token, slots}]``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator, Sequence
from typing import Any

from ..envs import sciworld_folds as folds
from ..errors import ConfigError, EnvConfigError, XTreeError

DEFAULT_SLOW_CAP = 4
"""Variations per mendelian-genetics task (their gold paths take seconds each to generate)."""


def plan_episodes(
    split: str = "train",
    per_task: int | None = 40,
    *,
    tasks: Sequence[str] | None = None,
    slow_cap: int | None = DEFAULT_SLOW_CAP,
) -> list[tuple[str, int]]:
    """The (task, variation) pairs to collect: up to ``per_task`` variations per type, spread evenly.

    With ``n`` variations in the split and ``k < n`` wanted, variation ``i * (n // k)`` is taken for
    ``i < k`` -- the selection of the shared ``train-gold.jsonl``.

    Example:
        >>> plan_episodes("train", 3, tasks=["boil", "mendelian-genetics-known-plant"], slow_cap=2)
        [('boil', 0), ('boil', 4), ('boil', 8), ('mendelian-genetics-known-plant', 0), ('mendelian-genetics-known-plant', 30)]
    """
    if split not in folds.SPLITS:
        raise ConfigError(
            f"split {split!r} is not a ScienceWorld split", fix=f"use one of {', '.join(folds.SPLITS)}"
        )
    if per_task is not None and per_task < 1:
        raise ConfigError(f"per_task={per_task} must be >= 1")
    names = [folds.resolve_task(t) for t in tasks] if tasks else list(folds.TASK_NAMES)
    pairs: list[tuple[str, int]] = []
    for task in names:
        variations = folds.split_variations(task, split)
        k = len(variations) if per_task is None else min(per_task, len(variations))
        if task in folds.SLOW_GOLD_TYPES and slow_cap is not None:
            k = min(k, slow_cap)
        if k <= 0:
            continue
        stride = len(variations) // k
        pairs.extend((task, variations[i * stride]) for i in range(k))
    return pairs


def plan_shortfall(
    split: str = "train",
    per_task: int | None = 40,
    *,
    tasks: Sequence[str] | None = None,
    slow_cap: int | None = DEFAULT_SLOW_CAP,
) -> list[tuple[str, int, str]]:
    """(task, episodes asked for but not planned, why) for each task :func:`plan_episodes` gives less.

    Example:
        >>> names = ["boil", "identify-life-stages-2", "mendelian-genetics-known-plant"]
        >>> for task, k, why in plan_shortfall("train", 5, tasks=names, slow_cap=4):
        ...     print(task, k, "|", why.split(" (")[0])
        identify-life-stages-2 1 | the train split has only 4 variations of it
        mendelian-genetics-known-plant 1 | --slow-cap 4
    """
    names = [folds.resolve_task(t) for t in tasks] if tasks else list(folds.TASK_NAMES)
    out: list[tuple[str, int, str]] = []
    for task in names:
        n = len(folds.split_variations(task, split))
        asked = n if per_task is None else per_task
        if asked > n:
            out.append((task, asked - n, f"the {split} split has only {n} variations of it"))
        if task in folds.SLOW_GOLD_TYPES and slow_cap is not None and min(asked, n) > slow_cap:
            why = (
                f"--slow-cap {slow_cap} (each mendelian-genetics gold path takes seconds to generate; "
                "raise --slow-cap for more)"
            )
            out.append((task, min(asked, n) - slow_cap, why))
    return out


def not_written(
    shortfall: Sequence[tuple[str, int, str]],
    pairs: Sequence[tuple[str, int]],
    records: Sequence[dict[str, Any]],
) -> list[str]:
    """One line per task (and reason) with episodes asked for but not in ``records``: the plan's
    shortfall, and any planned (task, variation) whose record did not come back.

    Example:
        >>> shortfall, planned = [("boil", 2, "too few")], [("boil", 0), ("melt", 3)]
        >>> for line in not_written(shortfall, planned, [{"task": "boil", "variation": 0}]):
        ...     print(line)
        boil: 2 episodes not written: too few
        melt: variation 3 not written: no record came back from the simulator
    """
    lines = [f"{t}: {k} episode{'s' * (k != 1)} not written: {why}" for t, k, why in shortfall]
    got = {(r.get("task"), r.get("variation")) for r in records}
    lines += [
        f"{t}: variation {v} not written: no record came back from the simulator"
        for t, v in pairs
        if (t, v) not in got
    ]
    return lines


def replay_gold(env: Any, task: str, variation: int, split: str = "train") -> dict[str, Any]:
    """Replay the gold sequence of one variation on ``env`` and return the corpus record (a dict)."""
    obs, info = env.reset(options={"task": task, "variation": variation, "gold_path": True})
    gold = env.gold_actions()
    steps: list[dict[str, Any]] = []
    score = 0
    fault = None
    for action in gold:
        obs, reward, terminated, truncated, info = env.step(action)
        xt = info["xtree"]
        steps.append(
            {
                "action": action,
                "observation": obs,
                "reward": int(reward),
                "token": xt["token"],
                "slots": xt["slots"],
            }
        )
        score = int(info["score"])
        fault = info.get("fault")
        if terminated or truncated:
            break
    record: dict[str, Any] = {
        "id": f"scienceworld/{task}/{split}/{variation}",
        "env": "scienceworld",
        "task": task,
        "task_id": folds.TASKS[task][0],
        "variation": variation,
        "split": split,
        "goal": env.goal,
        "initial_observation": env.trajectory.extra["initial_observation"],
        "success": score >= 100 and fault is None,
        "score": score,
        "steps": steps,
    }
    if fault:
        record["fault"] = fault
    return record


# -- worker processes (each owns one JVM) -------------------------------------------------------------
_WORKER_ENV: Any = None
_WORKER_ERROR: str | None = None


def _worker_init(step_timeout: float, load_timeout: float) -> None:
    # A Pool replaces a worker whose initializer raises, forever; so keep the failure and report
    # it with the first job instead, which ends the run with one error.
    global _WORKER_ENV, _WORKER_ERROR
    try:
        from ..envs.scienceworld import ScienceWorldEnv

        _WORKER_ENV = ScienceWorldEnv(step_limit=None, step_timeout=step_timeout, load_timeout=load_timeout)
    except BaseException as exc:
        _WORKER_ERROR = str(exc) or type(exc).__name__


def _worker_run(job: tuple[str, int, str]) -> dict[str, Any]:
    if _WORKER_ERROR is not None:
        raise EnvConfigError(f"a simulator worker could not start: {_WORKER_ERROR}")
    return replay_gold(_WORKER_ENV, *job)


def check_dependencies() -> None:
    """One error naming every missing extra and ``java`` at once, before any JVM or worker starts."""
    from ..envs.needs import check_env

    check_env("XTree-ScienceWorld-v0", feature="xtree collect scienceworld")


def collect_gold(
    pairs: Sequence[tuple[str, int]],
    split: str = "train",
    *,
    workers: int = 1,
    env: Any = None,
    step_timeout: float = 20.0,
    load_timeout: float = 300.0,
    show_progress: bool | None = None,
    desc: str = "gold",
) -> Iterator[dict[str, Any]]:
    """Yield one corpus record per pair, in the order of ``pairs`` (deterministic for any ``workers``).

    ``workers > 1`` runs that many processes, each with its own JVM; ``workers == 1`` runs here, on
    ``env`` when given (e.g. a test's shared simulator) or on a fresh env.
    """
    from ..progress import progress

    if workers < 1:
        raise ConfigError(f"workers={workers} must be >= 1")
    if env is None:
        check_dependencies()
    jobs = [(t, v, split) for t, v in pairs]
    if workers == 1:
        own = env is None
        if own:
            from ..envs.scienceworld import ScienceWorldEnv

            env = ScienceWorldEnv(step_limit=None, step_timeout=step_timeout, load_timeout=load_timeout)
        try:
            for job in progress(jobs, total=len(jobs), desc=desc, enabled=show_progress):
                yield replay_gold(env, *job)
        finally:
            if own:
                env.close()
        return
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    ctx = mp.get_context("spawn")  # no fork of a process that holds py4j sockets and watchdog threads
    # An executor, not a Pool: a worker process that dies (OOM kill, crash) breaks the executor and
    # ends the run with one error, where a Pool would wait forever for the lost job.
    pool = ProcessPoolExecutor(
        workers, mp_context=ctx, initializer=_worker_init, initargs=(step_timeout, load_timeout)
    )
    try:
        yield from progress(pool.map(_worker_run, jobs), total=len(jobs), desc=desc, enabled=show_progress)
    except XTreeError:
        raise
    except BrokenProcessPool:
        raise EnvConfigError(
            "a simulator worker process died (killed, or out of memory); the run is stopped",
            fix="rerun with fewer --workers, or see the system log for the killed process",
        ) from None
    except Exception as exc:  # a worker's own failure: one error, and the pool is torn down
        raise EnvConfigError(f"a simulator worker failed: {type(exc).__name__}: {exc}") from None
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def summarize(records: Sequence[dict[str, Any]], missing: Sequence[str] = ()) -> str:
    """One paragraph: counts, success rate, every failure by id and final score, and ``missing``
    (:func:`not_written`'s lines: what was asked for and not written, and why)."""
    n = len(records)
    ok = sum(1 for r in records if r["success"])
    types = len({r["task"] for r in records})
    steps = sum(len(r["steps"]) for r in records)
    lines = [f"{n} episodes, {types} task types, {steps} steps, {ok} successful ({ok / max(n, 1):.1%})"]
    for r in records:
        if not r["success"]:
            why = f" ({r['fault']})" if r.get("fault") else ""
            lines.append(f"  failure kept: {r['id']} score={r['score']} steps={len(r['steps'])}{why}")
    lines.extend(f"  {line}" for line in missing)
    return "\n".join(lines)


def _handler(args: argparse.Namespace) -> int:
    from ..corpus.records import write_corpus

    check_dependencies()
    tasks = [t for chunk in (args.tasks or []) for t in chunk.split(",") if t] or None
    per_task = None if args.per_task == 0 else args.per_task
    pairs = plan_episodes(args.split, per_task, tasks=tasks, slow_cap=args.slow_cap)
    shortfall = plan_shortfall(args.split, per_task, tasks=tasks, slow_cap=args.slow_cap)
    print(
        f"collecting {len(pairs)} gold episodes ({args.split} split) with {args.workers} worker(s); "
        "each starts a ScienceWorld JVM first (10-60 s before the first episode)",
        file=sys.stderr,
        flush=True,
    )
    records = list(collect_gold(pairs, args.split, workers=args.workers, step_timeout=args.step_timeout))
    n = write_corpus(args.output, records)
    missing = not_written(shortfall, pairs, records)
    asked = len(pairs) + sum(k for _, k, _ in shortfall)
    print(f"wrote {n} trajectories to {args.output}" + (f" ({asked} asked for)" if asked != n else ""))
    print(summarize(records, missing))
    if missing:  # also on stderr, where a script that keeps only the corpus still sees it
        print(f"{asked - n} of {asked} episodes asked for were not written:", file=sys.stderr)
        for line in missing:
            print(f"  {line}", file=sys.stderr)
    return 0


def register_cli(subparsers: Any, collect_subparsers: Any) -> None:
    p = collect_subparsers.add_parser(
        "scienceworld",
        help="replay ScienceWorld gold action sequences into a canonicalized corpus",
        description=__doc__.split("\n\n")[0].replace("``", "") if __doc__ else None,
    )
    p.add_argument("--split", choices=folds.SPLITS, default="train", help="variation split (default train)")
    p.add_argument(
        "--per-task",
        type=int,
        default=40,
        help="variations per task type, spread evenly (0 = all; default 40)",
    )
    p.add_argument("--tasks", nargs="+", default=None, help="task names or ids (default: all 30)")
    p.add_argument(
        "--slow-cap",
        type=int,
        default=DEFAULT_SLOW_CAP,
        help=f"at most this many variations of each mendelian-genetics task (default {DEFAULT_SLOW_CAP})",
    )
    p.add_argument("--workers", type=int, default=2, help="processes, one JVM each (default 2)")
    p.add_argument("--step-timeout", type=float, default=20.0, help="seconds before a hung step is killed")
    p.add_argument("-o", "--output", required=True, help="corpus file to write (.jsonl or .jsonl.gz)")
    p.set_defaults(func=_handler)
