"""The offline node-RL trainer: :class:`~xtree_gym.agents.grpo.trainer.GRPOTrainer` on replayed node instances.

Config, instance sets and the task schedule are in :mod:`xtree_gym.agents.sft_offline.offline` (torch-free);
this module adds the torch side only.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ...rewards.instances import NodeInstance, write_instances
from ..grpo.trainer import GRPOTrainer
from ..types import TaskSpec
from .offline import INSTANCES_FILE, OfflineConfig, build_instances, curriculum_phase, instance_tasks


class OfflineTrainer(GRPOTrainer):
    """:class:`GRPOTrainer` whose tasks are node instances replayed by ``XTree-NodeReplay-v0``."""

    method = "offline"

    def __init__(self, cfg: OfflineConfig, **kwargs: Any) -> None:
        cfg = cfg.resolved()
        self.instances = build_instances(cfg)
        path = Path(cfg.output_dir) / INSTANCES_FILE
        _write_once(path, self.instances)
        env_kwargs = {**cfg.env_kwargs, "instances": str(path), "reward": cfg.reward, "alpha": cfg.alpha,
                      "gamma": cfg.gamma, "obs_mode": "full"}  # fmt: skip
        horizon = max(i.length for i in self.instances)
        # the episode cap is the node horizon (Table 7); the env itself ends each instance at its ℓ_v
        cfg = dataclasses.replace(cfg, env_kwargs=env_kwargs, max_steps=horizon)
        self.depth_counts = dict(sorted(Counter(i.depth for i in self.instances).items()))
        super().__init__(cfg, **kwargs)

    def pool(self, step: int) -> list[int]:
        """Instance indices step ``step`` draws from (all, or the curriculum's current depth)."""
        cfg = self.cfg
        if getattr(cfg, "curriculum", "none") != "depth":
            return list(range(len(self.instances)))
        depth = curriculum_phase(step, cfg.steps, self.depth_counts)
        return [i for i, inst in enumerate(self.instances) if inst.depth == depth]

    def sample_tasks(self, step: int) -> list[TaskSpec]:
        return instance_tasks(
            self.instances, self.pool(step), self.cfg.tasks_per_step, seed=self.cfg.seed, step=step
        )


def _write_once(path: Path, instances: Sequence[NodeInstance]) -> None:
    """Write the instance file from the main process only (every rank builds the same set)."""
    try:
        from accelerate import PartialState

        state = PartialState()
        if state.is_main_process:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_instances(path, instances)
        state.wait_for_everyone()
    except ImportError:  # pragma: no cover - accelerate is in the train extra with the trainer
        path.parent.mkdir(parents=True, exist_ok=True)
        write_instances(path, instances)
