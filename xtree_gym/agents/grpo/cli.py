"""``xtree train <method>`` and ``xtree plot-run``: one flag per config field, ``--config FILE``.

The ``train`` group is a hook: every module in :data:`TRAIN_MODULES` has a
``register_train(train_sub)`` function that adds its method (``rlvr`` lives here; SFT and
offline node RL add theirs by appending one module name). Each method parser is built with
:func:`add_train_command`, which gives it the shared conventions: one flag per field of its
config dataclass (``--tasks-per-step``), ``-o`` for ``--output-dir``, ``--config FILE`` (YAML,
JSON or a built-in recipe name), flags given on the command line overriding the file, and
``--resume DIR`` taking the run's own config unless others are given.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ...errors import ConfigError, require_extra

TRAIN_MODULES: tuple[str, ...] = ("xtree_gym.agents.grpo.cli", "xtree_gym.agents.sft_offline.cli")
"""Modules adding ``xtree train`` methods (each defines ``register_train(train_sub)``)."""

RECIPE_DIR = Path(__file__).parent.parent / "recipes"  # agents/recipes, beside the rooms

TRAIN_PACKAGES = ("torch", "transformers", "accelerate", "safetensors")
"""What every ``xtree train`` method imports (the ``train`` extra); checked before any of it is imported."""


def recipes() -> dict[str, Path]:
    """Built-in recipe name -> file (``xtree_gym/agents/recipes/*.yaml``).

    Example:
        >>> "scienceworld-cpu-smoke" in recipes()
        True
    """
    return {p.stem: p for p in sorted(RECIPE_DIR.glob("*.yaml"))}


def register_cli(sub: Any, collect_sub: Any) -> None:
    train = sub.add_parser("train", help="train a policy (rlvr: multi-turn GRPO with X-Tree shaping / OPSD)")
    train_sub = train.add_subparsers(dest="method", metavar="METHOD")

    def _help(_: argparse.Namespace) -> int:
        train.print_help()
        return 2

    train.set_defaults(func=_help)
    for name in TRAIN_MODULES:
        importlib.import_module(name).register_train(train_sub)

    p = sub.add_parser("plot-run", help="draw a training run's learning curves and λ_g vs win rate (PNG)")
    p.add_argument("runs", nargs="+", help="run folder(s) holding metrics.jsonl")
    p.add_argument("-o", "--output", required=True, help="folder to write the PNG files into")
    p.set_defaults(func=cmd_plot_run)


def add_train_command(
    train_sub: Any, name: str, config_cls: type[Any], run: Callable[[Any], int], help: str
) -> argparse.ArgumentParser:
    """Add ``xtree train NAME`` for ``config_cls``; ``run(config)`` does the work."""
    from .config import add_config_arguments

    p = train_sub.add_parser(name, help=help, description=(config_cls.__doc__ or "").split("\n")[0])
    add_config_arguments(p, config_cls)
    p.add_argument("--print-config", action="store_true", help="print the resolved config as JSON and exit")
    p.add_argument(
        "--overwrite",
        action="store_true",
        help="delete the run already in the -o folder and start again (else a non-empty folder is refused)",
    )

    def _cmd(args: argparse.Namespace) -> int:
        require_extra("train", TRAIN_PACKAGES, f"xtree train {name}")
        from ...corpus.io import protect_inputs
        from ...corpus.outfolder import output_folder
        from ..run.launch import check_no_deepspeed, check_world
        from ..run.lock import RUN_LOCK, folder_lock, is_main_rank
        from ..run.runfolder import checkpointless_run, prepare_run_folder

        # a launch that cannot work is one line before any model loads or folder is made (run/launch.py)
        check_no_deepspeed(getattr(args, "config", None))
        restart = checkpointless_run(getattr(args, "resume", None))
        cfg = config_from_cli(config_cls, args)
        checked = getattr(cfg, "resolved", None) or getattr(cfg, "check", None)
        if checked is not None:  # the ranges too, before the folder is touched (and what is printed is valid)
            checked()
        check_world(cfg)  # tasks per step over the launch's processes
        if args.print_config:
            print(json.dumps(dataclasses.asdict(cfg), indent=1))
            return 0
        folder = cfg.output_dir if is_main_rank() else None
        with folder_lock(folder, name=RUN_LOCK, what=f"xtree train {name}", announce=False) as held:
            again = restart is not None and Path(cfg.output_dir).resolve() == restart.resolve()
            if restart is not None:
                print(
                    f"{restart}: the run has a config but no checkpoint (it stopped before its first save); "
                    "starting it again from step 0",
                    file=sys.stderr,
                )
            prepare_run_folder(cfg.output_dir, resume=cfg.resume, overwrite=args.overwrite or again)
            held.announce()  # only now: a refused run leaves the folder, its lock file included, as it was
            with (
                protect_inputs(input_files(cfg), option="-o (a link in the run folder)"),
                output_folder(folder),
            ):
                return run(cfg)

    p.set_defaults(func=_cmd)
    return p


def input_files(cfg: Any) -> list[str]:
    """The files a run reads that its config names (rows, corpus, tree, OPSD bank, ...): a write into the
    run folder that lands on one of them (a planted link) is refused.

    Example:
        >>> from xtree_gym.agents.grpo.config import GRPOConfig
        >>> input_files(GRPOConfig(tree=__file__)) == [__file__]
        True
    """
    skip = {"output_dir", "resume"}
    return sorted(
        v for f in dataclasses.fields(cfg) if f.name not in skip
        for v in [getattr(cfg, f.name)] if isinstance(v, str) and v and Path(v).is_file()
    )  # fmt: skip


def config_from_cli(config_cls: type[Any], args: argparse.Namespace) -> Any:
    """Defaults < resumed run's config < ``--config`` < flags; unknown keys are one error."""
    from ..run.checkpoint import find_checkpoint, read_state
    from ..run.runfolder import check_resume_config, checkpointless_run
    from .config import config_from_args, config_from_mapping

    cfg = config_from_args(config_cls, args, recipes())
    resume = getattr(args, "resume", None)
    given = {f.name: getattr(cfg, f.name) for f in dataclasses.fields(config_cls) if f.name in vars(args)}
    restart = checkpointless_run(resume)
    if restart is not None:  # stopped before its first checkpoint: the same run again, from step 0
        saved = {} if getattr(args, "config", None) else _saved_config(restart / "config.json")
        data = {**dataclasses.asdict(cfg), **saved, **given, "resume": None}
        data["output_dir"] = given.get("output_dir", str(restart))
        return config_from_mapping(config_cls, data, where=str(restart / "config.json"))
    if resume and getattr(args, "config", None):  # the file's settings too must be the run's
        found = find_checkpoint(resume)
        chosen = {**_config_file_keys(cfg, args.config), **given}
        check_resume_config(read_state(found).get("config", {}), chosen, where=str(found))
    if resume and not getattr(args, "config", None):
        found = find_checkpoint(resume)
        saved = dict(read_state(found).get("config", {}))
        check_resume_config(saved, given, where=str(found))  # another --model: refused before it is loaded
        # continue in the run folder the checkpoint belongs to (the copy's, if it was moved), unless -o says
        saved["output_dir"] = str(found.parent)
        cfg = config_from_mapping(config_cls, {**saved, **given}, where=str(resume))
    return cfg


def _config_file_keys(cfg: Any, source: str) -> dict[str, Any]:
    """The fields ``--config SOURCE`` (a file or a recipe name) sets, with their values in ``cfg``."""
    from .config import load_config_file

    path = Path(source) if Path(source).exists() else recipes().get(source, Path(source))
    return {k: getattr(cfg, k) for k in load_config_file(path) if hasattr(cfg, k)}


def _saved_config(path: Path) -> dict[str, Any]:
    """A run's ``config.json`` as a mapping (one :class:`ConfigError` naming it when it cannot be read)."""
    from ...corpus.io import loads_strict

    try:
        data = loads_strict(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ConfigError(
            f"cannot read the run's config ({exc})", where=str(path), fix="pass --config FILE"
        ) from None
    if not isinstance(data, dict):
        raise ConfigError("the run's config is not a mapping", where=str(path), fix="pass --config FILE")
    return data


def register_train(train_sub: Any) -> None:
    from .config import GRPOConfig

    add_train_command(
        train_sub,
        "rlvr",
        GRPOConfig,
        run_rlvr,
        help="multi-turn GRPO: outcome − invalid penalty + shaping (none | xtree | segcost), optional OPSD",
    )


def rollout_cost(method: str, cfg: Any) -> str:
    """The up-front line of an RL run: how much it generates (each step then prints its time and an ETA).

    Example:
        >>> from xtree_gym.agents.grpo.config import GRPOConfig
        >>> rollout_cost("rlvr", GRPOConfig(env="XTree-WebShop-v0", steps=2, tasks_per_step=1, n=2, max_new_tokens=12))
        'rlvr: 2 steps x 1 task(s) x 2 rollouts, each <= 15 turns of <= 12 new tokens (<= 360 generated tokens a step) with tiny-random; every step prints its line and an ETA'
    """
    turns = cfg.max_steps or cfg.resolved().max_steps
    per_step = cfg.tasks_per_step * cfg.n * turns * cfg.max_new_tokens
    return (
        f"{method}: {cfg.steps} steps x {cfg.tasks_per_step} task(s) x {cfg.n} rollouts, each <= {turns} turns "
        f"of <= {cfg.max_new_tokens} new tokens (<= {per_step:,} generated tokens a step) with {cfg.model}; "
        "every step prints its line and an ETA"
    )


def finished_note(trainer: Any) -> str | None:
    """``RUN: already finished at step N ...`` when a resumed run has no step left, else None."""
    if trainer.step < trainer.cfg.steps:
        return None
    return (
        f"{trainer.cfg.output_dir}: already finished at step {trainer.step} (steps = {trainer.cfg.steps}); "
        f"nothing to do -- pass --steps N (N > {trainer.step}) with --resume to train on"
    )


def run_rlvr(cfg: Any) -> int:
    from .trainer import GRPOTrainer

    if not cfg.resume:
        print(rollout_cost("rlvr", cfg), file=sys.stderr)
    trainer = GRPOTrainer(cfg)
    done = finished_note(trainer)
    if done and trainer.acc.is_main_process:
        print(done)
        return 0
    if trainer.acc.is_main_process:
        if cfg.resume:
            print(rollout_cost("rlvr", trainer.cfg) + f"; resuming at step {trainer.step}", file=sys.stderr)
        out = Path(trainer.cfg.output_dir)
        out.mkdir(parents=True, exist_ok=True)
        from ...corpus.io import atomic_write_text

        atomic_write_text(out / "config.json", json.dumps(trainer.cfg.to_dict(), indent=1) + "\n")
    lines = trainer.train()
    if trainer.acc.is_main_process:
        last = lines[-1] if lines else {"step": trainer.step}
        keys = ("step", "reward", "win_rate", "loss", "kl", "tokens")
        print(
            " ".join(
                f"{k}={last[k]:.4g}" if isinstance(last.get(k), float) else f"{k}={last.get(k)}" for k in keys
            )
        )
        print(f"wrote {trainer.cfg.output_dir}/metrics.jsonl and checkpoint-{trainer.step:06d}")
    return 0


def cmd_plot_run(args: argparse.Namespace) -> int:
    from ..run.plots import plot_runs

    for run in args.runs:
        if not (Path(run) / "metrics.jsonl").is_file():
            raise ConfigError(
                f"{run!r} holds no metrics.jsonl", fix="pass a run folder written by `xtree train`"
            )
    written = plot_runs(args.runs, args.output)
    for path in written:
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    from ...cli import main

    sys.exit(main(["train", *sys.argv[1:]]))
