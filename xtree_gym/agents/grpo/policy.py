"""Policy plumbing every trainer shares: the Accelerator, dtype, model + frozen copies, logprobs, EMA.

GRPO (:mod:`.trainer`), SFT and offline node RL build on these; none of them knows a loss.
"""

from __future__ import annotations

import copy
from typing import Any

import torch

from .losses import token_entropy, token_logps
from .rows import Batch


def make_accelerator(cpu: bool | None = None, mixed_precision: str = "no") -> Any:
    """An :class:`accelerate.Accelerator` (CPU when no GPU is visible or ``cpu=True``).

    ``mixed_precision`` (``no``, ``bf16``, ``fp16``) is Accelerate's autocast; under
    ``accelerate launch`` the launcher's config (FSDP, DeepSpeed...) applies as well.
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
