"""Countdown-Stepwise: rules (exact division, Rollback/Reset, Stuck, Timeout), generation, projection."""

from __future__ import annotations

import pytest

from xtree_gym.canon import canonicalize, get_canonicalizer
from xtree_gym.canon.countdown import SKILLS, parse_action, role
from xtree_gym.corpus import Step, Trajectory
from xtree_gym.envs.countdown import CountdownConfig, CountdownEnv, generate_puzzle
from xtree_gym.errors import EnvConfigError

PUZZLE = {"numbers": [80, 2, 28, 1], "target": 54}


def _env(**kw: object) -> CountdownEnv:
    env = CountdownEnv(**kw)  # type: ignore[arg-type]
    env.reset(options=PUZZLE)
    return env


def test_paper_worked_example_projection_and_win() -> None:
    env = _env()
    tokens, rewards = [], []
    for a in ["op(-, 80, 28)", "op(+, 52, 2)", "op(*, 54, 1)"]:
        _, r, term, trunc, info = env.step(a)
        tokens.append(info["xtree"]["token"])
        rewards.append(r)
    assert tokens == ["sub<large-small>", "add<near_target-small>", "mul<near_target-small>"]
    assert rewards == [0.0, 0.0, 10.0] and term and not trunc
    assert info["won"] and info["end"] == "success" and info["pool"] == [54]
    labels = [get_canonicalizer("countdown").glosses[t] for t in tokens]
    assert labels == ["OP_Sub-large-small", "OP_Add-near_target-small", "OP_Mul-near_target-small"]


def test_alphabet_has_26_skills_and_roles_are_unordered() -> None:
    assert len(set(SKILLS)) == 26
    ctx = {"target": 54}
    assert (
        canonicalize("countdown", "op(+, 1, 10)", ctx).token
        == canonicalize("countdown", "op(+, 10, 1)", ctx).token
    )
    # ±10 % band: 48.6 .. 59.4 is near_target
    assert [role(n, 54) for n in (48, 49, 59, 60)] == ["small", "near_target", "near_target", "large"]
    seen = {canonicalize("countdown", f"op({op}, {a}, {b})", ctx).token for op in "+-*/" for a in (1, 54, 90)
            for b in (1, 54, 90)}  # fmt: skip
    assert seen == set(SKILLS[:24])


def test_parse_forms() -> None:
    assert parse_action("OP(div, 8, 2)") == ("/", 8, 2)
    assert parse_action("8 / 2 = 4") == ("/", 8, 2)
    assert parse_action("RESET") == "reset"
    assert parse_action("op(+, 1)") is None


def test_division_must_be_exact() -> None:
    env = _env()
    _, _, _, _, info = env.step("op(/, 28, 80)")
    assert info["invalid_action"] and info["xtree"]["invalid"] and info["pool"] == [80, 2, 28, 1]
    _, _, _, _, info = env.step("op(/, 80, 2)")
    assert not info["invalid_action"] and info["pool"] == [28, 1, 40]
    _, _, _, _, info = env.step("op(/, 40, 0)")
    assert info["invalid_action"]


def test_operands_must_be_in_pool_and_no_negatives() -> None:
    env = _env()
    assert env.step("op(+, 80, 80)")[4]["invalid_action"]  # only one 80
    assert env.step("op(+, 7, 2)")[4]["invalid_action"]
    assert env.step("op(-, 2, 80)")[4]["invalid_action"]  # -78 not allowed
    neg = _env(allow_negative=True)
    assert neg.step("op(-, 2, 80)")[4]["pool"] == [28, 1, -78]


def test_rollback_and_reset() -> None:
    env = _env()
    env.step("op(+, 80, 2)")
    env.step("op(*, 82, 28)")
    info = env.step("rollback")[4]
    assert (
        info["pool"] == [28, 1, 82]
        and info["xtree"]["token"] == "rollback<pool>"
        and not info["invalid_action"]
    )
    info = env.step("rollback")[4]
    assert info["pool"] == [80, 2, 28, 1]
    assert env.step("rollback")[4]["invalid_action"]  # nothing left to undo
    env.step("op(+, 80, 2)")
    info = env.step("reset")[4]
    assert info["pool"] == [80, 2, 28, 1] and info["xtree"]["token"] == "reset<pool>"
    assert env.step("rollback")[4]["invalid_action"]  # reset clears the history


def test_stuck_ends_the_episode() -> None:
    env = CountdownEnv()
    env.reset(options={"numbers": [3, 4], "target": 10})
    _, r, term, trunc, info = env.step("op(+, 3, 4)")
    assert not term and info["pool"] == [7]
    _, r, term, trunc, info = env.step("op(+, 7, 7)")
    assert term and not trunc and r == 0.0 and info["end"] == "stuck" and not info["won"]
    env.reset(options={"numbers": [3, 4], "target": 10})
    env.step("op(*, 3, 4)")
    assert env.step("what now?")[4]["end"] == "stuck"  # unparsable counts too
    env.reset(options={"numbers": [3, 4], "target": 10})
    env.step("op(*, 3, 4)")
    _, _, term, _, info = env.step("rollback")  # rollback is the way out
    assert not term and info["pool"] == [3, 4]


def test_timeout_truncates_at_T() -> None:
    env = _env(horizon=5)
    for i in range(5):
        _, r, term, trunc, info = env.step("rollback")
        assert not term and r == 0.0
        assert trunc == (i == 4)
    assert info["end"] == "timeout"
    with pytest.raises(EnvConfigError):
        env.step("reset")
    assert CountdownEnv().horizon == 30


def test_seeded_generation_is_solvable_and_deterministic() -> None:
    env = CountdownEnv()
    first = [env.reset(seed=s)[1] for s in range(60)]
    again = [env.reset(seed=s)[1] for s in range(60)]
    assert [(i["numbers"], i["target"]) for i in first] == [(i["numbers"], i["target"]) for i in again]
    assert len({(tuple(i["numbers"]), i["target"]) for i in first}) > 50
    for s, info in enumerate(first):
        assert 3 <= len(info["numbers"]) <= 4 and 10 <= info["target"] <= 999
        env.reset(seed=s)
        for a in info["solution"]:
            _, r, term, _, out = env.step(a)
            assert not out["invalid_action"]
        assert term and r == 10.0, (s, info)


def test_config_errors_and_gym_registration() -> None:
    with pytest.raises(EnvConfigError):
        CountdownEnv(horizon=0)
    with pytest.raises(EnvConfigError, match="valid settings"):
        CountdownEnv(colour="red")
    with pytest.raises(EnvConfigError):
        CountdownEnv().reset(options={"numbers": [1], "target": 5})
    with pytest.raises(EnvConfigError):
        generate_puzzle(__import__("numpy").random.default_rng(0), CountdownConfig(min_target=998, max_target=999,
                        max_value=2, min_numbers=2, max_numbers=2))  # fmt: skip
    import gymnasium as gym

    from xtree_gym.envs import register_envs

    register_envs()
    env = gym.make("XTree-Countdown-v0")
    _, info = env.reset(seed=1)
    assert env.step(info["solution"][0])[4]["xtree"]["verb"] in ("add", "sub", "mul", "div")


def test_corpus_context_reads_the_target() -> None:
    t = Trajectory(id="t", steps=[Step("op(-, 80, 28)")], success=True, extra={"target": 54})
    canon = get_canonicalizer("countdown")
    assert canon(t.steps[0].action, canon.corpus_context(t, 0)).token == "sub<large-small>"
