"""``node``: X-Tree's node-level protocol (App. D): one turn per node, several env actions per turn.

Protocol facts (from the paper; the wording is ours, replaceable by a template):

* the response is a ``<planning>…</planning>`` block and then one ``<action>…</action>`` tag per
  primitive action; :class:`~xtree_gym.agents.types.ParsedAction` holds every action in
  ``actions`` (in order) and their joined string (``"; "``) in ``action``;
* the macro-action wrapper (:mod:`xtree_gym.wrappers.macro`) runs the tags in order, one env step
  each; the next prompt carries the observation after the last executed action and the turn's
  joined action string, so ``HarnessState.history`` holds one ``(joined actions, observation)``
  entry per *turn* -- the same node-level history the node SFT rows are built with;
* a budget of 30 env actions per episode (``step_limit``).

Works on any text env: the prompt shows the task, the earlier turns (all joined action strings,
the last ``history_length`` with the observation seen before them), the current observation,
and the admissible actions when the state has them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from ..types import ParsedAction
from .base import HarnessState, Message, register_harness
from .common import WordedHarness, joined, listed_from, observation_before
from .wording import first_tag, tag_blocks

JOIN = "; "
"""How one turn's actions join into its history entry (the macro wrapper's and the SFT rows' join)."""

WORDING: dict[str, str] = {
    "system": "You act in a text environment to complete a task. Each turn you may issue several "
    "actions that belong together (a short routine); they run in order, one after another, and you "
    "see the result once the last one has run.\n"
    "Answer with a plan inside <planning> </planning>, then each action in its own "
    "<action> </action> tag, in the order they should run.",
    "user": "Task: {task}\n{history}Current observation: {observation}\n{valid}{advice}"
    "Plan the next routine, then write its actions, one <action> tag each.",
    "history": "Turns so far: {turns}. Their actions, and for the last {recent} the observation "
    "seen before them:\n{lines}\n",
    "old_turn": "[Turn {n}: '{actions}']",
    "omitted": "[Turns 1-{n} not shown]",
    "recent_turn": "[Turn {n}, Observation: '{observation}', Actions: '{actions}']",
    "valid": "Actions you may take now: [{actions}]\n",
}
PLACEHOLDERS: dict[str, frozenset[str]] = {
    "system": frozenset(),
    "user": frozenset({"task", "history", "observation", "valid", "advice"}),
    "history": frozenset({"turns", "recent", "lines"}),
    "old_turn": frozenset({"n", "actions"}),
    "omitted": frozenset({"n"}),
    "recent_turn": frozenset({"n", "observation", "actions"}),
    "valid": frozenset({"actions"}),
}


def parse_node(text: str) -> ParsedAction:
    """``<planning>p</planning><action>a</action><action>b</action>`` -> actions ``(a, b)``, action ``"a; b"``.

    Empty action tags are skipped; a response with no non-empty action tag is invalid. Never raises.

    Example:
        >>> p = parse_node("<planning>leave</planning><action>open door</action><action>go to hallway</action>")
        >>> p.actions, p.action, p.thought
        (('open door', 'go to hallway'), 'open door; go to hallway', 'leave')
        >>> parse_node("<planning>only a plan</planning>").error
        'no <action>...</action> tag in the response'
    """
    if not isinstance(text, str):
        return ParsedAction(None, error=f"response is {type(text).__name__}, not text")
    planning = first_tag(text, "planning")
    actions = tuple(a.strip() for a in tag_blocks(text, "action") if a.strip())
    if not actions:
        return ParsedAction(None, error="no <action>...</action> tag in the response", thought=planning)
    return ParsedAction(JOIN.join(actions), thought=planning, actions=actions)


class NodeHarness(WordedHarness):
    """X-Tree's node-level protocol on any env (see module doc).

    Example:
        >>> h = NodeHarness()
        >>> h.format_actions(["open door", "go to hallway"], "leave the room")
        '<planning>leave the room</planning>\\n<action>open door</action>\\n<action>go to hallway</action>'
        >>> h.parse(h.format_actions(["open door", "go to hallway"], "")).actions
        ('open door', 'go to hallway')
    """

    name: ClassVar[str] = "node"
    envs: ClassVar[tuple[str, ...]] = ()
    step_limit: ClassVar[int] = 30
    response_tokens: ClassVar[int] = 512  # a plan and several actions
    WORDING: ClassVar[dict[str, str]] = WORDING
    PLACEHOLDERS: ClassVar[dict[str, frozenset[str]]] = PLACEHOLDERS

    def history_block(self, state: HarnessState) -> str:
        k = len(state.history)
        if k == 0:
            return ""
        first = listed_from(state, self.history_cap)  # at most history_cap turns listed
        recent_from = max(0, k - self.history_length)
        lines = [self.say("omitted", n=first)] if first else []
        for j in range(first, k):
            acts = state.history[j][0]
            if j < recent_from:
                lines.append(self.say("old_turn", n=j + 1, actions=acts))
            else:
                seen = observation_before(state, j)
                lines.append(self.say("recent_turn", n=j + 1, observation=seen, actions=acts))
        return self.say("history", turns=k, recent=k - recent_from, lines="\n".join(lines))

    def render(self, state: HarnessState) -> list[Message]:
        valid = self.say("valid", actions=joined(state.valid_actions)) if state.valid_actions else ""
        user = self.say(
            "user",
            task=state.goal,
            history=self.history_block(state),
            observation=state.observation,
            valid=valid,
            advice=self.advice_block(state),
        )
        return [{"role": "system", "content": self.say("system")}, {"role": "user", "content": user}]

    def parse(self, text: str) -> ParsedAction:
        return parse_node(text)

    def format_actions(self, actions: Sequence[str], planning: str = "") -> str:
        """One node turn: the planning block, then one ``<action>`` tag per action."""
        return "\n".join([f"<planning>{planning}</planning>", *(f"<action>{a}</action>" for a in actions)])

    def format_response(self, action: str, thought: str = "") -> str:
        """A one-action turn (the oracle's primitive): ``parse`` gives ``action`` back."""
        return self.format_actions([action], thought)


register_harness("node", NodeHarness)
