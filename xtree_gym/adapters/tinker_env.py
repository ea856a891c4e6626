"""tinker adapter: our envs as ``tinker_cookbook`` RL envs, the X-Tree bonus as the group reward.

``tinker_cookbook.rl`` runs groups: an :class:`~tinker_cookbook.rl.types.EnvGroupBuilder` makes the
``n`` envs of one task and scores the finished group in ``compute_group_rewards`` — exactly where
Eq. 3's ``λ_g · Σ b_v`` belongs, since λ_g needs the group's win rate. Envs speak token ids: the
observation is the chat-templated prompt (``tinker.ModelInput``), the action the sampled ids,
decoded and parsed by the harness (or the last line of the reply).

Example:
    >>> from xtree_gym.adapters.text_env import run_sync
    >>> from xtree_gym.agents.model.loading import tiny_tokenizer
    >>> b = XTreeGroupBuilder("XTree-Countdown-v0", tokenizer=tiny_tokenizer(), seed=0, n=2)
    >>> envs = run_sync(b.make_envs())
    >>> ob, stop = run_sync(envs[0].initial_observation())
    >>> ob.length > 0, len(envs)
    (True, 2)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import tinker
from tinker_cookbook.rl.types import Env, EnvGroupBuilder, StepResult, Trajectory

from ..mining.tree import XTree
from ..rewards.constants import LAMBDA0, W_REF
from .text_env import TextEpisode, episode_bonus, group_bonus_rewards


def _prompt_ids(tokenizer: Any, messages: list[dict[str, str]]) -> list[int]:
    ids = tokenizer.apply_chat_template(
        messages, add_generation_prompt=True, tokenize=True, return_dict=False
    )
    return [int(i) for i in ids]


class XTreeTinkerEnv(Env):
    """One episode of ``env_id`` (single-use, as tinker wants)."""

    def __init__(
        self,
        env_id: str,
        *,
        tokenizer: Any,
        seed: int,
        harness: Any = None,
        stop: Sequence[str] = (),
        **kwargs: Any,
    ) -> None:
        self.episode = TextEpisode(env_id, harness=harness, **kwargs)
        self.tokenizer, self.seed, self.stop = tokenizer, seed, list(stop)

    async def initial_observation(self) -> tuple[tinker.ModelInput, list[str]]:
        self.episode.reset(seed=self.seed)
        return tinker.ModelInput.from_ints(_prompt_ids(self.tokenizer, self.episode.messages())), self.stop

    async def step(self, action: list[int], *, extra: Any = None) -> StepResult:
        reply = self.tokenizer.decode(action, skip_special_tokens=True)
        s = self.episode.step(reply)
        done = self.episode.done
        ob = [] if done else _prompt_ids(self.tokenizer, self.episode.messages())
        return StepResult(
            reward=s.reward, episode_done=done, next_observation=tinker.ModelInput.from_ints(ob),
            next_stop_condition=self.stop, metrics={"invalid": float(s.invalid)},
        )  # fmt: skip


class XTreeGroupBuilder(EnvGroupBuilder):
    """``n`` same-seed envs of one task; ``compute_group_rewards`` adds ``λ_g · Σ b_v`` (Eq. 3)."""

    def __init__(
        self, env_id: str, *, tokenizer: Any, seed: int, n: int, tree: XTree | str | None = None,
        bonus: str = "depth", lambda0: float = LAMBDA0, w_ref: float = W_REF["scienceworld"], **env_kwargs: Any,
    ) -> None:  # fmt: skip
        self.env_id, self.tokenizer, self.seed, self.n = env_id, tokenizer, seed, n
        self.tree = XTree.load(tree) if isinstance(tree, str) else tree
        self.bonus, self.lambda0, self.w_ref, self.env_kwargs = bonus, lambda0, w_ref, env_kwargs

    async def make_envs(self) -> Sequence[Env]:
        return [
            XTreeTinkerEnv(self.env_id, tokenizer=self.tokenizer, seed=self.seed, **self.env_kwargs)
            for _ in range(self.n)
        ]

    async def compute_group_rewards(
        self, trajectory_group: list[Trajectory], env_group: Sequence[Env]
    ) -> list[tuple[float, dict[str, float | int]]]:
        episodes = [e.episode for e in env_group if isinstance(e, XTreeTinkerEnv)]
        won = [ep.won for ep in episodes]
        if self.tree is None:
            return [(0.0, {"won": float(w)}) for w in won]
        bonuses = [
            episode_bonus(self.tree, ep.tokens, bonus=self.bonus, goal_options=ep.goal_options)
            for ep in episodes
        ]
        extra, lam = group_bonus_rewards(
            [ep.total_reward for ep in episodes], bonuses, won, lambda0=self.lambda0, w_ref=self.w_ref
        )
        return [
            (r, {"won": float(w), "xtree_bonus": b, "lambda_g": lam}) for r, w, b in zip(extra, won, bonuses)
        ]

    def logging_tags(self) -> list[str]:
        return [self.env_id]
