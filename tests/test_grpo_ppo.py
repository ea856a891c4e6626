"""PPO-style updates (mini-batches × epochs, one π_old), the LR schedule and the zero-signal stop."""

from __future__ import annotations

import copy
import dataclasses

import pytest

pytest.importorskip("accelerate")
pytest.importorskip("transformers")
torch = pytest.importorskip("torch")

from xtree_gym.agents.grpo.config import GRPOConfig  # noqa: E402
from xtree_gym.agents.grpo.schedule import lr_at  # noqa: E402
from xtree_gym.agents.grpo.trainer import GRPOTrainer  # noqa: E402
from xtree_gym.agents.grpo.updates import recompute_old_logprobs, split_rows, updates_per_epoch  # noqa: E402
from xtree_gym.errors import ConfigError  # noqa: E402


@pytest.fixture
def trainer(grpo_trainer: GRPOTrainer) -> GRPOTrainer:
    return grpo_trainer  # tests/fixtures/grpo.py; every test below copies it first


@pytest.fixture
def eps(grpo_trainer: GRPOTrainer, grpo_batch) -> list:
    return grpo_batch(grpo_trainer.tokenizer)


def _params(tr: GRPOTrainer) -> dict:
    return {k: v.detach().clone() for k, v in tr.policy.state_dict().items()}


def _with(tr: GRPOTrainer, **changes) -> GRPOTrainer:
    twin = copy.deepcopy(tr)
    twin.cfg = dataclasses.replace(twin.cfg, **changes)
    return twin


def test_one_mini_batch_one_epoch_is_todays_update_bit_for_bit(trainer: GRPOTrainer, eps: list) -> None:
    rows = trainer.rows(eps, trainer.rewards(eps))
    today = copy.deepcopy(trainer)
    today.update(rows)  # the single update the trainer always made
    for size in (0, len(rows), 10 * len(rows)):
        ppo = _with(trainer, mini_batch_size=size, ppo_epochs=1)
        stats = ppo.learn(eps)
        assert stats["updates"] == 1
        a, b = _params(today), _params(ppo)
        assert all(torch.equal(a[k], b[k]) for k in a), size
    # the stored-π_old path (one recompute pass before the update) gives the same update too
    forced = copy.deepcopy(trainer)
    forced.update(recompute_old_logprobs(forced, rows), stored_old=True)
    a, b = _params(today), _params(forced)
    assert all(torch.allclose(a[k], b[k], atol=1e-7, rtol=0) for k in a)


def test_second_mini_batch_has_ratio_off_one_and_the_clip_can_bite(trainer: GRPOTrainer, eps: list) -> None:
    n_rows = len(trainer.rows(eps, trainer.rewards(eps)))
    tr = _with(trainer, mini_batch_size=n_rows // 2, ppo_epochs=2, clip_eps_low=1e-4, clip_eps_high=1e-4)
    before = _params(tr)
    stats = tr.learn(eps)
    ups = tr.last_updates
    assert stats["updates"] == len(ups) == 4  # 2 mini-batches × 2 epochs
    ratio = [u["ratio_sum"] / u["tokens"] for u in ups]
    clip = [u["clip_sum"] / u["tokens"] for u in ups]
    assert ratio[0] == pytest.approx(1.0, abs=1e-6) and clip[0] == 0.0  # π_old = the weights before update 1
    assert abs(ratio[1] - 1.0) > 1e-6  # the second mini-batch is scored by moved weights
    assert clip[1] > 0.0
    assert any(not torch.equal(before[k], v) for k, v in _params(tr).items())


def test_rollout_old_logprobs_are_kept_as_generated(trainer: GRPOTrainer, eps: list) -> None:
    for ep in eps:  # generation-time logprobs far from the policy's: ratio far from 1 at once
        for t in ep.turns:
            t.logprobs = [-0.01] * len(t.completion_ids)
    tr = _with(trainer, old_logprobs="rollout", mini_batch_size=4, ppo_epochs=1)
    tr.learn(eps)
    assert all(abs(u["ratio_sum"] / u["tokens"] - 1.0) > 0.5 for u in tr.last_updates)


def test_split_rows_and_update_count() -> None:
    assert split_rows(5, 2, None) == [[0, 1, 2], [3, 4]]
    assert split_rows(5, 2, 7) == split_rows(5, 2, 7)  # seeded: deterministic
    assert sorted(i for part in split_rows(9, 4, 3) for i in part) == list(range(9))
    assert [updates_per_epoch(r, 4) for r in (1, 4, 5, 8, 9)] == [1, 1, 2, 2, 3]


@pytest.mark.parametrize(
    ("kind", "warmup", "expected"),
    [
        # lr 2e-3 over 5 steps; warm-up: lr·s/W; after it p = (s − W − 1)/(N − W)
        ("constant", 0, [2e-3] * 5),
        ("constant", 2, [1e-3, 2e-3, 2e-3, 2e-3, 2e-3]),
        ("linear", 0, [2e-3, 1.6e-3, 1.2e-3, 0.8e-3, 0.4e-3]),  # 1 − (s−1)/5
        ("linear", 1, [2e-3, 2e-3, 1.5e-3, 1e-3, 0.5e-3]),  # 1 − (s−2)/4
        ("cosine", 1, [2e-3, 2e-3, 1.7071e-3, 1e-3, 0.2929e-3]),  # (1 + cos(π(s−2)/4))/2
    ],
)
def test_lr_schedule_at_hand_computed_steps(kind: str, warmup: int, expected: list[float]) -> None:
    got = [lr_at(s, lr=2e-3, total=5, warmup=warmup, kind=kind) for s in range(1, 6)]
    assert got == pytest.approx(expected, abs=1e-7)


def test_trainer_puts_the_scheduled_lr_on_the_optimizer(trainer: GRPOTrainer) -> None:
    tr = _with(trainer, steps=4, lr_scheduler="linear", warmup_steps=2)
    assert [tr.set_lr(s) for s in (1, 2, 3, 4)] == pytest.approx([5e-4, 1e-3, 1e-3, 5e-4])
    assert all(g["lr"] == pytest.approx(5e-4) for g in tr.optimizer.param_groups)


def test_bad_update_and_schedule_fields_are_one_error() -> None:
    for bad in (
        {"ppo_epochs": 0},
        {"mini_batch_size": -1},
        {"lr_scheduler": "step"},
        {"warmup_steps": 9, "steps": 3},
    ):
        with pytest.raises(ConfigError):
            GRPOConfig(**bad).resolved()
