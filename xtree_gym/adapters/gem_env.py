"""GEM adapter: every ``XTree-*`` id in GEM's registry, as a text env that reads raw replies.

GEM (``pip install gem-llm``; ROLL, Oat and others train through it) steps one env at a time with
the model's whole reply as the action. :class:`GemTextEnv` is a :class:`gem.Env` over our
:class:`~xtree_gym.adapters.text_env.TextEpisode`: the harness (if any) renders the observation
and parses the reply. GEM never shows a trainer the whole group, so Eq. 3's λ_g cannot be the
group's win rate: with a ``tree``, the final step's reward adds ``λ · Σ b_v`` with λ from a
per-task running win rate (:class:`~xtree_gym.rewards.RunningWinRate`, the documented stand-in),
and ``info["xtree_bonus"]`` carries the raw Σ b_v for a trainer that groups by itself.

Example:
    >>> import gem
    >>> ids = register_gem()
    >>> "XTree-Countdown-v0" in ids
    True
    >>> env = gem.make("XTree-Countdown-v0")
    >>> obs, info = env.reset(seed=0)
    >>> obs.splitlines()[1]
    'Target: 145'
"""

from __future__ import annotations

from typing import Any

import gem

from ..envs import ENV_SPECS
from ..mining.tree import XTree
from ..rewards.constants import LAMBDA0, W_REF
from ..rewards.group import RunningWinRate
from .text_env import TextEpisode, episode_bonus


class GemTextEnv(gem.Env):
    """One of our envs (``env``: its gym id) behind GEM's ``reset(seed)`` / ``step(reply)`` interface."""

    def __init__(
        self,
        env: str,
        *,
        harness: Any = None,
        env_kwargs: dict[str, Any] | None = None,
        max_steps: int | None = None,
        tree: XTree | str | None = None,
        bonus: str = "depth",
        lambda0: float = LAMBDA0,
        w_ref: float = W_REF["scienceworld"],
        window: int = 8,
    ) -> None:
        super().__init__()
        self.episode = TextEpisode(env, harness=harness, env_kwargs=env_kwargs, max_steps=max_steps)
        self.tree = XTree.load(tree) if isinstance(tree, str) else tree
        self.bonus, self.lambda0, self.w_ref = bonus, lambda0, w_ref
        self.win_rate = RunningWinRate(window)

    def reset(self, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed)
        text = self.episode.reset(seed=seed)
        return text, dict(self.episode.info)

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        s = self.episode.step(action)
        reward, info = s.reward, dict(s.info)
        if self.episode.done and self.tree is not None:
            task = str(self.episode.info.get("task", self.episode.env_id))
            b = episode_bonus(
                self.tree, self.episode.tokens, bonus=self.bonus, goal_options=self.episode.goal_options
            )
            lam = self.win_rate.weight(task, self.lambda0, self.w_ref)
            self.win_rate.update(task, self.episode.won)
            info.update(xtree_bonus=b, xtree_lambda=lam)
            reward += lam * b
        return self.episode.user_text(), reward, s.terminated, s.truncated, info

    def sample_random_action(self) -> str:
        return "look"


def register_gem(prefix: str = "", **defaults: Any) -> list[str]:
    """``gem.register`` every ``XTree-*`` id (as ``prefix + id``); returns the ids registered.

    ``defaults`` (``harness=``, ``tree=``...) become each spec's kwargs. Idempotent.
    """
    from gem.envs.registration import ENV_REGISTRY

    done = []
    for env_id in ENV_SPECS:
        name = prefix + env_id
        if name not in ENV_REGISTRY:
            gem.register(name, GemTextEnv, env=env_id, **defaults)
        done.append(name)
    return done
