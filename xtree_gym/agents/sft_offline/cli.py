"""``xtree train sft`` and ``xtree train offline`` (added to the ``train`` group through its hook)."""

from __future__ import annotations

import argparse
import json
from typing import Any


def register_train(train_sub: Any) -> None:
    from ..grpo.cli import add_train_command
    from .offline import OfflineConfig
    from .sft import SFTConfig

    add_train_command(
        train_sub, "sft", SFTConfig, run_sft, help="SFT on rows from `xtree sft-rows` (targets only)"
    )
    p = add_train_command(
        train_sub,
        "offline",
        OfflineConfig,
        run_offline,
        help="offline node RL: GRPO on node instances replayed from a gold corpus (Eq. 2)",
    )
    # the flag name; the field is corpus_domain because GRPOConfig.domain() is a method
    p.add_argument(
        "--domain",
        dest="corpus_domain",
        default=argparse.SUPPRESS,
        help="canonicalizer for steps without a 'token'",
    )


def run_sft(cfg: Any) -> int:
    from .sft import train_sft

    out = train_sft(cfg)
    if out.get("finished"):
        print(f"{out['output_dir']}: already finished at step {out['step']}; nothing to do -- pass --epochs N "
              "(more than the run's) with --resume to train on")  # fmt: skip
        return 0
    keys = ("step", "epoch", "loss", "initial_loss", "final_loss", "rows", "skipped_rows")
    print(json.dumps({k: out.get(k) for k in keys}))
    print(f"wrote {out['output_dir']}/metrics.jsonl and checkpoint-{int(out.get('step', 0)):06d}")
    return 0


def run_offline(cfg: Any) -> int:
    import sys

    from ..grpo.cli import finished_note, rollout_cost
    from .offline import instance_summary
    from .offline_trainer import OfflineTrainer

    trainer = OfflineTrainer(cfg)
    done = finished_note(trainer)
    if done and trainer.acc.is_main_process:
        print(done)
        return 0
    if trainer.acc.is_main_process:
        print(rollout_cost("offline", trainer.cfg) + f"; starting at step {trainer.step}", file=sys.stderr)
        from pathlib import Path

        from ...corpus.io import atomic_write_text

        out = Path(trainer.cfg.output_dir)
        atomic_write_text(out / "config.json", json.dumps(trainer.cfg.to_dict(), indent=1) + "\n")
        print(json.dumps(instance_summary(trainer.instances)))
    lines = trainer.train()
    if trainer.acc.is_main_process:
        last = lines[-1] if lines else {"step": trainer.step}
        print(json.dumps({k: last.get(k) for k in ("step", "reward", "win_rate", "loss", "tokens")}))
        print(f"wrote {trainer.cfg.output_dir}/metrics.jsonl and checkpoint-{trainer.step:06d}")
    return 0
