"""Checkpoints that work when the policy is sharded (FSDP, DeepSpeed ZeRO) under ``accelerate launch``.

Unsharded runs (one process, DDP) keep the plain path of :mod:`.checkpoint`. Sharded runs:

* weights: ``accelerator.get_state_dict(model)`` gathers the full state dict (every rank takes
  part; rank 0 writes it with ``save_pretrained(state_dict=...)``, safetensors as always); on
  resume each rank reads the files and ``set_model_state_dict(full_state_dict=True)`` shards them;
* FSDP optimizer state: ``get_optimizer_state_dict(full_state_dict=True)`` (keyed by parameter
  names) through the same safetensors + JSON format; ``set_optimizer_state_dict`` on resume;
* DeepSpeed: the weights as above; its optimizer state is partitioned inside the engine and is
  not written (a warning says so at every save); resuming a ZeRO-3 run is refused.

No GPU here: the FSDP/DeepSpeed branches are exercised by ``scripts/gpu_smoke.py --fsdp``; the
full-state-dict functions themselves are tested on an unsharded model.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from ...errors import ConfigError


def sharding(acc: Any) -> str:
    """``fsdp``, ``deepspeed`` or ``none`` for an Accelerator."""
    kind = str(getattr(acc, "distributed_type", "")).rsplit(".", 1)[-1].upper()
    return {"FSDP": "fsdp", "DEEPSPEED": "deepspeed"}.get(kind, "none")


def inner_optimizer(optimizer: Any) -> Any:
    """The torch optimizer inside Accelerate's wrapper."""
    return optimizer.optimizer if hasattr(optimizer, "optimizer") else optimizer


class FullOptimizerState:
    """Stands for an optimizer in :func:`~.checkpoint.save_checkpoint`: its full (gathered) state dict."""

    def __init__(self, model: Any, optimizer: Any) -> None:
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_optimizer_state_dict

        options = StateDictOptions(full_state_dict=True, cpu_offload=True)
        self._state = get_optimizer_state_dict(model, inner_optimizer(optimizer), options=options)

    def state_dict(self) -> dict[str, Any]:
        return self._state


def load_full_model_state(model: Any, folder: Path) -> None:
    """Read ``folder``'s full safetensors weights and load them into the (sharded) ``model``."""
    from safetensors.torch import load_file
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict

    if (folder / "adapter_config.json").is_file():
        raise ConfigError(
            "resuming a LoRA run under FSDP/DeepSpeed is not supported",
            where=str(folder),
            fix="resume without sharding (one process or DDP), or start from the merged weights",
        )
    weights: dict[str, Any] = {}
    for f in sorted(folder.glob("*.safetensors")):
        weights.update(load_file(str(f)))
    if not weights:
        raise ConfigError("the checkpoint holds no model weights", where=str(folder))
    set_model_state_dict(model, weights, options=StateDictOptions(full_state_dict=True, strict=False))


def load_full_optimizer_state(model: Any, optimizer: Any, state: dict[str, Any]) -> None:
    """Load a full (name-keyed) optimizer state dict into the (sharded) ``optimizer``."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_optimizer_state_dict

    options = StateDictOptions(full_state_dict=True)
    set_optimizer_state_dict(model, inner_optimizer(optimizer), state, options=options)


def save_args(acc: Any, model: Any, optimizer: Any) -> dict[str, Any]:
    """``save_checkpoint`` keyword arguments for this run's sharding (call on EVERY rank: it gathers)."""
    kind = sharding(acc)
    if kind == "none":
        return {"optimizer": inner_optimizer(optimizer)}
    state = acc.get_state_dict(model)
    if kind == "fsdp":
        return {"optimizer": FullOptimizerState(model, optimizer), "model_state": state}
    if acc.is_main_process:
        print("checkpoint: DeepSpeed keeps the optimizer state inside its engine; not saved", file=sys.stderr)
    return {"optimizer": None, "model_state": state}


def load_sharded(acc: Any, model: Any, optimizer: Any, path: Path) -> bool:
    """Restore weights (and FSDP optimizer state) of a sharded run; False when the run is not sharded."""
    from . import checkpoint as ckpt

    kind = sharding(acc)
    if kind == "none":
        return False
    if kind == "deepspeed":
        stage = int(
            (getattr(acc, "deepspeed_config", None) or {}).get("zero_optimization", {}).get("stage", 0)
        )
        if stage == 3:
            raise ConfigError(
                "resuming a DeepSpeed ZeRO-3 run is not supported", fix="resume under FSDP or ZeRO-2"
            )
        ckpt.load_model_weights(acc.unwrap_model(model), path)  # ZeRO-2: the weights are whole on every rank
        return True
    load_full_model_state(model, Path(path) / "model")
    if (Path(path) / "optimizer.safetensors").is_file():
        load_full_optimizer_state(model, optimizer, ckpt.read_optimizer_state(path))
    return True
