"""TextWorld-Cooking: a real generated game replayed to a win, burn/timeout ends, the 10-skill projection."""

from __future__ import annotations

from pathlib import Path

import pytest

from xtree_gym.canon import canonicalize
from xtree_gym.canon.twcooking import LABELS, SKILLS
from xtree_gym.envs.twcooking import TWCookingConfig, TWCookingEnv, game_settings, generate_game
from xtree_gym.errors import EnvConfigError


def test_paper_worked_example_projection() -> None:
    walk = ["examine cookbook", "open fridge", "take carrot from fridge", "dice carrot", "cook carrot with stove",
            "prepare meal", "eat meal"]  # fmt: skip
    labels = [LABELS[canonicalize("twcooking", a).token] for a in walk]
    assert labels == ["Read_Recipe", "Open", "Take", "Cut", "Cook", "Prepare_Meal", "Eat_Meal"]
    assert len(set(SKILLS)) == 10
    other = ["go north", "west", "look", "inventory", "examine fridge", "drop knife", "put apple on counter",
             "close fridge", "slice red potato with knife", "xyzzy"]  # fmt: skip
    assert [canonicalize("twcooking", a).token for a in other] == [
        "go<room>", "go<room>", "examine<object>", "examine<object>", "examine<object>", "drop<item>",
        "drop<item>", "open<container>", "cut<ingredient>", "examine<object>",
    ]  # fmt: skip
    assert canonicalize("twcooking", "slice red potato with knife").slots == {
        "verb": "slice", "object": "red potato", "tool": "knife"}  # fmt: skip


def _env(game: Path, **kw: object) -> TWCookingEnv:
    return TWCookingEnv(cache_dir=str(game.parent), **kw)  # type: ignore[arg-type]


def test_walkthrough_wins_with_plus_10(tw_cooking_game: Path) -> None:
    env = _env(tw_cooking_game)
    obs, info = env.reset(options={"game": 3})
    assert "cookbook" in obs.lower() and info["walkthrough"]
    walk = info["walkthrough"]
    tokens, rewards = [], []
    for cmd in walk:
        obs, r, term, trunc, info = env.step(cmd)
        tokens.append(info["xtree"]["token"])
        rewards.append(r)
        assert not info["invalid_action"], cmd
    assert term and not trunc and info["won"] and info["end"] == "success"
    assert rewards[-1] == 10.0 and sum(rewards) == 10.0
    assert tokens == [canonicalize("twcooking", c).token for c in walk]
    assert set(tokens) <= set(SKILLS)
    labels = [LABELS[t] for t in tokens]
    # cook + cut game: the recipe is read, the item taken, cooked and cut, then the meal made and eaten
    for needed in ("Read_Recipe", "Take", "Cook", "Cut", "Prepare_Meal"):
        assert needed in labels
    assert labels[-2:] == ["Prepare_Meal", "Eat_Meal"]
    assert labels.index("Read_Recipe") < labels.index("Take") < labels.index("Prepare_Meal")
    env.close()


def test_burning_food_is_a_terminal_loss(tw_cooking_game: Path) -> None:
    env = _env(tw_cooking_game)
    _, info = env.reset(options={"game": 3})
    walk = info["walkthrough"]
    cook = next(c for c in walk if c.startswith("cook "))
    for cmd in walk[: walk.index(cook) + 1]:
        _, r, term, _, info = env.step(cmd)
        assert not term
    _, r, term, trunc, info = env.step(cook)  # cooking twice burns it
    assert term and not trunc and r == 0.0 and info["lost"] and info["end"] == "lost"
    env.close()


def test_timeout_and_invalid_flag(tw_cooking_game: Path) -> None:
    env = _env(tw_cooking_game, horizon=3)
    env.reset(options={"game": 3})
    for _ in range(3):
        _, r, term, trunc, info = env.step("dance")
        assert info["xtree"]["invalid"] and info["xtree"]["token"] == "examine<object>"
    assert trunc and not term and info["end"] == "timeout" and r == 0.0
    with pytest.raises(EnvConfigError):
        env.step("look")
    env.close()


def test_cache_is_reused_and_seeded_reset_uses_it(tw_cooking_game: Path) -> None:
    mtime = tw_cooking_game.stat().st_mtime_ns
    assert generate_game("simple", 3, tw_cooking_game.parent) == tw_cooking_game
    assert tw_cooking_game.stat().st_mtime_ns == mtime
    env = TWCookingEnv(game_file=tw_cooking_game)
    _, info = env.reset(seed=0)
    assert info["game_file"] == str(tw_cooking_game) and env.horizon == 40
    env.close()


def test_settings_and_config_errors(tmp_path: Path) -> None:
    assert game_settings("hard", 0)["go"] == 6 and game_settings("simple", 0)["go"] == 1
    with pytest.raises(EnvConfigError):
        TWCookingConfig(difficulty="medium")
    with pytest.raises(EnvConfigError):
        TWCookingEnv(game_file=tmp_path / "missing.z8")
    with pytest.raises(EnvConfigError, match="valid settings"):
        TWCookingEnv(rooms=3)
