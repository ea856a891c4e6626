"""The update on a fixed batch: the reward reaches the loss, placeholders change nothing, checkpoints round-trip."""

from __future__ import annotations

import copy
import importlib.util
from pathlib import Path

import pytest

pytest.importorskip("accelerate")
pytest.importorskip("transformers")
torch = pytest.importorskip("torch")

from xtree_gym.agents.grpo.rows import Row  # noqa: E402
from xtree_gym.agents.grpo.trainer import GRPOTrainer  # noqa: E402
from xtree_gym.agents.run import checkpoint as ckpt  # noqa: E402

SCRIPT = Path(__file__).parent / "scripts" / "grpo_dist_step.py"


def _batch_module():
    spec = importlib.util.spec_from_file_location("grpo_dist_step", SCRIPT)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def trainer(grpo_trainer: GRPOTrainer) -> GRPOTrainer:
    return grpo_trainer  # tests/fixtures/grpo.py (shared with test_grpo_ppo.py)


def _params(tr: GRPOTrainer) -> dict:
    return {k: v.detach().clone() for k, v in tr.policy.state_dict().items()}


def test_equal_rewards_leave_the_first_step_still(trainer: GRPOTrainer) -> None:
    tr = copy.deepcopy(trainer)
    eps = _batch_module().batch(tr.tokenizer)
    for ep in eps:
        ep.success, ep.reward = False, 0.0  # every group zero-variance: A = 0; KL = 0 at the warm start
    before = _params(tr)
    stats = tr.learn(eps)
    assert stats["grad_norm"] == 0.0
    assert all(torch.equal(before[k], v) for k, v in _params(tr).items())
    eps[0].success, eps[0].reward = True, 1.0  # one win: group 0 now has a preference
    stats = tr.learn(eps)
    assert stats["grad_norm"] > 0
    assert any(not torch.equal(before[k], v) for k, v in _params(tr).items())


def test_weightless_row_changes_nothing(trainer: GRPOTrainer) -> None:
    a, b = copy.deepcopy(trainer), copy.deepcopy(trainer)
    start = _params(a)
    eps = _batch_module().batch(a.tokenizer)
    rows = a.rows(eps, a.rewards(eps))
    pad = int(a.tokenizer.pad_token_id)
    sa = a.update(rows)
    sb = b.update([*rows, Row([pad] * 5, [False, True, True, True, True], [0.0] * 5, weight=0.0)])
    assert sa["tokens"] == sb["tokens"] and sa["loss"] == pytest.approx(sb["loss"], abs=1e-7)
    pa, pb = _params(a), _params(b)
    assert len(pa) == len(pb) > 10
    moved = max(float((pa[k] - start[k]).abs().max()) for k in pa)
    apart = max(float((pa[k] - pb[k]).abs().max()) for k in pa)
    # The padded batch sums in another order (float32), and AdamW's g/sqrt(v) turns a last-bit difference of a
    # near-zero gradient into up to ~6e-7 here: still 1000x less than what the step moved, where a weighted
    # pad row would move the weights as much as a real one.
    assert moved > 1e-4 and apart <= 1e-3 * moved, (apart, moved)


def test_checkpoint_round_trip(trainer: GRPOTrainer, tmp_path: Path) -> None:
    tr = copy.deepcopy(trainer)
    tr.run_dir = tmp_path
    tr.learn(_batch_module().batch(tr.tokenizer))
    tr.step = 1
    path = tr.save()
    assert path is not None and (path / "model" / "model.safetensors").is_file()
    assert ckpt.find_checkpoint(tmp_path) == path and ckpt.read_state(path)["step"] == 1
    fresh = copy.deepcopy(trainer)
    fresh.load(path)
    assert fresh.step == 1
    assert all(torch.equal(v, _params(tr)[k]) for k, v in _params(fresh).items())
    sa = tr.optimizer.state_dict()["state"]
    sb = fresh.optimizer.state_dict()["state"]
    assert sa.keys() == sb.keys()
    for pid in sa:
        for key in ("exp_avg", "exp_avg_sq", "step"):
            assert torch.equal(sa[pid][key], sb[pid][key])


def test_push_weights_to_vllm_reaches_the_engine_model(trainer: GRPOTrainer) -> None:
    # vLLM cannot run here (no GPU): a stand-in with the engine's attribute path records the call
    from types import SimpleNamespace

    from xtree_gym.agents.grpo.trainer import push_weights_to_vllm
    from xtree_gym.errors import ConfigError

    got: dict = {}
    target = SimpleNamespace(load_weights=lambda pairs: got.update(pairs))
    runner = SimpleNamespace(model=target)
    gen = SimpleNamespace(
        llm=SimpleNamespace(
            llm_engine=SimpleNamespace(
                model_executor=SimpleNamespace(driver_worker=SimpleNamespace(model_runner=runner))
            )
        )
    )
    push_weights_to_vllm(gen, trainer.policy)
    assert got.keys() == trainer.policy.state_dict().keys()
    with pytest.raises(ConfigError, match="in-process vLLM engine"):
        push_weights_to_vllm(SimpleNamespace(llm=None), trainer.policy)
