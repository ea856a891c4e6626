"""The ``--features`` checks of ``scripts/gpu_smoke.py``: bf16, LoRA, gradient checkpointing, FSDP.

Every check runs the real :class:`~xtree_gym.agents.grpo.trainer.GRPOTrainer` on ``tiny-random`` and a
fixed batch (2 groups × 2 episodes × 2 turns, rewards that differ inside each group), and prints
one JSON line with ``"ok": true/false`` and its figures. The exit status is 1 if any check failed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
FSDP_CONFIG = ROOT / "xtree_gym" / "agents" / "accelerate" / "fsdp-1gpu.yaml"


def batch(tokenizer: Any) -> list[Any]:
    from xtree_gym.agents.types import Episode, Turn

    eps = []
    for g in range(2):
        for m in range(2):
            turns = []
            for k in range(2):
                prompt = tokenizer.apply_chat_template(
                    [{"role": "user", "content": f"task {g} turn {k}: boil water " * 8}],
                    add_generation_prompt=True,
                    tokenize=True,
                )
                comp = tokenizer.encode(f"<action>open door {g} {m} {k}</action>", add_special_tokens=False)
                turns.append(Turn(list(prompt), comp, [0.0] * len(comp), "", "a", ""))
            won = m == 0
            eps.append(
                Episode(f"{g}.{m}", "env", "t", "g", 0, g, m, turns=turns, success=won, reward=float(won))
            )
    return eps


def trainer(out: str, **kw: Any) -> Any:
    from accelerate.state import AcceleratorState

    from xtree_gym.agents.grpo.config import GRPOConfig
    from xtree_gym.agents.grpo.trainer import GRPOTrainer

    if not os.environ.get("ACCELERATE_USE_FSDP"):  # checks differ in precision: a fresh Accelerate state each
        AcceleratorState._reset_state(reset_partial_state=True)
    base = {"env": "scienceworld", "output_dir": out, "progress": False, "tensorboard": False, "lr": 1e-2}
    return GRPOTrainer(GRPOConfig(**{**base, "kl_coef": 0.05, **kw}))


def _params(tr: Any) -> dict[str, Any]:
    return {k: v.detach().float().cpu().clone() for k, v in tr.acc.get_state_dict(tr.model).items()}


def _peak(cuda: bool) -> float | None:
    import torch

    return round(torch.cuda.max_memory_allocated() / 2**20, 1) if cuda else None


def _reset(cuda: bool) -> None:
    import torch

    if cuda:
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


def check_bf16(tmp: str, cuda: bool) -> dict[str, Any]:
    import torch

    _reset(cuda)
    tr = trainer(f"{tmp}/bf16", dtype="bf16")
    before = _params(tr)
    t = time.perf_counter()
    stats = tr.learn(batch(tr.tokenizer))
    secs = time.perf_counter() - t
    after = _params(tr)
    moved = sum(not torch.equal(before[k], after[k]) for k in before)
    ok = (
        tr.acc.mixed_precision == "bf16"
        and moved >= len(before) // 2
        and 0 < stats["grad_norm"] < float("inf")
    )
    return {
        "check": "bf16",
        "ok": bool(ok),
        "mixed_precision": tr.acc.mixed_precision,
        "moved": moved,
        "tensors": len(before),
        "loss": stats["loss"],
        "update_s": round(secs, 3),
        "peak_mib": _peak(cuda),
    }


def check_lora(tmp: str, cuda: bool) -> dict[str, Any]:
    import torch

    from xtree_gym.agents.model.lora import AdapterFreeReference

    _reset(cuda)
    tr = trainer(f"{tmp}/lora", dtype="bf16", lora_r=8, lora_alpha=16)
    before = _params(tr)
    eps = batch(tr.tokenizer)
    tr.learn(eps)
    stats = tr.learn(eps)
    after = _params(tr)
    adapters = [k for k in before if "lora_" in k]
    moved = sum(not torch.equal(before[k], after[k]) for k in adapters)
    frozen = all(torch.equal(before[k], after[k]) for k in before if "lora_" not in k)
    base_dtype = str(next(p for n, p in tr.policy.named_parameters() if "lora_" not in n).dtype)
    tr.step = 2
    path = tr.save()
    ok = (
        isinstance(tr.ref, AdapterFreeReference)
        and moved >= len(adapters) // 2
        and frozen
        and stats["kl_sum"] > 0
        and path is not None
        and (path / "model" / "adapter_model.safetensors").is_file()
    )
    return {
        "check": "lora",
        "ok": bool(ok),
        "adapters_moved": moved,
        "adapters": len(adapters),
        "base_frozen": frozen,
        "base_dtype": base_dtype,
        "kl_sum": stats["kl_sum"],
        "peak_mib": _peak(cuda),
    }


def _grads(tr: Any, rows: list[Any], cuda: bool) -> tuple[dict[str, Any], float | None]:
    _reset(cuda)
    tr.model.train()
    tr.optimizer.zero_grad(set_to_none=True)
    totals = {"tokens": float(sum(r.n_targets for r in rows)), "rows": float(len(rows))}
    tr.micro_step(rows, totals, sync=True)
    grads = {n: p.grad.detach().float().cpu() for n, p in tr.policy.named_parameters() if p.grad is not None}
    return grads, _peak(cuda)


def check_gradient_checkpointing(tmp: str, cuda: bool) -> dict[str, Any]:
    import torch

    from xtree_gym.agents.grpo.shaping import plain_rewards

    plain = trainer(f"{tmp}/gc0", dtype="fp32")
    eps = batch(plain.tokenizer)
    rows = plain.rows(eps, plain_rewards(eps, invalid_penalty=0.1))
    g0, m0 = _grads(plain, rows, cuda)
    del plain
    ckpt = trainer(f"{tmp}/gc1", dtype="fp32", gradient_checkpointing=True)
    g1, m1 = _grads(ckpt, rows, cuda)
    worst = max(float((g0[k] - g1[k]).abs().max()) for k in g0)
    ok = g0.keys() == g1.keys() and all(torch.allclose(g0[k], g1[k], atol=1e-5, rtol=1e-4) for k in g0)
    return {
        "check": "gradient_checkpointing",
        "ok": bool(ok),
        "max_abs_grad_diff": worst,
        "peak_mib_off": m0,
        "peak_mib_on": m1,
    }


def fsdp_child(out: str) -> int:
    """Under ``accelerate launch --config_file fsdp-1gpu.yaml``: one step, save, resume, write params."""
    from safetensors.torch import save_file

    from xtree_gym.agents.run.scaleout import sharding

    tr = trainer(f"{out}/run", dtype="fp32")
    kind = sharding(tr.acc)
    stats = tr.learn(batch(tr.tokenizer))
    tr.step = 1
    path = tr.save()
    params = _params(tr)
    back = trainer(f"{out}/run", dtype="fp32", resume=f"{out}/run")
    again = _params(back)
    if tr.acc.is_main_process:
        save_file({k: v.contiguous() for k, v in params.items()}, f"{out}/params.safetensors")
        same = all(bool((params[k] == again[k]).all()) for k in params)
        info = {
            "sharding": kind,
            "grad_norm": stats["grad_norm"],
            "resumed_step": back.step,
            "resumed_equal": same,
            "checkpoint": str(path),
        }
        Path(f"{out}/child.json").write_text(json.dumps(info))
    return 0


def check_fsdp(tmp: str, cuda: bool) -> dict[str, Any]:
    import torch
    from safetensors.torch import load_file

    if not cuda:
        return {"check": "fsdp", "ok": True, "skipped": "Accelerate runs FSDP on GPUs only"}
    plain = trainer(f"{tmp}/plain", dtype="fp32")
    plain.learn(batch(plain.tokenizer))
    want = _params(plain)
    del plain
    out = f"{tmp}/fsdp"
    os.makedirs(out, exist_ok=True)
    launcher = shutil.which("accelerate") or str(Path(sys.executable).with_name("accelerate"))
    cmd = [
        launcher,
        "launch",
        "--config_file",
        str(FSDP_CONFIG),
        "--main_process_port",
        "29533",
        str(ROOT / "scripts" / "gpu_smoke.py"),
        "--fsdp-child",
        out,
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "XTREE_PROGRESS": "0"}
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    if proc.returncode:
        return {"check": "fsdp", "ok": False, "stderr": proc.stderr[-2000:]}
    info = json.loads(Path(f"{out}/child.json").read_text())
    got = load_file(f"{out}/params.safetensors")
    worst = max(float((want[k] - got[k]).abs().max()) for k in want) if want.keys() == got.keys() else None
    ok = (
        info["sharding"] == "fsdp"
        and info["resumed_equal"]
        and info["resumed_step"] == 1
        and worst is not None
        and worst < 1e-5
        and all(torch.isfinite(v).all() for v in got.values())
    )
    return {"check": "fsdp", "ok": bool(ok), "max_abs_param_diff_vs_one_process": worst, **info}


def run_features(cuda: bool) -> int:
    """Run every check; one JSON line each; exit status 1 when any failed."""
    import torch

    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for check in (check_bf16, check_lora, check_gradient_checkpointing, check_fsdp):
            try:
                res = check(tmp, cuda)
            except Exception as exc:  # report and go on: one line per check
                res = {"check": check.__name__[6:], "ok": False, "error": f"{type(exc).__name__}: {exc}"}
            res["device"] = torch.cuda.get_device_name(0) if cuda else "cpu"
            failed += not res["ok"]
            print(json.dumps(res), flush=True)
    return 1 if failed else 0
