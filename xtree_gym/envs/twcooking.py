"""``XTree-TWCooking-v0``: TextWorld cooking games (ReuseRL, App. 12) as a Gymnasium env.

Games are generated locally by TextWorld's ``tw-cooking`` challenge (the code behind
``tw-make tw-cooking``) under the paper's settings, and cached:

* ``simple``: 1 room, 1 ingredient, ``cook`` and ``cut`` each drawn per game;
* ``hard``: 6 rooms, 2 ingredients, ``cook=True``, ``cut=True``.

Containers must be opened (``open=True``, as in the paper's worked example); the inventory is
unbounded. Game ``k`` of a difficulty is generated with seed ``k`` and stored as
``<cache>/<difficulty>-<k>.z8`` (+ ``.json``), so a pool of ``n_games`` games is built once
(simple ~5 s, hard ~15 s a game) and reused. ``reset(seed=...)`` draws a game index from the
seeded generator; ``reset(options={"game": k})`` or ``game_file=`` picks one.

One step is one TextWorld command. Reward: ``+10`` when the game is won, else 0 (the TextWorld
score is reported in ``info["score"]``). ``terminated`` when the game is won or lost (e.g. burned
food); ``truncated`` at ``T = 40`` steps. ``info["xtree"]`` is the projected cooking skill
(:mod:`xtree_gym.canon.twcooking`), with ``invalid`` when the command was not admissible.
"""

from __future__ import annotations

import os
import tempfile
import warnings
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, SupportsFloat

import gymnasium as gym

from ..canon.twcooking import SKILLS, TWCookingCanonicalizer
from ..errors import EnvConfigError, missing_dependency

_CANON = TWCookingCanonicalizer()
DIFFICULTIES = ("simple", "hard")


def default_cache_dir() -> Path:
    """``$XTREE_TW_GAMES`` or ``~/.cache/xtree_gym/tw_games``."""
    env = os.environ.get("XTREE_TW_GAMES")
    return Path(env) if env else Path.home() / ".cache" / "xtree_gym" / "tw_games"


@dataclass(frozen=True)
class TWCookingConfig:
    """Settings of the TextWorld-Cooking env (defaults: the paper's)."""

    difficulty: str = "simple"
    """``"simple"`` (1 room, 1 ingredient) or ``"hard"`` (6 rooms, 2 ingredients, cook, cut)."""
    n_games: int = 64
    """Size of the game pool a seeded reset draws from (games 0..n_games-1)."""
    split: str | None = None
    """TextWorld's food split (``"train"``, ``"valid"``, ``"test"``) or None for all foods."""
    horizon: int = 40
    """``T``: step budget; reaching it is a Timeout (truncated)."""
    success_reward: float = 10.0
    """Terminal reward when the game is won."""
    cache_dir: str | None = None
    """Where generated games are kept (None: :func:`default_cache_dir`)."""

    def __post_init__(self) -> None:
        if self.difficulty not in DIFFICULTIES:
            raise EnvConfigError(f"difficulty {self.difficulty!r}", fix="use 'simple' or 'hard'")
        if self.split not in (None, "train", "valid", "test"):
            raise EnvConfigError(f"split {self.split!r}", fix="use None, 'train', 'valid' or 'test'")
        for name in ("n_games", "horizon"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise EnvConfigError(f"TWCookingConfig.{name} = {v!r}", fix="use a positive int")


def game_settings(difficulty: str, index: int) -> dict[str, Any]:
    """The ``tw-cooking`` settings of game ``index`` (simple games draw cook/cut from the index).

    Example:
        >>> s = game_settings("hard", 3)
        >>> s["go"], s["recipe"], s["cook"], s["cut"], s["open"]
        (6, 2, True, True, True)
        >>> sorted({(game_settings("simple", k)["cook"], game_settings("simple", k)["cut"]) for k in range(4)})
        [(False, False), (False, True), (True, False), (True, True)]
    """
    if difficulty == "hard":
        rooms, ingredients, cook, cut = 6, 2, True, True
    else:
        rooms, ingredients, cook, cut = 1, 1, bool(index & 1), bool(index & 2)
    return {"recipe": ingredients, "take": ingredients, "go": rooms, "open": True, "cook": cook, "cut": cut,
            "drop": False, "recipe_seed": index}  # fmt: skip


def generate_game(
    difficulty: str, index: int, cache_dir: str | os.PathLike[str], split: str | None = None
) -> Path:
    """Path of game ``index`` in ``cache_dir``, generating it first when absent (atomic)."""
    cache = Path(cache_dir)
    name = f"{difficulty}-{index}" + (f"-{split}" if split else "")
    final = cache / f"{name}.z8"
    if final.exists() and final.with_suffix(".json").exists():
        return final
    try:
        import textworld
        from textworld.challenges.tw_cooking import cooking
        from textworld.generator import compile_game
    except ImportError:
        raise missing_dependency("textworld", "textworld", "XTree-TWCooking-v0") from None
    cache.mkdir(parents=True, exist_ok=True)
    settings = {**game_settings(difficulty, index), "split": split}
    with tempfile.TemporaryDirectory(dir=cache, prefix=".gen-") as tmp:
        options = textworld.GameOptions()
        options.seeds = index
        options.path = str(Path(tmp) / f"{name}.z8")
        options.force_recompile = True
        with warnings.catch_warnings():  # jericho, when TextWorld replays the walkthrough
            warnings.filterwarnings("ignore", message=".*is not fully supported")
            game = cooking.make(settings, options)
            compile_game(game, options)
        # .json first: a .z8 without its .json is regenerated, never half-read
        os.replace(Path(tmp) / f"{name}.json", final.with_suffix(".json"))
        os.replace(Path(tmp) / f"{name}.z8", final)
    return final


class TWCookingEnv(gym.Env[str, str]):
    """A TextWorld cooking game per episode, with text observations and text actions.

    ``info``: ``won``, ``lost``, ``score``, ``max_score``, ``admissible_commands``, ``game_file``,
    ``end`` (None, "success", "lost", "timeout"), ``invalid_action``, ``xtree``; on reset also
    ``walkthrough`` (a winning command list) and ``objective``.

    Example:
        >>> env = TWCookingEnv(difficulty="simple", n_games=8)  # games are generated on first use
        >>> obs, info = env.reset(seed=0)  # doctest: +SKIP
        >>> for cmd in info["walkthrough"]:  # doctest: +SKIP
        ...     obs, reward, terminated, truncated, info = env.step(cmd)
        >>> reward, info["xtree"]["token"]  # doctest: +SKIP
        (10.0, 'eat<meal>')
    """

    metadata = {"render_modes": ["ansi"]}  # noqa: RUF012 - Gymnasium declares it an instance attribute
    skills = SKILLS
    """The skill alphabet Sigma of the projection (10 tokens), for the MDL code."""

    def __init__(
        self,
        config: TWCookingConfig | None = None,
        *,
        game_file: str | os.PathLike[str] | None = None,
        render_mode: str | None = None,
        **overrides: Any,
    ) -> None:
        if config is not None and not isinstance(config, TWCookingConfig):
            raise EnvConfigError(f"config must be a TWCookingConfig, got {type(config).__name__}")
        try:
            self.config = replace(config or TWCookingConfig(), **overrides)
        except TypeError as exc:
            raise EnvConfigError(
                str(exc), fix=f"valid settings: {', '.join(asdict(TWCookingConfig()))}"
            ) from None
        if game_file is not None and not Path(game_file).is_file():
            raise EnvConfigError(
                f"game_file {str(game_file)!r} does not exist", fix="pass a .z8 made by tw-make"
            )
        if render_mode not in (None, "ansi"):
            raise EnvConfigError(f"render_mode {render_mode!r}", fix="use None or 'ansi'")
        self.game_file = Path(game_file) if game_file is not None else None
        self.cache_dir = Path(self.config.cache_dir) if self.config.cache_dir else default_cache_dir()
        self.render_mode = render_mode
        self.horizon = self.config.horizon
        self.observation_space = gym.spaces.Text(max_length=1 << 16)
        self.action_space = gym.spaces.Text(max_length=256)
        self._tw: Any = None  # the textworld Environment of the current game
        self._state: Any = None
        self._loaded: Path | None = None
        self._t = 0
        self._done = False

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        options = options or {}
        if "game" in options:
            path = generate_game(
                self.config.difficulty, int(options["game"]), self.cache_dir, self.config.split
            )
        elif self.game_file is not None:
            path = self.game_file
        else:
            k = int(self.np_random.integers(self.config.n_games))
            path = generate_game(self.config.difficulty, k, self.cache_dir, self.config.split)
        with warnings.catch_warnings():  # jericho: "not fully supported" -- TextWorld keeps score itself
            warnings.filterwarnings("ignore", message=".*is not fully supported")
            self._open(path)
            self._state = self._tw.reset()
        self._t, self._done = 0, False
        info = self._info(None)
        info["walkthrough"] = list(self._state.get("extra.walkthrough") or [])
        info["objective"] = self._state.get("objective")
        return str(self._state.feedback), info

    def step(self, action: str) -> tuple[str, SupportsFloat, bool, bool, dict[str, Any]]:
        if self._done or self._tw is None:
            raise EnvConfigError(
                "step() called before reset() or after the episode ended", fix="call reset()"
            )
        admissible = set(self._state.get("admissible_commands") or [])
        self._t += 1
        cmd = str(action).strip()
        self._state, _score, done = self._tw.step(cmd)
        won, lost = bool(self._state.get("won")), bool(self._state.get("lost"))
        terminated = bool(done or won or lost)
        truncated = not terminated and self._t >= self.config.horizon
        end = "success" if won else "lost" if lost else "timeout" if truncated else None
        self._done = terminated or truncated
        info = self._info(end)
        x = _CANON(cmd).to_info()
        x["invalid"] = cmd.lower() not in {a.lower() for a in admissible}
        info.update(xtree=x, invalid_action=x["invalid"])
        reward = self.config.success_reward if won else 0.0
        return str(self._state.feedback), reward, terminated, truncated, info

    def render(self) -> str | None:
        return str(self._state.feedback) if self.render_mode == "ansi" and self._state is not None else None

    def close(self) -> None:
        if self._tw is not None:
            self._tw.close()
            self._tw = None
        super().close()

    def _open(self, path: Path) -> None:
        if self._loaded == path and self._tw is not None:
            return
        try:
            import textworld
        except ImportError:
            raise missing_dependency("textworld", "textworld", "XTree-TWCooking-v0") from None
        if self._tw is not None:
            self._tw.close()
        infos = textworld.EnvInfos(
            admissible_commands=True, won=True, lost=True, score=True, max_score=True, objective=True,
            extras=["walkthrough"],
        )  # fmt: skip
        self._tw = textworld.start(str(path), request_infos=infos)
        self._loaded = path

    def _info(self, end: str | None) -> dict[str, Any]:
        s = self._state
        return {
            "won": bool(s.get("won")),
            "lost": bool(s.get("lost")),
            "score": s.get("score"),
            "max_score": s.get("max_score"),
            "admissible_commands": list(s.get("admissible_commands") or []),
            "game_file": str(self._loaded),
            "end": end,
            "step": self._t,
        }


__all__ = [
    "DIFFICULTIES",
    "TWCookingConfig",
    "TWCookingEnv",
    "default_cache_dir",
    "game_settings",
    "generate_game",
]
