"""PPO-style updates of one step: mini-batches × epochs over the step's rows, one π_old.

``mini_batch_size`` counts *training rows* (one per turn with ``rows turn``, one per episode with
``rows episode``) over all ranks, as verl-agent's turn-level batches do (Table 7's mini-batch of
256 / 64 is larger than a step's 64 / 128 episodes, so it can only count rows). A step makes
``M = ceil(rows / mini_batch_size)`` updates per epoch, ``ppo_epochs`` times.

The mini-batches do not depend on the number of processes: every rank gathers the step's rows
(:func:`gather_rows`), puts them in one global order by each row's ``key`` (task of the step,
member, turn: :func:`~.rows.place_rows`), shuffles that order from ``(seed, step, epoch)`` and cuts
it into the same ``M`` near-equal mini-batches (:func:`global_mini_batches`) at any world size. Each
rank computes its contiguous ``world``-th of each mini-batch (:func:`rank_slice`; shares differ by at
most one row, a rank may have none), and :meth:`GRPOTrainer.update` normalises the loss by the
counts of the whole mini-batch summed over the ranks. So N processes make the optimizer steps one
process makes, and a run resumed at another world size continues the same run.

Each update is :meth:`GRPOTrainer.update` on its mini-batch: its own loss normalisation, clipping,
AdamW step. ``loss_norm token`` normalises an update by its own tokens; ``sequence`` by its own rows;
``trl-dapo`` by the step's tokens ÷ M for every update, as TRL divides its generation batch's tokens
by ``steps_per_generation`` (token and trl-dapo differ when mini-batches differ in tokens). All three
count the whole mini-batch (every rank), so none depends on the world size.

π_old: ``old_logprobs rollout`` uses the generator's logprobs as recorded; ``recompute`` makes one
no-grad pass with the weights before the first update (each rank on its own rows, before the
gather) and keeps those for every update, so from the second update on the ratio moves away from 1
and the clip can act. With one update per step (``M = 1``, one epoch) nothing changes: it is exactly
the single update the trainer always made.
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


def epoch_seed(seed: int, step: int, epoch: int) -> int:
    """The shuffle seed of one epoch's mini-batches: ``(seed, step, epoch)``, never the rank.

    Example:
        >>> epoch_seed(11, 1, 0) == epoch_seed(11, 1, 0) != epoch_seed(11, 1, 1)
        True
    """
    # × 64 (+ rank 0): the seed rank 0 used before, so a 1-process run shuffles as it did
    return ((seed * 1_000_003 + step) * 97 + epoch) * 64


def global_mini_batches(keys: Sequence[Sequence[int]], parts: int, seed: int | None) -> list[list[int]]:
    """The step's ``parts`` mini-batches as indices into ``keys``: key order, shuffled by ``seed``, cut.

    Only the set of keys matters, not the order they come in (so not which rank held which row):
    the rows are sorted by key first, then shuffled and cut by :func:`split_rows`.

    Example:
        >>> global_mini_batches([(1, 0), (0, 1), (0, 0)], 2, None)  # key order: 2, 1, 0
        [[2, 1], [0]]
        >>> global_mini_batches([(0, 0), (1, 0), (0, 1)], 2, None)
        [[0, 2], [1]]
    """
    canon = sorted(range(len(keys)), key=lambda i: tuple(keys[i]))
    return [[canon[j] for j in part] for part in split_rows(len(keys), parts, seed)]


def rank_slice(batch: Sequence[int], rank: int, world: int) -> list[int]:
    """Rank ``rank``'s share of a mini-batch: its ``rank``-th contiguous part of ``world`` near-equal ones.

    The shares of the ranks are disjoint, in order, their union is ``batch``, and they differ by at
    most one row (a rank may get none when the mini-batch has fewer rows than ranks). Contiguous, so
    a rank's micro-batches are runs of the mini-batch as one process cuts it.

    Example:
        >>> [rank_slice([7, 8, 9, 10, 11], r, 2) for r in range(2)]
        [[7, 8, 9], [10, 11]]
        >>> [rank_slice([7], r, 2) for r in range(2)]
        [[7], []]
    """
    size, extra = divmod(len(batch), world)
    start = rank * size + min(rank, extra)
    return list(batch[start : start + size + (1 if rank < extra else 0)])


def gather_rows(rows: Sequence[Row], acc: Any) -> list[Row]:
    """Every rank's ``rows``, rank 0's first, on every rank (``rows`` itself on one process).

    Sent as plain dicts of lists and numbers (``all_gather_object``), rebuilt as :class:`Row`.
    """
    if acc.num_processes == 1:
        return list(rows)
    from accelerate.utils import gather_object

    return [Row(**d) for d in gather_object([dataclasses.asdict(r) for r in rows])]


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
    """All updates of one step, ``rows`` being this rank's: ``(step statistics, one dict per update)``.

    With one update per epoch each rank trains on its own rows (their union is the step); with
    ``M > 1`` the rows are gathered and each rank trains on its slice of every global mini-batch.

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
    rank, world = 0, 1
    if parts > 1:  # one global order of every rank's rows: the same mini-batches at any world size
        real, rank, world = gather_rows(real, tr.acc), tr.acc.process_index, tr.acc.num_processes
    keys = [r.key for r in real]
    per_update: list[dict[str, float]] = []
    for epoch in range(cfg.ppo_epochs):
        seed = epoch_seed(cfg.seed, step, epoch) if parts > 1 else None
        for batch in global_mini_batches(keys, parts, seed):
            mine = [real[j] for j in rank_slice(batch, rank, world)]
            per_update.append(tr.update(mine, stored_old=stored, norm=norm))
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
