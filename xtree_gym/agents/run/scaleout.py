"""Checkpoints of a sharded (FSDP2) policy: each rank writes its shard; any world size resumes.

Unsharded runs (one process, DDP) keep the plain format of :mod:`.checkpoint`. An FSDP run's
``checkpoint-N/`` holds

* ``dcp/`` -- :mod:`torch.distributed.checkpoint`: every rank writes its own shard of the trainable
  weights (all of them; the adapters only under LoRA), of their AdamW state and of the EMA teacher's
  weights -- nothing is gathered on rank 0. DCP reshards on load, so the checkpoint resumes at any
  world size, sharded or not (one process reads it into a plain model);
* ``model/`` -- the Hugging Face export (``save_pretrained``: full weights, or the PEFT adapters)
  at the last step and every ``export_every`` steps; this one gathers the weights on rank 0;
* ``trainer_state.json`` and the trainer's other files, as in every checkpoint.

A plain checkpoint (written at one process or by DDP) resumes under FSDP too: every rank reads the
full files and keeps its shard (:func:`load_plain_into_sharded`).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from ...errors import ConfigError

SHARD_DIR = "dcp"


def sharding(acc: Any) -> str:
    """``fsdp`` or ``none`` for an Accelerator (the sharding Accelerate itself applies)."""
    kind = str(getattr(acc, "distributed_type", "")).rsplit(".", 1)[-1].upper()
    return "fsdp" if kind == "FSDP" else "none"


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
    """Read ``folder``'s full safetensors weights (or PEFT adapters) into the (sharded) ``model``."""
    from safetensors.torch import load_file
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict

    weights: dict[str, Any] = {}
    for f in sorted(folder.glob("*.safetensors")):
        weights.update(load_file(str(f)))
    if not weights:
        raise ConfigError("the checkpoint holds no model weights", where=str(folder))
    if (
        folder / "adapter_config.json"
    ).is_file():  # PEFT saves "...lora_A.weight" for "...lora_A.default.weight"
        names = [n for n, p in model.named_parameters() if p.requires_grad]
        mapped = {
            n: weights[n.replace(".default", "")] for n in names if n.replace(".default", "") in weights
        }
        if len(mapped) != len(names) or len(mapped) != len(weights):
            raise ConfigError(
                f"checkpoint adapters do not fit the model ({len(weights)} saved, {len(names)} in the model)",
                where=str(folder),
                fix="resume with the same --model and --lora-r/--lora-targets as the run that wrote it",
            )
        weights = mapped
    set_model_state_dict(model, weights, options=StateDictOptions(full_state_dict=True, strict=False))


def load_full_optimizer_state(model: Any, optimizer: Any, state: dict[str, Any]) -> None:
    """Load a full (name-keyed) optimizer state dict into the (sharded) ``optimizer``."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_optimizer_state_dict

    options = StateDictOptions(full_state_dict=True)
    set_optimizer_state_dict(model, inner_optimizer(optimizer), state, options=options)


def trainable_names(model: Any) -> set[str]:
    """The state-dict names of ``model``'s trainable parameters (what a checkpoint must hold)."""
    return {n for n, p in model.named_parameters() if p.requires_grad}


def _states(model: Any, optimizer: Any, ema: Any) -> dict[str, Any]:
    """This rank's pieces of the trainable weights, their optimizer state and the EMA teacher's weights."""
    from torch.distributed.checkpoint.state_dict import get_model_state_dict, get_state_dict

    names = trainable_names(model)
    msd, osd = get_state_dict(model, inner_optimizer(optimizer))
    out = {"model": {k: v for k, v in msd.items() if k in names}, "optim": osd}
    if ema is not None:
        out["ema"] = {k: v for k, v in get_model_state_dict(ema).items() if k in names}
    return out


def save_shards(model: Any, optimizer: Any, ema: Any, folder: Path) -> None:
    """Every rank writes its shards into ``folder`` (DCP; every rank must call)."""
    import torch.distributed.checkpoint as dcp

    dcp.save(_states(model, optimizer, ema), checkpoint_id=str(folder))


def load_shards(model: Any, optimizer: Any, ema: Any, folder: Path) -> None:
    """Read a :func:`save_shards` folder into this run's model, optimizer and EMA teacher (any world size)."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict, set_state_dict

    want = _states(model, optimizer, ema)
    try:
        dcp.load(want, checkpoint_id=str(folder))
    except Exception as exc:  # CheckpointException wraps each rank's error
        raise ConfigError(
            f"cannot read the sharded checkpoint ({type(exc).__name__}: {str(exc)[:300]})",
            where=str(folder),
            fix="resume with the same --model, --lora-* and --opsd-teacher as the run that wrote it",
        ) from None
    strict = StateDictOptions(strict=False)
    set_state_dict(
        model, inner_optimizer(optimizer), model_state_dict=want["model"], optim_state_dict=want["optim"],
        options=strict,
    )  # fmt: skip
    if ema is not None:
        set_model_state_dict(ema, want["ema"], options=strict)


def full_weights(model: Any) -> dict[str, Any]:
    """The full state dict of a sharded ``model`` on rank 0 (on the CPU; empty on the other ranks)."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    full = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    # tied weights (the LM head = the embeddings) are one parameter: keep the name ``parameters()`` gives
    names = {n for n, _ in model.named_parameters()} | {n for n, _ in model.named_buffers()}
    return {k: v for k, v in full.items() if k in names}


def shared_temp_dir(acc: Any, run: Path, step: int) -> Path:
    """A fresh ``RUN/.checkpoint-N.<pid>.<rand>`` made by rank 0, its name told to every rank."""
    name = ""
    if acc.is_main_process:
        run.mkdir(parents=True, exist_ok=True)
        name = tempfile.mkdtemp(prefix=f".checkpoint-{step:06d}.{os.getpid()}.", dir=run)
    if acc.num_processes > 1:
        from accelerate.utils import broadcast_object_list

        box = [name]
        broadcast_object_list(box, from_process=0)
        name = box[0]
    return Path(name)


def plain_optimizer_by_name(model: Any, state: dict[str, Any]) -> dict[str, Any]:
    """A plain optimizer state dict (keyed 0..n-1 in parameter order) keyed by parameter names instead.

    The optimizer was built on the trainable parameters in ``named_parameters`` order, the same
    order sharding keeps.
    """
    names = [n for n, p in model.named_parameters() if p.requires_grad]
    by_name = {names[int(k)]: v for k, v in state["state"].items()}
    groups = [{**g, "params": [names[int(i)] for i in g["params"]]} for g in state["param_groups"]]
    return {"state": by_name, "param_groups": groups}


def load_plain_into_sharded(model: Any, optimizer: Any, ema: Any, path: Path) -> None:
    """Resume a sharded run from a plain checkpoint (one process or DDP): each rank keeps its shards."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict

    from . import checkpoint as ckpt

    load_full_model_state(model, path / "model")
    if (path / "optimizer.safetensors").is_file():
        state = plain_optimizer_by_name(model, ckpt.read_optimizer_state(path))
        load_full_optimizer_state(model, optimizer, state)
    if ema is not None:
        extra: dict[str, Any] = {k[4:]: v for k, v in ckpt.load_extra(path).items() if k.startswith("ema.")}
        set_model_state_dict(ema, extra, options=StateDictOptions(full_state_dict=True, strict=False))


def save_sharded_checkpoint(
    acc: Any, run_dir: Path, step: int, *, model: Any, optimizer: Any, ema: Any, export: bool, **common: Any
) -> Path | None:
    """An FSDP run's ``checkpoint-N`` (every rank must call): shards by every rank, the rest by rank 0.

    ``export``: also write the Hugging Face ``model/`` folder (gathers the weights on rank 0).
    ``common``: :func:`~.checkpoint.save_checkpoint`'s ``tokenizer``, ``state``, ``files``, ``keep``.
    """
    from . import checkpoint as ckpt

    tmp = shared_temp_dir(acc, run_dir, step)
    save_shards(model, optimizer, ema, tmp / SHARD_DIR)
    full = full_weights(model) if export else None
    acc.wait_for_everyone()
    if not acc.is_main_process:
        return None
    tokenizer = common.pop("tokenizer", None)
    return ckpt.save_checkpoint(
        run_dir, step, model=model if export else None, model_state=full, tokenizer=tokenizer, folder=tmp,
        **common,
    )  # fmt: skip


def save_any(
    acc: Any, run_dir: Path, step: int, *, kind: str, model: Any, optimizer: Any, ema: Any, export: bool,
    **common: Any,
) -> Path | None:  # fmt: skip
    """``checkpoint-N`` of a run of ``kind`` (``parallel.json``'s): sharded (every rank) or plain (rank 0).

    Every rank must call; the path on rank 0, ``None`` elsewhere. ``export`` matters for FSDP only:
    plain checkpoints always hold ``model/``.
    """
    from . import checkpoint as ckpt

    if kind == "fsdp":
        return save_sharded_checkpoint(
            acc, run_dir, step, model=model, optimizer=optimizer, ema=ema, export=export, **common
        )
    if not acc.is_main_process:
        return None
    extra = {f"ema.{k}": v for k, v in ema.state_dict().items()} if ema is not None else None
    return ckpt.save_checkpoint(
        run_dir, step, model=model, optimizer=inner_optimizer(optimizer), extra_tensors=extra, **common
    )


def load_any(path: Path, *, kind: str, model: Any, optimizer: Any, ema: Any) -> None:
    """Restore the weights, optimizer and EMA teacher of any checkpoint into a run of ``kind``.

    FSDP shards (``dcp/``) load at any world size and kind; a plain checkpoint loads plainly, or
    into a sharded run (:func:`load_plain_into_sharded`).
    """
    from . import checkpoint as ckpt

    if (path / SHARD_DIR).is_dir():
        load_shards(model, optimizer, ema, path / SHARD_DIR)
    elif kind == "fsdp":
        load_plain_into_sharded(model, optimizer, ema, path)
    else:
        ckpt.load_model_weights(model, path)
        ckpt.load_optimizer(path, inner_optimizer(optimizer))
        if ema is not None:
            extra = ckpt.load_extra(path)
            ema.load_state_dict({k[4:]: v for k, v in extra.items() if k.startswith("ema.")})
