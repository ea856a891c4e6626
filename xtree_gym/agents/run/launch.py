"""What ``accelerate launch`` asked for, checked before any model loads or any run folder is made.

``xtree train`` runs these first: a launch that cannot work is one line, and the corrected rerun
finds nothing of it in its ``-o`` folder.

* DeepSpeed (an accelerate config with ``distributed_type: DEEPSPEED``, which sets
  ``ACCELERATE_USE_DEEPSPEED``; or such a config passed to ``--config``) is not supported: FSDP2 is;
* ``tasks_per_step`` must split over the launch's processes (``WORLD_SIZE``): each rank plays whole
  groups (:func:`~xtree_gym.agents.play.tasks.rank_share`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ...errors import ConfigError

FSDP_FIX = (
    "launch with FSDP2 instead: accelerate launch --config_file xtree_gym/agents/accelerate/fsdp.yaml "
    "--num_processes N -m xtree_gym train ..."
)


def launch_world() -> int:
    """The number of processes of this launch (``WORLD_SIZE``, set by ``accelerate launch``; 1 alone).

    Example:
        >>> os.environ.pop("WORLD_SIZE", None) and None
        >>> launch_world()
        1
    """
    value = os.environ.get("WORLD_SIZE", "").strip()
    return int(value) if value.isdigit() and int(value) > 0 else 1


def deepspeed_refusal(where: str) -> ConfigError:
    """The one error for a DeepSpeed launch: FSDP2 is the supported path."""
    return ConfigError("DeepSpeed is not supported: FSDP2 is the supported path", where=where, fix=FSDP_FIX)


def check_no_deepspeed(config: str | None) -> None:
    """Refuse DeepSpeed, asked for by the launcher or by an accelerate config given to ``--config``.

    Example:
        >>> os.environ.pop("ACCELERATE_USE_DEEPSPEED", None) and None
        >>> check_no_deepspeed(None)
    """
    if os.environ.get("ACCELERATE_USE_DEEPSPEED", "").strip().lower() in ("1", "true", "yes"):
        raise deepspeed_refusal("accelerate launch (distributed_type: DEEPSPEED)")
    if (
        not config
        or Path(config).suffix.lower() not in (".yaml", ".yml", ".json")
        or not Path(config).is_file()
    ):
        return
    path = Path(config)
    data = _read_mapping(path)  # an accelerate config passed to --config: its keys say so
    kind = str(data.get("distributed_type", "")).upper() if isinstance(data, dict) else ""
    if kind == "DEEPSPEED":
        raise deepspeed_refusal(config)
    if kind:
        raise ConfigError(
            f"this is an accelerate launcher config (distributed_type: {kind}), not a training config",
            where=config,
            fix=f"pass it to accelerate launch --config_file {config} -m xtree_gym train ... (not to --config)",
        )


def _read_mapping(path: Path) -> Any:
    """``path``'s JSON or YAML content; None when it cannot be read (the config reader then says why)."""
    try:
        text = path.read_text(encoding="utf-8")
        if path.suffix.lower() == ".json":
            return json.loads(text)
        import yaml
    except (OSError, UnicodeDecodeError, ValueError, ImportError):
        return None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return None


def check_world(cfg: Any) -> None:
    """Refuse a ``tasks_per_step`` that does not split over this launch's processes.

    Example:
        >>> from types import SimpleNamespace
        >>> os.environ["WORLD_SIZE"] = "2"
        >>> check_world(SimpleNamespace(tasks_per_step=3))
        Traceback (most recent call last):
        ...
        xtree_gym.errors.ConfigError: tasks_per_step = 3 does not split over the 2 processes of this launch -- fix: pass --tasks-per-step 2 or 4 (a multiple of 2: each rank plays whole groups), or launch --num_processes 1 or 3
        >>> check_world(SimpleNamespace(tasks_per_step=4)); _ = os.environ.pop("WORLD_SIZE")
    """
    tasks, world = getattr(cfg, "tasks_per_step", None), launch_world()
    if not isinstance(tasks, int) or world == 1 or tasks % world == 0:
        return
    lower, upper = max(tasks // world, 1) * world, (tasks // world + 1) * world
    options = f"{lower} or {upper}" if lower < tasks else f"{upper}"
    near = sorted((d for d in range(1, tasks + 1) if tasks % d == 0), key=lambda d: abs(d - world))[:2]
    divisors = sorted(near)  # the process counts nearest this one that do split the tasks
    raise ConfigError(
        f"tasks_per_step = {tasks} does not split over the {world} processes of this launch",
        fix=f"pass --tasks-per-step {options} (a multiple of {world}: each rank plays whole groups), "
        f"or launch --num_processes {' or '.join(map(str, divisors))}",
    )
