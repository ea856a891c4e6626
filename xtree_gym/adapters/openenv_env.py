"""OpenEnv adapter: one of our envs behind OpenEnv's ``Environment`` server interface.

OpenEnv serves an ``Environment`` (``reset() -> Observation``, ``step(Action) -> Observation``,
``state``) over HTTP with ``create_fastapi_app``; TRL, Unsloth and others are its clients.
:class:`XTreeOpenEnv` wraps a :class:`~xtree_gym.adapters.text_env.TextEpisode`: an action is
the model's reply (``XTreeAction(reply=...)``), an observation its text plus reward, done, and
the canonical token (``token``), and on the last step ``won``, ``tokens`` and ``xtree_bonus``
(OpenEnv's HTTP server drops ``metadata``, so these are fields). Both the 0.1 package layout (``openenv_core``) and the newer
one (``openenv.core``) are accepted. Like every single-env interface it cannot see a group: with
a ``tree`` the final observation's ``xtree_bonus`` holds Σ b_v for the client to
weight by its group's λ_g (:func:`~xtree_gym.adapters.text_env.group_bonus_rewards`).

Example:
    >>> env = XTreeOpenEnv("XTree-Countdown-v0", seed=0)
    >>> obs = env.reset()
    >>> obs.text.splitlines()[1], obs.done
    ('Target: 145', False)
    >>> obs = env.step(XTreeAction(reply="op(+, 55, 87)"))
    >>> obs.token, env.state.step_count
    ('add<small-small>', 1)
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

try:  # openenv-core 0.1.x
    from openenv_core.env_server import Action, Environment, Observation, State, create_fastapi_app
except ImportError:  # openenv-core >= 0.2
    from openenv.core.env_server import Action, Environment, Observation, State, create_fastapi_app

from ..tree import XTree
from .text_env import TextEpisode, episode_bonus


@dataclass(kw_only=True)
class XTreeAction(Action):
    """The model's reply for one turn."""

    reply: str


@dataclass(kw_only=True)
class XTreeObservation(Observation):
    """What the model reads next, plus the step's reward and end flag (``done``/``reward`` inherited)."""

    text: str = ""
    token: str | None = None
    """Canonical token of the action just executed (``None`` if the reply did not parse)."""
    invalid: bool = False
    won: bool = False
    tokens: list[str] = field(default_factory=list)
    """Every executed token of the episode, filled on the final observation."""
    xtree_bonus: float | None = None
    """Σ b_v of the episode (final observation, with a tree): weight it by the group's λ_g."""


class XTreeOpenEnv(Environment):
    """``gym.make(env_id)`` as an OpenEnv environment; each :meth:`reset` uses the next seed."""

    def __init__(
        self,
        env_id: str,
        *,
        seed: int = 0,
        harness: Any = None,
        tree: XTree | str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__()
        self.episode = TextEpisode(env_id, harness=harness, **kwargs)
        self.tree = XTree.load(tree) if isinstance(tree, str) else tree
        self.next_seed = seed
        self._state = State()

    def reset(self) -> XTreeObservation:
        text = self.episode.reset(seed=self.next_seed)
        self._state = State(
            episode_id=f"{self.episode.env_id}/{self.next_seed}/{uuid.uuid4().hex[:8]}", step_count=0
        )
        self.next_seed += 1
        return XTreeObservation(text=text, done=False, reward=0.0, metadata={"goal": self.episode.goal})

    def step(self, action: Action) -> XTreeObservation:
        reply = getattr(action, "reply", None)
        if reply is None:
            reply = str(getattr(action, "metadata", {}).get("reply", ""))
        s = self.episode.step(str(reply))
        self._state.step_count += 1
        obs = XTreeObservation(
            text=self.episode.user_text(), done=self.episode.done, reward=s.reward, token=s.token,
            invalid=s.invalid, metadata={"action": s.action},
        )  # fmt: skip
        if self.episode.done:
            obs.won, obs.tokens = self.episode.won, list(self.episode.tokens)
            if self.tree is not None:
                obs.xtree_bonus = episode_bonus(
                    self.tree, self.episode.tokens, goal_options=self.episode.goal_options
                )
        return obs

    @property
    def state(self) -> State:
        return self._state


def make_app(env_id: str, **kwargs: Any) -> Any:
    """A FastAPI app serving ``XTreeOpenEnv(env_id, **kwargs)`` (run it with uvicorn)."""
    return create_fastapi_app(XTreeOpenEnv(env_id, **kwargs), XTreeAction, XTreeObservation)
