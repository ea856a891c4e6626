"""TRL adapter: an ``environment_factory`` class and Eq. 3 reward functions for ``GRPOTrainer``.

Two ways in, both with TRL's ``GRPOTrainer``:

* **Multi-turn, environment owns the state** (TRL ≥ 1.x with transformers ≥ 5.2): pass
  ``environment_factory=XTreeTRLEnv.factory("XTree-Countdown-v0")``. Each rollout gets its own
  instance; TRL calls ``reset(**row)`` (the dataset row, ``seed`` among it), exposes the public
  method :meth:`XTreeTRLEnv.act` as the model's tool, and scores the rollout with
  :meth:`XTreeTRLEnv.get_reward` (the env's total reward). Add :func:`make_env_bonus_reward` to
  ``reward_funcs`` for Eq. 3's bonus: it reads each rollout's executed tokens from the instances
  TRL passes as ``environments`` and weights Σ b_v by the group's λ_g.
* **Single-turn plans**: a completion is a list of actions (one per line), replayed in a fresh env
  by :func:`replay_outcome`; :class:`~xtree_gym.rewards.XTreeRewardFunction` (``outcome_fn=`` the
  replay) gives the whole of Eq. 3. This runs with any TRL/transformers pair.

TRL groups a prompt's ``num_generations`` completions in one call, so λ_g is the group's; when a
group is split across processes, each process weights by the part it sees (documented in
docs/interop.md).

Example:
    >>> env = XTreeTRLEnv("XTree-Countdown-v0")
    >>> env.reset(seed=0).splitlines()[1]
    'Target: 145'
    >>> env.act("op(+, 55, 87)").splitlines()[0]
    '55 + 87 = 142.'
    >>> env.act("op(+, 142, 3)").splitlines()[0], env.get_reward()
    ('142 + 3 = 145. Target reached!', 10.0)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..mining.tree import XTree
from ..rewards.adapters import completion_actions, grouped_rewards
from ..rewards.constants import LAMBDA0, W_REF
from .text_env import TextEpisode, episode_bonus


class XTreeTRLEnv:
    """One of our envs as a TRL environment: ``reset``, one tool (:meth:`act`), ``get_reward``."""

    def __init__(
        self,
        env_id: str,
        *,
        harness: Any = None,
        env_kwargs: dict[str, Any] | None = None,
        max_steps: int | None = None,
    ) -> None:
        self.episode = TextEpisode(env_id, harness=None, env_kwargs=env_kwargs, max_steps=max_steps)
        # The tool call carries the action itself, so no harness parses it; a harness still renders.
        self._render = harness

    @classmethod
    def factory(cls, env_id: str, **kwargs: Any) -> Callable[[], XTreeTRLEnv]:
        """A zero-argument callable, as ``environment_factory`` wants."""
        return lambda: cls(env_id, **kwargs)

    def reset(self, seed: int | None = None, **row: Any) -> str:
        """Start the episode of this dataset row; the returned text is appended to the prompt."""
        return self.episode.reset(seed=None if seed is None else int(seed))

    def act(self, action: str) -> str:
        """Execute one action in the environment and return what it shows next.

        Args:
            action: the action to execute, in the environment's own syntax.

        Returns:
            The environment's text after the action.
        """
        if self.episode.done:
            return "The episode has ended; no further actions are executed."
        return self.episode.step(action).observation

    def get_reward(self) -> float:
        """The episode's total env reward (TRL calls it once per finished rollout)."""
        return float(self.episode.total_reward)


def make_env_bonus_reward(
    tree: XTree, *, bonus: str = "depth", lambda0: float = LAMBDA0, w_ref: float = W_REF["scienceworld"]
) -> Callable[..., list[float]]:
    """A reward function ``fn(prompts, completions, environments, **kw)`` giving ``λ_g · Σ b_v``.

    Groups are identical prompts (TRL's ``num_generations`` per prompt); a rollout's win is its
    episode's ``won``.
    """

    def xtree_env_bonus(
        prompts: Sequence[Any],
        completions: Sequence[Any],
        environments: Sequence[Any] | None = None,
        **kw: Any,
    ) -> list[float]:
        envs = list(environments or [])
        if len(envs) != len(completions):
            return [0.0] * len(completions)
        bonuses = [
            episode_bonus(tree, e.episode.tokens, bonus=bonus, goal_options=e.episode.goal_options)
            for e in envs
        ]
        won = [e.episode.won for e in envs]
        rewards, _ = grouped_rewards(
            [0.0] * len(envs), bonuses, [repr(p) for p in prompts], won, lambda0, w_ref
        )
        return rewards

    return xtree_env_bonus


def replay_outcome(
    env_id: str, *, seed_key: str = "seed", won_reward: float = 1.0, env_kwargs: dict[str, Any] | None = None
) -> Callable[..., float]:
    """An ``outcome_fn(prompt, completion, **row)``: replay the completion's lines in a fresh env.

    Returns ``won_reward`` if the replayed episode was won, else 0. The env is reset with the row's
    ``seed_key`` column. Lines past the end of the episode are ignored.

    Example:
        >>> fn = replay_outcome("XTree-Countdown-v0")
        >>> fn("p", "op(+, 55, 87)\\nop(+, 142, 3)", seed=0), fn("p", "op(+, 55, 87)", seed=0)
        (1.0, 0.0)
    """
    episode = TextEpisode(env_id, env_kwargs=env_kwargs)

    def outcome(prompt: Any, completion: Any, **row: Any) -> float:
        episode.reset(seed=int(row.get(seed_key, 0)))
        for action in completion_actions(completion):
            if episode.done:
                break
            episode.step(action)
        return won_reward if episode.won else 0.0

    return outcome
