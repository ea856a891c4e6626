"""MiniWoB++: agent primitives -> ``verb<role>`` with the DOM rule of paper Table 10.

The verb is the agent's primitive (``click``, ``submit``, ``clear``, ``type``, ``select``,
``key``, ``noop``; BrowserGym names such as ``fill`` and ``select_option`` map to the same
verbs). The role comes from the addressed DOM element, by the first matching rule:

1. ARIA role ``button``, ``link``, ``checkbox``, ``radio``, ``tab``, ``dialog`` or ``option``;
2. tag ``button``, or ``input`` of type ``submit``/``button`` -> ``button``;
3. tag ``a`` -> ``link``;  4. tag ``select``/``option`` -> ``select``/``option``;
5. ``input`` of type ``checkbox``/``radio`` -> ``checkbox``/``radio``;
6. tag ``textarea`` or ``input`` of any other type -> ``text_input``;
7. class containing ``tab``/``dialog``, or tag ``dialog`` -> ``tab``/``dialog``;
8. tag ``p``, ``span``, ``div``, ``label``, ``td``, ``th``, ``li`` -> ``text``;
9. any other tag verbatim (``element`` if none).

The authors' corpus reported every input as a typed tag (``input_text``, ``input_password``,
``input_checkbox``), which rule 9 keeps verbatim; that is why their tree holds
``type<input_text>`` rather than ``type<text_input>``. By default this canonicalizer does the
same (an ``input`` of type T becomes the tag ``input_T`` before the rules), so tokens match the
released tree; ``MiniWoBCanonicalizer(typed_input_tags=False)`` (or context
``{"typed_input_tags": False}``) applies the rules to plain ``input`` tags instead.

Context: ``{"element": {"tag", "type", "aria_role", "class", "label", "text", "placeholder",
"value", "id"}}`` (any subset). The ARIA role is ``aria_role`` (the DOM ``role`` attribute, as
xtree_gym's browser env passes it); a ``role`` key counts as the ARIA role only in a plain DOM
dict without an accessibility ``name`` (the env's merged dict carries the computed AX ``role``
and ``name``, which are not attributes). The element label (first of label, aria-label, name,
text, placeholder, value, id) is kept in ``slots["label"]``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from . import register_canonicalizer
from .base import CanonicalAction, Canonicalizer, catch_all, parse_token_form
from .browsergym import parse_calls

if TYPE_CHECKING:
    from ..corpus.records import Trajectory

VERBS: dict[str, str] = {
    "click": "click",
    "dblclick": "click",
    "submit": "submit",
    "clear": "clear",
    "noop": "noop",
    "type": "type",
    "fill": "type",
    "select": "select",
    "select_option": "select",
    "key": "key",
    "press": "key",
    "keyboard_press": "key",
    # BrowserGym's answer and give-up calls end the episode as in every browser domain
    "send_msg_to_user": "stop",
    "report_infeasible": "stop",
    "stop": "stop",
}
ARIA_ROLES = frozenset({"button", "link", "checkbox", "radio", "tab", "dialog", "option"})
TEXT_TAGS = frozenset({"p", "span", "div", "label", "td", "th", "li"})
_LABEL_KEYS = ("label", "aria_label", "aria-label", "name", "text", "placeholder", "value", "id")
_ARG_NAMES: dict[str, tuple[str, ...]] = {
    "type": ("ref", "text"),
    "fill": ("ref", "text"),
    "select": ("ref", "value"),
    "select_option": ("ref", "value"),
    "key": ("key",),
    "keyboard_press": ("key",),
    "press": ("ref", "key"),
}


def _aria_role(element: Mapping[str, Any]) -> Any:
    # The DOM ``role`` attribute. xtree_gym's browser env passes it as ``aria_role`` next to the
    # accessibility tree's computed ``role`` and ``name``; a computed role is not an attribute
    # (every checkbox input has it), so ``role`` counts only in a plain DOM dict (no ``name``).
    if "aria_role" in element or "aria-role" in element:
        return element.get("aria_role", element.get("aria-role"))
    return None if "name" in element else element.get("role")


def dom_role(element: Mapping[str, Any], typed_input_tags: bool = True) -> str:
    """Table 10's role of a DOM element (first matching rule wins).

    Example:
        >>> dom_role({"tag": "input", "type": "password"})
        'input_password'
        >>> dom_role({"tag": "input", "type": "password"}, typed_input_tags=False)
        'text_input'
        >>> dom_role({"tag": "span", "class": "tab-title"}), dom_role({"tag": "h3"}), dom_role({})
        ('tab', 'h3', 'element')
    """
    tag = str(element.get("tag") or "").strip().lower()
    itype = str(element.get("type") or "").strip().lower()
    aria = str(_aria_role(element) or "").strip().lower()
    cls = str(element.get("class") or "").lower()
    if typed_input_tags and tag == "input":
        tag = f"input_{itype or 'text'}"
    if aria in ARIA_ROLES:
        return aria
    if tag == "button" or (tag == "input" and itype in ("submit", "button")):
        return "button"
    if tag == "a":
        return "link"
    if tag in ("select", "option"):
        return tag
    if tag == "input" and itype in ("checkbox", "radio"):
        return itype
    if tag in ("textarea", "input"):
        return "text_input"
    if "tab" in cls or "dialog" in cls or tag == "dialog":
        return "tab" if "tab" in cls else "dialog"
    if tag in TEXT_TAGS:
        return "text"
    return tag or "element"


def element_label(element: Mapping[str, Any]) -> str | None:
    """The element's label: first non-empty of label, aria-label, text, placeholder, value, id."""
    for key in _LABEL_KEYS:
        val = element.get(key)
        if val not in (None, ""):
            return str(val)
    return None


class MiniWoBCanonicalizer(Canonicalizer):
    """MiniWoB++ actions -> ``verb<role>`` (Table 10).

    Example:
        >>> c = MiniWoBCanonicalizer()
        >>> c('type(ref=10, "GX")', {"element": {"tag": "input", "type": "password", "label": "Password"}}).token
        'type<input_password>'
        >>> c("click(ref=17)", {"element": {"tag": "button", "text": "Cancel"}}).slots["label"]
        'Cancel'
        >>> c("click<text>(Reply)").token
        'click<text>'
    """

    name = "miniwob"
    glosses: Mapping[str, str] = {
        "click<button>": "press a button",
        "submit<button>": "submit the form",
        "click<link>": "follow a link",
        "click<text>": "click a text element",
        "click<input_checkbox>": "tick a checkbox",
        "click<input_radio>": "choose a radio button",
        "click<input_text>": "focus a text field",
        "type<input_text>": "type into a text field",
        "type<input_password>": "type a password",
        "select<select>": "pick a dropdown value",
        "click<h3>": "open an accordion section",
    }

    def __init__(self, typed_input_tags: bool = True) -> None:
        if not isinstance(typed_input_tags, bool):
            raise TypeError(f"typed_input_tags must be a bool, got {typed_input_tags!r}")
        self.typed_input_tags = typed_input_tags

    def canonicalize(self, action: str, context: Mapping[str, Any] | None = None) -> CanonicalAction:
        token_form = parse_token_form(action)
        if token_form is not None:
            return token_form
        calls = parse_calls(action)
        if not calls:
            return catch_all(action)
        call = calls[0]
        verb = VERBS.get(call.name, call.name.lower())
        # Positional values fill the argument names not given by keyword: type(ref=7, "x").
        names = tuple(n for n in _ARG_NAMES.get(call.name, ("ref",)) if n not in call.kwargs)
        slots: dict[str, Any] = {"function": call.name}
        for i, val in enumerate(call.args):
            slots[names[i] if i < len(names) else f"arg{i}"] = val
        slots.update(call.kwargs)
        if "bid" in slots and "ref" not in slots:
            slots["ref"] = slots["bid"]
        ctx = context or {}
        element = ctx.get("element")
        typed = ctx.get("typed_input_tags", self.typed_input_tags)
        if isinstance(element, Mapping) and element:
            role = dom_role(element, typed_input_tags=bool(typed))
            label = element_label(element)
            if label is not None:
                slots["label"] = label
        else:
            role = "element"
        if len(calls) > 1:
            slots["calls"] = [c.source for c in calls]
        return CanonicalAction(verb, role, slots, action)

    def corpus_context(self, trajectory: Trajectory, index: int) -> dict[str, Any]:
        """The step's ``element`` (a DOM element dict in the step's extra keys)."""
        el = trajectory.steps[index].extra.get("element")
        return {"element": el} if isinstance(el, Mapping) else {}


register_canonicalizer(MiniWoBCanonicalizer(), "miniwob++")
