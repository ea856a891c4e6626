"""``countdown`` and ``textgame``: plain text-game protocols for the envs no paper harness covers.

Both keep the rlvmr layout (task, the last steps in full, the current observation) and the
``<think>…</think><action>…</action>`` response; the wording is ours, replaceable by a template.

* ``countdown`` (``XTree-Countdown-v0``): states the action grammar of Countdown-Stepwise
  (``op(<+|-|*|/>, a, b)``, ``rollback``, ``reset``) and the pool, so a policy can act validly from
  the first turn (the ``browsergym`` fallback asked for ``click('12')``: every turn invalid);
* ``textgame`` (``XTree-TWCooking-v0``, ``XTree-ALFWorld-v0``): lists the env's admissible
  commands (``info["admissible_commands"]``) when it gives them.
"""

from __future__ import annotations

from typing import ClassVar

from ..types import ParsedAction
from .base import HarnessState, Message, register_harness
from .common import WordedHarness, format_think_action, joined, observation_before, parse_think_action

_ANSWER = "Think step by step first, inside <think> </think>.\nThen give exactly one action inside <action> </action>."
_STEPS = "Your last {history_length} step(s), each with what you saw before it:\n{action_history}\n"
_STEP = "[Step {n}, Observation {n}: '{observation}', Action {n}: '{action}']"
_HISTORY = frozenset({"history_length", "action_history"})

COUNTDOWN_WORDING: dict[str, str] = {
    "first": "You play Countdown: combine the numbers of the pool, two at a time, until only the target is left.\n"
    "Rules: each action is op(<op>, a, b) with <op> one of + - * / and a, b two numbers of the pool "
    "(the result replaces them; division must be exact, results must not be negative), "
    "or rollback (undo the last operation), or reset (start over).\n"
    "{advice}Now:\n{observation}\n" + _ANSWER,
    "later": "You play Countdown: combine the numbers of the pool, two at a time, until only the target is left.\n"
    "Rules: each action is op(<op>, a, b) with <op> one of + - * / and a, b two numbers of the pool "
    "(the result replaces them; division must be exact, results must not be negative), "
    "or rollback (undo the last operation), or reset (start over).\n"
    "{advice}" + _STEPS + "Now:\n{observation}\n" + _ANSWER,
    "recent_step": _STEP,
}
TEXTGAME_WORDING: dict[str, str] = {
    "first": "You play a text game.\nTask: {task}\n{advice}What you observe now: {observation}\n{commands}"
    + _ANSWER,
    "later": "You play a text game.\nTask: {task}\n{advice}"
    + _STEPS
    + "What you observe now: {observation}\n{commands}"
    + _ANSWER,
    "recent_step": _STEP,
}
_STEP_FIELDS = frozenset({"n", "observation", "action"})


class _TextGameBase(WordedHarness):
    """The shared turn layout: first turn, later turns with the last steps in full."""

    step_limit: ClassVar[int] = 30

    def history_block(self, state: HarnessState) -> tuple[int, str]:
        k = len(state.history)
        lines = [
            self.say(
                "recent_step", n=j + 1, observation=observation_before(state, j), action=state.history[j][0]
            )
            for j in range(max(0, k - self.history_length), k)
        ]
        return min(self.history_length, k), "\n".join(lines)

    def fields(self, state: HarnessState) -> dict[str, str]:
        return {"observation": state.observation, "advice": self.advice_block(state)}

    def render(self, state: HarnessState) -> list[Message]:
        view = self.fields(state)
        if not state.history or self.history_length == 0:
            return [{"role": "user", "content": self.say("first", **view)}]
        n, history = self.history_block(state)
        text = self.say("later", **view, history_length=n, action_history=history)
        return [{"role": "user", "content": text}]

    def parse(self, text: str) -> ParsedAction:
        return parse_think_action(text)

    def format_response(self, action: str, thought: str = "") -> str:
        return format_think_action(action, thought)


class CountdownHarness(_TextGameBase):
    """Countdown-Stepwise with its action grammar in the prompt.

    Example:
        >>> h = CountdownHarness()
        >>> s = HarnessState(goal="", observation="Target: 54\\nPool: [80, 2, 28, 1]")
        >>> "op(<op>, a, b)" in h.render(s)[0]["content"]
        True
        >>> h.parse("<think>80-28=52</think><action>op(-, 80, 28)</action>").action
        'op(-, 80, 28)'
    """

    name: ClassVar[str] = "countdown"
    envs: ClassVar[tuple[str, ...]] = ("countdown",)
    WORDING: ClassVar[dict[str, str]] = COUNTDOWN_WORDING
    PLACEHOLDERS: ClassVar[dict[str, frozenset[str]]] = {
        "first": frozenset({"observation", "advice"}),
        "later": frozenset({"observation", "advice"}) | _HISTORY,
        "recent_step": _STEP_FIELDS,
    }
    advice_domain: ClassVar[str | None] = "countdown"


class TextGameHarness(_TextGameBase):
    """TextWorld-style games (TWCooking, ALFWorld): task, observation, admissible commands.

    Example:
        >>> h = TextGameHarness()
        >>> s = HarnessState(goal="cook a meal", observation="Kitchen.", info={"admissible_commands": ["look", "go east"]})
        >>> print(h.render(s)[0]["content"].splitlines()[3])
        Commands you can use now: look, go east
    """

    name: ClassVar[str] = "textgame"
    envs: ClassVar[tuple[str, ...]] = ("twcooking", "alfworld")
    WORDING: ClassVar[dict[str, str]] = TEXTGAME_WORDING
    PLACEHOLDERS: ClassVar[dict[str, frozenset[str]]] = {
        "first": frozenset({"task", "observation", "advice", "commands"}),
        "later": frozenset({"task", "observation", "advice", "commands"}) | _HISTORY,
        "recent_step": _STEP_FIELDS,
    }

    def fields(self, state: HarnessState) -> dict[str, str]:
        cmds = state.info.get("admissible_commands") or ()
        commands = f"Commands you can use now: {joined(cmds)}\n" if cmds else ""
        return {**super().fields(state), "task": state.goal, "commands": commands}


register_harness("countdown", CountdownHarness)
register_harness("textgame", TextGameHarness)
