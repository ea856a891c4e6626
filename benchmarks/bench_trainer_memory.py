"""Peak memory and time of ONE update: ours (completion-only logits) vs TRL's GRPOTrainer, same batch.

SmolLM2-135M (``--model smollm2``, vocab 49k), ``--rows`` rows of ``--prompt-tokens`` prompt +
``--completion-tokens`` completion tokens (random ids, seeded), advantages ±1, k3 KL to a frozen
reference (β = ``--kl``) on both sides, token-mean loss, AdamW, float32 on CPU (bf16 autocast on a
GPU). Each side runs in its own subprocess so that its peak is its own:

* **ours**: ``GRPOTrainer.update(rows)`` -- reference forward, policy forward/backward, step;
* **TRL**: ``trl.GRPOTrainer`` (``loss_type="dapo"``, ``optim="adamw_torch"`` and no gradient
  checkpointing, as ours; TRL's defaults are the fused AdamW and checkpointing on): the reference's per-token logprobs
  (``_get_per_token_logps_and_entropies`` on its ``ref_model``), ``compute_loss`` + backward, step;
* with ``--with-full-logits``: ours again on the former full-vocabulary-logit path.

Memory is the process's peak resident set (CPU, sampled every 5 ms) or ``max_memory_allocated``
(GPU) during the update -- weights, reference, gradients, AdamW state and activations -- and,
as ``update +``, that peak minus the figure just before the update. The last line is
``peak memory vs TRL: X.XX×`` (ours / TRL, the peaks). On CPU the peaks include each process's
libraries (TRL imports more), so the ``update +`` figures are printed too.

    python benchmarks/bench_trainer_memory.py [--rows 2] [--prompt-tokens 2048] [--completion-tokens 64]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

SIDES = ("ours", "trl", "ours-full-logits")


class PeakRSS:
    """The peak resident set size of this process while open (a 5 ms sampling thread; psutil)."""

    def __init__(self) -> None:
        import psutil

        self.proc = psutil.Process()
        self.peak = self.start = self.proc.memory_info().rss
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self.proc.memory_info().rss)
            time.sleep(0.005)

    def __enter__(self) -> PeakRSS:
        self.start = self.peak = self.proc.memory_info().rss
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self.proc.memory_info().rss)


def _data(args: argparse.Namespace, vocab: int) -> tuple[list[list[int]], list[list[int]], list[float]]:
    import random

    rng = random.Random(0)
    prompts = [[rng.randrange(100, vocab) for _ in range(args.prompt_tokens)] for _ in range(args.rows)]
    comps = [[rng.randrange(100, vocab) for _ in range(args.completion_tokens)] for _ in range(args.rows)]
    advs = [1.0 if i % 2 == 0 else -1.0 for i in range(args.rows)]
    return prompts, comps, advs


def _measure(fn: Any, cuda: bool) -> dict[str, float]:
    import torch

    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        t = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        secs = time.perf_counter() - t
        peak = torch.cuda.max_memory_allocated()
        return {"seconds": secs, "peak_gib": peak / 2**30, "update_gib": (peak - base) / 2**30}
    with PeakRSS() as mem:
        t = time.perf_counter()
        fn()
        secs = time.perf_counter() - t
    return {"seconds": secs, "peak_gib": mem.peak / 2**30, "update_gib": (mem.peak - mem.start) / 2**30}


def run_ours(args: argparse.Namespace, full_logits: bool) -> dict[str, float]:
    import torch

    from xtree_gym.agents.grpo import trainer as trainer_mod
    from xtree_gym.agents.grpo.config import GRPOConfig
    from xtree_gym.agents.grpo.policy import full_sequence_logps
    from xtree_gym.agents.grpo.rows import Row

    if full_logits:
        trainer_mod.sequence_logps = full_sequence_logps  # type: ignore[assignment]
    tmp = tempfile.mkdtemp(prefix="bench-mem-")
    budget = args.rows * (args.prompt_tokens + args.completion_tokens)
    cfg = GRPOConfig(
        model=args.model,
        kl_coef=args.kl,
        lr=1e-6,
        micro_batch_tokens=budget,
        output_dir=tmp,
        progress=False,
        tensorboard=False,
        dtype="auto",
    )
    tr = trainer_mod.GRPOTrainer(cfg)
    tr.model.train()
    prompts, comps, advs = _data(args, tr.policy.config.vocab_size)
    rows = [
        Row(p + c, [False] * len(p) + [True] * len(c), [0.0] * (len(p) + len(c)), advantage=a)
        for p, c, a in zip(prompts, comps, advs)
    ]
    out = _measure(lambda: tr.update(rows), torch.cuda.is_available())
    return out


def run_trl(args: argparse.Namespace) -> dict[str, float]:
    import torch
    from datasets import Dataset
    from trl import GRPOConfig as TRLConfig
    from trl import GRPOTrainer as TRLTrainer

    from xtree_gym.agents.model.loading import load_model

    cuda = torch.cuda.is_available()
    model, tok = load_model(args.model, device="cuda" if cuda else "cpu")
    tmp = tempfile.mkdtemp(prefix="bench-mem-trl-")
    targs = TRLConfig(
        output_dir=tmp,
        per_device_train_batch_size=args.rows,
        num_generations=args.rows,
        max_completion_length=args.completion_tokens,
        beta=args.kl,
        loss_type="dapo",
        learning_rate=1e-6,
        report_to="none",
        optim="adamw_torch",  # as ours (TRL defaults to the fused AdamW)
        gradient_checkpointing=False,  # as ours (TRL defaults to True)
        use_cpu=not cuda,
        bf16=cuda,
        logging_steps=1,
        save_strategy="no",
    )
    data = Dataset.from_dict({"prompt": ["x"] * args.rows})
    trainer = TRLTrainer(
        model=model,
        reward_funcs=lambda completions, **kw: [0.0] * len(completions),
        args=targs,
        train_dataset=data,
        processing_class=tok,
    )
    trainer.create_optimizer()
    trainer.current_gradient_accumulation_steps = 1
    dev = trainer.accelerator.device
    prompts, comps, advs = _data(args, model.config.vocab_size)
    inputs: dict[str, Any] = {
        "prompt_ids": torch.tensor(prompts, device=dev),
        "prompt_mask": torch.ones(args.rows, args.prompt_tokens, dtype=torch.long, device=dev),
        "completion_ids": torch.tensor(comps, device=dev),
        "completion_mask": torch.ones(args.rows, args.completion_tokens, dtype=torch.long, device=dev),
        "advantages": torch.tensor(advs, device=dev),
        "num_items_in_batch": torch.tensor(float(args.rows * args.completion_tokens), device=dev),
    }
    trainer.model.train()

    def update() -> None:
        if args.kl > 0:
            ids = torch.cat([inputs["prompt_ids"], inputs["completion_ids"]], dim=1)
            attn = torch.cat([inputs["prompt_mask"], inputs["completion_mask"]], dim=1)
            with torch.no_grad():
                inputs["ref_per_token_logps"] = trainer._get_per_token_logps_and_entropies(
                    trainer.ref_model, ids, attn, args.completion_tokens
                )[0]
        loss = trainer.compute_loss(trainer.model, inputs)
        trainer.accelerator.backward(loss)
        trainer.accelerator.clip_grad_norm_(trainer.model.parameters(), 1.0)
        trainer.optimizer.step()
        trainer.optimizer.zero_grad(set_to_none=True)

    return _measure(update, cuda)


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--rows", type=int, default=2)
    ap.add_argument("--prompt-tokens", type=int, default=2048)
    ap.add_argument("--completion-tokens", type=int, default=64)
    ap.add_argument("--kl", type=float, default=0.01, help="KL weight on both sides (0: no reference model)")
    ap.add_argument("--with-full-logits", action="store_true", help="also run ours on the full-logit path")
    ap.add_argument("--side", choices=SIDES, default=None, help=argparse.SUPPRESS)
    return ap.parse_args(argv)


def main() -> int:
    args = parse()
    if args.side:  # a child: one side, one JSON line
        res = run_trl(args) if args.side == "trl" else run_ours(args, args.side == "ours-full-logits")
        print("RESULT " + json.dumps(res), flush=True)
        return 0
    sides = ["ours", "trl"] + (["ours-full-logits"] if args.with_full_logits else [])
    print(
        f"load before: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f} (uptime, 1/5/15 min)"
    )
    print(
        f"{args.rows} rows x ({args.prompt_tokens} prompt + {args.completion_tokens} completion) tokens, "
        f"model {args.model}, kl {args.kl}"
    )
    results: dict[str, dict[str, float]] = {}
    for side in sides:
        cmd = [
            sys.executable,
            __file__,
            "--side",
            side,
            "--model",
            args.model,
            "--rows",
            str(args.rows),
            "--prompt-tokens",
            str(args.prompt_tokens),
            "--completion-tokens",
            str(args.completion_tokens),
            "--kl",
            str(args.kl),
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        line = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
        if proc.returncode or not line:
            print(proc.stderr[-3000:], file=sys.stderr)
            raise SystemExit(f"{side}: failed (exit {proc.returncode})")
        results[side] = json.loads(line[-1][len("RESULT ") :])
        r = results[side]
        print(
            f"{side:>17}: peak {r['peak_gib']:.2f} GiB (update +{r['update_gib']:.2f} GiB), update {r['seconds']:.1f} s"
        )
    print(f"load after: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}")
    print(f"update time vs TRL: {results['ours']['seconds'] / results['trl']['seconds']:.2f}×")
    print(f"update + vs TRL: {results['ours']['update_gib'] / results['trl']['update_gib']:.2f}×")
    print(f"peak memory vs TRL: {results['ours']['peak_gib'] / results['trl']['peak_gib']:.2f}×")
    return 0


if __name__ == "__main__":
    sys.exit(main())
