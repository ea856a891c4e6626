"""One GRPO update on a fixed batch, run alone or under ``accelerate launch --num_processes 2``.

Usage: python grpo_dist_step.py OUT_DIR. Each rank learns from its share of the groups (whole
groups, every world-th); rank 0 writes the updated weights to OUT_DIR/params.safetensors and
the step's metrics to OUT_DIR/metrics.json. tests/test_grpo_distributed.py compares the runs.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from pathlib import Path

from safetensors.torch import save_file

from xtree_gym.agents.grpo.config import GRPOConfig
from xtree_gym.agents.grpo.trainer import GRPOTrainer
from xtree_gym.agents.types import Episode, Turn

TEXTS = [
    "<action>look around</action>",
    "open door to kitchen",
    "<think>go</think>",
    "wait1",
    "x",
    "focus on pot",
]


def batch(tokenizer) -> list[Episode]:
    """4 groups x 2 members, 1-2 turns each, rewards that differ inside 3 groups."""
    eps = []
    for g in range(4):
        for m in range(2):
            turns = []
            for k in range(1 + (g + m) % 2):
                prompt = tokenizer.apply_chat_template(
                    [{"role": "user", "content": f"task {g} turn {k}: boil water"}],
                    add_generation_prompt=True,
                    tokenize=True,
                    return_dict=False,
                )
                comp = tokenizer.encode(TEXTS[(g * 2 + m + k) % len(TEXTS)], add_special_tokens=False)
                turns.append(Turn(list(prompt), comp, [0.0] * len(comp), "", "a", "", token=f"t{k}<x>"))
            won = (g + m) % 3 == 0 and g != 3
            eps.append(
                Episode(
                    f"{g}.{m}",
                    "env",
                    "boil",
                    "boil water",
                    0,
                    g,
                    m,
                    turns=turns,
                    success=won,
                    reward=float(won),
                )
            )
    return eps


def main(out: str) -> None:
    cfg = GRPOConfig(
        env="scienceworld",
        model="tiny-random",
        lr=1e-4,
        kl_coef=0.05,
        micro_batch_tokens=96,
        output_dir=str(Path(out) / "run"),
        progress=False,
        tensorboard=False,
        opsd="empty",
        opsd_c=0.1,
    )
    ppo = os.environ.get("XTREE_TEST_PPO")  # "MINI_BATCH_SIZE,PPO_EPOCHS" (tests/test_grpo_distributed.py)
    if ppo:
        size, epochs = (int(x) for x in ppo.split(","))
        cfg = dataclasses.replace(cfg, mini_batch_size=size, ppo_epochs=epochs)
    tr = GRPOTrainer(cfg)
    init = {k: v.detach().cpu().clone() for k, v in tr.policy.state_dict().items()}
    eps = batch(tr.tokenizer)
    rank, world = tr.acc.process_index, tr.acc.num_processes
    mine = [e for e in eps if e.group % world == rank]
    stats = tr.learn(mine)  # a first step: KL is 0, the policy moves away from the reference
    stats2 = tr.learn(mine)  # a second: KL and its gradient are non-zero now
    if tr.acc.is_main_process:
        Path(out).mkdir(parents=True, exist_ok=True)
        state = {k: v.detach().cpu().clone() for k, v in tr.policy.state_dict().items()}
        save_file(state, str(Path(out) / "params.safetensors"))
        save_file(init, str(Path(out) / "init.safetensors"))
        (Path(out) / "metrics.json").write_text(
            json.dumps({"world": world, "first": stats, "second": stats2})
        )
    tr.acc.wait_for_everyone()


if __name__ == "__main__":
    main(sys.argv[1])
