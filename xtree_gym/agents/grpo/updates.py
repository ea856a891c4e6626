"""PPO-style updates of one step: mini-batches × epochs over the step's rows, one π_old.

``mini_batch_size`` counts *training rows* (one per turn with ``rows turn``, one per episode with
``rows episode``) over all ranks, as verl-agent's turn-level batches do (Table 7's mini-batch of
256 / 64 is larger than a step's 64 / 128 episodes, so it can only count rows). A step makes
``M = ceil(rows / mini_batch_size)`` updates per epoch (each rank splits its own rows into M
near-equal parts, so every rank takes part in every update), ``ppo_epochs`` times, the rows
shuffled per epoch from ``(seed, step, epoch, rank)``. Each update is :meth:`GRPOTrainer.update`
on its part: its own loss normalisation, clipping, AdamW step. ``loss_norm token`` normalises an
update by its own tokens; ``trl-dapo`` by the step's tokens ÷ M for every update, as TRL divides its
generation batch's tokens by ``steps_per_generation`` (the two differ when mini-batches differ in
tokens).

π_old: ``old_logprobs rollout`` uses the generator's logprobs as recorded; ``recompute`` makes one
no-grad pass with the weights before the first update and keeps those for every update, so from
the second update on the ratio moves away from 1 and the clip can act. With one update per step
(``M = 1``, one epoch) nothing changes: it is exactly the single update the trainer always made.
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Sequence
from typing import Any

import torch

from ..run.metrics import reduce_sums
from .rows import Row, collate, micro_batches

MEAN_KEYS = ("loss", "pg_loss", "opsd", "grad_norm")
"""Per-update statistics averaged over the step's updates (the rest are token sums)."""


def split_rows(n_rows: int, parts: int, seed: int | None) -> list[list[int]]:
    """Row indices in ``parts`` near-equal mini-batches (shuffled first when ``seed`` is given).

    Example:
        >>> split_rows(7, 3, None)
        [[0, 1, 2], [3, 4], [5, 6]]
        >>> sorted(sum(split_rows(7, 3, seed=1), [])) == list(range(7))
        True
    """
    order = list(range(n_rows))
    if seed is not None:
        random.Random(seed).shuffle(order)
    size, extra = divmod(n_rows, parts)
    out, start = [], 0
    for k in range(parts):
        end = start + size + (1 if k < extra else 0)
        out.append(order[start:end])
        start = end
    return out


def updates_per_epoch(total_rows: float, mini_batch_size: int) -> int:
    """``M``: 1 when ``mini_batch_size`` is 0 (off) or covers the step.

    Example:
        >>> updates_per_epoch(10, 0), updates_per_epoch(10, 4), updates_per_epoch(10, 64)
        (1, 3, 1)
    """
    if mini_batch_size <= 0 or total_rows <= mini_batch_size:
        return 1
    return math.ceil(total_rows / mini_batch_size)


@torch.no_grad()
def recompute_old_logprobs(tr: Any, rows: Sequence[Row]) -> list[Row]:
    """Copies of ``rows`` whose ``old_logprobs`` are the current weights' (one no-grad pass)."""
    pad = int(tr.tokenizer.pad_token_id)
    from .policy import sequence_logps

    out: list[Row] = []
    padded, batches = tr.lockstep(list(rows), micro_batches(rows, tr.cfg.micro_batch_tokens))
    for idx in batches:  # under FSDP padded to the same count on every rank (forwards are collective)
        part = [padded[j] for j in idx]
        batch = collate(part, pad, device=tr.acc.device)
        logp = (sequence_logps(tr.model, batch, tr.cfg.temperature)[0] * batch.mask).float().cpu()
        for b, row in enumerate(part):
            if idx[b] >= len(rows):  # a placeholder
                continue
            old = [0.0, *logp[b, : len(row) - 1].tolist()]
            out.append(
                dataclasses.replace(row, old_logprobs=[x if t else 0.0 for x, t in zip(old, row.target)])
            )
    return out


def ppo_updates(tr: Any, rows: Sequence[Row], step: int) -> tuple[dict[str, float], list[dict[str, float]]]:
    """All updates of one step on this rank's ``rows``: ``(step statistics, one dict per update)``.

    The step statistics sum the token sums of every update divided by ``ppo_epochs`` (so per-token
    means stay means over the step's tokens) and average ``MEAN_KEYS``; ``updates`` counts them.
    """
    cfg = tr.cfg
    real = [r for r in rows if r.weight]
    counts = reduce_sums({"rows": float(len(real)), "tokens": float(sum(r.n_targets for r in real))}, tr.acc)
    parts = updates_per_epoch(counts["rows"], cfg.mini_batch_size)
    norm = {"step_tokens": counts["tokens"], "updates": float(parts)}  # read by loss_norm trl-dapo only
    if parts == 1 and cfg.ppo_epochs == 1:  # today's single update, untouched
        out = tr.update(rows)
        return {**out, "updates": 1.0}, [out]
    stored = cfg.old_logprobs == "rollout"
    if not stored:
        real, stored = recompute_old_logprobs(tr, real), True
    per_update: list[dict[str, float]] = []
    for epoch in range(cfg.ppo_epochs):
        seed = ((cfg.seed * 1_000_003 + step) * 97 + epoch) * 64 + tr.acc.process_index if parts > 1 else None
        for idx in split_rows(len(real), parts, seed):
            per_update.append(tr.update([real[j] for j in idx], stored_old=stored, norm=norm))
    return combine(per_update, cfg.ppo_epochs), per_update


def combine(per_update: Sequence[dict[str, float]], epochs: int) -> dict[str, float]:
    """One step's statistics from its updates (see :func:`ppo_updates`).

    Example:
        >>> combine([{"loss": 1.0, "tokens": 4.0}, {"loss": 3.0, "tokens": 4.0}], epochs=2)
        {'loss': 2.0, 'tokens': 4.0, 'updates': 2.0}
    """
    out: dict[str, float] = {}
    for part in per_update:
        for k, v in part.items():
            out[k] = out.get(k, 0.0) + v
    n = max(len(per_update), 1)
    for k in out:
        out[k] = out[k] / n if k in MEAN_KEYS else out[k] / epochs
    out["updates"] = float(len(per_update))
    return out
