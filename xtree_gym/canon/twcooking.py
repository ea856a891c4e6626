"""TextWorld-Cooking: the 10 recipe-execution skills of ReuseRL (App. 13.2).

The paper names seven skills in its worked example (Read_Recipe, Open, Take, Cut, Cook,
Prepare_Meal, Eat_Meal) and says there are ten; its rule table did not survive in our copy, so the
other three -- Navigate, Examine, Drop -- are our reading of the TextWorld cooking command set.
Rules, on the first word(s) of the command:

=================  ==========================================  ==========================
token              commands                                    paper label
=================  ==========================================  ==========================
read<recipe>       examine/read/look at the cookbook            Read_Recipe
go<room>           go north|south|east|west, n/s/e/w            Navigate
examine<object>    look, examine X, inventory, anything else    Examine
open<container>    open X, close X                              Open
take<item>         take X [from Y], pick up X                   Take
drop<item>         drop X, put X on Y, insert X into Y          Drop
cut<ingredient>    slice|dice|chop X with knife                 Cut
cook<ingredient>   cook X with Y, roast|fry|grill|bake X        Cook
prepare<meal>      prepare meal                                 Prepare_Meal
eat<meal>          eat X                                        Eat_Meal
=================  ==========================================  ==========================

An unrecognised command changes nothing in TextWorld, so it is projected to Examine (with
``slots["unmatched"] = True``): the alphabet stays closed at 10 skills. No context is needed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from . import register_canonicalizer
from .base import CanonicalAction, Canonicalizer

SKILLS = (
    "read<recipe>",
    "go<room>",
    "examine<object>",
    "open<container>",
    "take<item>",
    "drop<item>",
    "cut<ingredient>",
    "cook<ingredient>",
    "prepare<meal>",
    "eat<meal>",
)
"""The 10 skill tokens, in a fixed order."""

LABELS = dict(
    zip(
        SKILLS,
        (
            "Read_Recipe",
            "Navigate",
            "Examine",
            "Open",
            "Take",
            "Drop",
            "Cut",
            "Cook",
            "Prepare_Meal",
            "Eat_Meal",
        ),
    )
)  # token -> paper-style label

_DIRECTIONS = {"north", "south", "east", "west", "n", "s", "e", "w", "up", "down"}
_CUT = {"slice", "dice", "chop", "cut"}
_COOK = {"cook", "roast", "fry", "grill", "bake"}
_RULES = (  # (pattern on the lowered command, token, slot names of the groups)
    (re.compile(r"^(?:examine|read|look at|x)\s+(?:the\s+)?cookbook$"), "read<recipe>", ()),
    (re.compile(r"^go\s+(\w+)$"), "go<room>", ("direction",)),
    (re.compile(r"^(open|close)\s+(.+)$"), "open<container>", ("verb", "object")),
    (re.compile(r"^(?:take|get|pick up)\s+(.+?)(?:\s+from\s+(.+))?$"), "take<item>", ("object", "source")),
    (re.compile(r"^drop\s+(.+)$"), "drop<item>", ("object",)),
    (re.compile(r"^(?:put|insert)\s+(.+?)\s+(?:on|in|into)\s+(.+)$"), "drop<item>", ("object", "target")),
    (
        re.compile(r"^(slice|dice|chop|cut)\s+(.+?)(?:\s+with\s+(.+))?$"),
        "cut<ingredient>",
        ("verb", "object", "tool"),
    ),
    (
        re.compile(r"^(cook|roast|fry|grill|bake)\s+(.+?)(?:\s+(?:with|in|on)\s+(.+))?$"),
        "cook<ingredient>",
        ("verb", "object", "tool"),
    ),
    (re.compile(r"^prepare\s+meal$"), "prepare<meal>", ()),
    (re.compile(r"^eat\s+(.+)$"), "eat<meal>", ("object",)),
    (re.compile(r"^(look|l|inventory|i|examine\s+.+|x\s+.+)$"), "examine<object>", ("command",)),
)


class TWCookingCanonicalizer(Canonicalizer):
    """TextWorld cooking commands -> the 10 cooking skills.

    Example:
        >>> c = TWCookingCanonicalizer()
        >>> walk = ["examine cookbook", "open fridge", "take carrot from fridge", "dice carrot with knife",
        ...         "cook carrot with stove", "prepare meal", "eat meal"]
        >>> [LABELS[c(a).token] for a in walk]
        ['Read_Recipe', 'Open', 'Take', 'Cut', 'Cook', 'Prepare_Meal', 'Eat_Meal']
        >>> c("go north").token, c("inventory").token, c("dance wildly").slots["unmatched"]
        ('go<room>', 'examine<object>', True)
    """

    name = "twcooking"
    glosses: Mapping[str, str] = LABELS

    def canonicalize(self, action: str, context: Mapping[str, Any] | None = None) -> CanonicalAction:
        text = " ".join(action.strip().lower().split())
        if text in _DIRECTIONS:
            return CanonicalAction("go", "room", {"direction": text}, action)
        for pattern, token, names in _RULES:
            m = pattern.match(text)
            if m:
                verb, role = token[:-1].split("<")
                slots = {k: v for k, v in zip(names, m.groups()) if v is not None}
                return CanonicalAction(verb, role, slots, action)
        return CanonicalAction("examine", "object", {"command": text, "unmatched": True}, action)


register_canonicalizer(TWCookingCanonicalizer(), "tw-cooking", "textworld-cooking")
