"""``replay``: offline node RL on ``XTree-NodeReplay-v0`` (X-Tree §3.2, App. E).

Protocol facts (structure only; the wording is ours, replaceable by a template):

* the policy is given the gold prefix -- the goal, the first observation, then every earlier action
  with what the environment answered -- which the env renders as its observation
  (``obs_mode="full"``), and the node steps already matched are appended to it;
* it writes one action per turn, ``<think>…</think><action>…</action>`` as the other protocols;
  the env compares the action with the recorded gold one (thought excluded);
* the episode cap is the node horizon: the env itself ends after ``ℓ_v`` steps or the first mismatch;
  a response without an ``<action>`` block is sent as it is, so it is that mismatch (it can never
  equal a gold action) and the rollout stops there, as the protocol says, instead of idling on.
"""

from __future__ import annotations

from typing import ClassVar

from ..types import ParsedAction
from .base import HarnessState, Message, register_harness
from .common import WordedHarness, format_think_action, parse_think_action

WORDING: dict[str, str] = {
    "prompt": "You are an agent continuing a recorded episode. Below is everything that has happened so far: "
    "the task, what the environment showed, each action taken and the environment's answer.\n\n"
    "{history}\n\n"
    "{advice}"
    "Write the next action. Think first, inside <think> </think>, "
    "then give exactly one action inside <action> </action>.",
}
PLACEHOLDERS: dict[str, frozenset[str]] = {"prompt": frozenset({"history", "advice"})}


class ReplayHarness(WordedHarness):
    """The gold history as one user message; one ``<action>`` per turn.

    Example:
        >>> h = ReplayHarness()
        >>> msg = h.render(HarnessState(goal="g", observation="Goal: g\\nObservation: A hallway."))[0]["content"]
        >>> msg.splitlines()[2:4]
        ['Goal: g', 'Observation: A hallway.']
        >>> h.parse(h.format_response("open door", "the door first")).action
        'open door'
        >>> h.parse("no tags at all").action  # sent as is: the replay env ends the rollout on it
        'no tags at all'
    """

    name: ClassVar[str] = "replay"
    envs: ClassVar[tuple[str, ...]] = ("nodereplay",)
    step_limit: ClassVar[int] = 30
    stop: ClassVar[tuple[str, ...]] = ("</action>",)
    WORDING: ClassVar[dict[str, str]] = WORDING
    PLACEHOLDERS: ClassVar[dict[str, frozenset[str]]] = PLACEHOLDERS
    default_history: ClassVar[int] = 0

    def render(self, state: HarnessState) -> list[Message]:
        text = self.say("prompt", history=state.observation, advice=self.advice_block(state))
        return [{"role": "user", "content": text}]

    def parse(self, text: str) -> ParsedAction:
        parsed = parse_think_action(text)
        if parsed.action is None and isinstance(text, str):
            return ParsedAction(text.strip() or "(empty response)", thought=parsed.thought)
        return parsed

    def format_response(self, action: str, thought: str = "") -> str:
        return format_think_action(action, thought)


register_harness("replay", ReplayHarness)
