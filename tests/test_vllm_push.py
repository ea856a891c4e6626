"""Issue 32, item 5 (without vLLM): what the trainer pushes into vLLM, and when.

The names and merged tensors are checked against PEFT's own ``merge_and_unload``; FSDP2 shards are
gathered with 2 gloo processes; the push count uses a stand-in for vLLM's in-process engine (vLLM
itself cannot be installed in the shared venv: tests/test_vllm_cpu.py runs the real engine).
"""

from __future__ import annotations

import copy

import pytest

torch = pytest.importorskip("torch")
peft = pytest.importorskip("peft")

from xtree_gym.agents.model.push import gathered, lora_scaling, merged_weights, push_state  # noqa: E402
from xtree_gym.errors import ConfigError  # noqa: E402


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(11, 6)
        self.q = torch.nn.Linear(6, 5, bias=True)
        self.v = torch.nn.Linear(5, 6, bias=False)
        self.norm = torch.nn.LayerNorm(6)
        self.head = torch.nn.Linear(6, 11, bias=False)

    def forward(self, x):
        return self.head(self.norm(self.v(self.q(self.embed(x)))))


def _peft(**kw):
    torch.manual_seed(0)
    config = peft.LoraConfig(r=3, lora_alpha=7, init_lora_weights=False, **kw)  # B ≠ 0: the merge shows
    return peft.get_peft_model(Net(), config)


def _check_against_peft(model) -> int:
    ref = copy.deepcopy(model).merge_and_unload().state_dict()
    got = dict(push_state(model))
    assert sorted(got) == sorted(ref)
    for k, v in ref.items():
        assert got[k].dtype == v.dtype and torch.allclose(got[k], v, atol=1e-6, rtol=1e-6), k
    return len(ref)


def test_hand_made_merge() -> None:
    """W + s·B·A on 2×2 tensors; the bias passes; a second adapter and original_module are dropped."""
    sd = [
        ("base_model.model.q.base_layer.weight", torch.eye(2)),
        ("base_model.model.q.base_layer.bias", torch.tensor([1.0, -1.0])),
        ("base_model.model.q.lora_A.default.weight", torch.tensor([[1.0, 2.0]])),
        ("base_model.model.q.lora_A.other.weight", torch.tensor([[9.0, 9.0]])),
        ("base_model.model.q.lora_B.default.weight", torch.tensor([[1.0], [0.0]])),
        ("base_model.model.q.lora_B.other.weight", torch.tensor([[9.0], [9.0]])),
        ("base_model.model.head.original_module.weight", torch.zeros(2, 2)),
        ("base_model.model.head.modules_to_save.default.weight", torch.ones(2, 2)),
    ]
    got = {k: v.tolist() for k, v in merged_weights(sd, {"q": 0.5})}
    assert got == {
        "q.weight": [[1.5, 1.0], [0.0, 1.0]],
        "q.bias": [1.0, -1.0],
        "head.weight": [[1.0, 1.0]] * 2,
    }


@pytest.mark.parametrize(
    "kw",
    [
        {"target_modules": ["q", "v"]},
        {"target_modules": ["q", "v"], "modules_to_save": ["head"]},
        {"target_modules": ["q"], "lora_bias": True},
        {"target_modules": ["embed", "v"]},
    ],
    ids=["linear", "modules_to_save", "lora_bias", "embedding"],
)
def test_merge_equals_peft_merge_and_unload(kw) -> None:
    model = _peft(**kw)
    if "modules_to_save" in kw:  # the trained copy differs from the frozen original
        with torch.no_grad():
            model.base_model.model.head.modules_to_save["default"].weight.add_(1.0)
    assert _check_against_peft(model) == 7  # embed, q (weight, bias), v, norm (weight, bias), head


def test_merge_of_a_transformers_model_in_bf16() -> None:
    """tiny-random (Qwen2, tied head), all-linear, bf16 base: names and values are merge_and_unload's."""
    pytest.importorskip("transformers")
    from xtree_gym.agents.model.loading import load_model, tiny_random
    from xtree_gym.agents.model.lora import apply_lora

    plain = tiny_random()[0].state_dict()
    model, _ = load_model("tiny-random")
    peft_model = apply_lora(model, r=4, alpha=8, targets="all-linear")
    with torch.no_grad():
        for n, p in peft_model.named_parameters():
            if "lora_B" in n:
                p.normal_(0, 0.1)
    n = _check_against_peft(peft_model)
    assert n == len(plain) and all("lora" not in k for k in dict(push_state(peft_model)))
    low = copy.deepcopy(peft_model).to(torch.bfloat16)
    got = dict(push_state(low))
    ref = copy.deepcopy(low).merge_and_unload().state_dict()
    # bf16: we round W + Δ once, PEFT rounds Δ and then the sum; u = 2⁻⁸, so |ours − PEFT's| ≤ 3u(|W| + |Δ|)
    base = {
        k.replace("base_model.model.", "").replace(".base_layer", ""): v for k, v in low.state_dict().items()
    }
    assert sorted(got) == sorted(ref)
    for k, v in ref.items():
        w, g = base[k].float(), got[k].float()
        bound = 3 * 2**-8 * (w.abs() + (g - w).abs()) + 1e-30
        assert bool(((g - v.float()).abs() <= bound).all()), k


def test_missing_pieces_are_one_error() -> None:
    sd = [("base_model.model.q.base_layer.weight", torch.eye(2))]
    with pytest.raises(ConfigError, match="only"):
        list(merged_weights(sd, {"q": 1.0}))
    sd.append(("base_model.model.q.lora_A.default.weight", torch.ones(1, 2)))
    sd.append(("base_model.model.q.lora_B.default.weight", torch.ones(2, 1)))
    with pytest.raises(ConfigError, match="scaling"):
        list(merged_weights(sd, {}))
    assert lora_scaling(_peft(target_modules=["q"])) == {"q": 7 / 3}


def _gather_worker(rank: int, world: int, port: int, queue) -> None:
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard, distribute_tensor

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    try:
        mesh = init_device_mesh("cpu", (world,))
        full = {"a": torch.arange(12.0).reshape(4, 3), "b": torch.arange(6.0)}
        shards = {k: distribute_tensor(v, mesh, [Shard(0)]) for k, v in full.items()}
        local = {k: tuple(v.to_local().shape) for k, v in shards.items()}
        out = {k: v.tolist() for k, v in gathered(shards.items())}
        queue.put((rank, local, out == {k: v.tolist() for k, v in full.items()}))
    finally:
        dist.destroy_process_group()


@pytest.mark.slow  # two spawned torch processes: 10-50 s on 2 loaded cores
def test_fsdp_shards_are_gathered_per_parameter_on_two_gloo_ranks() -> None:
    import socket

    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_gather_worker, args=(r, 2, port, queue)) for r in range(2)]
    for p in procs:
        p.start()
    results = sorted(queue.get(timeout=120) for _ in procs)
    for p in procs:
        p.join(timeout=60)
    assert [r for r, _, _ in results] == [0, 1]
    assert all(local == {"a": (2, 3), "b": (3,)} for _, local, _ in results)  # each rank held half
    assert all(ok for _, _, ok in results)  # and got the full tensors back


# -- the trainer pushes once per step, after its last update, merged names ---------------------------------
class _Worker:
    def __init__(self) -> None:
        self.pushes: list[dict] = []
        self.model_runner = type("R", (), {"model": type("M", (), {"load_weights": lambda *a: None})()})()

    def reload_weights(self, weights_iterator, is_checkpoint_format):
        assert is_checkpoint_format
        self.pushes.append({k: v.clone() for k, v in weights_iterator})


class _Engine:
    """Stands in for vLLM's in-process ``LLM`` (its attribute path to the worker), recording pushes."""

    def __init__(self) -> None:
        self.worker = _Worker()
        self.llm_engine = type("E", (), {"model_executor": type("X", (), {"driver_worker": self.worker})()})()

    def reset_prefix_cache(self) -> None:
        pass


def test_lora_trainer_pushes_once_per_step_with_merged_names(tmp_path, grpo_batch) -> None:
    pytest.importorskip("accelerate")
    from xtree_gym.agents.grpo.config import GRPOConfig
    from xtree_gym.agents.grpo.trainer import GRPOTrainer

    cfg = GRPOConfig(
        env="scienceworld", output_dir=str(tmp_path), progress=False, tensorboard=False, lr=1e-2, lora_r=4,
        lora_alpha=8, mini_batch_size=4, ppo_epochs=2,
    )  # fmt: skip
    tr = GRPOTrainer(cfg)
    engine = _Engine()
    tr._vllm = type("G", (), {"llm": engine})()
    stats = tr.learn(grpo_batch(tr.tokenizer))
    assert stats["updates"] >= 4  # E·M optimizer updates ...
    assert len(engine.worker.pushes) == 1  # ... and one push, after the last of them
    pushed = engine.worker.pushes[0]
    ref = copy.deepcopy(tr.policy).merge_and_unload().state_dict()
    assert sorted(pushed) == sorted(ref) and len(pushed) == len(ref)
    assert all(torch.allclose(pushed[k], v, atol=1e-6) for k, v in ref.items())
    base = {k: v for k, v in tr.policy.state_dict().items() if k.endswith("base_layer.weight")}
    merged_name = {k: k.replace("base_model.model.", "").replace(".base_layer", "") for k in base}
    moved = [k for k in base if not torch.equal(base[k], pushed[merged_name[k]])]
    assert len(base) == 14 and len(moved) == len(base)  # every adapted weight carries the update


def test_plain_model_state_passes_unchanged() -> None:
    net = Net()
    got = dict(push_state(net))
    assert sorted(got) == sorted(net.state_dict()) and len(got) == 7
    assert all(torch.equal(got[k], v) for k, v in net.state_dict().items())


@pytest.mark.parametrize(
    "kw",
    [{}, {"target_modules": ["q", "v", "embed"]}, {"target_modules": ["q"], "modules_to_save": ["head"]}],
)
def test_push_metadata_declares_what_push_state_yields(kw) -> None:
    """vLLM's NCCL transfer sizes its buffers from ``push_metadata`` (no gather, no merge): names, dtypes and
    shapes, in order, equal those of the tensors ``push_state`` yields (plain model and LoRA)."""
    model = Net() if not kw else _peft(**kw)
    got = [(n, t.dtype, tuple(t.shape)) for n, t in push_state(model)]
    from xtree_gym.agents.model.push import push_metadata

    assert push_metadata(model) == got and len(got) >= 6


def test_files_transport_shards_round_trip_exactly(tmp_path) -> None:
    """The files transport's shards (tied tensors, several shards) read back as written, names in order."""
    from xtree_gym.agents.model.vllm_worker import read_shards, write_shards

    model = _peft(target_modules=["q", "v"])
    sent = [(n, t.clone()) for n, t in push_state(model)]
    sent.append(("tied.copy", sent[0][1]))  # the same storage twice (SmolLM2 ties its head to the embedding)
    assert write_shards(iter(sent), tmp_path, shard_bytes=200) == len(sent)
    assert len(list(tmp_path.glob("shard-*.safetensors"))) > 2 and not list(tmp_path.glob(".*"))
    back = list(read_shards(tmp_path))
    assert [n for n, _ in back] == [n for n, _ in sent]
    assert all(torch.equal(a, b) for (_, a), (_, b) in zip(back, sent)) and len(back) == len(sent)


def test_a_missing_push_folder_is_one_error(tmp_path) -> None:
    from xtree_gym.agents.model.vllm_worker import read_shards

    with pytest.raises(ConfigError, match="sync folder"):
        list(read_shards(tmp_path / "gone"))
