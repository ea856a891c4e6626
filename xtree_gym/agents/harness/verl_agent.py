"""``verl-agent``: WebShop as verl-agent (Feng et al., 2025; GiGPO) prompts it.

Protocol facts carried over (structure only; the wording is ours, replaceable by a template):

* one user message per turn: the task (the goal instruction), then on later turns the number of
  steps taken and the last 2 steps as ``[Observation k: '…', Action k: '…']`` (the observation
  seen before action k), the current step and observation, then the admissible actions, one
  ``'action',`` per line between ``[`` and ``]``;
* the observation drops the page header up to the instruction and quotes each remaining
  ``[SEP]``-separated part (``'Back to Search' [SEP] 'Page 1 (Total results: 50)' …``);
* admissible actions are ``search[<your query>]`` on the search page plus ``click[value]`` for
  every clickable (:meth:`~xtree_gym.envs.webshop.WebShopEnv.valid_actions`);
* the response is ``<think>…</think><action>…</action>``; the first action block runs;
* 15 env steps per episode.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from ..types import ParsedAction
from .base import HarnessState, Message, register_harness
from .common import WordedHarness, format_think_action, observation_before, parse_think_action

SEP = " [SEP] "


def webshop_view(observation: str, task: str) -> str:
    """The page after the instruction, each ``[SEP]`` part quoted; the raw text if the task is not on it.

    Example:
        >>> webshop_view("WebShop [SEP] Instruction: [SEP] buy a hat [SEP] Search", "buy a hat")
        "'Search'"
        >>> webshop_view("Thank you", "buy a hat")
        'Thank you'
    """
    parts = observation.split(SEP)
    if task not in parts:
        return observation
    rest = parts[parts.index(task) + 1 :]
    return SEP.join(f"'{p}'" for p in rest)


def action_lines(actions: Sequence[str]) -> str:
    """One ``'action',`` per line (the admissible-action list as verl-agent writes it).

    Example:
        >>> print(action_lines(["search[<your query>]", "click[next >]"]))
        'search[<your query>]',
        'click[next >]',
    """
    return "\n".join(f"'{a}'," for a in actions)


_TAIL = (
    "The actions you may take now:\n[\n{available_actions}\n].\n\n"
    "{advice}"
    "Take one action for this step. Reason step by step about the page and which allowed action "
    "gets you closest to the requested purchase, inside <think> </think>.\n"
    "Then give the chosen action, copied from the list, inside <action> </action>."
)
WORDING: dict[str, str] = {
    "first": "You are shopping on WebShop, an online store.\nYour task: {task}.\n"
    "What you see now: {observation}.\n" + _TAIL,
    "later": "You are shopping on WebShop, an online store.\nYour task: {task}.\n"
    "You have taken {step_count} step(s). The last {history_length} pages you saw, with the action "
    "you took on each: {action_history}\n"
    "This is step {current_step}. What you see now: {observation}.\n" + _TAIL,
    "recent_step": "[Observation {n}: '{observation}', Action {n}: '{action}']",
}
_FIELDS = frozenset({"task", "observation", "available_actions", "advice"})
PLACEHOLDERS: dict[str, frozenset[str]] = {
    "first": _FIELDS,
    "later": _FIELDS | {"step_count", "history_length", "action_history", "current_step"},
    "recent_step": frozenset({"n", "observation", "action"}),
}


class VerlAgentWebShopHarness(WordedHarness):
    """WebShop, verl-agent's prompt structure (see module doc).

    Example:
        >>> h = VerlAgentWebShopHarness()
        >>> s = HarnessState(goal="buy a hat", observation="WebShop [SEP] Instruction: [SEP] buy a hat [SEP] Search",
        ...                  valid_actions=["search[<your query>]"])
        >>> print(h.render(s)[0]["content"].splitlines()[2])
        What you see now: 'Search'.
    """

    name: ClassVar[str] = "verl-agent"
    envs: ClassVar[tuple[str, ...]] = ("webshop",)
    step_limit: ClassVar[int] = 15
    stop: ClassVar[tuple[str, ...]] = ("</action>",)
    needs_valid_actions: ClassVar[bool] = True
    WORDING: ClassVar[dict[str, str]] = WORDING
    PLACEHOLDERS: ClassVar[dict[str, frozenset[str]]] = PLACEHOLDERS
    advice_domain: ClassVar[str | None] = "webshop"

    def render(self, state: HarnessState) -> list[Message]:
        task = state.goal
        view = {
            "task": task,
            "observation": webshop_view(state.observation, task),
            "available_actions": action_lines(state.valid_actions or ()),
            "advice": self.advice_block(state),
        }
        k = len(state.history)
        if k == 0 or self.history_length == 0:
            return [{"role": "user", "content": self.say("first", **view)}]
        start = max(0, k - self.history_length)
        lines = [
            self.say(
                "recent_step",
                n=j + 1,
                observation=webshop_view(observation_before(state, j), task),
                action=state.history[j][0],
            )
            for j in range(start, k)
        ]
        text = self.say(
            "later",
            **view,
            step_count=k,
            history_length=k - start,
            action_history="\n".join(lines),
            current_step=k + 1,
        )
        return [{"role": "user", "content": text}]

    def parse(self, text: str) -> ParsedAction:
        return parse_think_action(text)

    def format_response(self, action: str, thought: str = "") -> str:
        return format_think_action(action, thought)


register_harness("verl-agent", VerlAgentWebShopHarness)
