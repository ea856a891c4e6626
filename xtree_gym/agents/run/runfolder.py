"""Run folders that a new run never destroys: the one check every ``xtree train`` method runs first.

A run folder (``-o DIR``) holds ``metrics.jsonl``, ``checkpoint-NNNNNN/``, ``latest.json`` and
``config.json``. A new run into a folder that already holds something is refused unless the user
says what they mean: ``--resume DIR`` (continue it) or ``--overwrite`` (delete the old run first).
A resume must continue the same run: :func:`check_resume_config` refuses a checkpoint whose config
differs in a field that changes what is trained (only :data:`RESUME_FREE` fields may change).

Nothing here imports torch: the CLI calls it before any model is loaded.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ...errors import ConfigError
from .lock import LOCK_FILES

RUN_MARKERS = ("metrics.jsonl", "latest.json", "config.json")
"""Files whose presence says a folder holds a training run (besides ``checkpoint-*/``)."""

RESUME_FREE = frozenset(
    {
        "steps", "epochs", "output_dir", "resume", "progress", "tensorboard", "workers", "env_servers",
        "save_every", "keep_checkpoints", "eval_every", "eval_tasks", "step_timeout",
        "episode_timeout", "dtype", "export_every",
    }
)  # fmt: skip
"""Config fields a resume may change (how long, where, how it is shown and saved, not what is learned)."""

STATE_FILE = "trainer_state.json"
"""The file that makes a ``checkpoint-N`` folder a complete checkpoint (written by ``run.checkpoint``)."""
_CKPT_RE = re.compile(r"checkpoint-(\d+)")
_TEMP_RE = re.compile(r"\.checkpoint-\d+\.(\d+)\.[A-Za-z0-9_]+")  # save_checkpoint's temp folders


def checkpoint_step(path: str | os.PathLike[str]) -> int | None:
    """The step a ``checkpoint-NNNNNN`` folder name says, or None for any other name.

    Example:
        >>> checkpoint_step("run/checkpoint-000010"), checkpoint_step("run/checkpoint-x")
        (10, None)
    """
    m = _CKPT_RE.fullmatch(Path(path).name)
    return int(m.group(1)) if m else None


def checkpoints_by_step(run: str | os.PathLike[str]) -> list[Path]:
    """The run's ``checkpoint-N`` folders, oldest step first (by number: ``checkpoint-1000000`` after ``-999999``)."""
    found = [(checkpoint_step(p), p) for p in Path(run).glob("checkpoint-*") if p.is_dir()]
    return [p for step, p in sorted((s, p) for s, p in found if s is not None)]


def holds_run(run: str | os.PathLike[str]) -> bool:
    """Whether ``run`` holds (part of) a training run: a marker file or a checkpoint folder."""
    p = Path(run)
    return p.is_dir() and (any((p / m).exists() for m in RUN_MARKERS) or bool(checkpoints_by_step(p)))


def _visible_entries(run: Path) -> list[str]:
    try:
        return sorted(n for n in os.listdir(run) if not _TEMP_RE.fullmatch(n) and n not in LOCK_FILES)
    except FileNotFoundError:
        return []
    except NotADirectoryError:
        raise ConfigError(
            f"output folder {str(run)!r} is a file", fix="pass a folder with -o (it is created if missing)"
        ) from None


def prepare_run_folder(output_dir: str | os.PathLike[str], *, resume: str | None, overwrite: bool) -> None:
    """Refuse a new run into a non-empty folder (unless ``overwrite``), or clear it when ``overwrite``.

    A resume may write into the run it resumes, or into an empty/new folder; ``overwrite`` and
    ``resume`` together are refused (they contradict). Temp folders of checkpoint writes killed
    mid-way are swept (only ours, only when their writer is dead).

    Example:
        >>> import tempfile, pathlib
        >>> d = pathlib.Path(tempfile.mkdtemp())
        >>> prepare_run_folder(d, resume=None, overwrite=False)       # empty: fine
        >>> _ = (d / "metrics.jsonl").write_text("{}\\n")
        >>> prepare_run_folder(d, resume=None, overwrite=False)       # doctest: +ELLIPSIS
        Traceback (most recent call last):
        xtree_gym.errors.ConfigError: output folder ... already holds a run (metrics.jsonl) -- fix: ...
        >>> prepare_run_folder(d, resume=None, overwrite=True); sorted(p.name for p in d.iterdir())
        []
    """
    run = Path(output_dir)
    if overwrite and resume:
        raise ConfigError("--overwrite and --resume contradict each other", fix="pass one of them")
    sweep_checkpoint_temps(run)
    entries = _visible_entries(run)
    if not entries:
        return
    if resume and _resumes_into(run, resume):
        return
    if not overwrite:
        shown = ", ".join(entries[:4]) + (", ..." if len(entries) > 4 else "")
        what = "already holds a run" if holds_run(run) else "is not empty"
        raise ConfigError(
            f"output folder {str(run)!r} {what} ({shown})",
            fix=f"pass --resume {run} to continue it, --overwrite to delete it and start again, "
            "or another -o folder",
        )
    if not holds_run(run):
        raise ConfigError(
            f"--overwrite: {str(run)!r} holds files but no training run ({', '.join(entries[:4])}); "
            "it is not deleted",
            fix="pass an empty or new -o folder",
        )
    for name in entries:
        target = run / name
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        else:
            target.unlink()


def checkpointless_run(resume: str | os.PathLike[str] | None) -> Path | None:
    """The run folder ``resume`` names when it holds the run's ``config.json`` but no checkpoint yet (the run
    was stopped before its first save), else None. ``--resume`` starts such a run again from step 0.

    Example:
        >>> import tempfile, pathlib
        >>> d = pathlib.Path(tempfile.mkdtemp())
        >>> checkpointless_run(d) is None                      # no config: not a run
        True
        >>> _ = (d / "config.json").write_text("{}"); checkpointless_run(d) == d
        True
        >>> (d / "checkpoint-000002").mkdir(); _ = (d / "checkpoint-000002" / "trainer_state.json").write_text("{}")
        >>> checkpointless_run(d) is None                      # a checkpoint to resume from
        True
    """
    if not resume:
        return None
    p = Path(resume)
    if checkpoint_step(p) is not None or not (p / "config.json").is_file() or (p / STATE_FILE).is_file():
        return None
    if any((c / STATE_FILE).is_file() for c in checkpoints_by_step(p)):
        return None
    return p


def _resumes_into(run: Path, resume: str) -> bool:
    """Whether ``resume`` (a run folder or one of its checkpoints) belongs to ``run``."""
    r = Path(resume)
    folder = r.parent if checkpoint_step(r) is not None else r
    try:
        return folder.resolve() == run.resolve()
    except OSError:
        return False


def sweep_checkpoint_temps(run: str | os.PathLike[str]) -> list[str]:
    """Remove the temp folders (``.checkpoint-N.<pid>.<rand>``) that killed checkpoint writes left.

    Only folders of that exact naming whose writer pid no longer runs are removed.

    Example:
        >>> import tempfile, pathlib
        >>> d = pathlib.Path(tempfile.mkdtemp())
        >>> (d / ".checkpoint-000003.999999999.abc").mkdir(); (d / ".keep-me").mkdir()
        >>> [pathlib.Path(p).name for p in sweep_checkpoint_temps(d)]
        ['.checkpoint-000003.999999999.abc']
    """
    from ...corpus.io import _pid_alive

    p = Path(run)
    removed: list[str] = []
    try:
        names = os.listdir(p)
    except OSError:
        return removed
    for name in names:
        m = _TEMP_RE.fullmatch(name)
        if m is None or _pid_alive(int(m.group(1))) or not (p / name).is_dir():
            continue
        shutil.rmtree(p / name, ignore_errors=True)
        removed.append(str(p / name))
    return sorted(removed)


def check_resume_config(
    saved: Mapping[str, Any], current: Mapping[str, Any], where: str, free: Iterable[str] = RESUME_FREE
) -> None:
    """Refuse a resume whose config differs from the checkpoint's in a field outside ``free``.

    Example:
        >>> check_resume_config({"lr": 1e-6, "steps": 2}, {"lr": 1e-6, "steps": 4}, "ck")   # more steps: fine
        >>> check_resume_config({"model": "a"}, {"model": "b"}, "ck")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        xtree_gym.errors.ConfigError: ck: the run being resumed was trained with other settings (model: 'a' vs 'b') -- fix: ...
    """
    skip = set(free)
    saved, current = _comparable(saved), _comparable(current)
    diff = [
        f"{k}: {saved[k]!r} vs {current[k]!r}"
        for k in sorted(set(saved) & set(current))
        if k not in skip and _norm(saved[k]) != _norm(current[k])
    ]
    if diff:
        raise ConfigError(
            f"the run being resumed was trained with other settings ({'; '.join(diff[:6])})",
            where=where,
            fix="resume with the run's own settings (omit --config and those flags) "
            "or start a new run with another -o",
        )


def _comparable(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """The config without what moves with the run folder (offline RL's instance file lives in it)."""
    out = dict(cfg)
    if isinstance(out.get("env_kwargs"), Mapping):
        out["env_kwargs"] = {k: v for k, v in out["env_kwargs"].items() if k != "instances"}
    return out


def _norm(value: Any) -> Any:
    if isinstance(value, (tuple, list)):
        return [_norm(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _norm(v) for k, v in value.items()}
    return value


def refuse_existing_run(run: str | os.PathLike[str]) -> None:
    """A fresh (not resumed) trainer's check: ``run`` must not hold a run already (library callers too)."""
    if holds_run(run):
        raise ConfigError(
            f"output folder {str(run)!r} already holds a run; a new run would destroy it",
            fix="set resume to continue it (--resume), delete it first (--overwrite), or use another output_dir",
        )
