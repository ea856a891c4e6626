"""No silent no-learning: a harness for every text env, Countdown trains, a zero-signal run stops;
trackers (TensorBoard through Accelerate); the ScienceWorld reward scale; OPSD that distils."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from xtree_gym.agents.grpo.config import GRPOConfig
from xtree_gym.agents.grpo.shaping import outcome_of, plain_rewards, xtree_rewards
from xtree_gym.agents.harness import get_harness
from xtree_gym.agents.harness.registry import DEFAULT_HARNESS
from xtree_gym.agents.play.rollout import env_domain
from xtree_gym.agents.run.tracking import Trackers, installed, resolve_trackers
from xtree_gym.agents.types import Episode
from xtree_gym.envs import ENV_SPECS
from xtree_gym.errors import ConfigError, DependencyError


def test_every_registered_env_has_a_registered_harness() -> None:
    for env_id in ENV_SPECS:
        cfg = GRPOConfig(env=env_id).resolved()
        assert cfg.harness == DEFAULT_HARNESS[cfg.domain()], env_id
        h = get_harness(cfg.harness)  # registered: builds
        assert not h.envs or {cfg.domain(), env_domain(env_id)} & set(h.envs) or cfg.harness == "browsergym"
    assert GRPOConfig(env="XTree-Countdown-v0").resolved().harness == "countdown"


def test_an_env_without_a_harness_is_one_error_naming_the_flag() -> None:
    with pytest.raises(ConfigError, match="--harness"):
        GRPOConfig(env="mypkg.games:MazeEnv").resolved()
    assert GRPOConfig(env="mypkg.games:MazeEnv", harness="textgame").resolved().harness == "textgame"


def test_countdown_harness_round_trips_the_oracle_action() -> None:
    pytest.importorskip("gymnasium")
    from xtree_gym.agents.model.oracle import oracle_action
    from xtree_gym.envs.countdown import CountdownEnv

    env, h = CountdownEnv(), get_harness("countdown")
    env.reset(seed=3)
    for _ in env.solution:
        action = oracle_action(env)
        assert action is not None and h.parse(h.format_response(action)).action == action
        *_, info = env.step(action)
        assert not info["invalid_action"]
    assert info["won"]


# ----------------------------------------------------------------------------- trainer runs (tiny-random)


def _train(tmp_path: Path, *extra: str) -> list[dict]:
    pytest.importorskip("accelerate")
    pytest.importorskip("transformers")
    from xtree_gym.agents.run.metrics import read_metrics
    from xtree_gym.cli import main

    args = ["train", "rlvr", "--env", "XTree-Countdown-v0", "--model", "tiny-random", "--tasks-per-step", "2"]
    args += ["--n", "2", "--max-new-tokens", "6", "--max-steps", "2", "--lr", "1e-3", "--no-progress"]
    args += ["--keep-checkpoints", "0", "-o", str(tmp_path / "run"), *extra]
    rc = main(args)
    assert (rc != 0) == ("--zero-signal-steps" in extra)  # the zero-signal runs below end in the error
    return read_metrics(tmp_path / "run") if (tmp_path / "run" / "metrics.jsonl").exists() else []


def test_countdown_trains_with_its_own_harness(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    from safetensors.torch import load_file

    from xtree_gym.agents.model.loading import load_model

    lines = _train(
        tmp_path, "--steps", "1", "--oracle-mix", "0.5", "--max-steps", "3", "--report-to", "tensorboard"
    )
    (m,) = lines
    assert m["signal_groups"] == m["groups"] == 2 and m["no_signal"] == ""  # oracle wins, the policy fails
    assert m["win_rate"] == 0.5 and m["invalid_rate"] < 1.0 and m["grad_norm"] > 0
    init = dict(load_model("tiny-random", seed=0)[0].state_dict())
    after = load_file(str(tmp_path / "run" / "checkpoint-000001" / "model" / "model.safetensors"))
    assert any(not torch.equal(init[k], after[k]) for k in after)
    if installed("tensorboard"):  # the tracker wrote the step's scalars
        scalars = _tb_scalars(tmp_path / "run" / "tb")
        assert scalars["reward"] == [(1, pytest.approx(m["reward"]))]


def test_a_zero_signal_run_stops_with_the_reason(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lines = _train(tmp_path, "--steps", "5", "--zero-signal-steps", "2", "--report-to", "none")
    err = capsys.readouterr().err
    assert [m["step"] for m in lines] == [1, 2]  # stopped after 2 of 5 steps, step 2 saved
    assert (tmp_path / "run" / "checkpoint-000002").is_dir()
    assert all(m["no_signal"] and m["signal_groups"] == 0 for m in lines)
    assert "no learning signal" in err and "--zero-signal-steps 0" in err and "--harness" in err


def _tb_scalars(folder: Path) -> dict[str, list[tuple[int, float]]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(folder))
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


# ----------------------------------------------------------------------------- trackers


def test_tensorboard_tracker_writes_scalars(tmp_path: Path) -> None:
    pytest.importorskip("accelerate")
    if not installed("tensorboard"):
        pytest.skip("tensorboard is not installed")
    t = Trackers(resolve_trackers("tensorboard", tensorboard=False), tmp_path, config={"lr": 1e-6, "env": {}})
    t.log({"step": 1, "loss": 0.5, "no_signal": "", "nan": float("nan")})
    t.log({"step": 2, "loss": 0.25})
    t.close()
    scalars = _tb_scalars(tmp_path / "tb")
    assert scalars["loss"] == [(1, 0.5), (2, 0.25)] and "nan" not in scalars and "no_signal" not in scalars


def test_missing_tracker_package_is_one_error_naming_it() -> None:
    for name in ("wandb", "trackio", "mlflow"):
        if not installed(name):
            with pytest.raises(DependencyError, match=f"pip install {name}"):
                resolve_trackers(name, tensorboard=True)
    assert resolve_trackers("none", tensorboard=True) == []
    assert resolve_trackers(None, tensorboard=False) == []
    with pytest.raises(ConfigError, match="report_to"):
        GRPOConfig(report_to="neptune").resolved()


# ----------------------------------------------------------------------------- ScienceWorld reward scale


def test_scienceworld_outcome_is_rlvmr_won10_by_default() -> None:
    assert GRPOConfig(env="scienceworld").resolved().outcome == "won10"
    assert GRPOConfig(env="webshop").resolved().outcome == "env"
    partial = Episode("a", "scienceworld", "t", "g", 0, 0, 0, reward=75.0, success=False)
    won = Episode("b", "scienceworld", "t", "g", 0, 0, 1, reward=100.0, success=True)
    # RLVMR: 10 · won (a 75-point failure is a failure); the env's points would make it 75
    assert [outcome_of(e, "won10") for e in (partial, won)] == [0.0, 10.0]
    assert plain_rewards([partial, won], invalid_penalty=0.1, outcome="env").rewards == [75.0, 100.0]
    assert xtree_rewards([partial, won], [2.0, 0.0], invalid_penalty=0.1, lambda0=0.75, w_ref=0.4,
                         outcome="won10").rewards == [0.0, 10.0]  # win rate 0.5 >= w_ref: λ_g = 0  # fmt: skip
    # an all-fail group: under won10 the X-Tree bonus (λ_g = λ0 = 0.75) alone separates the rollouts;
    # in points a 75-point failure outweighs it 50 to 1
    fail = Episode("c", "scienceworld", "t", "g", 0, 0, 1, reward=0.0, success=False)
    kw = {"invalid_penalty": 0.1, "lambda0": 0.75, "w_ref": 0.4}
    assert xtree_rewards([partial, fail], [0.0, 2.0], **kw, outcome="won10").rewards == [0.0, 1.5]
    assert xtree_rewards([partial, fail], [0.0, 2.0], **kw, outcome="env").rewards == [75.0, 1.5]


# ----------------------------------------------------------------------------- OPSD


def test_opsd_expected_gradient_zero_for_eq4_at_beta0_and_reverse_kl_for_rkl() -> None:
    torch = pytest.importorskip("torch")
    from xtree_gym.agents.grpo.losses import opsd_term

    theta = torch.tensor([0.3, -0.2, 0.5, 0.0], requires_grad=True)  # one-token policy over 4 tokens
    teacher = torch.log_softmax(torch.tensor([1.0, 0.0, -1.0, 0.5]), -1)
    c = 0.5

    def expected_grad(grad: str, beta: float) -> torch.Tensor:
        """Σ_y π(y) ∇ term(y): the exact expectation over on-policy samples."""
        probs = torch.softmax(theta, -1).detach()
        total = torch.zeros(4)
        for y in range(4):
            logp = torch.log_softmax(theta, -1)[y].reshape(1, 1)
            term = opsd_term(logp, teacher[y].reshape(1, 1), torch.ones(1, 1), beta=beta, c=c, grad=grad)
            (g,) = torch.autograd.grad(term, theta)
            total += probs[y] * g
        return total

    assert torch.allclose(expected_grad("eq4", 0.0), torch.zeros(4), atol=1e-7)  # distils nothing
    assert expected_grad("eq4", 5.0).abs().max() > 1e-3  # the gate lets the teacher in
    # rkl at β = 0: (c/2) · ∇ KL(π_θ ‖ π_teacher), computed in closed form
    kl = (torch.softmax(theta, -1) * (torch.log_softmax(theta, -1) - teacher)).sum()
    (grad_kl,) = torch.autograd.grad(kl, theta)
    assert torch.allclose(expected_grad("rkl", 0.0), c / 2 * grad_kl, atol=1e-6)


def test_webshop_opsd_recipe_distils_and_a_zero_gradient_config_warns(tmp_path: Path) -> None:
    from xtree_gym.agents.grpo.cli import recipes
    from xtree_gym.agents.grpo.config import config_from_mapping, load_config_file
    from xtree_gym.agents.grpo.losses import opsd_zero_gradient

    data = {**load_config_file(recipes()["webshop-opsd-gpu"]), "tree": "t.json"}
    cfg = config_from_mapping(GRPOConfig, data)
    assert cfg.opsd_beta == 0.0 and cfg.opsd_grad == "rkl"
    assert opsd_zero_gradient(grad="rkl", beta=0.0, c=cfg.opsd_c) is None
    assert "exactly 0" in (opsd_zero_gradient(grad="eq4", beta=0.0, c=0.01) or "")
    pytest.importorskip("accelerate")
    pytest.importorskip("transformers")
    from xtree_gym.agents.grpo.trainer import GRPOTrainer

    bad = GRPOConfig(env="scienceworld", opsd="empty", opsd_beta=0.0, opsd_grad="eq4", output_dir=str(tmp_path),
                     progress=False, tensorboard=False, kl_coef=0.0)  # fmt: skip
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        GRPOTrainer(bad)
    assert any("OPSD distils nothing" in str(w.message) for w in caught)
