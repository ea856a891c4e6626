"""ALFWorld: the 5 navigation/manipulation skills of ReuseRL (App. 13.1).

===================  ==============================================================  ==========
token                commands                                                         label
===================  ==============================================================  ==========
explore<receptacle>  go to X while empty-handed; open/close/examine X; look; inventory  Explore
take<object>         take X from Y, pick up X                                          Take
transport<object>    go to X while holding an object                                   Transport
transform<object>    clean/heat/cool/slice X with Y, use X (e.g. toggle a desklamp)     Transform
deliver<object>      put X in/on Y, move X to Y                                        Deliver
===================  ==============================================================  ==========

The paper's worked example fixes the split of ``go to``: before the ``take`` it is Explore, after
it Transport. So the projection needs one bit of context, ``{"holding": bool}``; the env adapter
tracks it, and :meth:`ALFWorldCanonicalizer.corpus_context` recomputes it from the earlier steps of
a stored trajectory (a take sets it, a put/move clears it; a step answered "Nothing happens."
changes nothing). An unrecognised command is projected to Explore (``slots["unmatched"]``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from . import register_canonicalizer
from .base import CanonicalAction, Canonicalizer

if TYPE_CHECKING:
    from ..corpus.records import Trajectory

SKILLS = ("explore<receptacle>", "take<object>", "transport<object>", "transform<object>", "deliver<object>")
"""The 5 skill tokens, in a fixed order."""
LABELS = dict(zip(SKILLS, ("Explore", "Take", "Transport", "Transform", "Deliver")))  # token -> label

_NOTHING = "nothing happens"
_GO = re.compile(r"^go\s+to\s+(.+)$")
_TAKE = re.compile(r"^(?:take|pick up|get)\s+(.+?)(?:\s+from\s+(.+))?$")
_PUT = re.compile(r"^(?:put|move|place)\s+(.+?)\s+(?:in/on|in|on|into|onto|to)\s+(.+)$")
_TRANSFORM = re.compile(r"^(clean|heat|cool|slice)\s+(.+?)(?:\s+with\s+(.+))?$")
_USE = re.compile(r"^(?:use|toggle)\s+(.+)$")
_EXPLORE = re.compile(r"^(open|close|examine|look|inventory|look at|check)\b\s*(.*)$")


def effect(action: str) -> str | None:
    """What an action does to the held-object bit: ``"take"``, ``"put"`` or None.

    Example:
        >>> effect("take ladle 1 from drawer 1"), effect("put ladle 1 in/on countertop 1"), effect("go to sinkbasin 1")
        ('take', 'put', None)
    """
    text = " ".join(action.strip().lower().split())
    if _TAKE.match(text):
        return "take"
    if _PUT.match(text):
        return "put"
    return None


class ALFWorldCanonicalizer(Canonicalizer):
    """ALFWorld commands -> the 5 skills (``go to`` depends on ``context["holding"]``).

    Example:
        >>> c = ALFWorldCanonicalizer()
        >>> walk = ["go to drawer 1", "open drawer 1", "take ladle 1 from drawer 1", "go to sinkbasin 1",
        ...         "clean ladle 1 with sinkbasin 1", "go to countertop 1", "put ladle 1 on countertop 1"]
        >>> holding, out = False, []
        >>> for a in walk:
        ...     out.append(LABELS[c(a, {"holding": holding}).token])
        ...     holding = {"take": True, "put": False}.get(effect(a), holding)
        >>> out
        ['Explore', 'Explore', 'Take', 'Transport', 'Transform', 'Transport', 'Deliver']
    """

    name = "alfworld"
    glosses: Mapping[str, str] = LABELS

    def canonicalize(self, action: str, context: Mapping[str, Any] | None = None) -> CanonicalAction:
        text = " ".join(action.strip().lower().split())
        holding = bool((context or {}).get("holding", False))
        m = _GO.match(text)
        if m:
            verb = "transport" if holding else "explore"
            role = "object" if holding else "receptacle"
            return CanonicalAction(verb, role, {"target": m.group(1), "holding": holding}, action)
        m = _TAKE.match(text)
        if m:
            return CanonicalAction("take", "object", _slots(("object", "source"), m.groups()), action)
        m = _PUT.match(text)
        if m:
            return CanonicalAction("deliver", "object", _slots(("object", "target"), m.groups()), action)
        m = _TRANSFORM.match(text)
        if m:
            return CanonicalAction(
                "transform", "object", _slots(("verb", "object", "tool"), m.groups()), action
            )
        m = _USE.match(text)
        if m:
            return CanonicalAction("transform", "object", {"verb": "use", "object": m.group(1)}, action)
        m = _EXPLORE.match(text)
        if m:
            return CanonicalAction("explore", "receptacle", _slots(("verb", "object"), m.groups()), action)
        return CanonicalAction("explore", "receptacle", {"command": text, "unmatched": True}, action)

    def corpus_context(self, trajectory: Trajectory, index: int) -> dict[str, Any]:
        """``{"holding": bool}`` from the effective takes and puts before step ``index``."""
        holding = False
        for step in trajectory.steps[:index]:
            if _NOTHING in (step.observation or "").lower():
                continue
            holding = {"take": True, "put": False}.get(effect(step.action) or "", holding)
        return {"holding": holding}


def _slots(names: tuple[str, ...], values: tuple[str | None, ...]) -> dict[str, Any]:
    return {k: v for k, v in zip(names, values) if v}


register_canonicalizer(ALFWorldCanonicalizer(), "alfworld-tw")
