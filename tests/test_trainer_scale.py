"""Issue 21 (models, memory, LoRA): folders by path, completion-only logits, LoRA, gradient checkpointing."""

from __future__ import annotations

import copy
import importlib.util
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("accelerate")
pytest.importorskip("transformers")
torch = pytest.importorskip("torch")

from xtree_gym.agents.grpo import trainer as trainer_mod  # noqa: E402
from xtree_gym.agents.grpo.config import GRPOConfig  # noqa: E402
from xtree_gym.agents.grpo.policy import full_sequence_logps, sequence_logps  # noqa: E402
from xtree_gym.agents.grpo.rows import Row, collate  # noqa: E402
from xtree_gym.agents.grpo.shaping import plain_rewards  # noqa: E402
from xtree_gym.agents.grpo.trainer import GRPOTrainer  # noqa: E402
from xtree_gym.errors import ConfigError  # noqa: E402

SCRIPT = Path(__file__).parent / "scripts" / "grpo_dist_step.py"


def _episodes(tokenizer):
    spec = importlib.util.spec_from_file_location("grpo_dist_step", SCRIPT)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.batch(tokenizer)


def _cfg(tmp: Path, **kw) -> GRPOConfig:
    base = dict(env="scienceworld", output_dir=str(tmp), progress=False, tensorboard=False, lr=1e-2)
    return GRPOConfig(**{**base, **kw})


def _multi_span_rows(tr: GRPOTrainer) -> list[Row]:
    """The batch's per-turn rows (1-2 turns an episode) plus one row holding two completions."""
    eps = _episodes(tr.tokenizer)
    rows = tr.rows(eps, plain_rewards(eps, invalid_penalty=0.1))
    ids = list(range(10, 40))
    target = [False] * 8 + [True] * 6 + [False] * 10 + [True] * 6
    rows.append(Row(ids, target, [0.0] * len(ids), advantage=-0.7, teacher_prefix=[11, 12, 13]))
    return rows


def _grads(model) -> dict[str, torch.Tensor]:
    return {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}


def _step_grads(tr: GRPOTrainer, rows: list[Row]) -> tuple[dict[str, float], dict[str, torch.Tensor]]:
    tr.optimizer.zero_grad(set_to_none=True)
    totals = {"tokens": float(sum(r.n_targets for r in rows)), "rows": float(len(rows))}
    stats = tr.micro_step(rows, totals, sync=True)
    return stats, _grads(tr.policy)


# -- item 1: models -----------------------------------------------------------------------------------
def test_saved_folder_trains_by_path_with_no_env_and_no_hub(tmp_path: Path, monkeypatch) -> None:
    from xtree_gym.agents.model.loading import tiny_random

    model, tok = tiny_random(seed=3)
    folder = tmp_path / "my-model"
    model.save_pretrained(str(folder), safe_serialization=True)
    tok.save_pretrained(str(folder))
    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(var, raising=False)
    connects: list[object] = []

    def no_network(self, address):  # the hub is never asked: any connection attempt is recorded and refused
        connects.append(address)
        raise OSError("network disabled by the test")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    before = dict(os.environ)
    tr = GRPOTrainer(_cfg(tmp_path / "run", model=str(folder), kl_coef=0.05))
    start = {k: v.detach().clone() for k, v in tr.policy.state_dict().items()}
    assert torch.equal(
        start["model.layers.0.mlp.up_proj.weight"], model.state_dict()["model.layers.0.mlp.up_proj.weight"]
    )
    stats = tr.learn(_episodes(tr.tokenizer))
    after = tr.policy.state_dict()
    assert stats["grad_norm"] > 0
    assert sum(not torch.equal(start[k], after[k]) for k in start) >= len(start) // 2
    assert dict(os.environ) == before
    assert connects == []


def test_hub_id_offline_is_one_clear_error(tmp_path: Path) -> None:
    code = "from xtree_gym.agents.model.loading import load_model\nload_model('nobody-xyz/no-such-model')"
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "HF_HOME": str(tmp_path / "hf"),
        "PYTHONPATH": str(Path(__file__).parents[1]),
    }
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0
    assert "ConfigError: cannot load model 'nobody-xyz/no-such-model'" in proc.stderr
    assert "HF_HUB_OFFLINE is set" in proc.stderr


def test_attn_and_dtype_options(tmp_path: Path) -> None:
    from xtree_gym.agents.model.loading import load_model

    model, _ = load_model("tiny-random", attn="eager")
    assert model.config._attn_implementation == "eager"
    for bad in (
        {"dtype": "fp8"},
        {"attn": "flash"},
        {"lora_r": -1},
        {"lora_r": 4, "lora_targets": " , "},
    ):
        with pytest.raises(ConfigError):
            _cfg(tmp_path, **bad).resolved()
    # LoRA with vLLM: the push merges the adapters (issue 32)
    assert _cfg(tmp_path, lora_r=4, backend="vllm").resolved().lora_r == 4


# -- item 2: completion-only logits ---------------------------------------------------------------------
def test_completion_only_logits_match_the_full_logit_path(tmp_path: Path, monkeypatch) -> None:
    tr = GRPOTrainer(_cfg(tmp_path, kl_coef=0.05, opsd="empty", opsd_teacher="base", temperature=0.7))
    with torch.no_grad():  # move the policy off the reference so the KL term is not zero
        for p in tr.policy.parameters():
            p.add_(0.02 * torch.randn_like(p))
    rows = _multi_span_rows(tr)
    assert any(sum(a != b for a, b in zip(r.target, r.target[1:])) > 2 for r in rows)  # a row with 2 spans
    new_stats, new_grads = _step_grads(tr, rows)
    monkeypatch.setattr(trainer_mod, "sequence_logps", full_sequence_logps)
    old_stats, old_grads = _step_grads(tr, rows)
    assert old_stats["kl_sum"] > 0 and abs(old_stats["opsd"]) > 0
    for key in ("loss", "pg_loss", "opsd", "kl_sum", "entropy_sum"):
        assert new_stats[key] == pytest.approx(old_stats[key], abs=1e-6, rel=1e-6), key
    assert new_grads.keys() == old_grads.keys()
    for name, g in old_grads.items():
        assert torch.allclose(new_grads[name], g, atol=1e-6, rtol=1e-5), name
    assert max(float(g.abs().max()) for g in old_grads.values()) > 1e-4  # a real gradient was compared


def test_completion_logits_are_formed_on_trained_positions_only() -> None:
    from xtree_gym.agents.model.loading import tiny_random

    model, tok = tiny_random()
    rows = [Row(list(range(5, 205)), [False] * 190 + [True] * 10, [0.0] * 200)]
    batch = collate(rows, tok.pad_token_id)
    shapes: list[tuple[int, ...]] = []
    hook = model.lm_head.register_forward_hook(lambda m, a, out: shapes.append(tuple(out.shape)))
    logp, _ = sequence_logps(model, batch, 1.0)
    full, _ = full_sequence_logps(model, batch, 1.0)
    hook.remove()
    assert shapes == [(10, model.config.vocab_size), (1, 200, model.config.vocab_size)]
    assert torch.allclose(logp * batch.mask, full * batch.mask, atol=1e-6)


# -- item 4: LoRA and gradient checkpointing -------------------------------------------------------------
def test_lora_trains_adapters_only_and_round_trips(tmp_path: Path) -> None:
    pytest.importorskip("peft")
    from xtree_gym.agents.model.loading import tiny_random
    from xtree_gym.agents.model.lora import AdapterFreeReference

    tr = GRPOTrainer(_cfg(tmp_path / "run", lora_r=4, lora_alpha=8, kl_coef=0.05))
    assert isinstance(tr.ref, AdapterFreeReference)  # no second copy of the weights
    state = {k: v.detach().clone() for k, v in tr.policy.state_dict().items()}
    adapters = [k for k in state if "lora_" in k]
    assert adapters and all(("lora_" in n) for n, p in tr.policy.named_parameters() if p.requires_grad)
    eps = _episodes(tr.tokenizer)
    tr.learn(eps)
    stats = tr.learn(eps)
    after = tr.policy.state_dict()
    assert sum(not torch.equal(state[k], after[k]) for k in adapters) >= len(adapters) // 2
    assert all(torch.equal(state[k], after[k]) for k in state if "lora_" not in k)  # the base is frozen
    assert stats["kl_sum"] > 0  # the adapters moved the policy away from the base
    base, _ = tiny_random(seed=0)  # the reference is the base model itself
    batch = collate(_multi_span_rows(tr), int(tr.tokenizer.pad_token_id))
    with torch.no_grad():
        ref = sequence_logps(tr.ref, batch, 1.0)[0]
        plain = sequence_logps(base, batch, 1.0)[0]
        live = sequence_logps(tr.model, batch, 1.0)[0]
    assert torch.allclose(ref, plain, atol=1e-5)
    assert not torch.allclose(live, plain, atol=1e-5)
    tr.step = 2
    path = tr.save()
    assert path is not None and (path / "model" / "adapter_model.safetensors").is_file()
    assert not (path / "model" / "model.safetensors").exists()  # adapters only, not a base copy
    back = GRPOTrainer(_cfg(tmp_path / "run", lora_r=4, lora_alpha=8, kl_coef=0.05, resume=str(path)))
    restored = back.policy.state_dict()
    assert back.step == 2
    assert all(torch.equal(after[k], restored[k]) for k in adapters)
    # a run without LoRA cannot resume the adapter checkpoint: the resume check names the setting
    with pytest.raises(ConfigError, match="lora_r: 4 vs 0"):
        GRPOTrainer(_cfg(tmp_path / "run", kl_coef=0.05, resume=str(path)))


def test_gradient_checkpointing_gives_the_same_gradient(tmp_path: Path) -> None:
    plain = GRPOTrainer(_cfg(tmp_path / "a", kl_coef=0.05))
    ckpt = GRPOTrainer(_cfg(tmp_path / "b", kl_coef=0.05, gradient_checkpointing=True))
    assert ckpt.policy.is_gradient_checkpointing and not plain.policy.is_gradient_checkpointing
    rows = _multi_span_rows(plain)
    plain.model.train()
    ckpt.model.train()  # checkpointing acts in train mode (the trainer trains after each rollout)
    calls = []
    act = ckpt.policy.model.layers[0].mlp.act_fn  # inside the layer: recomputed in backward
    hook = act.register_forward_hook(lambda *a: calls.append(torch.is_grad_enabled()))
    s1, g1 = _step_grads(plain, rows)
    s2, g2 = _step_grads(ckpt, copy.deepcopy(rows))
    hook.remove()
    assert len(calls) == 2  # the layer ran again in the backward pass: it was checkpointed
    assert s1["loss"] == pytest.approx(s2["loss"], abs=1e-7)
    for name, g in g1.items():
        assert torch.allclose(g2[name], g, atol=1e-6, rtol=1e-5), name


# -- item 5: the checkpoint path of sharded runs -----------------------------------------------------------
def test_full_state_dict_checkpoint_path_round_trips(tmp_path: Path) -> None:
    """The gathered-state path FSDP takes (parameter-name keys), run here on an unsharded model."""
    from xtree_gym.agents.model.loading import tiny_random
    from xtree_gym.agents.run import checkpoint as ckpt
    from xtree_gym.agents.run.scaleout import (
        FullOptimizerState,
        load_full_model_state,
        load_full_optimizer_state,
    )

    model, _ = tiny_random(seed=1)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    model(input_ids=torch.tensor([[5, 6, 7, 8]])).logits.float().pow(2).mean().backward()
    opt.step()
    full = FullOptimizerState(model, opt)
    assert any(
        isinstance(k, str) and "." in k for k in full.state_dict()["state"]
    )  # keyed by parameter names
    path = ckpt.save_checkpoint(tmp_path, 1, model=model, optimizer=full, model_state=model.state_dict())
    fresh, _ = tiny_random(seed=2)
    fresh_opt = torch.optim.AdamW(fresh.parameters(), lr=1e-2)
    load_full_model_state(fresh, path / "model")
    load_full_optimizer_state(fresh, fresh_opt, ckpt.read_optimizer_state(path))
    for (name, a), b in zip(model.state_dict().items(), fresh.state_dict().values()):
        assert torch.equal(a, b), name
    for p, q in zip(model.parameters(), fresh.parameters()):
        for key in ("exp_avg", "exp_avg_sq", "step"):
            assert torch.equal(opt.state[p][key], fresh_opt.state[q][key]), key


def test_cli_flags_of_issue_21(capsys) -> None:
    import json

    from xtree_gym.cli import main

    flags = [
        "--lora-r",
        "4",
        "--lora-alpha",
        "8",
        "--lora-targets",
        "q_proj,v_proj",
        "--gradient-checkpointing",
    ]
    flags += ["--dtype", "bf16", "--attn", "sdpa", "--model", "Qwen/Qwen2.5-1.5B-Instruct"]
    assert main(["train", "rlvr", *flags, "--print-config"]) == 0
    cfg = json.loads(capsys.readouterr().out)
    assert (cfg["lora_r"], cfg["lora_alpha"], cfg["lora_targets"]) == (4, 8, "q_proj,v_proj")
    assert (cfg["gradient_checkpointing"], cfg["dtype"], cfg["attn"]) == (True, "bf16", "sdpa")
    assert cfg["model"] == "Qwen/Qwen2.5-1.5B-Instruct"
