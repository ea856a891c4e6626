"""Issue 23's bonus designs beside Eq. 3: hand-computed values, Eq. 3 untouched, clear errors."""

from __future__ import annotations

import pytest

from xtree_gym.corpus import Step, Trajectory
from xtree_gym.errors import ConfigError
from xtree_gym.mining import mine
from xtree_gym.mining.config import MinerConfig
from xtree_gym.rewards import group_rewards
from xtree_gym.rewards.modes import (
    BONUS_MODES,
    annealed_weight,
    gated_weight,
    max_episode_bonus,
    normalized_bonus,
    shaped_group_rewards,
)


def test_eq3_mode_is_eq3_exactly() -> None:
    cases: list[tuple[list[float], list[float], list[bool]]] = [
        ([0, 0, 0], [4.0, 1.5, 0.0], [False] * 3),
        ([1, 0, 0.5], [2.0, 9.0, 1.0], [True, False, True]),
    ]
    for outcomes, bonuses, won in cases:
        for w_ref in (0.4, 0.85):
            got, _ = shaped_group_rewards(outcomes, bonuses, won, w_ref=w_ref)
            assert got == group_rewards(outcomes, bonuses, won, 0.75, w_ref)
    # hand: w_g = 2/3 >= w_ref 0.4 -> λ_g = 0; all-fail -> 0.75
    assert shaped_group_rewards([1, 0, 0.5], [2.0, 9.0, 1.0], [True, False, True])[1] == 0.0
    assert shaped_group_rewards([0, 0], [2.0, 0.0], [False, False]) == ([1.5, 0.0], 0.75)


def test_normalized_any_win_outranks_any_bonus_only_episode() -> None:
    # B_max 10, margin 0.09: bonus-only episode worth at most 0.09 < smallest MiniGrid win 0.1
    rewards, lam = shaped_group_rewards(
        [0.1, 0.0, 0.0, 0.0], [0.0, 10.0, 50.0, 5.0], [True, False, False, False],
        mode="normalized", max_bonus=10.0, margin=0.09, w_ref=0.4,
    )  # fmt: skip
    # w_g = 0.25 -> λ_g = 0.75 · (1 − 0.625) = 0.28125, scale λ_g/λ0 = 0.375
    assert lam == pytest.approx(0.28125)
    assert rewards == pytest.approx([0.1, 0.03375, 0.03375, 0.016875])
    assert rewards[0] > max(rewards[1:])
    # all-fail: full scale; only relative bonus separates
    r, _ = shaped_group_rewards(
        [0, 0], [2.5, 10.0], [False, False], mode="normalized", max_bonus=10.0, margin=0.2
    )
    assert r == pytest.approx([0.05, 0.2])
    assert normalized_bonus(5.0, 0.0, 0.5) == 0.0


def test_gated_only_where_the_verifier_cannot_separate() -> None:
    assert gated_weight([False, False, False], 0.6) == 0.6
    assert gated_weight([True, True], 0.6) == 0.6
    assert gated_weight([True, False, False], 0.6) == 0.0
    assert shaped_group_rewards([1, 1], [2.0, 0.0], [True, True], mode="gated") == ([2.5, 1.0], 0.75)
    assert shaped_group_rewards([0, 0], [2.0, 0.0], [False, False], mode="gated") == ([1.5, 0.0], 0.75)
    assert shaped_group_rewards([1, 0], [0.0, 9.0], [True, False], mode="gated") == ([1.0, 0.0], 0.0)


def test_annealed_reaches_zero_even_when_the_win_rate_falls_back() -> None:
    # the group now wins nothing (farming), but 0.3 was reached before: λ0 (1 − 0.3/0.4) = 0.1875
    assert annealed_weight(0.0, 0.3, 0.0, 0.75, 0.4) == pytest.approx(0.1875)
    assert annealed_weight(0.0, 0.3, 0.5, 0.75, 0.4) == pytest.approx(0.09375)
    assert annealed_weight(0.0, 0.0, 0.8, 0.75, 0.4, anneal_end=0.8) == 0.0
    assert annealed_weight(0.0, 0.0, 2.0) == 0.0  # past the end stays 0
    assert annealed_weight(0.0, 0.5, 0.0, 0.75, 0.4) == 0.0
    r, lam = shaped_group_rewards([0, 0], [4.0, 0.0], [False, False], mode="annealed",
                                  best_win_rate=0.2, progress=0.25, w_ref=0.4)  # fmt: skip
    assert lam == pytest.approx(0.375 * 0.75) and r == pytest.approx([1.125, 0.0])


def test_max_episode_bonus_bounds_every_episode() -> None:
    from xtree_gym.rewards import sequence_bonus

    trajs = [Trajectory(str(i), [Step(a, token=a) for a in "abcabcab"], True) for i in range(6)]
    tree = mine(trajs, MinerConfig(min_freq=3, eta=0.5, cap=6))
    bound = max_episode_bonus(tree)
    assert bound == sum(1.0 + 0.5 * n.depth for n in tree.nodes)
    for toks in ("abcabcab", "ab" * 10, "cabcab", "abcabcabcabc"):
        assert sequence_bonus(tree, list(toks)).total <= bound


def test_bad_mode_and_parameters_are_one_error() -> None:
    assert BONUS_MODES[0] == "eq3"
    with pytest.raises(ConfigError, match="bonus mode 'nope'"):
        shaped_group_rewards([0], [1.0], [False], mode="nope")
    with pytest.raises(ConfigError, match="margin"):
        shaped_group_rewards([0], [1.0], [False], mode="normalized", margin=0.0)
    with pytest.raises(ConfigError, match="group sizes differ"):
        shaped_group_rewards([0, 1], [1.0], [False, True], mode="gated")


def test_shaping_xtree_rewards_takes_the_mode() -> None:
    """The trainer's reward phase: eq3 unchanged, gated silences a mixed group, invalid penalty kept."""
    from xtree_gym.agents.grpo.shaping import xtree_rewards
    from xtree_gym.agents.types import Episode

    eps = [Episode(str(i), "env", "x", "g", 0, i // 2, i) for i in range(4)]
    eps[0].success, eps[0].reward = True, 1.0  # group 0 mixed, group 1 all-fail
    b = [2.0, 2.0, 2.0, 0.0]
    eq3 = xtree_rewards(eps, b, invalid_penalty=0.1, lambda0=0.75, w_ref=0.4)
    assert eq3.rewards == [1.0, 0.0, 1.5, 0.0] and eq3.lambdas == [0.0, 0.0, 0.75, 0.75]
    gated = xtree_rewards(eps, b, invalid_penalty=0.1, lambda0=0.75, w_ref=0.4, mode="gated")
    assert gated.rewards == [1.0, 0.0, 1.5, 0.0]
    norm = xtree_rewards(
        eps, b, invalid_penalty=0.1, lambda0=0.75, w_ref=0.4, mode="normalized", max_bonus=4.0, margin=0.5
    )
    assert norm.rewards == [1.0, 0.0, 0.25, 0.0]
    ann = xtree_rewards(eps, b, invalid_penalty=0.1, lambda0=0.75, w_ref=0.4, mode="annealed", progress=0.75)
    assert ann.rewards == pytest.approx([1.0, 0.0, 0.375, 0.0])


def test_cli_flag_and_its_error(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from xtree_gym.cli import main

    assert main(["train", "rlvr", "--bonus-mode", "gated", "--bonus-margin", "0.3", "--print-config"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["bonus_mode"], out["bonus_margin"], out["bonus_anneal_end"]) == ("gated", 0.3, 1.0)
    assert main(["train", "rlvr", "--bonus-mode", "farm", "-o", str(tmp_path / "r")]) == 1
    err = capsys.readouterr().err
    assert "bonus mode 'farm'" in err and "eq3, normalized, gated, annealed" in err and "Traceback" not in err


@pytest.mark.parametrize("mode", ["normalized", "gated", "annealed"])
def test_train_rlvr_two_steps_with_each_mode(tmp_path, mode: str) -> None:
    """Real WebShop (demo catalogue), tiny-random: the mode reaches the metrics and the weights move."""
    pytest.importorskip("bm25s", reason="the webshop extra is not installed")
    from safetensors.torch import load_file

    from xtree_gym.agents.run.metrics import read_metrics
    from xtree_gym.cli import main
    from xtree_gym.envs.webshop_data import write_demo_data

    shop = write_demo_data(tmp_path / "shop")
    toks = ["search<query>", "click<item>", "click<option-size>", "click<buy>"]
    trajs = [
        Trajectory(str(i), [Step(t, token=t) for t in toks], i < 6, env="webshop", task="webshop")
        for i in range(8)
    ]
    mine(trajs, MinerConfig(min_freq=3, eta=0.5, cap=5)).save(tmp_path / "tree.json")
    run = tmp_path / "run"
    args = ["train", "rlvr", "--config", "webshop-cpu-smoke", "--env-kwargs", f"data_dir={shop}",
            "--shaping", "xtree", "--tree", str(tmp_path / "tree.json"), "--bonus-mode", mode,
            "-o", str(run), "--keep-checkpoints", "0", "--no-tensorboard"]  # fmt: skip
    assert main(args) == 0
    lines = read_metrics(run)
    assert [m["win_rate"] for m in lines] == [0.5, 0.5]  # the oracle member buys, the random one does not
    assert all(m["bonus"] > 0 for m in lines)
    lam = 0.75 * (1 - 0.5 / 0.85)  # Eq. 3's λ_g at w_g = 0.5, w_ref 0.85
    want = {"normalized": [lam, lam], "gated": [0.0, 0.0], "annealed": [lam, lam * 0.5]}[mode]
    assert [m["lambda_g"] for m in lines] == pytest.approx(want)
    w1, w2 = (load_file(str(run / f"checkpoint-00000{k}" / "model" / "model.safetensors")) for k in (1, 2))
    assert any(not torch_equal(w1[k], w2[k]) for k in w1)


def torch_equal(a, b) -> bool:  # type: ignore[no-untyped-def]
    import torch

    return bool(torch.equal(a, b))


def test_auto_picks_contrastive_gated_only_with_a_labelled_corpus() -> None:
    """Issue 34's default: contrastive values need successes and failures; without both, Eq. 3."""
    from xtree_gym.rewards.modes import AUTO_MODE, check_bonus_mode, pick_bonus_mode

    cases = {(True, False): "contrastive_gated", (True, True): "eq3", (False,): "eq3", (): "eq3"}
    assert {k: pick_bonus_mode(AUTO_MODE, list(k)) for k in cases} == cases
    assert pick_bonus_mode(AUTO_MODE, None) == "eq3" and pick_bonus_mode("potential", [True]) == "potential"
    check_bonus_mode(AUTO_MODE, auto=True)  # a config may say auto ...
    with pytest.raises(ConfigError, match="'auto'"):  # ... the reward function needs the mode it stands for
        shaped_group_rewards([0, 0], [1.0, 0.0], [False, False], mode=AUTO_MODE)
