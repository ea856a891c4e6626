"""``scripts/gpu_smoke.py --multi`` (issue 32, item 9): no CUDA here, so its CPU dry path and its verdict lines."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "gpu_smoke.py"
torch = pytest.importorskip("torch")


def _multi():
    spec = importlib.util.spec_from_file_location("gpu_multi", ROOT / "scripts" / "gpu_multi.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _run(*args: str, timeout: int = 60) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=ROOT,
    )


def test_report_prints_one_verdict_per_feature_and_fails_on_any_fail(capsys) -> None:
    mod = _multi()
    code = mod.report({"fsdp": {"ok": False, "kind": "ddp"}, "lora": {"ok": True}, "vllm": {"ok": None}}, 2)
    lines = capsys.readouterr().out.splitlines()
    assert code == 1 and len(lines) == len(mod.FEATURES) + 1
    assert lines[:4] == [
        'FAIL fsdp  {"kind": "ddp"}',
        "PASS lora  {}",
        "SKIP vllm  {}",
        'FAIL steps  {"why": "not reported"}',  # a feature the child never reported fails
    ]
    assert lines[4] == '{"world": 2, "passed": 1, "failed": 2, "skipped": 1}'


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-CUDA message")
def test_without_cuda_it_says_so_and_exits_cleanly() -> None:
    out = _run("--multi")
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == (
        "gpu_smoke --multi: no CUDA device visible, nothing to check (use --cpu for the CPU dry run)"
    )
    assert "Traceback" not in out.stderr


# accelerate launch of 2 gloo processes, 2 GRPO steps of tiny-random each: ~25 s alone on 2 cores, < 90 s loaded
def test_cpu_dry_run_runs_every_check_on_two_gloo_processes_and_passes() -> None:
    pytest.importorskip("accelerate")
    pytest.importorskip("peft")
    out = _run("--multi", "--cpu", timeout=600)
    lines = out.stdout.splitlines()
    verdicts = {line.split()[1]: line.split()[0] for line in lines if line[:4] in ("PASS", "FAIL", "SKIP")}
    print(out.stdout)
    assert sorted(verdicts) == ["fsdp", "lora", "steps", "vllm"], out.stdout + out.stderr[-3000:]
    assert [verdicts[k] for k in ("fsdp", "lora", "steps")] == ["PASS"] * 3, out.stdout
    assert verdicts["vllm"] == "SKIP"  # vLLM is not installed on CPU: the line says so, it does not fail
    assert not any(line.startswith("FAIL") for line in lines)
    assert out.returncode == 0 and lines[-1] == '{"world": 2, "passed": 3, "failed": 0, "skipped": 1}'


# Each rank runs this: rank 0 or rank 1 alone finds a parallel.json in its own folder, as when rank 0
# has just written it and rank 1 looks before it lands. A verdict that branched on the file would send
# one rank into an all_reduce the other never enters: a hang, stopped by the subprocess timeout.
RANK_SCRIPT = """
import json, sys
from pathlib import Path
import torch, torch.distributed as dist
sys.path.insert(0, sys.argv[4])
from gpu_multi import sharding_check
rank, port, folder = int(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
model = torch.nn.Linear(4, 4)
out = []
for holder in (0, 1):
    mine = folder / f"rank{rank}-holder{holder}" / "parallel.json"
    if rank == holder:
        mine.parent.mkdir(parents=True)
        mine.write_text(json.dumps({"kind": "fsdp", "world": 2, "param_bytes_per_rank": [40, 40],
                                    "param_bytes_total": 80}))
    parallel = json.loads(mine.read_text()) if mine.is_file() else None
    out.append(sharding_check(model, parallel, 2))
    dist.barrier()
print(json.dumps(out))
dist.destroy_process_group()
"""


def test_a_collective_gated_by_a_file_only_one_rank_sees_cannot_hang(tmp_path: Path) -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = str(sock.getsockname()[1])
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    argv = [port, str(tmp_path), str(ROOT / "scripts")]
    procs = [subprocess.Popen([sys.executable, "-c", RANK_SCRIPT, str(r), *argv], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r in (0, 1)]  # fmt: skip
    outs = []
    try:
        for proc in procs:
            outs.append(proc.communicate(timeout=90))
    except subprocess.TimeoutExpired:
        pytest.fail("the 2 ranks hung: a collective was entered by one rank only")
    finally:
        for proc in procs:
            proc.kill()
    assert [p.returncode for p in procs] == [0, 0], [err[-2000:] for _, err in outs]
    rank0, rank1 = (json.loads(out.strip().splitlines()[-1]) for out, _ in outs)
    assert rank0 == rank1 and len(rank0) == 2  # both ranks took rank 0's branch, twice
    # rank 0 held the file: its figures; rank 1 held it: rank 0 has none, so both measured the (plain) model
    assert rank0[0] == {"ok": True, "kind": "fsdp", "largest_rank_share": 0.5}
    assert rank0[1] == {"ok": False, "kind": "none", "largest_rank_share": 1.0}


def _smoke():
    spec = importlib.util.spec_from_file_location("gpu_smoke", SCRIPT)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU memory refusal")
def test_a_shape_that_cannot_fit_the_host_is_refused_up_front_in_one_line() -> None:
    mod = _smoke()
    need = mod.host_bytes_needed(
        "7b", episodes=16, turns=1, prompt=64, new=16, micro_batch_tokens=16384, teacher=False
    )
    assert need > 150 * 2**30  # 7.6B float32 parameters x 5 (weights, grads, AdamW x2, reference) alone
    if mod.available_bytes() >= need:
        pytest.skip("this host could hold a 7b CPU step")
    t = time.perf_counter()
    out = _run("--cpu", "--shape", "7b")  # --cpu alone: the CPU step (as --allow-cpu), here refused
    assert out.returncode == 2 and "Traceback" not in out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpu_smoke: --shape 7b (7.61B parameters)"), out.stderr
    assert "GiB on CPU" in lines[0] and "GiB are available: refused before building it" in lines[0]
    assert time.perf_counter() - t < 30  # nothing was built: a 7b model would take minutes


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU default sizes")
@pytest.mark.slow  # builds tiny-random's Qwen shape and runs one step: ~35 s on 2 loaded cores
def test_cpu_alone_runs_the_step_at_a_script_checks_sizes() -> None:
    out = _run("--cpu", timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert (got["shape"], got["device"], got["episodes"], got["prompt_tokens"]) == ("tiny", "cpu", 16, 64)
    assert got["generated_tokens"] > 0 and got["micro_batches"] >= 1
