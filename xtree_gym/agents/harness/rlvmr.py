"""``rlvmr``: ScienceWorld as RLVMR (Zhang et al., 2025, on verl-agent) prompts it.

Protocol facts carried over (structure only; the wording here is ours, replaceable by a template):

* one user message per turn; the first turn shows the task, the current observation, the action
  command templates and the objects in view;
* later turns also show how many steps were taken, every earlier action as
  ``[Step k, Action k: '…']`` and the last 2 steps in full as
  ``[Step k, Observation k: '…', Action k: '…']`` (the observation the agent saw *before* action k),
  then the current step number and observation;
* the response is ``<think>…</think><action>…</action>``; the first action block is executed;
* 30 env steps per episode.

The action templates and objects come from the simulator each turn (:meth:`RLVMRHarness.env_view`:
``getPossibleActions`` / ``getPossibleObjects``, cheap); the costly valid-action list is not used.
"""

from __future__ import annotations

from typing import Any, ClassVar

from ..types import ParsedAction
from .base import HarnessState, Message, register_harness
from .common import (
    WordedHarness,
    format_think_action,
    joined,
    listed_from,
    observation_before,
    parse_think_action,
)

_INTRO = "You are an agent in ScienceWorld, a text simulator of elementary-school science experiments.\n"
_VIEW = (
    "Action commands you can use: [{action_templates}]\n"
    "Objects you can act on here: [{objects}]\n\n"
    "{advice}"
    "Choose the next action: fill a command's OBJ / LOC slots with objects from the list.\n"
    "Think step by step first, inside <think> </think>.\n"
    "Then give exactly one action inside <action> </action>."
)

WORDING: dict[str, str] = {
    "first": _INTRO + "Task: {task}\nWhat you observe now: {observation}\n" + _VIEW,
    "later": _INTRO
    + "Task: {task}\n"
    + "You have taken {step_count} step(s). Your earlier actions, and the last {history_length} "
    + "observations with the action you took after each: {action_history}\n"
    + "This is step {current_step}. What you observe now: {observation}\n"
    + _VIEW,
    "old_step": "[Step {n}, Action {n}: '{action}']",
    "omitted": "[Steps 1-{n} not shown]",
    "recent_step": "[Step {n}, Observation {n}: '{observation}', Action {n}: '{action}']",
}
_VIEW_FIELDS = frozenset({"task", "observation", "action_templates", "objects", "advice"})
PLACEHOLDERS: dict[str, frozenset[str]] = {
    "first": _VIEW_FIELDS,
    "later": _VIEW_FIELDS | {"step_count", "history_length", "action_history", "current_step"},
    "omitted": frozenset({"n"}),
    "old_step": frozenset({"n", "action"}),
    "recent_step": frozenset({"n", "observation", "action"}),
}


class RLVMRHarness(WordedHarness):
    """ScienceWorld, RLVMR's prompt structure (see module doc).

    Example:
        >>> h = RLVMRHarness()
        >>> s = HarnessState(goal="Your task is to boil water.", observation="You are in the kitchen.",
        ...                  info={"action_templates": ["open OBJ", "go to LOC"], "objects": ["door", "sink"]})
        >>> print(h.render(s)[0]["content"].splitlines()[3])
        Action commands you can use: [open OBJ, go to LOC]
        >>> h.parse("<think>need heat</think><action>go to kitchen</action>").action
        'go to kitchen'
    """

    name: ClassVar[str] = "rlvmr"
    envs: ClassVar[tuple[str, ...]] = ("scienceworld",)
    step_limit: ClassVar[int] = 30
    stop: ClassVar[tuple[str, ...]] = ("</action>",)
    WORDING: ClassVar[dict[str, str]] = WORDING
    PLACEHOLDERS: ClassVar[dict[str, frozenset[str]]] = PLACEHOLDERS
    advice_domain: ClassVar[str | None] = "scienceworld"

    def env_view(self, env: Any) -> dict[str, Any]:
        """The action command templates and the objects in view, read from the simulator."""
        base = getattr(env, "unwrapped", env)
        out: dict[str, Any] = {}
        for key, method in (("action_templates", "action_templates"), ("objects", "objects_in_view")):
            fn = getattr(base, method, None)
            if callable(fn):
                out[key] = list(fn())
        return out

    def action_history(self, state: HarnessState) -> str:
        """Earlier actions alone, then the last ``history_length`` steps with the observation before each.

        At most ``history_cap`` earlier steps are listed; older ones are one "not shown" line, so a
        prompt's size (and the time to build it) does not grow with the episode.
        """
        k = len(state.history)
        first = listed_from(state, self.history_cap)
        recent_from = max(0, k - self.history_length)
        lines = [self.say("omitted", n=first)] if first else []
        old_step, history = self.words["old_step"].format, state.history  # the hot loop: no say() per line
        lines += [old_step(n=j + 1, action=history[j][0]) for j in range(first, min(recent_from, k))]
        for j in range(max(first, recent_from), k):
            seen = observation_before(state, j)
            lines.append(self.say("recent_step", n=j + 1, observation=seen, action=history[j][0]))
        return "\n".join(lines)

    def render(self, state: HarnessState) -> list[Message]:
        view = {
            "task": state.goal,
            "observation": state.observation,
            "action_templates": joined(state.info.get("action_templates", ())),
            "objects": joined(state.info.get("objects", ())),
            "advice": self.advice_block(state),
        }
        k = len(state.history)
        if k == 0 or self.history_length == 0:
            return [{"role": "user", "content": self.say("first", **view)}]
        text = self.say(
            "later",
            **view,
            step_count=k,
            history_length=min(self.history_length, k),
            action_history=self.action_history(state),
            current_step=k + 1,
        )
        return [{"role": "user", "content": text}]

    def parse(self, text: str) -> ParsedAction:
        return parse_think_action(text)

    def format_response(self, action: str, thought: str = "") -> str:
        return format_think_action(action, thought)


register_harness("rlvmr", RLVMRHarness)
