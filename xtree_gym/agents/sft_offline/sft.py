"""``xtree train sft``: supervised fine-tuning on SFT rows (App. D), loss on target tokens only.

Thin by design: rows from :mod:`xtree_gym.agents.sft_offline.rows` become the trainer's
:class:`~xtree_gym.agents.grpo.rows.Row` (target mask = the row's ``loss_mask``), then the same pieces
as ``xtree train rlvr`` -- token-budget micro-batches, padded batches, per-token log-probs, the
step-wide token-mean weights, AdamW with clipping, checkpoints and ``metrics.jsonl`` -- with the
RL terms left out: the loss is the mean negative log-likelihood of the target tokens.

Follow one step: ``batch_size`` rows (seeded shuffle per epoch) --> micro-batches of at most
``micro_batch_tokens`` --> ``Σ −log π(target) · w`` (``w = 1 / target tokens of the step``)
accumulated --> clip --> AdamW --> one line of ``metrics.jsonl``.
"""

from __future__ import annotations

import dataclasses
import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...errors import ConfigError

if TYPE_CHECKING:  # the rows module pulls in numpy and the harnesses: imported when training starts
    from .rows import SFTRow

SFT_KEYS = ("step", "epoch", "loss", "rows", "tokens", "target_tokens", "lr", "grad_norm", "seconds")
"""Keys on every line of an SFT run's ``metrics.jsonl``."""


@dataclass
class SFTConfig:
    """Supervised fine-tuning on rows (Table 6's warm start: 5 epochs, lr 1e-5, batch 256).

    Example:
        >>> SFTConfig(rows="rows.jsonl").epochs, SFTConfig(rows="rows.jsonl").lr
        (5, 1e-05)
    """

    rows: str = ""
    """Rows file from ``xtree sft-rows`` (ids are made with the model's tokenizer when it has none)."""
    model: str = "tiny-random"
    """Start weights: an HF folder, ``smollm2`` or ``tiny-random``."""
    dtype: str | None = None
    """Torch dtype of the weights; None: float32 on CPU, bfloat16 on GPU."""
    epochs: int = 5
    """Passes over the rows (Table 6: 5 on ScienceWorld and WebShop)."""
    lr: float = 1e-5
    """AdamW learning rate, constant (Table 6: 1e-5)."""
    weight_decay: float = 0.0
    """AdamW weight decay."""
    max_grad_norm: float = 1.0
    """Gradient clipping by global norm (0 = off)."""
    batch_size: int = 256
    """Rows per optimizer step (Table 6's global batch of 256 sequences)."""
    micro_batch_tokens: int = 4096
    """Token budget of one micro-batch (rows × padded length); gradients accumulate over them."""
    max_len: int = 4096
    """Longest row in tokens (Table 6: 4,096 ScienceWorld); longer rows are skipped and counted."""
    warm_start: int = 0
    """Train on the rows of only this many trajectories, sampled with ``seed`` (0 = all; the paper: 200 / 500)."""
    output_dir: str = "runs/sft"
    """Run folder: ``metrics.jsonl``, ``checkpoint-*/``, ``config.json``."""
    resume: str | None = None
    """Continue from a run folder (its latest checkpoint) or a ``checkpoint-*`` folder."""
    save_every: int = 0
    """Checkpoint every K steps (0 = at the end of each epoch); always after the last step."""
    keep_checkpoints: int = 2
    """Checkpoints kept (oldest deleted first; 0 = keep all)."""
    seed: int = 0
    """Seeds the warm-start sample, the per-epoch shuffles and ``tiny-random``'s init."""
    progress: bool = True
    """Show a progress bar on stderr."""
    tensorboard: bool = True
    """Also write TensorBoard events when ``tensorboard`` is installed."""

    def check(self) -> SFTConfig:
        """Type, finiteness and range checks; one :class:`ConfigError` naming the field."""
        from ..run.validate import check_fields

        check_fields(self)
        if not self.rows:
            raise ConfigError("no rows file", fix="pass --rows rows.jsonl (from `xtree sft-rows`)")
        for name in ("epochs", "batch_size", "micro_batch_tokens", "max_len"):
            if int(getattr(self, name)) < 1:
                raise ConfigError(f"{name} = {getattr(self, name)!r} must be >= 1")
        for name in ("lr", "weight_decay", "max_grad_norm", "warm_start", "save_every", "keep_checkpoints"):
            if float(getattr(self, name)) < 0:
                raise ConfigError(f"{name} = {getattr(self, name)!r} must be >= 0")
        return self


def warm_start_rows(rows: Sequence[SFTRow], n: int, seed: int = 0) -> list[SFTRow]:
    """The rows of ``n`` trajectories drawn uniformly (seeded) from those the rows cover; all when ``n`` is 0.

    Example:
        >>> from xtree_gym.agents.sft_offline.rows import SFTRow
        >>> rs = [SFTRow(f"t{i}@0:1#node", "node", f"t{i}", 0, 1, "", [], "x") for i in range(5)]
        >>> [r.trajectory_id for r in warm_start_rows(rs, 2, seed=0)]
        ['t3', 't4']
    """
    if n <= 0:
        return list(rows)
    ids = sorted({r.trajectory_id for r in rows})
    if n > len(ids):
        raise ConfigError(
            f"warm_start = {n} but the rows cover {len(ids)} trajectories", fix=f"use <= {len(ids)}"
        )
    keep = set(random.Random(seed).sample(ids, n))
    return [r for r in rows if r.trajectory_id in keep]


def to_train_rows(rows: Sequence[SFTRow], tokenizer: Any, max_len: int) -> tuple[list[Any], int]:
    """The trainer's :class:`~xtree_gym.agents.grpo.rows.Row` for each SFT row (tokenized if needed); (rows, skipped)."""
    from ..grpo.rows import Row
    from .rows import tokenize_row

    out, skipped = [], 0
    for r in rows:
        if r.input_ids is None:
            r = tokenize_row(dataclasses.replace(r), tokenizer)
        ids, mask = list(r.input_ids or []), list(r.loss_mask or [])
        if len(ids) > max_len or not any(mask):
            skipped += 1
            continue
        out.append(Row(input_ids=ids, target=[bool(m) for m in mask], old_logprobs=[0.0] * len(ids)))
    return out, skipped


def sft_step(
    model: Any,
    rows: Sequence[Any],
    *,
    pad_id: int,
    micro_batch_tokens: int,
    device: Any,
    on_batch: Callable[[int], None] | None = None,
) -> dict[str, float]:
    """Accumulate the target-token mean NLL of ``rows`` over micro-batches (backward only; no optimizer step).

    Every target token of the step weighs ``1 / (target tokens of the step)``, so the accumulated
    gradient is the gradient of the step's token-mean loss whatever the micro-batching.
    ``on_batch(k)`` is told after each micro-batch of ``k`` rows (a step of 256 long rows is minutes on CPU).
    """
    from ..grpo.losses import loss_weights, token_logps
    from ..grpo.rows import collate, micro_batches

    total = float(sum(r.n_targets for r in rows))
    loss_sum = 0.0
    for idx in micro_batches(rows, micro_batch_tokens):
        batch = collate([rows[i] for i in idx], pad_id, device=device)
        logits = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits[:, :-1]
        nll = -token_logps(logits, batch.labels)
        w = loss_weights(batch.mask, norm="token", total_tokens=total, total_rows=len(rows))
        loss = (nll * w).sum()
        loss.backward()
        loss_sum += float(loss.detach())
        if on_batch is not None:
            on_batch(len(idx))
    return {"loss": loss_sum, "target_tokens": total, "tokens": float(sum(len(r) for r in rows))}


def evaluate_loss(
    model: Any,
    rows: Sequence[Any],
    *,
    pad_id: int,
    micro_batch_tokens: int,
    device: Any,
    desc: str = "",
    progress: bool | None = False,
) -> float:
    """The target-token mean NLL of ``rows`` under ``model``, no gradient (for before/after checks).

    A pass over every row is as long as an epoch's forward passes: ``desc``/``progress`` show a bar
    moving per micro-batch.
    """
    import torch

    from ...progress import progress as progress_bar
    from ..grpo.losses import token_logps
    from ..grpo.rows import collate, micro_batches

    total, n = 0.0, 0.0
    batches = list(micro_batches(rows, micro_batch_tokens))
    with torch.no_grad():
        for idx in progress_bar(batches, desc=desc or "loss", enabled=progress):
            batch = collate([rows[i] for i in idx], pad_id, device=device)
            logits = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits[:, :-1]
            total += float((-token_logps(logits, batch.labels) * batch.mask).sum())
            n += float(batch.mask.sum())
    return total / max(n, 1.0)


def check_tokenization(rows: Sequence[SFTRow], tokenizer: Any, vocab_size: int, where: str) -> None:
    """Refuse pre-tokenized rows that do not belong to this model: ids past its vocabulary, or ids
    its tokenizer would not produce (rows built with ``--tokenizer`` for another model).

    Rows without ids are tokenized here by the model's own tokenizer, so they always fit.
    """
    from .rows import tokenize_row

    given = [r for r in rows if r.input_ids]
    if not given:
        return
    top = max(max(r.input_ids or [0]) for r in given)
    rebuild = (
        "rebuild the rows with `xtree sft-rows ... --tokenizer M` for this --model M, "
        "or without --tokenizer (they are then tokenized for the model at training time)"
    )
    if top >= vocab_size:
        raise ConfigError(
            f"row token ids go up to {top}, but the model's vocabulary has {vocab_size} entries",
            where=where,
            fix=rebuild,
        )
    probe = tokenize_row(dataclasses.replace(given[0], input_ids=None, loss_mask=None), tokenizer)
    if probe.input_ids != given[0].input_ids:
        raise ConfigError(
            f"row {given[0].id!r} was tokenized by another tokenizer than the model's",
            where=where,
            fix=rebuild,
        )


def _say(message: str) -> None:
    import sys

    print(message, file=sys.stderr, flush=True)


def _quiet(message: str) -> None:
    pass


def _schedule(n_rows: int, cfg: SFTConfig) -> list[tuple[int, list[int]]]:
    """Every optimizer step as (epoch, row indices): a seeded shuffle per epoch, cut into batches."""
    steps = []
    for epoch in range(cfg.epochs):
        order = list(range(n_rows))
        random.Random(cfg.seed * 1_000_003 + epoch).shuffle(order)
        for b in range(0, n_rows, cfg.batch_size):
            steps.append((epoch, order[b : b + cfg.batch_size]))
    return steps


def train_sft(cfg: SFTConfig) -> dict[str, Any]:
    """Run SFT; returns the last metrics line plus ``output_dir``, ``skipped_rows``, ``initial_loss`` and
    ``final_loss`` (the target-token mean NLL over all rows before the first step and after the last)."""
    import torch

    from ..model.loading import load_model
    from ..run.checkpoint import find_checkpoint, load_model_weights, load_optimizer, read_state
    from ..run.metrics import MetricsWriter
    from ..run.runfolder import check_resume_config, refuse_existing_run
    from .rows import read_rows

    cfg.check()
    if not cfg.resume:
        refuse_existing_run(cfg.output_dir)
    say = _say if cfg.progress else _quiet
    device = "cuda" if torch.cuda.is_available() else "cpu"
    dtype = cfg.dtype or ("bfloat16" if device == "cuda" else None)
    say(f"sft: reading rows from {cfg.rows}")
    sft_rows = warm_start_rows(read_rows(cfg.rows), cfg.warm_start, cfg.seed)
    say(f"sft: loading model {cfg.model} on {device} (a first smollm2 load dequantizes its GGUF once)")
    model, tok = load_model(cfg.model, device=device, dtype=dtype, seed=cfg.seed)
    check_tokenization(sft_rows, tok, model.get_input_embeddings().num_embeddings, cfg.rows)
    say(f"sft: tokenizing {len(sft_rows)} rows")
    rows, skipped = to_train_rows(sft_rows, tok, cfg.max_len)
    if not rows:
        raise ConfigError(f"no row of {cfg.rows!r} fits max_len = {cfg.max_len}", fix="raise --max-len")
    pad_id = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    run = Path(cfg.output_dir)
    start = 0
    if cfg.resume:
        ckpt = find_checkpoint(cfg.resume)
        state = read_state(ckpt)
        check_resume_config(state.get("config", {}), dataclasses.asdict(cfg), where=str(ckpt))
        load_model_weights(model, ckpt)
        load_optimizer(ckpt, opt)
        start = int(state["step"])
    schedule = _schedule(len(rows), cfg)
    if start >= len(schedule):  # a finished run resumed: nothing to train, nothing to rewrite
        return {"step": start, "output_dir": str(run), "finished": True}
    tokens = sum(len(r.input_ids) for r in rows)
    _say(f"sft: {len(schedule) - start} optimizer steps left of {len(schedule)}: {len(rows)} rows ({tokens:,} tokens) "
         f"x {cfg.epochs} epoch(s) on {device}")  # fmt: skip
    writer = MetricsWriter(run, tensorboard=cfg.tensorboard)
    writer.truncate(start)
    _write_config(run, cfg)
    kw = {"pad_id": pad_id, "micro_batch_tokens": cfg.micro_batch_tokens, "device": device}
    shown = None if cfg.progress else False
    initial = math.nan
    if start == 0:
        t0 = time.perf_counter()
        initial = evaluate_loss(model, rows, **kw, desc="sft: loss before training", progress=shown)
        _say(training_estimate(time.perf_counter() - t0, cfg.epochs))
    line = _run_steps(model, opt, rows, schedule, start, cfg, writer, tok, kw)
    writer.close()
    final = evaluate_loss(model, rows, **kw, desc="sft: loss after training", progress=shown)
    return {
        **line,
        "output_dir": str(run),
        "skipped_rows": skipped,
        "initial_loss": initial,
        "final_loss": final,
    }


def training_estimate(forward_seconds: float, epochs: int) -> str:
    """The up-front cost of SFT from a measured speed: a step's forward + backward costs ~3 forward passes.

    Example:
        >>> training_estimate(40.0, 2)
        'sft: one forward pass over the rows took 40s, so training should take about 4m00s (3 passes a token x 2 epoch(s)), plus checkpoints'
    """
    from ...progress import format_seconds

    return (
        f"sft: one forward pass over the rows took {format_seconds(forward_seconds)}, so training should take about "
        f"{format_seconds(3 * forward_seconds * epochs)} (3 passes a token x {epochs} epoch(s)), plus checkpoints"
    )


def _run_steps(
    model: Any, opt: Any, rows: list[Any], schedule: list[tuple[int, list[int]]], start: int,
    cfg: SFTConfig, writer: Any, tok: Any, kw: dict[str, Any],
) -> dict[str, Any]:  # fmt: skip
    """The optimizer steps ``start+1 .. len(schedule)``, checkpointing as configured."""
    import torch

    from ...progress import Progress
    from ..run.checkpoint import save_checkpoint
    from ..run.guards import check_finite_step

    todo = sum(len(idx) for _, idx in schedule[start:])
    bar = Progress(total=todo, desc="sft rows", enabled=None if cfg.progress else False)
    line: dict[str, Any] = {}
    model.train()
    for step in range(start + 1, len(schedule) + 1):
        t0 = time.perf_counter()
        epoch, idx = schedule[step - 1]
        opt.zero_grad(set_to_none=True)
        stats = sft_step(model, [rows[i] for i in idx], **kw, on_batch=bar.update)
        bar.set_postfix(f"step {step}/{len(schedule)} loss {stats['loss']:.4f}")
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.max_grad_norm or float("inf"))
        check_finite_step(step, loss=stats["loss"], grad_norm=float(norm))
        opt.step()
        line = {"step": step, "epoch": epoch, "loss": stats["loss"], "rows": len(idx), "tokens": stats["tokens"],
                "target_tokens": stats["target_tokens"], "lr": cfg.lr, "grad_norm": float(norm),
                "seconds": time.perf_counter() - t0}  # fmt: skip
        writer.write(line)
        epoch_end = step == len(schedule) or schedule[step][0] != epoch
        if (
            step == len(schedule)
            or (cfg.save_every and step % cfg.save_every == 0)
            or (not cfg.save_every and epoch_end)
        ):
            state = {"config": dataclasses.asdict(cfg), "epoch": epoch}
            save_checkpoint(cfg.output_dir, step, model=model, tokenizer=tok, optimizer=opt, state=state,
                            keep=cfg.keep_checkpoints)  # fmt: skip
    bar.close()
    model.eval()
    return line


def _write_config(run: Path, cfg: SFTConfig) -> None:
    import json

    from ...corpus.io import atomic_write_text

    run.mkdir(parents=True, exist_ok=True)
    atomic_write_text(run / "config.json", json.dumps(dataclasses.asdict(cfg), indent=1) + "\n")
