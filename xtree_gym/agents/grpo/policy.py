"""Policy plumbing every trainer shares: the Accelerator, dtype, model + frozen copies, logprobs, EMA.

GRPO (:mod:`.trainer`), SFT and offline node RL build on these; none of them knows a loss.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import torch

from .losses import token_entropy, token_logps
from .rows import Batch


def make_accelerator(cpu: bool | None = None, mixed_precision: str = "no") -> Any:
    """An :class:`accelerate.Accelerator` (CPU when no GPU is visible or ``cpu=True``).

    ``mixed_precision`` (``no``, ``bf16``, ``fp16``) is Accelerate's autocast; under
    ``accelerate launch`` the launcher's config (DDP, FSDP: :mod:`..run.sharding`) applies as well.
    """
    from accelerate import Accelerator

    if cpu is None:
        cpu = not torch.cuda.is_available()
    return Accelerator(cpu=cpu, mixed_precision=mixed_precision)


def load_policy(
    name: str, *, device: torch.device, dtype: torch.dtype, seed: int, attn: str | None = None
) -> tuple[Any, Any]:
    """The trainable policy and its tokenizer (through :func:`xtree_gym.agents.model.loading.load_model`)."""
    from ..model.loading import load_model

    model, tokenizer = load_model(name, device=str(device), dtype=dtype, seed=seed, attn=attn)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return model, tokenizer


def adapt_policy(model: Any, cfg: Any) -> Any:
    """LoRA adapters (``cfg.lora_r`` > 0) and gradient checkpointing, as the config asks."""
    from ..model.lora import apply_lora, enable_gradient_checkpointing

    if cfg.lora_r:
        model = apply_lora(model, r=cfg.lora_r, alpha=cfg.lora_alpha, targets=cfg.lora_targets)
    if cfg.gradient_checkpointing:
        enable_gradient_checkpointing(model)
    return model


def frozen_copy(model: Any, dtype: torch.dtype | None = None) -> Any:
    """A gradient-free copy in eval mode (the KL reference / the EMA teacher), cast to ``dtype`` if given.

    Under mixed precision the reference only runs in autocast, so it is kept in the low precision.
    """
    twin = copy.deepcopy(model)
    if dtype is not None:
        twin = twin.to(dtype)
    twin.eval()
    for p in twin.parameters():
        p.requires_grad_(False)
    return twin


@dataclass
class Models:
    """What a trainer trains with: the (wrapped or sharded) policy, its optimizer, reference and teacher."""

    model: Any
    optimizer: Any
    tokenizer: Any
    ref: Any
    """The frozen KL / OPSD-base reference (``None``: not needed, or LoRA's adapters-off base)."""
    ema: Any
    """The EMA teacher (``None`` unless ``opsd_teacher`` is ``ema``)."""


def build_models(cfg: Any, acc: Any, weights: str) -> Models:
    """Load the policy (``weights`` dtype), adapt it, and set up data parallelism as launched.

    Plain or DDP (``accelerate launch`` without FSDP): the reference and the EMA teacher are copies
    of the policy. FSDP (:mod:`xtree_gym.agents.run.sharding`): they are built sharded from the
    start (:func:`_sharded_twin`) -- no rank ever holds a whole copy of them. A model folder is read
    sharded too (:func:`_sliced_policy`); a model loaded whole (tiny-random, a hub id) is read in the
    low dtype under mixed precision and only its shards are cast to the float32 master dtype.
    """
    from ..run.sharding import plan, shard

    how = plan(acc)
    low = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(str(acc.mixed_precision))
    mixed = str(acc.mixed_precision)
    needs_base = cfg.kl_coef > 0 or (cfg.opsd != "none" and cfg.opsd_teacher == "base")
    wants_ema = cfg.opsd != "none" and cfg.opsd_teacher == "ema"
    master = getattr(torch, weights)
    load_dtype = low if how == "own" and low is not None else master
    sliced = _sliced_policy(cfg, acc, mixed, master) if how == "own" else None
    if sliced is not None:  # sharded as it was read: no rank held the whole model
        model, tokenizer = sliced
    else:
        model, tokenizer = load_policy(
            cfg.model, device=acc.device, dtype=load_dtype, seed=cfg.seed, attn=cfg.attn
        )
        model = adapt_policy(model, cfg)  # LoRA adapters, gradient checkpointing
    if how == "none":
        ref = frozen_copy(model, dtype=low) if needs_base and not cfg.lora_r else None
        ema = frozen_copy(model) if wants_ema else None
        opt = torch.optim.AdamW(_trainable(model), lr=cfg.lr, weight_decay=cfg.weight_decay)
        model, opt = acc.prepare(model, opt)
        return Models(model, opt, tokenizer, ref, ema)
    if how == "own":
        if sliced is None:
            shard(model, mixed, master=master)
        opt = acc.prepare(torch.optim.AdamW(_trainable(model), lr=cfg.lr, weight_decay=cfg.weight_decay))
    else:  # Accelerate shards the policy in prepare
        opt = torch.optim.AdamW(_trainable(model), lr=cfg.lr, weight_decay=cfg.weight_decay)
        model, opt = acc.prepare(model, opt)
    policy = acc.unwrap_model(model)
    ref = _sharded_twin(cfg, policy, low or master, adapt=False) if needs_base and not cfg.lora_r else None
    ema = _sharded_twin(cfg, policy, master, adapt=True) if wants_ema else None
    return Models(model, opt, tokenizer, ref, ema)


def _sliced_policy(cfg: Any, acc: Any, mixed: str, master: torch.dtype) -> tuple[Any, Any] | None:
    """The policy built on the meta device, sharded, and filled with this rank's rows of the checkpoint
    (:mod:`xtree_gym.agents.model.sharded_load`); ``None`` where it must be loaded whole (tiny-random...).

    Read in the master dtype straight away: no rank ever holds the whole model, so nothing is saved
    by reading it in the low precision first -- and the values are those one process loads.
    """
    from ..model.sharded_load import load_sharded
    from ..run.sharding import shard

    got = load_sharded(
        cfg.model, device=acc.device, dtype=master, attn=cfg.attn,
        adapt=lambda m: adapt_policy(m, cfg), shard=lambda m: shard(m, mixed, master=master),
    )  # fmt: skip
    if got is not None and got[1].pad_token_id is None:
        got[1].pad_token = got[1].eos_token
    return got


def _trainable(model: Any) -> list[Any]:
    return [p for p in model.parameters() if p.requires_grad]


def _sharded_twin(cfg: Any, policy: Any, dtype: torch.dtype, adapt: bool) -> Any:
    """A frozen copy of the sharded ``policy`` that never exists whole: the same model built on the meta
    device (LoRA-adapted if ``adapt``), sharded, given memory shard by shard, and filled from the
    policy's shards and buffers. Built before any update (and before a resume loads the checkpoint),
    it is the warm start: the KL reference, or the EMA teacher's first value.
    """
    from ..run.sharding import shard

    base = policy.get_base_model() if hasattr(policy, "get_base_model") else policy
    with torch.random.fork_rng(devices=[]), torch.device("meta"):  # draws nothing from the run's RNG
        twin = type(base)(base.config).to(dtype)
        if adapt and cfg.lora_r:
            from ..model.lora import apply_lora

            twin = apply_lora(twin, r=cfg.lora_r, alpha=cfg.lora_alpha, targets=cfg.lora_targets)
    twin.eval()
    for p in twin.parameters():
        p.requires_grad_(False)
    shard(twin, frozen=True)
    device = next(policy.parameters()).device
    twin.to_empty(device=device)
    with torch.no_grad():
        for e, p in zip(twin.parameters(), policy.parameters(), strict=True):
            e.copy_(p.detach())
        for (name, b), (other, c) in zip(twin.named_buffers(), policy.named_buffers(), strict=True):
            if name != other or b.shape != c.shape:
                raise RuntimeError(f"the frozen copy's buffer {name} does not match the policy's {other}")
            b.copy_(c)
    return twin


def sequence_logps(
    model: Any, batch: Batch, temperature: float, *, entropy: bool = False
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Logprobs of ``batch.labels`` ``[B, L-1]`` (and entropies when asked) on ``batch.mask``'s positions.

    Logits are formed only where the mask is set (:mod:`.logits`); the other positions hold 0.
    Models without an output head to restrict take :func:`full_sequence_logps`.
    """
    from ..model.logits import completion_logps

    got = completion_logps(
        model, batch.input_ids, batch.attention_mask, batch.labels, batch.mask, temperature, entropy=entropy
    )
    if got is not None:
        return got
    return full_sequence_logps(model, batch, temperature, entropy=entropy)


def full_sequence_logps(
    model: Any, batch: Batch, temperature: float, *, entropy: bool = False
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Per-position logprobs of ``batch.labels`` ``[B, L-1]`` from full-vocabulary logits everywhere."""
    out = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask, use_cache=False)
    logits = out.logits[:, :-1]
    logp = token_logps(logits, batch.labels, temperature)
    ent = token_entropy(logits.detach(), temperature) if entropy else None
    return logp, ent


@torch.no_grad()
def ema_update(ema: Any, model: Any, decay: float) -> None:
    """``θ̄ ← d·θ̄ + (1 − d)·θ`` parameter by parameter."""
    for e, p in zip(ema.parameters(), model.parameters()):
        e.mul_(decay).add_(p.detach().to(e.dtype), alpha=1.0 - decay)
