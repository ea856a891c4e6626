"""What every harness is: a prompt renderer plus a response parser for one benchmark protocol.

A harness is the only place that knows prompt wording and tags. The rollout hands it a
:class:`HarnessState` (what the agent may see this turn) and gets chat messages back; it hands
it the model's text and gets a :class:`~xtree_gym.agents.types.ParsedAction` back. A response
that does not parse is never an exception: ``ParsedAction(action=None, error=...)``.

A new benchmark protocol is one module in this package with a :class:`Harness` subclass and a
``register_harness`` line; nothing else changes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
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
    """The env's latest ``info`` (e.g. BrowserGym's axtree text, ScienceWorld's objects in view),
    merged with what :meth:`Harness.env_view` read from the env this turn."""
    initial_observation: str = ""
    """The reset observation (history-showing protocols pair each action with the text seen before it)."""
    responses: list[str] = field(default_factory=list)
    """The model's full text of each step in ``history`` (conversation-style protocols replay it)."""
    tokens: list[str] = field(default_factory=list)
    """Canonical tokens (``info["xtree"]["token"]``) of the steps in ``history``; the advice hint reads them."""

    @classmethod
    def start(
        cls,
        goal: str,
        observation: str,
        info: Mapping[str, Any],
        view: Mapping[str, Any] | None = None,
        valid_actions: Sequence[str] | None = None,
    ) -> HarnessState:
        """The state of turn 0 after ``env.reset``; ``view``/``valid_actions`` from :meth:`Harness.look`.

        Example:
            >>> s = HarnessState.start("boil water", "hallway", {"goal": "boil water"}, {"objects": ["door"]})
            >>> s.initial_observation, s.info["objects"], s.turn
            ('hallway', ['door'], 0)
        """
        return cls(
            goal=goal,
            observation=observation,
            initial_observation=observation,
            info={**info, **(view or {})},
            valid_actions=valid_actions,
        )

    def advance(
        self,
        action: str,
        observation: str,
        info: Mapping[str, Any],
        *,
        response: str = "",
        view: Mapping[str, Any] | None = None,
        valid_actions: Sequence[str] | None = None,
    ) -> None:
        """Record one executed step (``action`` -> ``observation``/``info``) and move to the next turn.

        Example:
            >>> s = HarnessState.start("g", "o0", {})
            >>> s.advance("look", "o1", {"xtree": {"token": "look<>"}}, response="<action>look</action>")
            >>> s.history, s.observation, s.tokens, s.turn
            ([('look', 'o1')], 'o1', ['look<>'], 1)
        """
        xtree = info.get("xtree") or {}
        self.history.append((action, observation))
        self.responses.append(response)
        self.tokens.append(str(xtree.get("token") or action))
        self.observation = observation
        self.info = {**info, **(view or {})}
        self.valid_actions = valid_actions
        self.turn += 1


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
    stop: ClassVar[tuple[str, ...]] = ()
    """Text that ends a response under this protocol (``</action>``): generation stops there, since
    nothing after it is read. ``xtree eval`` uses it unless ``--stop`` is given."""
    response_tokens: ClassVar[int] = 256
    """The response length the protocol needs (a short think plus the action): ``xtree eval``'s
    ``--max-new-tokens`` default, so a model that never closes its tag cannot run on for minutes."""

    max_parse_retries: int = 0
    """How often the rollout may re-ask after an unparseable response (BrowserGym's ``n_retry``); 0 = never."""

    def render(self, state: HarnessState) -> list[Message]:
        """Chat messages for this turn."""
        raise NotImplementedError

    def env_view(self, env: Any) -> dict[str, Any]:
        """Extra facts this protocol reads from the live env each turn (merged into ``HarnessState.info``).

        Called by the rollout in the process that holds the env, after reset and after every step;
        the default reads nothing. ``rlvmr`` reads ScienceWorld's action templates and objects in view.
        """
        return {}

    def look(self, env: Any) -> tuple[dict[str, Any], list[str] | None]:
        """``(env_view(env), valid_actions(env))``: all a turn reads from the live env, in one call."""
        return self.env_view(env), self.valid_actions(env)

    def valid_actions(self, env: Any) -> list[str] | None:
        """Admissible actions for ``HarnessState.valid_actions``: the env's ``valid_actions()`` when
        ``needs_valid_actions`` is set (ScienceWorld's list costs 35-150 ms: asked only then), else None.
        """
        if not self.needs_valid_actions:
            return None
        fn = getattr(getattr(env, "unwrapped", env), "valid_actions", None)
        return [str(a) for a in fn()] if callable(fn) else None

    def retry_messages(self, messages: list[Message], response: str, error: str) -> list[Message]:
        """The messages for a re-ask after ``response`` failed to parse with ``error`` (see ``max_parse_retries``)."""
        return [
            *messages,
            {"role": "assistant", "content": response},
            {
                "role": "user",
                "content": f"Your answer could not be read: {error}\nAnswer again in the required format.",
            },
        ]

    def parse(self, text: str) -> ParsedAction:
        """Read the env action out of the model's text; never raises on bad text."""
        raise NotImplementedError

    def format_response(self, action: str, thought: str = "") -> str:
        """Write ``action`` as a response this harness parses back to ``action`` (oracle backend)."""
        raise NotImplementedError


def goal_of(info: Mapping[str, Any], env: Any = None) -> str:
    """The task instruction as text, from an env's ``info["goal"]`` (a string, or WebShop's goal dict).

    Falls back to ``env.goal`` (or its ``instruction``) when ``info`` has none.

    Example:
        >>> goal_of({"goal": "Your task is to boil water."})
        'Your task is to boil water.'
        >>> goal_of({"goal": {"instruction": "i need a red hat", "asin": "B01"}})
        'i need a red hat'
    """
    goal: Any = info.get("goal")
    if goal is None and env is not None:
        goal = getattr(getattr(env, "unwrapped", env), "goal", None)
    if isinstance(goal, Mapping):
        goal = goal.get("instruction", "")
    elif goal is not None and not isinstance(goal, str):
        goal = getattr(goal, "instruction", goal)
    return "" if goal is None else str(goal)


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
    try:
        return _REGISTRY[name](**kwargs)
    except TypeError as exc:  # a misspelt option: name it instead of a traceback
        if "unexpected keyword argument" not in str(exc):
            raise
        bad = str(exc).split("unexpected keyword argument")[-1].strip()
        raise ConfigError(
            f"harness {name!r} has no option {bad}",
            fix="use template=, advice=, advice_corpus=, advice_top_k=, advice_domain=, history_length=, "
            "history_cap= (browsergym also: benchmark=, parse_retries=, action_subsets=)",
        ) from exc
