"""``browsergym``: MiniWoB and WebArena as BrowserGym's generic agent (AgentLab) prompts them.

Protocol facts carried over (structure only; the wording is ours, replaceable by a template):

* a system message, then one user message of markdown sections in this order: instructions with
  the goal; the current observation (the flattened accessibility tree, the focused element, the
  error of the previous action when there was one); the history of the episode (each earlier
  step's ``<think>`` and ``<action>``); the action space (BrowserGym's own
  ``HighLevelActionSet.describe()`` of the benchmark's subset: ``bid`` on MiniWoB,
  ``webarena`` on WebArena, one action per step); a concrete example; the request for the next action;
* the response holds ``<think>…</think>`` (optional) and ``<action>…</action>``; the action is
  the BrowserGym call inside the first action tag (a Markdown code fence around it is dropped);
* an unparseable response may be re-asked (``parse_retries``, 4 as AgentLab's ``n_retry``); the
  rollout sends :meth:`~xtree_gym.agents.harness.base.Harness.retry_messages`;
* 30 env steps per episode on WebArena (and on MiniWoB here).

The env's text observation is already the flattened AXTree
(:mod:`xtree_gym.envs.browsergym`); ``info["action_error"]`` is the previous action's error.
"""

from __future__ import annotations

import functools
import re
from typing import Any, ClassVar

from ...errors import ConfigError
from ..types import ParsedAction
from .base import HarnessState, Message, register_harness
from .common import WordedHarness, format_think_action, parse_think_action

ACTION_SUBSETS: dict[str, tuple[str, ...]] = {"miniwob": ("bid",), "webarena": ("webarena",)}
"""BrowserGym action-set subsets per benchmark: its `miniwob_bid` and `webarena` defaults (our MiniWoB
observation is the AXTree text with bids and no coordinates, so the bid actions fit it)."""

_FALLBACK_ACTIONS = (
    "click(bid: str) -- click the element with this bid, e.g. click('12')\n"
    "fill(bid: str, value: str) -- type text into a field, e.g. fill('7', 'hello')\n"
    "select_option(bid: str, options: str | list[str]) -- choose in a list, e.g. select_option('9', 'red')\n"
    "noop() -- do nothing this step"
)
"""Used only when BrowserGym is not installed (its own description is preferred)."""


@functools.lru_cache(maxsize=8)
def action_space_text(subsets: tuple[str, ...]) -> str:
    """BrowserGym's description of the action subsets (with examples), or a short fallback without it."""
    try:
        from browsergym.core.action.highlevel import HighLevelActionSet
    except ImportError:
        return _FALLBACK_ACTIONS
    action_set = HighLevelActionSet(subsets=list(subsets), strict=False, multiaction=False)
    return str(action_set.describe(with_long_description=False, with_examples=True)).strip()


WORDING: dict[str, str] = {
    "system": "You are an agent that completes tasks in a web browser. You read the page's content "
    "and the user's instructions, act on the page one action at a time, and after each action you "
    "get the new page.",
    "instructions": "# Instructions\nStudy the page and everything below, then choose the single "
    "best next action towards the goal. A program reads your answer and runs it, so keep to the "
    "answer format.\n\n## Goal:\n{goal}",
    "observation": "# Observation of current step:\n## AXTree:\nEach element line starts with its "
    "bid in [brackets]; refer to elements by that bid in your actions.\n{axtree}",
    "focused": "## Focused element:\n{bid}",
    "error": "## Error from previous action:\n{error}",
    "history": "# History of interaction with the task:\n{steps}",
    "history_step": "## step {n}\n<think>\n{thought}\n</think>\n<action>\n{action}\n</action>",
    "action_space": "# Action space:\nEach action is one Python-like call that the browser runs; "
    "elements are named by their bid.\n\n{actions}",
    "example": "# Concrete Example\nHere is how an answer looks:\n<think>\nThe goal asks to press the "
    "button labelled Submit, which has bid '12' in the tree.\n</think>\n<action>\nclick('12')\n</action>",
    "next": "# Next action\n{advice}Think step by step about the goal, your earlier actions, any error "
    "message and the current page inside <think> </think>, then give exactly one action inside "
    "<action> </action>.",
}
PLACEHOLDERS: dict[str, frozenset[str]] = {
    "system": frozenset(),
    "instructions": frozenset({"goal"}),
    "observation": frozenset({"axtree"}),
    "focused": frozenset({"bid"}),
    "error": frozenset({"error"}),
    "history": frozenset({"steps"}),
    "history_step": frozenset({"n", "thought", "action"}),
    "action_space": frozenset({"actions"}),
    "example": frozenset(),
    "next": frozenset({"advice"}),
}
_FENCE = re.compile(
    r"^```(?:[A-Za-z0-9_+-]*[ \t]*\n)?\s*(.*?)\s*```$", re.DOTALL
)  # a language tag ends its line


def parse_browsergym(text: str) -> ParsedAction:
    """The call inside the first ``<action>`` tag, a Markdown code fence around it dropped; never raises.

    Example:
        >>> parse_browsergym("<think>the button</think><action>```python\\nclick('12')\\n```</action>").action
        "click('12')"
        >>> parse_browsergym("click('12')").error
        'no <action>...</action> block in the response'
    """
    parsed = parse_think_action(text)
    if parsed.action is None:
        return parsed
    m = _FENCE.match(parsed.action)
    action = m.group(1).strip() if m else parsed.action
    if not action:
        return ParsedAction(
            None, error="the <action> block holds an empty code block", thought=parsed.thought
        )
    return ParsedAction(action, thought=parsed.thought, actions=(action,))


class BrowserGymHarness(WordedHarness):
    """MiniWoB / WebArena in the generic agent's prompt structure (see module doc).

    Example:
        >>> h = BrowserGymHarness(benchmark="miniwob")
        >>> msgs = h.render(HarnessState(goal='Click on the "ok" button.', observation="[3] button 'ok'"))
        >>> [line for line in msgs[1]["content"].splitlines() if line.startswith("# ")][:3]
        ['# Instructions', '# Observation of current step:', '# Action space:']
    """

    name: ClassVar[str] = "browsergym"
    envs: ClassVar[tuple[str, ...]] = ("miniwob", "webarena")
    step_limit: ClassVar[int] = 30
    stop: ClassVar[tuple[str, ...]] = ("</action>",)
    WORDING: ClassVar[dict[str, str]] = WORDING
    PLACEHOLDERS: ClassVar[dict[str, frozenset[str]]] = PLACEHOLDERS
    default_history: ClassVar[int] = 1_000_000  # the generic agent shows every earlier step

    def __init__(
        self,
        *,
        benchmark: str = "miniwob",
        parse_retries: int = 4,
        action_subsets: tuple[str, ...] | list[str] | None = None,
        **options: Any,
    ) -> None:
        if benchmark not in ACTION_SUBSETS:
            raise ConfigError(
                f"benchmark={benchmark!r} is not a BrowserGym benchmark here",
                fix=f"use one of {', '.join(ACTION_SUBSETS)}",
            )
        if int(parse_retries) < 0:
            raise ConfigError(f"parse_retries={parse_retries!r} must be >= 0", fix="use 0 to never re-ask")
        self.benchmark = benchmark
        self.max_parse_retries = int(parse_retries)
        self.action_subsets = tuple(action_subsets) if action_subsets else ACTION_SUBSETS[benchmark]
        super().__init__(**options)

    def advice_glosses(self) -> str | None:
        return self._advice_domain or self.benchmark  # the miniwob / webarena canonicalizer's glosses

    def env_view(self, env: Any) -> dict[str, Any]:
        """The focused element's bid from BrowserGym's latest observation ("" when none)."""
        obs = getattr(getattr(env, "unwrapped", env), "last_browsergym_obs", None) or {}
        return {"focused_element_bid": str(obs.get("focused_element_bid") or "")}

    def history_text(self, state: HarnessState) -> str:
        k = len(state.history)
        steps = []
        for j in range(max(0, k - self.history_length), k):
            action = state.history[j][0]
            thought = ""
            if j < len(state.responses):
                thought = self.parse(state.responses[j]).thought or ""
            steps.append(self.say("history_step", n=j, thought=thought, action=action))
        return self.say("history", steps="\n\n".join(steps))

    def render(self, state: HarnessState) -> list[Message]:
        sections = [
            self.say("instructions", goal=state.goal),
            self.say("observation", axtree=state.observation),
        ]
        focused = state.info.get("focused_element_bid")
        if focused:
            sections.append(self.say("focused", bid=focused))
        error = state.info.get("action_error") or state.info.get("last_action_error")
        if error:
            sections.append(self.say("error", error=error))
        if state.history:
            sections.append(self.history_text(state))
        sections.append(self.say("action_space", actions=action_space_text(self.action_subsets)))
        sections.append(self.say("example"))
        sections.append(self.say("next", advice=self.advice_block(state)))
        return [
            {"role": "system", "content": self.say("system")},
            {"role": "user", "content": "\n\n".join(s for s in sections if s)},
        ]

    def parse(self, text: str) -> ParsedAction:
        return parse_browsergym(text)

    def format_response(self, action: str, thought: str = "") -> str:
        return format_think_action(action, thought)


register_harness("browsergym", BrowserGymHarness)
