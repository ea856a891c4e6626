"""ALFWorld: the 5-skill projection on hand-written trajectories (its data cannot be downloaded here),
and the one clear error naming ALFWORLD_DATA when the data is absent."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import ClassVar

import pytest

from xtree_gym.canon import get_canonicalizer
from xtree_gym.canon.alfworld import LABELS, SKILLS
from xtree_gym.corpus import Step, Trajectory
from xtree_gym.envs.alfworld import ALFWorldEnv, find_games
from xtree_gym.errors import EnvConfigError

CANON = get_canonicalizer("alfworld")


def _project(t: Trajectory) -> list[str]:
    return [LABELS[CANON(s.action, CANON.corpus_context(t, i)).token] for i, s in enumerate(t.steps)]


def test_paper_worked_example() -> None:
    actions = ["go to drawer 1", "open drawer 1", "take ladle 1 from drawer 1", "go to sinkbasin 1",
               "clean ladle 1 with sinkbasin 1", "go to countertop 1", "put ladle 1 on countertop 1"]  # fmt: skip
    t = Trajectory(id="clean-ladle", steps=[Step(a) for a in actions], success=True)
    assert _project(t) == ["Explore", "Explore", "Take", "Transport", "Transform", "Transport", "Deliver"]


def test_failed_take_does_not_count_and_put_releases() -> None:
    steps = [
        Step("go to cabinet 1", "You arrive at cabinet 1."),
        Step("take mug 1 from cabinet 1", "Nothing happens."),  # no mug there: still empty-handed
        Step("go to shelf 2", "You arrive at shelf 2."),
        Step("take mug 1 from shelf 2", "You pick up the mug 1 from the shelf 2."),
        Step("heat mug 1 with microwave 1", "You heat the mug 1 using the microwave 1."),
        Step("go to coffeemachine 1", "You arrive at coffeemachine 1."),
        Step("move mug 1 to coffeemachine 1", "You move the mug 1 to the coffeemachine 1."),
        Step("go to desk 1", "You arrive at desk 1."),
        Step("use desklamp 1", "You turn on the desklamp 1."),
        Step("inventory", "You are not carrying anything."),
    ]
    t = Trajectory(id="heat-mug", steps=steps, success=True)
    assert _project(t) == ["Explore", "Take", "Explore", "Take", "Transform", "Transport", "Deliver",
                           "Explore", "Transform", "Explore"]  # fmt: skip
    assert len(set(SKILLS)) == 5
    assert CANON("frobnicate the lamp", {}).slots["unmatched"] is True


def test_missing_data_is_one_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("ALFWORLD_DATA", raising=False)
    with pytest.raises(EnvConfigError, match="ALFWORLD_DATA"):
        ALFWorldEnv()
    monkeypatch.setenv("ALFWORLD_DATA", str(tmp_path))
    with pytest.raises(EnvConfigError, match="ALFWORLD_DATA"):
        ALFWorldEnv(split="ood")
    with pytest.raises(EnvConfigError):
        ALFWorldEnv(split="nope")


def test_game_listing_on_a_fake_tree(tmp_path: Path) -> None:
    for trial in ("pick_and_place-X/trial_2", "pick_and_place-X/trial_1", "look_at_obj-Y/trial_1"):
        d = tmp_path / "json_2.1.1" / "valid_unseen" / trial
        d.mkdir(parents=True)
        (d / "game.tw-pddl").write_text("{}")
    games = find_games(tmp_path, "ood")
    assert [g.parent.name for g in games] == ["trial_1", "trial_1", "trial_2"] and games == sorted(games)
    env = ALFWorldEnv(data_dir=str(tmp_path), split="valid_unseen")
    assert len(env.games) == 3 and env.horizon == 50


def test_import_is_lazy() -> None:
    code = "import sys, xtree_gym.envs.alfworld, xtree_gym.canon.alfworld; print('alfworld' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


class _State(dict):
    """What textworld returns: a dict of requested infos with a ``feedback`` attribute."""

    def __init__(self, feedback: str, **infos: object) -> None:
        super().__init__(infos)
        self.feedback = feedback


class _ScriptedGame:
    """A stand-in for ``textworld.start(...)`` (ALFWorld's games are not available here)."""

    ADMISSIBLE: ClassVar[list[str]] = [
        "go to shelf 1",
        "take mug 1 from shelf 1",
        "go to desk 1",
        "put mug 1 in/on desk 1",
    ]
    FEEDBACK: ClassVar[dict[str, str]] = {
        "go to shelf 1": "You arrive at shelf 1.",
        "take mug 1 from shelf 1": "You pick up the mug 1 from the shelf 1.",
        "go to desk 1": "You arrive at desk 1.",
        "put mug 1 in/on desk 1": "You put the mug 1 in/on the desk 1.",
    }

    def reset(self) -> _State:
        return _State("You are in the middle of a room.", won=False, admissible_commands=self.ADMISSIBLE)

    def step(self, cmd: str) -> tuple[_State, float, bool]:
        won = cmd.startswith("put mug 1")
        state = _State(
            self.FEEDBACK.get(cmd, "Nothing happens."), won=won, admissible_commands=self.ADMISSIBLE
        )
        return state, float(won), won

    def close(self) -> None:
        pass


def _scripted_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **overrides: object) -> ALFWorldEnv:
    d = tmp_path / "json_2.1.1" / "train" / "pick_and_place-Mug/trial_1"
    d.mkdir(parents=True)
    (d / "game.tw-pddl").write_text("{}")
    env = ALFWorldEnv(data_dir=str(tmp_path), **overrides)
    monkeypatch.setattr(env, "_open", lambda path: setattr(env, "_tw", _ScriptedGame()))
    return env


def test_step_logic_on_a_scripted_game(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Holding, invalid flags, +10 and termination (the TextWorld game itself is a stand-in)."""
    env = _scripted_env(tmp_path, monkeypatch)
    _, info = env.reset(seed=0)
    assert info["game_file"].endswith("trial_1/game.tw-pddl") and info["holding"] is False
    rows = []
    for cmd in [
        "go to shelf 1",
        "jump around",
        "take mug 1 from shelf 1",
        "go to desk 1",
        "put mug 1 in/on desk 1",
    ]:
        _, reward, terminated, truncated, info = env.step(cmd)
        rows.append(
            (LABELS[info["xtree"]["token"]], info["invalid_action"], info["xtree"]["invalid"], reward)
        )
    assert rows == [
        ("Explore", False, False, 0.0),
        ("Explore", True, True, 0.0),  # not admissible: flagged under both keys
        ("Take", False, False, 0.0),
        ("Transport", False, False, 0.0),  # holding the mug: go to is Transport
        ("Deliver", False, False, 10.0),
    ]
    assert terminated and not truncated and info["won"] and info["end"] == "success"
    with pytest.raises(EnvConfigError, match="after the episode ended"):
        env.step("look")


def test_scripted_game_times_out_at_the_horizon(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = _scripted_env(tmp_path, monkeypatch, horizon=3)
    env.reset(seed=0)
    outs = [env.step("go to shelf 1") for _ in range(3)]
    assert [o[3] for o in outs] == [False, False, True] and outs[-1][4]["end"] == "timeout"
    assert not any(o[2] for o in outs) and all(o[1] == 0.0 for o in outs)
