"""``react``: WebShop in ETO's ReAct form (Song et al., 2024, after Yao et al., 2023).

Protocol facts carried over (structure only; the wording is ours, replaceable by a template):

* a multi-turn chat: the instruction (action syntax ``search[keywords]`` / ``click[value]``, the
  answer format) first, then one user message per observation (``Observation:`` + the env text,
  which carries the WebShop instruction) and one assistant message per earlier turn;
* the whole conversation is kept (``history_length`` cuts it, oldest turns first);
* the response is ``Thought: …`` then ``Action: …``; the text after the last ``Action:`` is the
  action (its first line);
* 15 env steps per episode.
"""

from __future__ import annotations

import re
from typing import ClassVar

from ..types import ParsedAction
from .base import HarnessState, Message, register_harness
from .common import WordedHarness, observation_before

WORDING: dict[str, str] = {
    "system": "You are shopping online in a web store. Each turn you get the page as an observation "
    "and answer with one action.\n"
    "Actions:\n"
    "search[keywords] -- run a search (only when the page has a search box)\n"
    "click[value] -- click a button or link shown on the page (use its text exactly)\n"
    "An action that does not fit the page does nothing.\n"
    "Answer in this form:\nThought: your reasoning\nAction: the action",
    "observation": "{advice}Observation:\n{observation}",
}
PLACEHOLDERS: dict[str, frozenset[str]] = {
    "system": frozenset(),
    "observation": frozenset({"observation", "advice"}),
}
_ACTION_LINE = re.compile(r"^[ \t]*action\s*:", re.IGNORECASE | re.MULTILINE)
_ACTION = re.compile(r"action\s*:", re.IGNORECASE)
_THOUGHT = re.compile(r"thought\s*:\s*(.*)", re.IGNORECASE | re.DOTALL)


def parse_react(text: str) -> ParsedAction:
    """``Thought: …\\nAction: a`` -> ``a`` (the first line after the last ``Action:``); never raises.

    Example:
        >>> parse_react("Thought: I need shoes.\\nAction: search[red shoes]").action
        'search[red shoes]'
        >>> parse_react("Thought: hmm").error
        "no 'Action:' line in the response"
    """
    if not isinstance(text, str):
        return ParsedAction(None, error=f"response is {type(text).__name__}, not text")
    # an "Action:" opening a line wins over one inside a sentence (or inside the action itself)
    marks = list(_ACTION_LINE.finditer(text)) or list(_ACTION.finditer(text))
    head = text[: marks[-1].start()] if marks else text
    m = _THOUGHT.search(head)
    thought = m.group(1).strip() if m else None
    if not marks:
        return ParsedAction(None, error="no 'Action:' line in the response", thought=thought)
    lines = text[marks[-1].end() :].strip().splitlines()
    action = lines[0].strip() if lines else ""
    if not action:
        return ParsedAction(None, error="the 'Action:' line is empty", thought=thought)
    return ParsedAction(action, thought=thought, actions=(action,))


class ReActWebShopHarness(WordedHarness):
    """WebShop, ETO's ReAct conversation (see module doc).

    Example:
        >>> h = ReActWebShopHarness()
        >>> s = HarnessState(goal="g", observation="page 2", history=[("search[hat]", "page 2")],
        ...                  initial_observation="page 1")
        >>> [m["role"] for m in h.render(s)]
        ['system', 'user', 'assistant', 'user']
        >>> h.parse(h.format_response("click[b01]", "It fits.")).action
        'click[b01]'
    """

    name: ClassVar[str] = "react"
    envs: ClassVar[tuple[str, ...]] = ("webshop",)
    step_limit: ClassVar[int] = 15
    WORDING: ClassVar[dict[str, str]] = WORDING
    PLACEHOLDERS: ClassVar[dict[str, frozenset[str]]] = PLACEHOLDERS
    default_history: ClassVar[int] = 1_000_000  # ETO keeps the whole conversation
    advice_domain: ClassVar[str | None] = "webshop"

    def render(self, state: HarnessState) -> list[Message]:
        messages: list[Message] = [{"role": "system", "content": self.say("system")}]
        k = len(state.history)
        for j in range(max(0, k - self.history_length), k):
            action = state.history[j][0]
            response = state.responses[j] if j < len(state.responses) else self.format_response(action)
            messages.append(
                {
                    "role": "user",
                    "content": self.say("observation", observation=observation_before(state, j), advice=""),
                }
            )
            messages.append({"role": "assistant", "content": response})
        last = self.say("observation", observation=state.observation, advice=self.advice_block(state))
        messages.append({"role": "user", "content": last})
        return messages

    def parse(self, text: str) -> ParsedAction:
        return parse_react(text)

    def format_response(self, action: str, thought: str = "") -> str:
        return f"Thought: {thought}\nAction: {action}"


register_harness("react", ReActWebShopHarness)
