"""Training tasks: which ``tasks_per_step`` tasks an optimizer step plays, and which rank plays which.

Sampling is a pure function of ``(seed, step)``, so every rank draws the same list without
talking to the others, and a resumed run draws what the uninterrupted one would have. A group
(one task, ``n`` rollouts) always stays whole on one rank: λ_g and the advantages need all of it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ...errors import ConfigError
from ..types import TaskSpec


def _rng(seed: int, step: int) -> np.random.Generator:
    return np.random.default_rng([int(seed), int(step), 0x7A5C])


def scienceworld_tasks(count: int, *, seed: int, step: int, fold: str = "train") -> list[TaskSpec]:
    """``count`` (task type, variation) draws from a ScienceWorld fold: type uniform, then variation.

    Example:
        >>> [t.task for t in scienceworld_tasks(3, seed=0, step=1)] == [t.task for t in scienceworld_tasks(3, seed=0, step=1)]
        True
    """
    from ...envs.sciworld_folds import sample_task_variation

    rng = _rng(seed, step)
    out = []
    for j in range(count):
        task, variation = sample_task_variation(rng, fold=fold)
        out.append(
            TaskSpec(
                task=task,
                seed=int(rng.integers(2**31 - 1)),
                reset_options={"task": task, "variation": variation},
                key=f"{task}/{variation}/{step}.{j}",
            )
        )
    return out


def webshop_goal_indices(env_kwargs: dict[str, Any], split: str) -> range:
    """Goal indices of a WebShop split for the catalogue ``env_kwargs`` names."""
    from ...envs.webshop import load_webshop_data
    from ...envs.webshop_data import split_indices

    data = load_webshop_data(env_kwargs.get("data_dir"), int(env_kwargs.get("price_seed", 0)))
    return split_indices(len(data.goals), split)


def webshop_tasks(count: int, *, seed: int, step: int, goals: Sequence[int]) -> list[TaskSpec]:
    """``count`` goals drawn uniformly (with replacement) from ``goals``.

    Example:
        >>> [t.reset_options["goal_idx"] for t in webshop_tasks(3, seed=0, step=0, goals=range(500, 510))]
        [500, 505, 507]
    """
    if not len(goals):
        raise ConfigError("the WebShop split has no goals", fix="check task_split and the data folder")
    rng = _rng(seed, step)
    out = []
    for j in range(count):
        goal = int(goals[int(rng.integers(len(goals)))])
        out.append(
            TaskSpec(
                task="webshop",
                seed=int(rng.integers(2**31 - 1)),
                reset_options={"goal_idx": goal},
                key=f"goal{goal}/{step}.{j}",
            )
        )
    return out


def generic_tasks(task: str, count: int, *, seed: int, step: int) -> list[TaskSpec]:
    """Envs that draw their own task from the reset seed (MiniWoB with ``task=`` in env_kwargs...)."""
    rng = _rng(seed, step)
    return [
        TaskSpec(task=task, seed=int(rng.integers(2**31 - 1)), key=f"{task}/{step}.{j}") for j in range(count)
    ]


def rank_share(tasks: Sequence[TaskSpec], rank: int, world: int) -> list[TaskSpec]:
    """The tasks rank ``rank`` of ``world`` plays: every ``world``-th, so groups stay whole.

    Example:
        >>> ts = [TaskSpec(str(i)) for i in range(4)]
        >>> [t.task for t in rank_share(ts, 1, 2)]
        ['1', '3']
    """
    if len(tasks) % world:
        raise ConfigError(
            f"tasks_per_step = {len(tasks)} does not split over {world} processes",
            fix=f"use a multiple of {world} (each rank plays whole groups)",
        )
    return list(tasks[rank::world])
