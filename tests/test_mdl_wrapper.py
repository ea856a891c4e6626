"""SegCost wrapper on the real Countdown env, and the `xtree mdl` CLI plugin."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from xtree_gym.envs.countdown import CountdownEnv
from xtree_gym.errors import ConfigError, EnvConfigError
from xtree_gym.reuserl.mdl import MDLConfig, ReuseRLShaper, SkillDictionary
from xtree_gym.wrappers.mdl import SegCost

PUZZLE = {"numbers": [80, 2, 28, 1], "target": 54}
SOLUTION = ["op(-, 80, 28)", "op(+, 52, 2)", "op(*, 54, 1)"]
SKILLS = ("sub<large-small>", "add<near_target-small>", "mul<near_target-small>")


def _play(env: SegCost, actions: list[str]) -> tuple[list[float], dict]:
    env.reset(options=PUZZLE)
    rewards = []
    for a in actions:
        _, r, _, _, info = env.step(a)
        rewards.append(float(r))
    return rewards, info


def test_fixed_dictionary_penalty_at_episode_end() -> None:
    d = SkillDictionary.singletons(SKILLS).with_phrase(SKILLS[:2])
    env = SegCost(CountdownEnv(), d)
    rewards, info = _play(env, SOLUTION)
    # seg = 2 (sub·add, mul), T = 30: 10 - 10 * 2/30
    assert rewards[:2] == [0.0, 0.0] and rewards[2] == pytest.approx(10 - 10 * 2 / 30)
    x = info["xtree"]
    assert x["seg"] == 2 and x["segmentation"] == [list(SKILLS[:2]), [SKILLS[2]]]
    assert x["segcost"] == pytest.approx(2 / 30) and x["mdl_penalty"] == pytest.approx(20 / 30)
    assert x["token"] == SKILLS[2]  # the env's keys are kept


def test_round_length_mode_and_failures_unpenalised() -> None:
    env = SegCost(CountdownEnv(horizon=4), SkillDictionary.singletons(SKILLS), mode="length", lam=3.0)
    rewards, info = _play(env, ["rollback", *SOLUTION])  # 4 steps, success on the last
    assert rewards[-1] == pytest.approx(10 - 3.0 * 4 / 4)
    rewards, info = _play(env, ["rollback"] * 4)  # timeout: no success, no penalty
    assert info["end"] == "timeout" and rewards[-1] == 0.0 and info["xtree"]["mdl_penalty"] == 0.0


def test_online_shaper_learns_a_phrase_and_lowers_the_penalty() -> None:
    shaper = ReuseRLShaper(horizon=30, config=MDLConfig(buffer_size=16))
    env = SegCost(CountdownEnv(), shaper)
    finals = [_play(env, SOLUTION)[0][-1] for _ in range(8)]
    # K = 3: merges pay only from the 7th identical success on (by Eq. 3), then the whole
    # solution is one phrase: seg 3 -> 1
    assert finals[:6] == [pytest.approx(10 - 10 * 3 / 30)] * 6
    assert finals[6:] == [pytest.approx(10 - 10 * 1 / 30)] * 2
    assert shaper.dictionary.merged[-1] == SKILLS and len(shaper.buffer) == 8


def test_default_shaper_uses_the_env_alphabet() -> None:
    from xtree_gym.canon.countdown import SKILLS as SIGMA

    env = SegCost(CountdownEnv())
    assert env.shaper is not None and env.shaper.alphabet == set(SIGMA) and len(env.dictionary) == 26
    _, info = _play(env, SOLUTION)
    assert info["xtree"]["seg"] == 3 and info["xtree"]["skills"] == list(SKILLS)


def test_wrapper_errors() -> None:
    import gymnasium as gym

    class NoToken(gym.Env):
        observation_space = action_space = gym.spaces.Text(8)

        def reset(self, *, seed=None, options=None):
            return "", {}

        def step(self, action):
            return "", 0.0, True, False, {}

    with pytest.raises(ConfigError, match="horizon"):
        SegCost(NoToken())
    env = SegCost(NoToken(), horizon=5)
    env.reset()
    with pytest.raises(EnvConfigError, match="xtree"):
        env.step("a")
    with pytest.raises(ConfigError):
        SegCost(CountdownEnv(), mode="bits")
    with pytest.raises(ConfigError):
        SegCost(CountdownEnv(), SkillDictionary.singletons("a"), learn=True)


def test_cli_prints_the_dictionary(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from xtree_gym.reuserl.cli import register_cli

    corpus = tmp_path / "c.jsonl"
    lines = []
    for i in range(12):
        steps = [{"action": a} for a in SOLUTION] if i % 4 else [{"action": "reset"}]
        lines.append(json.dumps({"id": f"t{i}", "success": bool(i % 4), "target": 54, "steps": steps}))
    corpus.write_text("\n".join(lines) + "\n")
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    register_cli(sub, None)
    out_json = tmp_path / "dict.json"
    args = parser.parse_args(["mdl", str(corpus), "--domain", "countdown", "--json", str(out_json)])
    assert args.func(args) == 0
    text = capsys.readouterr().out
    assert "9 sequences" in text and " ".join(SKILLS) in text
    saved = SkillDictionary.from_dict(json.loads(out_json.read_text()))
    assert SKILLS in saved and saved.seg(list(SKILLS)) == 1
