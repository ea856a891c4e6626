"""Policy plumbing every trainer shares: the Accelerator, dtype, model + frozen copies, logprobs, EMA.

GRPO (:mod:`.trainer`), SFT and offline node RL build on these; none of them knows a loss.
"""

from __future__ import annotations

import copy
from typing import Any

import torch

from ..errors import ConfigError
from .losses import token_entropy, token_logps
from .rows import Batch


def make_accelerator(cpu: bool | None = None) -> Any:
    """An :class:`accelerate.Accelerator` (CPU when no GPU is visible or ``cpu=True``)."""
    from accelerate import Accelerator

    if cpu is None:
        cpu = not torch.cuda.is_available()
    return Accelerator(cpu=cpu)


def resolve_dtype(name: str | None, device: torch.device) -> torch.dtype:
    """``float32`` on CPU and ``bfloat16`` on GPU unless named.

    Example:
        >>> resolve_dtype(None, torch.device("cpu")), resolve_dtype("bfloat16", torch.device("cpu"))
        (torch.float32, torch.bfloat16)
    """
    if name is None:
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    value = getattr(torch, name, None)
    if not isinstance(value, torch.dtype):
        raise ConfigError(f"dtype = {name!r}", fix="use float32, bfloat16 or float16")
    return value


def load_policy(name: str, *, device: torch.device, dtype: torch.dtype, seed: int) -> tuple[Any, Any]:
    """The trainable policy and its tokenizer (through :func:`xtree_gym.agents.models.load_model`)."""
    from .models import load_model

    model, tokenizer = load_model(name, device=str(device), dtype=dtype, seed=seed)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return model, tokenizer


def frozen_copy(model: Any) -> Any:
    """A gradient-free copy in eval mode (the KL reference / the EMA teacher)."""
    twin = copy.deepcopy(model)
    twin.eval()
    for p in twin.parameters():
        p.requires_grad_(False)
    return twin


def sequence_logps(
    model: Any, batch: Batch, temperature: float, *, entropy: bool = False
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Per-position logprobs of ``batch.labels`` ``[B, L-1]`` (and entropies when asked)."""
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
