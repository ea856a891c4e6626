"""ReuseRL's segmentation-cost penalty as a Gymnasium wrapper (one env, episode by episode).

Follow one episode: every ``env.step`` reports its skill in ``info["xtree"]["token"]`` -> the
wrapper appends it to the episode's skill sequence ``s`` -> at the last step (terminated or
truncated), if the episode succeeded, the reward is lowered by ``lam * seg(s, C) / T`` (Eq. 6) --
or by ``lam * |s| / T`` for the pure round-length baseline -- and ``info["xtree"]`` reports the
segmentation.

The dictionary ``C`` is either fixed (a :class:`~xtree_gym.reuserl.mdl.SkillDictionary`, e.g. extracted per
GRPO group by the trainer with :func:`~xtree_gym.reuserl.mdl.segcost_rewards`), or learned online by a
:class:`~xtree_gym.reuserl.mdl.ReuseRLShaper`: each successful episode enters its FIFO buffer and the
dictionary is re-extracted from the buffer before the episode is scored. For the exact group-level
E-step of the paper (batch successes + buffer), use :class:`~xtree_gym.reuserl.mdl.ReuseRLShaper.shape`
on the group instead.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, SupportsFloat

import gymnasium as gym

from ..errors import ConfigError, EnvConfigError
from ..reuserl.mdl import MDLConfig, ReuseRLShaper, SkillDictionary


def _default_won(reward: float, info: Mapping[str, Any]) -> bool:
    for key in ("won", "success"):
        if key in info:
            return bool(info[key])
    return reward > 0


def _horizon(env: gym.Env, horizon: int | None) -> int:
    h: Any = horizon
    if h is None:
        h = getattr(env.unwrapped, "horizon", None) or (env.spec.max_episode_steps if env.spec else None)
    if not isinstance(h, int) or h <= 0:
        raise ConfigError(
            f"cannot tell the horizon T (got {h!r})", fix="pass horizon=T (the env's step budget, e.g. 30)"
        )
    return h


class SegCost(gym.Wrapper):
    """Penalise successful episodes by their segmentation cost under a skill dictionary (ReuseRL).

    ``mode="segcost"`` (default) uses ``seg(s, C)/T``; ``mode="length"`` the round-length baseline
    ``|s|/T``. ``dictionary`` is a fixed :class:`SkillDictionary`, a shared :class:`ReuseRLShaper`
    (learned online from successful episodes), or None (a private shaper). At the last step
    ``info["xtree"]`` gains ``skills`` (the sequence), ``seg``, ``segcost``, ``segmentation`` (list of
    phrases) and ``mdl_penalty``; earlier steps carry ``mdl_penalty = 0.0``.

    Example:
        >>> import gymnasium as gym
        >>> class Echo(gym.Env):  # token = action; succeeds with +10 on "end"
        ...     observation_space = action_space = gym.spaces.Text(32)
        ...     horizon = 10
        ...     def reset(self, *, seed=None, options=None):
        ...         return "", {}
        ...     def step(self, action):
        ...         done = action == "end"
        ...         return "", 10.0 * done, done, False, {"xtree": {"token": action}, "won": done}
        >>> d = SkillDictionary.singletons(["a", "b", "end"]).with_phrase(("a", "b"))
        >>> env = SegCost(Echo(), d)
        >>> _ = env.reset()
        >>> [env.step(a)[1] for a in ["a", "b", "a", "b", "end"]]  # seg = 3 (ab, ab, end): 10 - 10*3/10
        [0.0, 0.0, 0.0, 0.0, 7.0]
    """

    def __init__(
        self,
        env: gym.Env,
        dictionary: SkillDictionary | ReuseRLShaper | None = None,
        *,
        mode: str = "segcost",
        lam: float | None = None,
        horizon: int | None = None,
        learn: bool | None = None,
        won_fn: Callable[[float, Mapping[str, Any]], bool] = _default_won,
    ) -> None:
        super().__init__(env)
        if mode not in ("segcost", "length"):
            raise ConfigError(f"mode {mode!r}", fix="use 'segcost' or 'length'")
        self.horizon = _horizon(env, horizon)
        self.mode = mode
        if dictionary is None:
            alphabet = getattr(env.unwrapped, "skills", ())  # the env's Sigma: the paper's K and singletons
            dictionary = ReuseRLShaper(self.horizon, MDLConfig(lam=10.0 if lam is None else lam), alphabet)
        if not isinstance(dictionary, (SkillDictionary, ReuseRLShaper)):
            raise ConfigError(
                f"dictionary must be a SkillDictionary or ReuseRLShaper, got {type(dictionary).__name__}"
            )
        self.shaper = dictionary if isinstance(dictionary, ReuseRLShaper) else None
        self._fixed = dictionary if isinstance(dictionary, SkillDictionary) else None
        self.lam = float(lam if lam is not None else (self.shaper.config.lam if self.shaper else 10.0))
        MDLConfig(lam=self.lam)  # validates lam
        self.learn = self.shaper is not None if learn is None else bool(learn)
        if self.learn and self.shaper is None:
            raise ConfigError(
                "learn=True needs a ReuseRLShaper", fix="pass dictionary=ReuseRLShaper(T) or None"
            )
        self.won_fn = won_fn
        self._skills: list[str] = []

    @property
    def dictionary(self) -> SkillDictionary:
        """The dictionary the next episode end will be scored with."""
        return self._fixed if self._fixed is not None else self.shaper.dictionary  # type: ignore[union-attr]

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        self._skills = []
        return self.env.reset(seed=seed, options=options)

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        x = info.get("xtree")
        if not isinstance(x, dict) or "token" not in x:
            raise EnvConfigError(
                "the env put no info['xtree']['token']",
                fix="wrap an XTree-* env (they report the skill token)",
            )
        self._skills.append(x["token"])
        x["mdl_penalty"] = 0.0
        if terminated or truncated:
            reward = self._score(float(reward), info, x)
        return obs, reward, terminated, truncated, info

    def _score(self, reward: float, info: Mapping[str, Any], x: dict[str, Any]) -> float:
        success = self.won_fn(reward, info)
        if self.learn and success and self.shaper is not None:
            self.shaper.observe([self._skills])
            self.shaper.refresh()
        d = self.dictionary
        if any((s,) not in d for s in self._skills):  # a skill never seen: add it as a singleton
            d = SkillDictionary(
                tuple(dict.fromkeys((*d.alphabet, *self._skills))),
                d.phrases + tuple(dict.fromkeys((s,) for s in self._skills if (s,) not in d)),
                d.max_len,
                d.alphabet_size,
            )
        parts = d.segment(self._skills) if self.mode == "segcost" else [(s,) for s in self._skills]
        cost = len(parts) / self.horizon
        penalty = self.lam * cost if success else 0.0
        x.update(
            skills=list(self._skills),
            seg=len(parts),
            segcost=cost,
            segmentation=[list(p) for p in parts],
            mdl_penalty=penalty,
        )
        return reward - penalty
