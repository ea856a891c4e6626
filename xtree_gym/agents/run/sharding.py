"""FSDP2 for every trainer: asked for by ``accelerate launch``, applied by Accelerate or here, reported.

``accelerate launch --config_file agents/accelerate/fsdp.yaml`` sets ``ACCELERATE_USE_FSDP``. On GPUs
Accelerate applies FSDP2 in ``prepare``; on CPU it does not (its state only knows FSDP for accelerator
devices: the run would silently be DDP over gloo), so :func:`plan` says ``own`` and the trainer shards
with :func:`shard` itself -- torch's ``fully_shard`` on each transformer block (the model's
``_no_split_modules``) and then on the root, the same layout Accelerate's ``TRANSFORMER_BASED_WRAP``
makes. Asking for FSDP and getting anything else is a :class:`~xtree_gym.errors.ConfigError`.

A sharded model's forward gathers each block's parameters from every rank: all ranks must run the
same forwards. Rollouts play different episodes on each rank, so they run inside :func:`gathered`
(the full weights gathered once, no collective until it ends); the update pads micro-batches to the
same count on every rank (:func:`max_over_ranks`).

``RUN/parallel.json`` (a contract, written by rank 0): ``{"kind": "fsdp"|"ddp"|"none", "world": W,
"param_bytes_per_rank": [...], "param_bytes_total": N}`` -- the policy's parameter bytes each rank
holds and the unsharded total.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ...errors import ConfigError

PARALLEL_FILE = "parallel.json"


def fsdp_requested() -> bool:
    """Whether the launcher asked for FSDP (``accelerate launch`` with an FSDP config sets the variable)."""
    return os.environ.get("ACCELERATE_USE_FSDP", "false").lower() == "true"


def plan(acc: Any) -> str:
    """``accelerate`` (Accelerate applies FSDP in ``prepare``), ``own`` (the trainer applies it) or ``none``.

    One :class:`ConfigError` when FSDP is asked for and cannot be had.
    """
    kind = str(getattr(acc, "distributed_type", "")).rsplit(".", 1)[-1].upper()
    if kind == "FSDP":
        return "accelerate"
    if not fsdp_requested():
        return "none"
    version = os.environ.get("FSDP_VERSION", "2")
    if version != "2":
        raise ConfigError(
            f"fsdp_version = {version!r}: only FSDP2 is supported", fix="set fsdp_version: 2 in the config"
        )
    if kind == "MULTI_CPU":  # Accelerate's CPU state has no FSDP: shard here over gloo
        return "own"
    raise ConfigError(
        f"FSDP was asked for, but Accelerate set up {kind or 'no'} distributed training "
        f"({getattr(acc, 'num_processes', 1)} process(es))",
        fix="launch with `accelerate launch --config_file ... --num_processes N` (N >= 1 on GPUs, "
        "N >= 1 with torchrun-style ranks on CPU), or drop the FSDP config",
    )


def block_classes(model: Any) -> set[str]:
    """Class names FSDP wraps one by one: the model's ``_no_split_modules`` (through a PEFT wrapper)."""
    inner = model
    for _ in range(4):
        names = getattr(inner, "_no_split_modules", None)
        if names:
            return set(names)
        inner = getattr(inner, "base_model", None) or getattr(inner, "model", None)
        if inner is None:
            break
    return set()


def shard(model: Any, mixed: str = "no", master: Any = None, frozen: bool = False) -> Any:
    """``fully_shard`` every transformer block, then the root model (in place; returns ``model``).

    ``mixed`` ``bf16``/``fp16``: FSDP2's mixed precision (compute in the low dtype, gradients reduced in
    float32). ``master``: cast the *sharded* parameters to this dtype afterwards (a model loaded in
    bf16 gets float32 master weights, 1/world of them per rank, never a full float32 copy).
    ``frozen``: a model that only runs forwards (the reference, the teacher): FSDP2 keeps a root's
    weights gathered after its forward for the backward that follows, which never comes here, so
    the root is resharded after each forward.
    """
    import torch
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    low = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(mixed)
    mp = MixedPrecisionPolicy(param_dtype=low, reduce_dtype=torch.float32) if low else MixedPrecisionPolicy()
    names = block_classes(model)
    blocks = [m for m in model.modules() if type(m).__name__ in names]
    if not blocks:
        raise ConfigError(
            f"cannot find the transformer blocks of {type(model).__name__} to shard",
            fix="use a transformers model that lists _no_split_modules",
        )
    for block in blocks:
        fully_shard(block, mp_policy=mp)
    # the root is the transformers model itself: a PEFT wrapper's generate() calls it, not the wrapper
    root = model.get_base_model() if hasattr(model, "get_base_model") else model
    fully_shard(root, mp_policy=mp)
    if frozen:
        root.register_forward_hook(lambda module, args, output: module.reshard())
    if master is not None and any(p.dtype != master for p in model.parameters() if p.requires_grad):
        model.to(master)
    return model


def is_sharded(model: Any) -> bool:
    """Whether any module of ``model`` is an FSDP2 module."""
    from torch.distributed.fsdp import FSDPModule

    return any(isinstance(m, FSDPModule) for m in model.modules())


def kind_of(model: Any) -> str:
    """``fsdp``, ``ddp`` or ``none``: what the trainer's model actually is."""
    from torch.nn.parallel import DistributedDataParallel

    if is_sharded(model):
        return "fsdp"
    return "ddp" if isinstance(model, DistributedDataParallel) else "none"


def local_tensor(t: Any) -> Any:
    """This rank's piece of a (possibly DTensor) tensor."""
    return t.to_local() if hasattr(t, "to_local") else t


def param_bytes(model: Any) -> tuple[int, int]:
    """``(bytes this rank holds, bytes of the full parameters)`` of ``model``'s parameters."""
    local = total = 0
    for p in model.parameters():
        local += local_tensor(p).numel() * p.element_size()
        total += p.numel() * p.element_size()
    return local, total


def write_parallel(acc: Any, run_dir: Path, model: Any) -> dict[str, Any]:
    """Write ``RUN/parallel.json`` (rank 0, atomically; every rank must call: it gathers)."""
    from ...corpus.io import atomic_write_text

    local, total = param_bytes(model)
    world = int(acc.num_processes)
    if world > 1:
        from accelerate.utils import gather_object

        per_rank = [int(x) for x in gather_object([local])]
    else:
        per_rank = [local]
    body = {"kind": kind_of(model), "world": world, "param_bytes_per_rank": per_rank,
            "param_bytes_total": int(total)}  # fmt: skip
    if acc.is_main_process:
        run_dir.mkdir(parents=True, exist_ok=True)
        atomic_write_text(run_dir / PARALLEL_FILE, json.dumps(body) + "\n")
    return body


@contextmanager
def gathered(*models: Any) -> Iterator[None]:
    """Hold the full weights of sharded ``models`` for a while (rollouts, evaluation): no collectives inside.

    Every rank enters and leaves together; inside, each rank may run any number of forwards. A model
    that is not sharded passes through untouched.
    """
    from torch.distributed.fsdp import FSDPModule

    mods = [m for model in models for m in model.modules() if isinstance(m, FSDPModule)]
    for m in mods:
        m.set_reshard_after_forward(False)
        m.unshard()
    try:
        yield
    finally:
        for m in mods:
            m.reshard()
            m.set_reshard_after_forward(True)


def clip_grad_norm(acc: Any, model: Any, max_norm: float) -> float:
    """Clip the gradients to ``max_norm`` (``inf``: measure only); the total norm over all ranks."""
    import torch

    if is_sharded(model) and str(getattr(acc, "distributed_type", "")).rsplit(".", 1)[-1] != "FSDP":
        params = [p for p in model.parameters() if p.grad is not None]
        norm = torch.nn.utils.clip_grad_norm_(params, max_norm)
    else:
        norm = acc.clip_grad_norm_(model.parameters(), max_norm)
    norm = norm.full_tensor() if hasattr(norm, "full_tensor") else norm
    return float(norm)


def max_over_ranks(acc: Any, value: int) -> int:
    """The largest ``value`` any rank has (every rank must call)."""
    if acc.num_processes == 1:
        return value
    import torch
    import torch.distributed as dist

    t = torch.tensor([value], dtype=torch.long, device=acc.device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return int(t.item())
