"""Two ranks (``accelerate launch``, gloo on CPU) take the same step as one process on the same batch."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("accelerate")
pytest.importorskip("transformers")
torch = pytest.importorskip("torch")
from safetensors.torch import load_file  # noqa: E402

SCRIPT = Path(__file__).parent / "scripts" / "grpo_dist_step.py"


def _free_port() -> int:
    with socket.socket() as sock:  # another run on this machine may hold a fixed port
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _run_in_process(out: Path) -> None:
    spec = importlib.util.spec_from_file_location("grpo_dist_step", SCRIPT)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.main(str(out))


def _launch_two(out: Path, extra_env: dict[str, str] | None = None) -> None:
    """Run the script under ``accelerate launch`` with 2 CPU processes (gloo) into ``out``."""
    launcher = shutil.which("accelerate") or str(Path(sys.executable).with_name("accelerate"))
    if not Path(launcher).exists():
        pytest.skip("the accelerate launcher is not installed")
    env = {
        **os.environ,
        "PYTHONPATH": str(Path(__file__).parents[1]),
        "OMP_NUM_THREADS": "1",
        "XTREE_PROGRESS": "0",
        **(extra_env or {}),
    }
    cmd = [launcher, "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1"]
    cmd += [
        "--mixed_precision",
        "no",
        "--dynamo_backend",
        "no",
        "--main_process_port",
        str(_free_port()),
        str(SCRIPT),
        str(out),
    ]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]


def test_two_process_step_equals_one_process_step(tmp_path: Path) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    _run_in_process(one)
    _launch_two(two)
    m1 = json.loads((one / "metrics.json").read_text())
    m2 = json.loads((two / "metrics.json").read_text())
    assert (m1["world"], m2["world"]) == (1, 2)
    for key in ("tokens", "episodes", "reward_sum", "win_sum", "micro_batches"):
        assert m1["first"][key] == m2["first"][key]  # the metrics are reduced over both ranks
    for key in ("loss", "pg_loss", "opsd", "kl_sum", "entropy_sum", "grad_norm"):
        assert m2["second"][key] == pytest.approx(m1["second"][key], rel=1e-4, abs=1e-6)
    assert m1["second"]["kl_sum"] > 0  # the second step really had a KL term
    p1, p2 = load_file(str(one / "params.safetensors")), load_file(str(two / "params.safetensors"))
    assert p1.keys() == p2.keys()
    for k in p1:
        assert torch.allclose(p1[k], p2[k], atol=2e-6, rtol=1e-5), k
    init = load_file(str(one / "init.safetensors"))
    assert sum(not torch.equal(init[k], p1[k]) for k in p1) >= len(p1) // 2  # the step moved the weights


def test_two_process_ppo_mini_batches_stay_in_step(tmp_path: Path) -> None:
    """Mini-batches × epochs on 2 ranks: every rank makes the same number of updates (no hang)."""
    _launch_two(tmp_path / "two", {"XTREE_TEST_PPO": "4,2"})
    m = json.loads((tmp_path / "two" / "metrics.json").read_text())
    # 12 rows over both ranks, 4 per update: ceil(12 / 4) = 3 updates per epoch, 2 epochs
    assert m["world"] == 2 and m["first"]["updates"] == m["second"]["updates"] == 6
    assert m["second"]["ratio_sum"] != pytest.approx(m["second"]["tokens"])  # π_old fixed: ρ moved
    p, init = (
        load_file(str(tmp_path / "two" / "params.safetensors")),
        load_file(str(tmp_path / "two" / "init.safetensors")),
    )
    assert any(not torch.equal(init[k], p[k]) for k in p)
