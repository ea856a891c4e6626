"""``XTree-ALFWorld-v0``: an adapter to ALFWorld's text games, for users who have its data.

ALFWorld's game files cannot be downloaded here; point ``ALFWORLD_DATA`` (or ``data_dir=``) at the
folder ``alfworld-download`` fills (it holds ``json_2.1.1/<split>/<task>/<trial>/game.tw-pddl``)
and install ``alfworld``. Without the data the constructor raises one :class:`EnvConfigError`
naming ``ALFWORLD_DATA``; the ``alfworld`` package is imported only when a game is opened.

The games run through TextWorld with ALFWorld's own wrappers (``AlfredDemangler``,
``AlfredInfos``), as ALFWorld's ``AlfredTWEnv`` does. ``T = 50`` steps, ``+10`` on success
(ReuseRL, App. 12). ``info["xtree"]`` is the projected skill of :mod:`xtree_gym.canon.alfworld`;
the env tracks the held-object bit that tells Explore from Transport.

Real vs untested: the data check, the game listing and the projection are tested here; opening a
game needs the data and is not exercised by this project's tests.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, SupportsFloat

import gymnasium as gym

from ..canon.alfworld import SKILLS, ALFWorldCanonicalizer, effect
from ..errors import EnvConfigError, missing_dependency

_CANON = ALFWorldCanonicalizer()
SPLITS = {"train": "train", "iid": "valid_seen", "valid_seen": "valid_seen", "ood": "valid_unseen",
          "valid_unseen": "valid_unseen"}  # fmt: skip


@dataclass(frozen=True)
class ALFWorldConfig:
    """Settings of the ALFWorld adapter."""

    data_dir: str | None = None
    """ALFWorld's data folder (None: ``$ALFWORLD_DATA``)."""
    split: str = "train"
    """``train``, ``iid``/``valid_seen`` (140 scenes) or ``ood``/``valid_unseen`` (134 scenes)."""
    horizon: int = 50
    """``T``: step budget (paper: 50)."""
    success_reward: float = 10.0
    """Terminal reward on success."""

    def __post_init__(self) -> None:
        if self.split not in SPLITS:
            raise EnvConfigError(f"split {self.split!r}", fix=f"use one of {sorted(SPLITS)}")
        if not isinstance(self.horizon, int) or self.horizon < 1:
            raise EnvConfigError(f"horizon {self.horizon!r}", fix="use a positive int")


def find_games(data_dir: str | os.PathLike[str] | None, split: str) -> list[Path]:
    """The sorted ``game.tw-pddl`` files of ``split``; raises the one ALFWORLD_DATA error when absent.

    Example:
        >>> try:
        ...     find_games("/nonexistent", "train")
        ... except EnvConfigError as exc:
        ...     print(exc.what, "|", "ALFWORLD_DATA" in exc.fix)
        ALFWorld data not found at '/nonexistent' | True
    """
    root = data_dir if data_dir is not None else os.environ.get("ALFWORLD_DATA")
    fix = (
        "set ALFWORLD_DATA to the folder filled by `alfworld-download` (it holds json_2.1.1/), "
        "or pass data_dir=; the data cannot be downloaded by xtree_gym"
    )
    if not root:
        raise EnvConfigError("ALFWorld needs its game data and ALFWORLD_DATA is not set", fix=fix)
    base = Path(root) / "json_2.1.1" / SPLITS[split]
    if not base.is_dir():
        raise EnvConfigError(f"ALFWorld data not found at {str(root)!r}", where=str(base), fix=fix)
    games = sorted(base.glob("*/*/game.tw-pddl"))
    if not games:
        raise EnvConfigError(f"no game.tw-pddl under {str(base)!r}", fix=fix)
    return games


class ALFWorldEnv(gym.Env[str, str]):
    """One ALFWorld game per episode (needs ``ALFWORLD_DATA`` and the ``alfworld`` package).

    Example:
        >>> try:
        ...     ALFWorldEnv(data_dir="/nonexistent")
        ... except EnvConfigError as exc:
        ...     print(type(exc).__name__, "ALFWORLD_DATA" in str(exc))
        EnvConfigError True
    """

    metadata = {"render_modes": []}  # noqa: RUF012 - Gymnasium declares it an instance attribute
    skills = SKILLS
    """The skill alphabet Sigma of the projection (5 tokens), for the MDL code."""

    def __init__(self, config: ALFWorldConfig | None = None, **overrides: Any) -> None:
        try:
            self.config = replace(config or ALFWorldConfig(), **overrides)
        except TypeError as exc:
            raise EnvConfigError(
                str(exc), fix=f"valid settings: {', '.join(asdict(ALFWorldConfig()))}"
            ) from None
        self.games = find_games(self.config.data_dir, self.config.split)
        self.horizon = self.config.horizon
        self.observation_space = gym.spaces.Text(max_length=1 << 16)
        self.action_space = gym.spaces.Text(max_length=256)
        self._tw: Any = None
        self._state: Any = None
        self._holding = False
        self._t = 0
        self._done = False

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        options = options or {}
        k = int(options["game"]) if "game" in options else int(self.np_random.integers(len(self.games)))
        path = self.games[k % len(self.games)]
        self._open(path)
        self._state = self._tw.reset()
        self._t, self._done, self._holding = 0, False, False
        info = self._info(None)
        info["game_file"] = str(path)
        return str(self._state.feedback), info

    def step(self, action: str) -> tuple[str, SupportsFloat, bool, bool, dict[str, Any]]:
        if self._done or self._tw is None:
            raise EnvConfigError(
                "step() called before reset() or after the episode ended", fix="call reset()"
            )
        cmd = str(action).strip()
        x = _CANON(cmd, {"holding": self._holding}).to_info()
        admissible = {a.lower() for a in (self._state.get("admissible_commands") or [])}
        self._state, _score, done = self._tw.step(cmd)
        self._t += 1
        feedback = str(self._state.feedback)
        if "nothing happens" not in feedback.lower():
            self._holding = {"take": True, "put": False}.get(effect(cmd) or "", self._holding)
        won = bool(self._state.get("won"))
        terminated = bool(done or won)
        truncated = not terminated and self._t >= self.config.horizon
        self._done = terminated or truncated
        x["invalid"] = bool(admissible) and cmd.lower() not in admissible
        info = self._info("success" if won else "timeout" if truncated else None)
        info.update(xtree=x, invalid_action=x["invalid"])
        return feedback, (self.config.success_reward if won else 0.0), terminated, truncated, info

    def close(self) -> None:
        if self._tw is not None:
            self._tw.close()
            self._tw = None
        super().close()

    def _open(self, path: Path) -> None:
        try:
            import textworld
            from alfworld.agents.environment.alfred_tw_env import AlfredDemangler, AlfredInfos
        except ImportError:
            raise missing_dependency("alfworld", "alfworld", "XTree-ALFWorld-v0") from None
        if self._tw is not None:
            self._tw.close()
        infos = textworld.EnvInfos(won=True, admissible_commands=True, extras=["gamefile"])
        self._tw = textworld.start(str(path), request_infos=infos, wrappers=[AlfredDemangler(), AlfredInfos])

    def _info(self, end: str | None) -> dict[str, Any]:
        s = self._state
        return {
            "won": bool(s.get("won")),
            "admissible_commands": list(s.get("admissible_commands") or []),
            "holding": self._holding,
            "end": end,
            "step": self._t,
        }
