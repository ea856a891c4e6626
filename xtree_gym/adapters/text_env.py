"""One of our envs driven by text: the small core every trainer adapter wraps.

Every trainer we adapt to (verifiers, GEM, OpenEnv, TRL, tinker) wants the same thing: a fresh
episode from a seed, the text the model should read, and a step that takes the model's reply. A
:class:`TextEpisode` gives exactly that on top of ``gym.make(env_id)``. With a harness (``rlvmr``,
``verl-agent``, ``react``, ...; see :mod:`xtree_gym.agents.harness`) the prompt is the harness's
and the reply is parsed by it; without one the last non-empty line of the reply is the action.
It records the canonical token of each executed step, so the X-Tree bonus of the episode (Σ b_v,
:func:`episode_bonus`) and the group reward of Eq. 3 (:func:`group_bonus_rewards`) can be applied
by whichever side sees the whole group.

Example:
    >>> ep = TextEpisode("XTree-Countdown-v0")
    >>> print(ep.reset(seed=0).splitlines()[1])
    Target: 145
    >>> s = ep.step("I add first.\\nop(+, 55, 87)")
    >>> s.action, s.token, ep.done
    ('op(+, 55, 87)', 'add<small-small>', False)
    >>> _ = ep.step("op(+, 142, 3)"); ep.done, ep.won, ep.tokens
    (True, True, ['add<small-small>', 'add<near_target-small>'])
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ..errors import ConfigError, EnvConfigError
from ..mining.tree import XTree
from ..rewards.bonus import resolve_bonus, sequence_bonus
from ..rewards.constants import LAMBDA0, W_REF
from ..rewards.group import lambda_g

Message = dict[str, str]
T = TypeVar("T")


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(coro)``, also where this thread already runs an event loop.

    verifiers and tinker are async; Jupyter, and Playwright's sync API (our browser envs), leave a
    loop running in the main thread, where ``asyncio.run`` refuses. Then a worker thread runs it.

    Example:
        >>> async def two():
        ...     return 2
        >>> run_sync(two())
        2
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


@dataclass
class TextStep:
    """What one reply did."""

    observation: str
    reward: float
    terminated: bool
    truncated: bool
    action: str | None
    """The parsed action; ``None`` when the reply did not parse (the env was not stepped)."""
    invalid: bool
    token: str | None = None
    info: dict[str, Any] = field(default_factory=dict)


def last_line(text: str) -> str | None:
    """The harness-free parser: the last non-empty line of a reply.

    Example:
        >>> last_line("thinking...\\n\\nopen door\\n"), last_line("  ")
        ('open door', None)
    """
    lines = [ln.strip() for ln in str(text).splitlines() if ln.strip()]
    return lines[-1] if lines else None


def _won(reward: float, info: Mapping[str, Any]) -> bool:
    for key in ("won", "success"):
        if key in info:
            return bool(info[key])
    return reward >= 1.0


class TextEpisode:
    """``gym.make(env_id)`` as a text conversation: :meth:`reset`, then :meth:`step` per reply.

    Args:
        env_id: any registered id (``XTree-ScienceWorld-v0``, ``XTree-Countdown-v0``...).
        harness: a harness name or object, or ``None`` for "the reply's last line is the action".
        env_kwargs: constructor arguments of the env.
        max_steps: episode cap; defaults to the harness's ``step_limit``, else the env's own.
    """

    def __init__(
        self,
        env_id: str,
        *,
        harness: Any = None,
        env_kwargs: Mapping[str, Any] | None = None,
        max_steps: int | None = None,
    ) -> None:
        import gymnasium as gym

        from ..envs import register_envs

        register_envs()  # the XTree-* ids

        if max_steps is not None and (not isinstance(max_steps, int) or max_steps < 1):
            raise ConfigError(f"max_steps = {max_steps!r}", fix="use a positive int or None")
        if isinstance(harness, str):
            from ..agents.harness import get_harness

            harness = get_harness(harness)
        self.harness = harness
        self.env_id = env_id
        try:
            self.env = gym.make(env_id, **dict(env_kwargs or {}))
        except gym.error.Error as exc:
            raise EnvConfigError(f"cannot make {env_id!r}: {exc}", fix="use a registered env id") from exc
        self.max_steps = max_steps or getattr(harness, "step_limit", None)
        self._reset_state()

    def _reset_state(self) -> None:
        self.goal, self.observation = "", ""
        self.history: list[tuple[str, str]] = []
        self.tokens: list[str] = []
        self.info: dict[str, Any] = {}
        self.total_reward, self.won, self.done, self.n_steps = 0.0, False, False, 0
        self.goal_options: list[str] | None = None

    def reset(self, seed: int | None = None) -> str:
        """Start an episode; returns the text of the first user turn."""
        self._reset_state()
        obs, info = self.env.reset(seed=seed)
        self.info = dict(info)
        self.observation = str(obs)
        goal = info.get("goal")
        self.goal = str(goal.get("instruction", "")) if isinstance(goal, Mapping) else str(goal or "")
        opts = info.get("goal_options") or (goal.get("goal_options") if isinstance(goal, Mapping) else None)
        self.goal_options = list(opts) if isinstance(opts, (list, tuple, dict)) else None
        return self.user_text()

    def messages(self) -> list[Message]:
        """The chat messages the model reads this turn (the harness's, or one user message)."""
        if self.harness is None:
            return [{"role": "user", "content": self.observation}]
        from ..agents.harness.base import HarnessState

        state = HarnessState(
            goal=self.goal or self.observation, observation=self.observation, history=list(self.history),
            turn=self.n_steps, info=self.info,
        )  # fmt: skip
        if getattr(self.harness, "needs_valid_actions", False):
            va = getattr(self.env.unwrapped, "valid_actions", None)
            state.valid_actions = list(va()) if callable(va) else self.info.get("valid_actions")
        return self.harness.render(state)

    def user_text(self) -> str:
        """The content of the last user message of :meth:`messages`."""
        users = [m["content"] for m in self.messages() if m.get("role") == "user"]
        return users[-1] if users else self.observation

    def parse(self, reply: str) -> tuple[str | None, str | None]:
        """``(action, error)`` of a reply."""
        if self.harness is None:
            action = last_line(reply)
            return action, None if action else "empty reply"
        parsed = self.harness.parse(reply)
        return parsed.action, parsed.error

    def step(self, reply: str) -> TextStep:
        """Play one reply; an unparsable reply is an invalid step (the env is not stepped)."""
        if self.done:
            raise EnvConfigError("step after the episode ended", fix="call reset() first")
        action, error = self.parse(reply)
        self.n_steps += 1
        if action is None:
            obs, reward, terminated, truncated = f"Invalid reply: {error}", 0.0, False, False
            info: dict[str, Any] = {"invalid_action": True, "parse_error": error}
            token = None
        else:
            obs, raw_reward, terminated, truncated, raw_info = self.env.step(action)
            reward, info = float(raw_reward), dict(raw_info)
            x = info.get("xtree")
            token = x.get("token") if isinstance(x, Mapping) and not x.get("invalid") else None
            if token:
                self.tokens.append(token)
            self.won = self.won or (_won(float(reward), info) and bool(terminated))
        if self.max_steps is not None and self.n_steps >= self.max_steps and not terminated:
            truncated = True
        self.total_reward += float(reward)
        self.observation, self.info = str(obs), info
        self.history.append((action or reply, self.observation))
        self.done = bool(terminated or truncated)
        invalid = action is None or bool(info.get("invalid_action"))
        return TextStep(
            self.observation, float(reward), bool(terminated), bool(truncated), action, invalid, token, info
        )

    def close(self) -> None:
        self.env.close()


def episode_bonus(
    tree: XTree, tokens: Sequence[str], *, bonus: str = "depth", goal_options: Sequence[str] | None = None
) -> float:
    """Σ b_v of one episode's tokens (each node once, with the nesting rule of its design).

    Example:
        >>> from xtree_gym import MinerConfig, Step, Trajectory, mine
        >>> trajs = [Trajectory(str(i), [Step(t, token=t) for t in "abcab"], True) for i in range(6)]
        >>> tree = mine(trajs, MinerConfig(min_freq=3, eta=0.5, cap=5))
        >>> episode_bonus(tree, ["a", "b"]), episode_bonus(tree, ["c"])
        (1.5, 0.0)
    """
    design = resolve_bonus(bonus)
    return sequence_bonus(tree, list(tokens), design, goal_options=goal_options).total


def group_bonus_rewards(
    outcomes: Sequence[float],
    bonuses: Sequence[float],
    won: Sequence[bool],
    *,
    lambda0: float = LAMBDA0,
    w_ref: float = W_REF["scienceworld"],
) -> tuple[list[float], float]:
    """The X-Tree part of Eq. 3 for one group: ``(λ_g · bonus_i for each i, λ_g)``.

    Adapters add it to the outcome the trainer already counts, so the sum is Eq. 3's r_i.

    Example:
        >>> group_bonus_rewards([0, 0], [4.0, 1.5], [False, False])
        ([3.0, 1.125], 0.75)
    """
    if not (len(outcomes) == len(bonuses) == len(won)):
        raise ConfigError("one outcome, bonus and won flag per rollout", fix="pass lists of equal length")
    if not won:
        return [], 0.0
    lam = lambda_g(sum(bool(w) for w in won) / len(won), lambda0, w_ref)
    return [lam * float(b) for b in bonuses], lam
