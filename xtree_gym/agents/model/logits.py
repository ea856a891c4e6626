"""Log-probs only where a loss is taken: the LM head on completion positions, log-softmax in chunks.

A turn row is 90-99 % prompt, and full-vocabulary logits at every prompt position are the
largest tensor of a step (vocab 49k, 2,048 tokens: 0.4 GB per float32 copy; vocab 152k and 16k
tokens: 10 GB). Here the model's own forward runs unchanged, but a forward pre-hook on its output
head (``get_output_embeddings()``) hands the head only the hidden states of the positions whose
next token is trained, ``[N, H]`` instead of ``[B, L, H]``, so the logits are ``[N, V]``. The head
runs inside the model's forward, so this also holds under FSDP (its weights are gathered there)
and with a LoRA-wrapped head. The float32 log-softmax then runs over chunks of
:data:`LOGIT_CHUNK` positions, each recomputed in the backward pass
(:func:`torch.utils.checkpoint.checkpoint`), so no float32 copy of all ``[N, V]`` is kept.

The result is the same ``[B, L-1]`` tensor as the full-logit path, with zeros off the mask:
every loss multiplies by the mask, so losses and gradients are equal (tested to 1e-6).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch.utils.checkpoint import checkpoint

LOGIT_CHUNK = 1024
"""Positions per float32 log-softmax chunk."""


def output_head(model: Any) -> Any:
    """The module that maps hidden states to logits (through DDP / FSDP / PEFT wrappers), or None."""
    seen = 0
    while seen < 8:  # DDP's .module; FSDP and PEFT forward get_output_embeddings themselves
        getter = getattr(model, "get_output_embeddings", None)
        if callable(getter):
            try:
                head = getter()
            except (AttributeError, NotImplementedError):
                head = None
            if isinstance(head, torch.nn.Module):
                return head
        inner = getattr(model, "module", None)
        if not isinstance(inner, torch.nn.Module):
            return None
        model, seen = inner, seen + 1
    return None


@contextmanager
def head_on_positions(model: Any, where: torch.Tensor) -> Iterator[bool]:
    """While open, ``model``'s output head sees only ``hidden[where]`` (``where``: bool ``[B, L-1]``).

    Yields False (and changes nothing) when the model has no output head to hook.
    """
    head = output_head(model)
    if head is None:
        yield False
        return
    rows, cols = torch.nonzero(where, as_tuple=True)

    def pick(_module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        hidden = args[0] if args else kwargs.pop("input")
        if hidden.dim() != 3 or hidden.shape[1] < where.shape[1]:
            raise RuntimeError(
                f"the output head got hidden states of shape {tuple(hidden.shape)}; "
                f"expected [B, >= {where.shape[1]}, H] (logits_to_keep must be 0)"
            )
        return (hidden[rows, cols], *args[1:]), kwargs

    handle = head.register_forward_pre_hook(pick, with_kwargs=True)
    try:
        yield True
    finally:
        handle.remove()


def _chunk_logps(logits: torch.Tensor, labels: torch.Tensor, temperature: float) -> torch.Tensor:
    x = logits.float()
    if temperature != 1.0:
        x = x / temperature
    return x.gather(-1, labels[:, None]).squeeze(-1) - torch.logsumexp(x, dim=-1)


def chunked_logps(
    logits: torch.Tensor, labels: torch.Tensor, temperature: float = 1.0, chunk: int = LOGIT_CHUNK
) -> torch.Tensor:
    """``log softmax(logits / T)[label]`` of ``[N, V]`` logits, float32, ``chunk`` rows at a time.

    Example:
        >>> logits = torch.tensor([[0.0, 0.0], [2.0, 0.0], [0.0, 1.0]])
        >>> [round(x, 4) for x in chunked_logps(logits, torch.tensor([0, 1, 1]), chunk=2).tolist()]
        [-0.6931, -2.1269, -0.3133]
    """
    parts = []
    for lo in range(0, logits.shape[0], chunk):
        piece, lab = logits[lo : lo + chunk], labels[lo : lo + chunk]
        if piece.requires_grad:  # keep only the chunk's input; recompute its float32 work in backward
            parts.append(checkpoint(_chunk_logps, piece, lab, temperature, use_reentrant=False))
        else:
            parts.append(_chunk_logps(piece, lab, temperature))
    if not parts:
        return logits.new_zeros((0,), dtype=torch.float32)
    return torch.cat(parts)


@torch.no_grad()
def chunked_entropy(logits: torch.Tensor, temperature: float = 1.0, chunk: int = LOGIT_CHUNK) -> torch.Tensor:
    """Entropy of each row's distribution of ``[N, V]`` logits, float32, ``chunk`` rows at a time.

    Example:
        >>> [round(x, 4) for x in chunked_entropy(torch.zeros(3, 4), chunk=2).tolist()]  # uniform: log 4
        [1.3863, 1.3863, 1.3863]
    """
    parts = []
    for lo in range(0, logits.shape[0], chunk):
        x = logits[lo : lo + chunk].float()
        if temperature != 1.0:
            x = x / temperature
        logp = torch.log_softmax(x, dim=-1)
        parts.append(-(logp.exp() * logp).sum(-1))
    return torch.cat(parts) if parts else logits.new_zeros((0,), dtype=torch.float32)


def completion_logps(
    model: Any,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    labels: torch.Tensor,
    mask: torch.Tensor,
    temperature: float,
    *,
    entropy: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None] | None:
    """``[B, L-1]`` logprobs (and entropies) computed on ``mask``'s positions only; zeros elsewhere.

    None when the model has no output head to restrict (the caller falls back to full logits).
    """
    where = mask > 0
    with head_on_positions(model, where) as hooked:
        if not hooked:
            return None
        out = model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False)
    logits = out.logits
    if logits.dim() != 2:
        raise RuntimeError(f"expected [N, V] logits from the restricted head, got {tuple(logits.shape)}")
    picked = chunked_logps(logits, labels[where], temperature)
    logp = torch.zeros(labels.shape, dtype=picked.dtype, device=picked.device)
    logp = logp.masked_scatter(where, picked)
    ent = None
    if entropy:
        ent = torch.zeros(labels.shape, dtype=torch.float32, device=picked.device)
        ent = ent.masked_scatter(where, chunked_entropy(logits.detach(), temperature))
    return logp, ent
