"""One AdamW step of the GRPO loss on an FSDP2-sharded ``tiny-random`` (torch's ``fully_shard``, gloo, CPU).

Usage: ``torchrun --nproc_per_node N fsdp2_step.py OUT``. Accelerate starts FSDP on GPUs only, so this
drives torch's FSDP2 directly through the pieces of the trainer that sharding touches:

* completion-only logprobs (:func:`xtree_gym.agents.grpo.policy.sequence_logps`, the head hook) on the
  sharded model, against the full-logit path on an unsharded copy (``logp_max_diff``);
* one step: clipped policy loss + k3 KL (reference = the unsharded initial weights), AdamW;
* the checkpoint path of sharded runs: gathered weights and name-keyed optimizer state written by
  rank 0 (:func:`xtree_gym.agents.run.checkpoint.save_checkpoint`), loaded into a fresh sharded model
  (:mod:`xtree_gym.agents.run.scaleout`) and gathered again (``resume_equal``).

Rank 0 writes OUT/params.safetensors (the gathered weights after the step) and OUT/result.json.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
import torch.distributed as dist
from safetensors.torch import save_file
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict
from torch.distributed.fsdp import fully_shard

from xtree_gym.agents.grpo.losses import clipped_policy_loss, k3_kl, loss_weights
from xtree_gym.agents.grpo.policy import frozen_copy, full_sequence_logps, sequence_logps
from xtree_gym.agents.grpo.rows import Row, collate
from xtree_gym.agents.model.loading import tiny_random
from xtree_gym.agents.run import checkpoint as ckpt
from xtree_gym.agents.run.scaleout import FullOptimizerState, load_full_model_state, load_full_optimizer_state


def rows() -> list[Row]:
    out = []
    for i in range(4):
        ids = [(7 * i + 3 * k) % 400 + 20 for k in range(24 + 3 * i)]
        target = [False] * (10 + i) + [True] * 6 + [False] * 3 + [True] * (len(ids) - 19 - i)
        out.append(Row(ids, target, [0.0] * len(ids), advantage=1.0 if i % 2 else -0.5))
    return out


def sharded(seed: int) -> torch.nn.Module:
    model, _ = tiny_random(seed=seed)
    model.train()
    for layer in model.model.layers:
        fully_shard(layer)
    fully_shard(model)
    return model


def gathered(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    state = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    return {k: v.detach().clone() for k, v in state.items()}


def main(out: str) -> None:
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    base, tok = tiny_random(seed=0)
    ref = frozen_copy(base)
    model = sharded(0)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    batch = collate(rows(), int(tok.pad_token_id))
    logp, _ = sequence_logps(model, batch, 1.0)
    with torch.no_grad():
        full = full_sequence_logps(base, batch, 1.0)[0]
        ref_logp = sequence_logps(ref, batch, 1.0)[0]
    diff = float(((logp.detach() - full) * batch.mask).abs().max())
    weights = loss_weights(batch.mask, norm="token", total_tokens=float(batch.mask.sum()), total_rows=4.0)
    pg, _ = clipped_policy_loss(logp, logp.detach() + 0.05, batch.advantages, weights, denom=1.0)
    loss = pg + 0.05 * (k3_kl(logp, ref_logp) * weights).sum()
    loss.backward()  # every rank has the same batch: FSDP's gradient average is the gradient
    opt.step()
    params = gathered(model)
    full_opt = FullOptimizerState(model, opt)
    path = Path(out) / "run"
    if rank == 0:
        ckpt.save_checkpoint(path, 1, model=base, optimizer=full_opt, model_state=params)
    dist.barrier()
    back = sharded(5)
    back_opt = torch.optim.AdamW(back.parameters(), lr=1e-2)
    load_full_model_state(back, path / "checkpoint-000001" / "model")
    load_full_optimizer_state(back, back_opt, ckpt.read_optimizer_state(path / "checkpoint-000001"))
    again = gathered(back)  # (full state dicts land on rank 0 only: cpu_offload)
    moments = FullOptimizerState(back, back_opt).state_dict()
    first = FullOptimizerState(model, opt).state_dict()
    if rank == 0:
        same_opt = bool(first["state"]) and all(
            torch.equal(first["state"][k][m], moments["state"][k][m])
            for k in first["state"]
            for m in ("exp_avg", "exp_avg_sq")
        )
        save_file({k: v.contiguous() for k, v in params.items()}, str(Path(out) / "params.safetensors"))
        result = {
            "world": world,
            "loss": float(loss.detach()),
            "logp_max_diff": diff,
            "resume_equal": all(torch.equal(params[k], again[k]) for k in params),
            "optimizer_equal": same_opt,
            "head_hooked": bool(logp.requires_grad),
        }
        (Path(out) / "result.json").write_text(json.dumps(result))
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
