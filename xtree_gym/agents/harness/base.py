"""What every harness is: a prompt renderer plus a response parser for one benchmark protocol.

A harness is the only place that knows prompt wording and tags. The rollout hands it a
:class:`HarnessState` (what the agent may see this turn) and gets chat messages back; it hands
it the model's text and gets a :class:`~xtree_gym.agents.types.ParsedAction` back. A response
that does not parse is never an exception: ``ParsedAction(action=None, error=...)``.

A new benchmark protocol is one module in this package with a :class:`Harness` subclass and a
``register_harness`` line; nothing else changes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ...errors import ConfigError
from ..types import ParsedAction

Message = dict[str, str]
"""A chat message: ``{"role": "system" | "user" | "assistant", "content": str}``."""


@dataclass
class HarnessState:
    """What the agent may see at one turn of an episode."""

    goal: str
    """The task instruction."""
    observation: str
    """The env's latest text observation (after the last action, or the reset text)."""
    history: list[tuple[str, str]] = field(default_factory=list)
    """Earlier ``(action, observation)`` pairs, oldest first; the harness decides how many to show."""
    turn: int = 0
    """0-based index of the turn about to be played."""
    valid_actions: Sequence[str] | None = None
    """Admissible actions, filled only when the harness set ``needs_valid_actions``."""
    info: dict[str, Any] = field(default_factory=dict)
    """The env's latest ``info`` (e.g. BrowserGym's axtree text, ScienceWorld's objects in view)."""


class Harness:
    """Base class: subclasses set ``name``/``envs``/``step_limit`` and implement render/parse."""

    name: ClassVar[str] = ""
    """Harness name, as ``--harness`` spells it (``rlvmr``, ``verl-agent``, ``react``, ...)."""
    envs: ClassVar[tuple[str, ...]] = ()
    """Env domains this protocol was written for (``scienceworld``, ``webshop``...); empty = any."""
    step_limit: ClassVar[int] = 30
    """The protocol's episode cap in env steps (30 ScienceWorld, 15 WebShop, 30 WebArena)."""
    needs_valid_actions: ClassVar[bool] = False
    """True when the prompt lists admissible actions (costly on ScienceWorld: asked per turn)."""

    def render(self, state: HarnessState) -> list[Message]:
        """Chat messages for this turn."""
        raise NotImplementedError

    def parse(self, text: str) -> ParsedAction:
        """Read the env action out of the model's text; never raises on bad text."""
        raise NotImplementedError

    def format_response(self, action: str, thought: str = "") -> str:
        """Write ``action`` as a response this harness parses back to ``action`` (oracle backend)."""
        raise NotImplementedError


_REGISTRY: dict[str, Callable[..., Harness]] = {}


def register_harness(name: str, factory: Callable[..., Harness]) -> None:
    """Make ``get_harness(name)`` build ``factory(**kwargs)``."""
    _REGISTRY[name] = factory


def harness_names() -> list[str]:
    return sorted(_REGISTRY)


def get_harness(name: str, **kwargs: Any) -> Harness:
    """Build the harness ``name`` (``template=PATH`` replaces its wording; ``advice=TREE`` adds hints).

    An unknown name is one clear error listing the known ones.
    """
    if name not in _REGISTRY:
        raise ConfigError(
            f"unknown harness {name!r}", fix=f"use one of: {', '.join(harness_names()) or '(none)'}"
        )
    return _REGISTRY[name](**kwargs)
