"""``xtree eval``: play a benchmark's evaluation fold and count success as the benchmark does.

Folds (``--fold``):

* ScienceWorld: ``G0`` (default), ``G1``, ``G2`` -- every (task, variation) of RLVMR's lists
  (:mod:`xtree_gym.envs.sciworld_folds`); ``--tasks N`` a seeded subset;
* WebShop: ``test`` -- the first 500 goals;
* MiniWoB: ``all`` (default: every MiniWoB++ task) or ``scripted`` (those with a scripted solver),
  5 seeds per task, as (task, seed) pairs; ``--env-arg task=NAME`` keeps one task;
* WebArena: ``all`` -- the 812 task ids; any other env: ``seeds`` (seeds 0..N-1).

Outputs in ``DIR``: ``episodes.jsonl`` (one corpus record per episode, appended as each finishes,
so ``xtree mine`` reads it) and ``results.json`` (``env``, ``harness``, ``fold``, ``model``,
``backend``, ``episodes``, ``success_rate``, ``score``, ``per_task``, and for ScienceWorld
``success_rate_rlvmr``). A re-run with the same settings skips the groups already in
``episodes.jsonl`` (a group cut short by an interruption is played again).
"""

from __future__ import annotations

import json
import math
import os
import random
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ...corpus import io as _io
from ...corpus.io import atomic_write_text, fit_json_line, loads_strict, output_target
from ...corpus.outfolder import output_folder
from ...errors import ConfigError, CorpusError
from ..run.lock import folder_lock
from ..types import Episode, TaskSpec
from .rollout import env_domain, rollout

MINIWOB_SEEDS = 5
"""Seeds per MiniWoB++ task (BrowserGym's MiniWoB benchmark repeats each task 5 times)."""
DEFAULT_FOLDS = {"scienceworld": "G0", "webshop": "test", "miniwob": "all", "webarena": "all"}
_FLAGS = {
    "env": "ENV_ID", "harness": "--harness", "fold": "--fold", "model": "--model", "backend": "--backend",
    "n": "--n", "max_steps": "--max-steps", "tasks": "--tasks", "seed": "--seed", "env_args": "--env-arg",
    "harness_args": "--harness-arg / --advice / --template",
    "sampling": "--temperature / --top-p / --max-new-tokens / --stop / --responses",
    "step_timeout": "--step-timeout", "episode_timeout": "--episode-timeout",
}  # fmt: skip
"""The resume key (``run.json``): every setting that can change an episode, and the flag that sets it."""


def _subset(items: list[TaskSpec], tasks: int | None, seed: int) -> list[TaskSpec]:
    """A seeded subset of ``tasks`` items, in fold order (all of them when ``tasks`` is None)."""
    if tasks is None or tasks >= len(items):
        return items
    if tasks < 1:
        raise ConfigError(f"--tasks {tasks} must be >= 1")
    keep = sorted(random.Random(seed).sample(range(len(items)), tasks))
    return [items[i] for i in keep]


def enumerate_fold(
    env_id: str,
    fold: str | None,
    *,
    tasks: int | None = None,
    seed: int = 0,
    env_args: Mapping[str, Any] | None = None,
) -> tuple[str, list[TaskSpec]]:
    """(fold name, the TaskSpecs to play) for ``env_id``.

    Example:
        >>> fold, specs = enumerate_fold("XTree-ScienceWorld-v0", "G2", tasks=3, seed=0)
        >>> fold, [s.key for s in specs]
        ('G2', ['find-plant/248', 'mendelian-genetics-unknown-plant/475', 'test-conductivity-of-unknown-substances/481'])
        >>> enumerate_fold("XTree-WebShop-v0", None)[1][499].reset_options
        {'goal_idx': 499}
    """
    domain = env_domain(env_id)
    args = dict(env_args or {})
    fold = fold or DEFAULT_FOLDS.get(domain, "seeds")
    if domain == "scienceworld":
        from ...envs import sciworld_folds

        only = sciworld_folds.resolve_task(str(args["task"])) if "task" in args else None
        f = sciworld_folds.get_fold(fold)
        items = [
            TaskSpec(t, seed=v, reset_options={"task": t, "variation": v}, key=f"{t}/{v}")
            for t, v in f.pairs()
            if only is None or t == only
        ]
        return f.name, _subset(items, tasks, seed)
    if domain == "webshop":
        if fold != "test":
            raise ConfigError(f"unknown WebShop fold {fold!r}", fix="use --fold test (the first 500 goals)")
        items = [
            TaskSpec("webshop", seed=i, reset_options={"goal_idx": i}, key=f"goal/{i}") for i in range(500)
        ]
        return fold, _subset(items, tasks, seed)
    if domain == "miniwob":
        return fold, _subset(_miniwob_pairs(fold, args.get("task")), tasks, seed)
    if domain == "webarena":
        items = [TaskSpec("webarena", seed=0, env_kwargs={"task_id": i}, key=f"task/{i}") for i in range(812)]
        return fold, _subset(items, tasks, seed)
    if fold != "seeds":
        raise ConfigError(f"unknown fold {fold!r} for {env_id}", fix="omit --fold (seeds 0..N-1)")
    return fold, [TaskSpec(domain, seed=i, key=f"seed/{i}") for i in range(tasks or 10)]


def _miniwob_pairs(fold: str, only: Any) -> list[TaskSpec]:
    if fold == "scripted":
        from ...collect.miniwob import SCRIPTED_TASKS

        names = sorted(SCRIPTED_TASKS)
    elif fold == "all":
        from ...envs.browsergym import miniwob_tasks

        names = sorted(miniwob_tasks())
    else:
        raise ConfigError(f"unknown MiniWoB fold {fold!r}", fix="use --fold all or --fold scripted")
    if only is not None:
        if str(only) not in names:
            raise ConfigError(
                f"MiniWoB task {only!r} is not in fold {fold}", fix=f"use one of: {', '.join(names[:12])}..."
            )
        names = [str(only)]
    return [
        TaskSpec(t, seed=s, env_kwargs={"task": t}, key=f"{t}/{s}")
        for t in names
        for s in range(MINIWOB_SEEDS)
    ]


def env_defaults(env_id: str) -> dict[str, Any]:
    """Constructor arguments an evaluation sets: one shared JVM, and the env's own cap off (the rollout caps).

    Example:
        >>> env_defaults("XTree-ScienceWorld-v0")
        {'jvm': 'shared', 'step_limit': None}
    """
    domain = env_domain(env_id)
    if domain == "scienceworld":
        return {"jvm": "shared", "step_limit": None}
    if domain in ("webshop", "miniwob", "webarena"):
        return {"max_steps": None}
    return {}


def summarize(episodes: Sequence[Episode], domain: str) -> dict[str, Any]:
    """``episodes``, ``success_rate``, ``score`` (mean graded score), ``per_task``, (``success_rate_rlvmr``).

    Example:
        >>> eps = [Episode("a", "webshop", "webshop", "", 0, 0, 0, success=True, score=1.0),
        ...        Episode("b", "webshop", "webshop", "", 1, 1, 0, score=0.5)]
        >>> summarize(eps, "webshop")
        {'episodes': 2, 'success_rate': 0.5, 'score': 0.75, 'faults': 0, 'per_task': {'webshop': {'episodes': 2, 'success_rate': 0.5, 'score': 0.75}}}
    """

    def block(eps: Sequence[Episode]) -> dict[str, Any]:
        k = max(len(eps), 1)
        out: dict[str, Any] = {
            "episodes": len(eps),
            "success_rate": sum(e.success for e in eps) / k,
            "score": sum(e.score for e in eps) / k,
        }
        if domain == "scienceworld":
            out["success_rate_rlvmr"] = (
                sum(bool(e.meta.get("done_rlvmr")) and float(e.meta.get("score_rlvmr", 0)) > 0 for e in eps)
                / k
            )
        return out

    result = block(episodes)
    result["faults"] = sum(e.fault is not None for e in episodes)
    tasks: dict[str, list[Episode]] = {}
    for e in episodes:
        tasks.setdefault(e.task, []).append(e)
    result["per_task"] = {t: block(tasks[t]) for t in sorted(tasks)}
    return result


# -- the episodes file -------------------------------------------------------------------------------
def read_episodes(path: Path) -> list[Episode]:
    """Episodes recorded in ``path``; a torn last line (an interrupted write) is dropped."""
    from ...corpus.records import read_corpus

    if not path.is_file():
        return []
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines = lines[:-1]
        atomic_write_text(path, "".join(lines))
    if not lines:
        return []
    try:
        return [Episode.from_trajectory(t) for t in read_corpus(path)]
    except CorpusError as exc:  # its own fix names flags of `xtree mine`, which `xtree eval` has not
        raise CorpusError(
            exc.what,
            where=exc.where,
            fix=f"move {path} away (the episodes in it are played again) or use another -o folder",
        ) from None


def _line(episode: Episode) -> str:
    """The episode's ``episodes.jsonl`` line, cut to what the readers take (never written unreadable)."""
    import sys

    try:
        line, cuts = fit_json_line(episode.to_trajectory().to_dict())
    except ValueError as exc:  # thousands of turns of short texts: nothing long to cut
        raise CorpusError(
            f"episode {episode.id}: {exc}", fix="raise XTREE_MAX_LINE_BYTES or lower --max-steps"
        ) from None
    if cuts:
        print(
            f"episode {episode.id}: {cuts} long text(s) cut so its line fits {_io.MAX_LINE_BYTES} bytes "
            "(marked '[cut by xtree: ...]')",
            file=sys.stderr,
        )
    return line


def _append(path: Path, episode: Episode) -> None:
    """One line per episode, flushed to disk before the next: a crash loses at most the line in flight."""
    line = _line(episode)
    with open(output_target(path), "a", encoding="utf-8") as fh:
        fh.write(line)
        fh.flush()
        os.fsync(fh.fileno())


def _recorder(out: Path | None, index: dict[str, int], model: str | None, fold: str) -> Any:
    """The ``on_episode`` callback: stable group numbers, run facts, one appended line per episode."""

    def finished(ep: Episode) -> None:
        ep.group = index[str(ep.meta.get("key"))]  # the group's place in the fold, stable across resumes
        ep.meta.update(model=model, fold=fold)
        if out is not None:
            _append(out / "episodes.jsonl", ep)

    return finished


def _resume(
    out: Path, config: dict[str, Any], specs: list[TaskSpec], n: int
) -> tuple[list[Episode], list[TaskSpec]]:
    """(finished episodes to keep, specs still to play); refuses a folder holding another run."""
    out.mkdir(parents=True, exist_ok=True)
    run_file = out / "run.json"
    path = out / "episodes.jsonl"
    if run_file.is_file() and path.is_file() and path.stat().st_size > 0:  # finished work to protect
        try:
            old = loads_strict(run_file.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise ConfigError(
                f"cannot read run.json ({exc}), so the episodes there cannot be matched to these settings",
                where=str(run_file),
                fix="use another -o folder (or delete that folder to start it again)",
            ) from None
        if not isinstance(old, dict):
            old = {}
        keys = sorted(set(_FLAGS) | set(old) | set(config))
        diff = {k: (old.get(k), config.get(k)) for k in keys if old.get(k) != config.get(k)}
        if diff:
            shown = "; ".join(f"{k}: {a!r} vs {b!r}" for k, (a, b) in list(diff.items())[:5])
            flags = sorted({_FLAGS.get(k, k) for k in diff})
            raise ConfigError(
                f"{out} holds another evaluation, played with other settings ({shown})",
                fix=f"use another -o folder, or resume with that run's {', '.join(flags)} (see {run_file})",
            )
    atomic_write_text(run_file, json.dumps(config, indent=2, sort_keys=True) + "\n")
    existing = read_episodes(path)
    by_key: dict[str, list[Episode]] = {}
    for e in existing:
        by_key.setdefault(str(e.meta.get("key")), []).append(e)
    wanted = {s.key for s in specs}
    complete = {k for k, eps in by_key.items() if k in wanted and len({e.member for e in eps}) >= n}
    kept = [e for e in existing if str(e.meta.get("key")) in complete]
    if len(kept) != len(existing):  # drop cut-short groups so they are played again in full
        atomic_write_text(path, "".join(_line(e) for e in kept))
    return kept, [s for s in specs if s.key not in complete]


# -- the run ---------------------------------------------------------------------------------------
def _harness(name: str, env_id: str, harness_args: Mapping[str, Any]) -> Any:
    from ..harness import get_harness

    kwargs = dict(harness_args)
    if name == "browsergym" and "benchmark" not in kwargs and env_domain(env_id) in ("miniwob", "webarena"):
        kwargs["benchmark"] = env_domain(env_id)
    return get_harness(name, **kwargs)


def _generator(backend: str, model: str | None, *, device: str, sampling: dict[str, Any]) -> tuple[Any, Any]:
    """(generator, tokenizer) for ``backend``; ``model`` is needed for hf and vllm only."""
    from ..model.generation import BACKENDS, make_generator
    from ..model.loading import load_model, load_tokenizer, smollm2_folder

    if backend not in BACKENDS:
        raise ConfigError(f"unknown backend {backend!r}", fix=f"use one of: {', '.join(BACKENDS)}")
    if backend in ("scripted", "oracle"):
        tok = load_tokenizer(model) if model else None
        return make_generator(backend, tokenizer=tok, **sampling), tok
    if not model:
        raise ConfigError(
            f"the {backend} backend needs --model", fix="pass --model smollm2, tiny-random or a folder"
        )
    if backend == "vllm":
        folder = str(smollm2_folder()) if model == "smollm2" else model
        tok = load_tokenizer(model)
        return make_generator("vllm", model=folder, tokenizer=tok, **sampling), tok
    lm, tok = load_model(model, device=device, seed=int(sampling.get("seed", 0)))
    return make_generator("hf", model=lm, tokenizer=tok, **sampling), tok


def evaluate(
    env_id: str,
    *,
    model: str | None = None,
    harness: str,
    fold: str | None = None,
    tasks: int | None = None,
    n: int = 1,
    backend: str = "hf",
    max_steps: int | None = None,
    env_args: Mapping[str, Any] | None = None,
    output_dir: str | os.PathLike[str] | None = None,
    harness_args: Mapping[str, Any] | None = None,
    sampling: Mapping[str, Any] | None = None,
    device: str = "cpu",
    workers: int = 0,
    step_timeout: float | None = None,
    episode_timeout: float | None = None,
    seed: int = 0,
    progress: bool | None = None,
    generator: Any = None,
    env_servers: str | Sequence[str] | None = None,
) -> dict[str, Any]:
    """Play ``env_id``'s fold with ``harness`` and return (and write to ``output_dir``) results.json.

    ``sampling`` holds the generator's settings (temperature, top_p, max_new_tokens, stop, seed;
    ``responses`` for scripted); ``generator`` overrides ``backend``/``model`` with a ready one.
    ``--env-arg`` values go to the env constructor, except ``task`` on ScienceWorld and MiniWoB,
    which keeps that one task of the fold. ``env_servers`` (``xtree serve`` URLs) plays each episode
    as one session on one of them instead of a local env (same episodes; see :mod:`.remote`).
    """
    from ...envs.needs import check_env

    domain = env_domain(env_id)
    args = dict(env_args or {})
    check_env(
        env_id, args, backend=None if generator is not None else backend
    )  # all that is missing, at once
    fold_name, specs = enumerate_fold(env_id, fold, tasks=tasks, seed=seed, env_args=args)
    if not specs:
        raise ConfigError(f"fold {fold_name!r} of {env_id} has no tasks left after the filters")
    if domain in ("scienceworld", "miniwob"):
        args.pop("task", None)
    h = _harness(harness, env_id, harness_args or {})
    gen_settings = {"seed": seed, **dict(sampling or {})}
    if backend in ("hf", "vllm") and generator is None:  # a model: the protocol's stop and length
        gen_settings.setdefault("max_new_tokens", h.response_tokens)
        gen_settings.setdefault("stop", h.stop)
    if generator is not None:
        gen, tok = generator, getattr(generator, "tokenizer", None)
        backend = str(getattr(generator, "name", backend))
    else:
        gen, tok = _generator(backend, model, device=device, sampling=gen_settings)
    config = {
        "env": env_id, "harness": harness, "fold": fold_name, "model": model, "backend": backend, "n": n,
        "max_steps": max_steps, "tasks": tasks, "seed": seed, "env_args": jsonable_args(args),
        "harness_args": resume_key(harness_args or {}), "sampling": resume_key(gen_settings),
        "step_timeout": step_timeout, "episode_timeout": episode_timeout,
    }  # fmt: skip
    out = Path(output_dir) if output_dir is not None else None
    with folder_lock(out), output_folder(out):  # a link found where a file goes is refused
        kept, todo = _resume(out, config, specs, n) if out is not None else ([], specs)
        if backend in ("hf", "vllm") and todo:
            import sys

            print(eval_cost(len(todo), n, max_steps or h.step_limit, getattr(gen, "max_new_tokens", None), model),
                  file=sys.stderr)  # fmt: skip
        finished = _recorder(out, {s.key: i for i, s in enumerate(specs)}, model, fold_name)
        new = rollout(
            env_id, todo, gen, h, n=n, tokenizer=tok, env_kwargs={**env_defaults(env_id), **args},
            max_steps=max_steps, workers=workers, step_timeout=step_timeout, episode_timeout=episode_timeout,
            seed=seed, progress=progress, on_episode=finished, env_servers=env_servers,
        )  # fmt: skip
        episodes = sorted([*kept, *new], key=lambda e: (e.group, e.member))
        result = {k: config[k] for k in ("env", "harness", "fold", "model", "backend")}
        result.update(summarize(episodes, domain))
        result.update(n=n, max_steps=max_steps or h.step_limit, resumed=len(kept))
        if out is not None:
            text = json.dumps(json_safe(result), indent=2, sort_keys=True, allow_nan=False)
            atomic_write_text(out / "results.json", text + "\n")
    return result


def eval_cost(tasks: int, n: int, turns: int, new_tokens: int | None, model: str | None) -> str:
    """The up-front line of an evaluation with a model: what it may generate at most.

    Example:
        >>> eval_cost(6, 1, 30, 256, "smollm2")
        'eval: 6 episode(s) to play (6 task(s) x n 1), each <= 30 turns of <= 256 new tokens (<= 46,080 generated tokens) with smollm2; the progress line shows tok/s and an ETA'
    """
    episodes = tasks * n
    budget = (
        f" of <= {new_tokens} new tokens (<= {episodes * turns * new_tokens:,} generated tokens)"
        if new_tokens
        else ""
    )
    return (
        f"eval: {episodes} episode(s) to play ({tasks} task(s) x n {n}), each <= {turns} turns{budget} with {model}; "
        "the progress line shows tok/s and an ETA"
    )


def jsonable_args(args: Mapping[str, Any]) -> dict[str, Any]:
    """``--env-arg`` values as JSON (what ``run.json`` compares on resume)."""
    from .envproc import jsonable

    return dict(jsonable(dict(args)))


def resume_key(settings: Mapping[str, Any]) -> dict[str, Any]:
    """``settings`` as JSON for ``run.json``: a file named by value (advice, template) adds its content's
    digest, and a long list (scripted responses) is kept as its digest, so a changed file is a changed run.

    Example:
        >>> key = resume_key({"temperature": 0.4, "responses": ["a", "b"]})
        >>> key["temperature"], key["responses"][:7], len(key["responses"])
        (0.4, 'sha256:', 71)
    """
    import hashlib

    from .envproc import jsonable

    out: dict[str, Any] = {}
    for key, value in sorted(settings.items()):
        value = jsonable(value)
        if (isinstance(value, list) and len(value) > 8) or key == "responses":
            blob = json.dumps(value, sort_keys=True, ensure_ascii=False).encode("utf-8", "replace")
            value = "sha256:" + hashlib.sha256(blob).hexdigest()
        elif isinstance(value, str) and key in ("advice", "template") and Path(value).is_file():
            value = {"path": value, "sha256": hashlib.sha256(Path(value).read_bytes()).hexdigest()}
        out[str(key)] = value
    return out


def json_safe(value: Any) -> Any:
    """``value`` with every non-finite float replaced by None (standard JSON has no NaN)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value
