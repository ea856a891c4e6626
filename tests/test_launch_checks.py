"""Scale-out II, item 6: a launch that cannot work is one line before any model loads or folder is made.

* tasks per step that do not split over the launch's processes: refused up front, the ``-o`` folder
  never made, so the corrected rerun into the same folder just runs;
* DeepSpeed (the launcher's ``ACCELERATE_USE_DEEPSPEED``, or an old DeepSpeed accelerate config given
  to ``--config``): one line naming FSDP2 as the supported path, no traceback.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("accelerate")
pytest.importorskip("torch")

ROOT = Path(__file__).parents[1]
ARGS = ["--env", "XTree-Countdown-v0", "--harness", "countdown", "--model", "tiny-random", "--n", "2",
        "--max-steps", "2", "--max-new-tokens", "8", "--steps", "1", "--no-tensorboard"]  # fmt: skip
# what `accelerate launch` sets for a config with distributed_type: DEEPSPEED (deepspeed installed)
DEEPSPEED_ENV = {"ACCELERATE_USE_DEEPSPEED": "true", "ACCELERATE_DEEPSPEED_ZERO_STAGE": "2"}
OLD_DEEPSPEED_YAML = """\
compute_environment: LOCAL_MACHINE
distributed_type: DEEPSPEED
mixed_precision: bf16
num_machines: 1
num_processes: 8
deepspeed_config:
  zero_stage: 2
  gradient_accumulation_steps: 1
"""


def _xtree(*args: str, env: dict[str, str] | None = None, timeout: int = 120) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("ACCELERATE_", "WORLD_SIZE", "RANK"))}
    full = {**base, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "XTREE_PROGRESS": "0", **(env or {})}
    cmd = [sys.executable, "-m", "xtree_gym", "train", "rlvr", *args]
    return subprocess.run(cmd, env=full, capture_output=True, text=True, timeout=timeout, cwd=str(ROOT))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _launch(world: int, *args: str) -> subprocess.CompletedProcess:
    """``accelerate launch --multi_gpu --num_processes W -m xtree_gym train rlvr ARGS`` (gloo on CPU)."""
    launcher = shutil.which("accelerate") or str(Path(sys.executable).with_name("accelerate"))
    if not Path(launcher).exists():
        pytest.skip("the accelerate launcher is not installed")
    cmd = [launcher, "launch", "--multi_gpu", "--num_processes", str(world), "--num_machines", "1",
           "--mixed_precision", "no", "--dynamo_backend", "no", "--main_process_port", str(_free_port()),
           "-m", "xtree_gym", "train", "rlvr", *args]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "XTREE_PROGRESS": "0"}
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600, cwd=str(ROOT))


def _error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "error:" in line]


def test_tasks_that_do_not_split_over_the_world_are_refused_before_the_model_and_the_folder(tmp_path) -> None:
    out = tmp_path / "run"
    # rank 0 of a 2-process launch, as `accelerate launch --num_processes 2` starts it
    refused = _xtree(*ARGS, "--tasks-per-step", "3", "-o", str(out), env={"WORLD_SIZE": "2", "RANK": "0"})
    assert refused.returncode == 1, refused.stderr[-3000:]
    assert refused.stderr.strip().splitlines() == [
        "xtree train: error: tasks_per_step = 3 does not split over the 2 processes of this launch -- fix: "
        "pass --tasks-per-step 2 or 4 (a multiple of 2: each rank plays whole groups), or launch "
        "--num_processes 1 or 3"
    ]
    assert not out.exists()  # no half-made run folder to block the rerun (the slow test below reruns)


@pytest.mark.slow  # two 2-process launches: the refusal, then a 1-step run (20-60 s on 2 loaded cores)
def test_the_launch_line_refuses_odd_tasks_up_front_and_the_corrected_rerun_runs(tmp_path) -> None:
    out = tmp_path / "run"
    refused = _launch(2, *ARGS, "--tasks-per-step", "3", "-o", str(out))
    assert refused.returncode != 0
    lines = _error_lines(refused.stderr)
    # each rank's line, or only the first's when the launcher stops the other before it prints
    assert lines and all("tasks_per_step = 3 does not split over the 2 processes" in x for x in lines)
    assert "rlvr: 1 steps x" not in refused.stderr  # printed just before the model loads: never reached
    assert not out.exists()
    again = _launch(2, *ARGS, "--tasks-per-step", "2", "-o", str(out))
    assert again.returncode == 0, again.stderr[-4000:]
    assert (out / "metrics.jsonl").is_file()


def test_a_deepspeed_launch_gets_one_line_naming_fsdp2(tmp_path) -> None:
    out = tmp_path / "run"
    proc = _xtree(*ARGS, "--tasks-per-step", "2", "-o", str(out), env=DEEPSPEED_ENV)
    assert proc.returncode == 1, proc.stderr[-3000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert "DeepSpeed is not supported: FSDP2 is the supported path" in lines[0]
    assert "xtree_gym/agents/accelerate/fsdp.yaml" in lines[0]
    assert not out.exists()


def test_an_old_deepspeed_accelerate_config_given_to_config_gets_the_same_line(tmp_path) -> None:
    cfg = tmp_path / "deepspeed-zero2.yaml"
    cfg.write_text(OLD_DEEPSPEED_YAML, encoding="utf-8")
    proc = _xtree("--config", str(cfg), "-o", str(tmp_path / "run"))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == [
        f"xtree train: error: {cfg}: DeepSpeed is not supported: FSDP2 is the supported path -- fix: launch with "
        "FSDP2 instead: accelerate launch --config_file xtree_gym/agents/accelerate/fsdp.yaml --num_processes N "
        "-m xtree_gym train ..."
    ]


def test_any_accelerate_config_given_to_config_is_named_as_one(tmp_path) -> None:
    ds_json = tmp_path / "ds.json"
    ds_json.write_text('{"distributed_type": "DEEPSPEED", "num_processes": 2}', encoding="utf-8")
    fsdp = ROOT / "xtree_gym" / "agents" / "accelerate" / "fsdp.yaml"
    outs = [_xtree("--config", str(path), "-o", str(tmp_path / "run")) for path in (ds_json, fsdp)]
    assert [p.returncode for p in outs] == [1, 1]
    lines = [p.stderr.strip().splitlines() for p in outs]
    assert [len(x) for x in lines] == [1, 1] and not any("Traceback" in p.stderr for p in outs)
    assert "DeepSpeed is not supported: FSDP2 is the supported path" in lines[0][0]
    assert "is an accelerate launcher config (distributed_type: FSDP), not a training config" in lines[1][0]
    assert f"accelerate launch --config_file {fsdp}" in lines[1][0]
    assert not (tmp_path / "run").exists()
