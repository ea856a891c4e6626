"""BrowserGym / WebArena: action strings -> ``verb<role>`` (paper Table 9).

The verb comes from the function name (``fill`` -> ``type``, ``select_option`` -> ``select``,
``goto`` -> ``navigate``, ...); the role from the accessibility role of the element the action
addresses (``textbox`` -> ``text_input``, ``combobox`` -> ``select``, ``menuitem`` -> ``option``,
other roles verbatim in lower case). The role is looked up in the context, first match wins:

* ``element``: ``{"role": "link", "name": "CUSTOMERS"}`` -- the addressed element itself;
* ``axtree_object``: BrowserGym's CDP accessibility tree (``{"nodes": [{"browsergym_id": "235",
  "role": {"value": "link"}, "name": {"value": "CUSTOMERS"}}, ...]}``);
* ``axtree_txt``: BrowserGym's flattened tree text (lines ``[235] link 'CUSTOMERS'``).

With no element found, ``fill``/``type`` imply ``text_input`` and ``select_option`` implies
``select`` (Playwright runs them only on such elements; ``slots["role_source"] == "implied"``);
everything else gets ``element``, the authors' name for an unknown role.

Action strings are parsed with :mod:`ast` (several calls in one string are allowed: the first
gives the token, all are kept in ``slots["calls"]``). Strings that are not Python (the authors'
MiniWoB++ ``type(ref=7, "x")``, WebArena's native ``click [12]``) go through a small tolerant
parser. Nothing raises: a string no parser reads gets the catch-all.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from . import register_canonicalizer
from .base import CanonicalAction, Canonicalizer, catch_all, parse_token_form

if TYPE_CHECKING:
    from ..corpus.records import Trajectory


@dataclass
class Call:
    """One function call of an action string: name, positional and keyword arguments.

    Example:
        >>> parse_calls("select_option('12', ['a', 'b'])")[0]
        Call(name='select_option', args=['12', ['a', 'b']], kwargs={}, source="select_option('12', ['a', 'b'])")
    """

    name: str
    args: list[Any] = field(default_factory=list)
    kwargs: dict[str, Any] = field(default_factory=dict)
    source: str = ""


def _literal(node: ast.expr) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return ast.unparse(node)


def _parse_python(action: str) -> list[Call] | None:
    try:
        tree = ast.parse(action.strip(), mode="exec")
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None
    calls: list[Call] = []
    for stmt in tree.body:
        if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
            return None
        call = stmt.value
        func = call.func
        if isinstance(func, ast.Name):
            name = func.id
        elif isinstance(func, ast.Attribute):
            name = func.attr
        else:
            return None
        calls.append(
            Call(
                name,
                [_literal(a) for a in call.args],
                {k.arg: _literal(k.value) for k in call.keywords if k.arg is not None},
                ast.get_source_segment(action.strip(), stmt) or "",
            )
        )
    return calls or None


def _split_args(text: str) -> list[str]:
    """Split an argument list on top-level commas, respecting quotes and brackets."""
    parts: list[str] = []
    depth, quote, start, i = 0, "", 0, 0
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
        i += 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def _value(text: str) -> Any:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return text


_IDENT = re.compile(r"[A-Za-z_]\w*")
_WS_OR_COMMENT = re.compile(r"(?:\s+|#[^\n]*)*")


def _closing_paren(text: str, start: int) -> int | None:
    """Index of the ``)`` closing the ``(`` at ``start`` (quotes and brackets respected), or None."""
    depth, i, n = 0, start, len(text)
    while i < n:
        ch = text[i]
        if ch in "'\"":
            quote = ch * 3 if text.startswith(ch * 3, i) else ch
            i += len(quote)
            while i < n and not text.startswith(quote, i):
                i += 2 if text[i] == "\\" else 1
            if i >= n:
                return None
            i += len(quote)
            continue
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth == 0:
                return i if ch == ")" else None
        i += 1
    return None


def _literal_call(source: str) -> Call | None:
    """``source`` as one call whose arguments are all literals (BrowserGym's grammar), else None."""
    try:
        node = ast.parse(source, mode="eval").body
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
        return None
    try:
        args = [ast.literal_eval(a) for a in node.args]
        kwargs = {k.arg: ast.literal_eval(k.value) for k in node.keywords if k.arg is not None}
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    if len(kwargs) != len(node.keywords):  # a **mapping argument
        return None
    return Call(node.func.id, args, kwargs, source)


def search_calls(text: str) -> list[Call]:
    r"""The calls BrowserGym executes from free text: every ``name(literal, ...)`` found in it.

    BrowserGym's action mapping (``HighLevelActionSet.to_python_code``, non-strict) searches
    the whole string for Python-like calls with literal arguments and skips everything in
    between (prose, ``Action:`` prefixes, code fences, ``#`` comments). This does the same
    scan: at each position, skip blanks and comments, try a call, else move one character on.

    Example:
        >>> [c.source for c in search_calls("Thought: the button.\nAction: click('12')")]
        ["click('12')"]
        >>> [c.source for c in search_calls("```python\n# click('1')\nfill('2', \"it's\")\n```")]
        ['fill(\'2\', "it\'s")']
        >>> [c.source for c in search_calls("page.click('3') then f(g('4'))")]
        ["click('3')", "g('4')"]
    """
    calls: list[Call] = []
    loc, n = 0, len(text)
    while loc < n:
        wc = _WS_OR_COMMENT.match(text, loc)
        pre = wc.end() if wc is not None else loc
        m = _IDENT.match(text, pre)
        if m is not None:
            paren = _WS_OR_COMMENT.match(text, m.end())
            at = paren.end() if paren is not None else m.end()
            if at < n and text[at] == "(":
                end = _closing_paren(text, at)
                call = None if end is None else _literal_call(text[m.start() : end + 1])
                if call is not None and end is not None:
                    calls.append(call)
                    loc = end + 1
                    continue
            # a shorter suffix of this name meets the same "(" (or none) and fails the same way
            loc = max(m.end(), pre + 1)
            continue
        loc = pre + 1
    return calls


_LOOSE_CALL = re.compile(r"^\s*([A-Za-z_]\w*)\s*\((.*)\)\s*$", re.DOTALL)
_BRACKET_CALL = re.compile(r"^\s*([A-Za-z_]\w*)((?:\s*\[[^\]]*\])*)\s*$", re.DOTALL)


def parse_calls(action: str) -> list[Call]:
    """Parse an action string into calls; ``[]`` when no syntax fits.

    Example:
        >>> [(c.name, c.args) for c in parse_calls("fill('925', 'a, \\\\'b\\\\'')")]
        [('fill', ['925', "a, 'b'"])]
        >>> c = parse_calls('type(ref=7, "myron")')[0]
        >>> c.name, c.args, c.kwargs
        ('type', ['myron'], {'ref': 7})
        >>> parse_calls("click [1234]")[0].args
        ['1234']
    """
    calls = _parse_python(action)
    if calls is not None and all(_literal_call(c.source) is not None for c in calls):
        return calls
    found = search_calls(action)  # a call inside a longer response, as BrowserGym finds it
    if found:
        return found
    if calls is not None:
        return calls
    m = _LOOSE_CALL.match(action)
    if m is not None:
        call = Call(m.group(1), source=action.strip())
        for part in _split_args(m.group(2)):
            kv = re.match(r"^([A-Za-z_]\w*)\s*=(?!=)\s*(.*)$", part, re.DOTALL)
            if kv is not None:
                call.kwargs[kv.group(1)] = _value(kv.group(2))
            else:
                call.args.append(_value(part))
        return [call]
    m = _BRACKET_CALL.match(action)
    if m is not None and (m.group(2) or "_" in m.group(1) or m.group(1) in _BARE_NAMES):
        return [Call(m.group(1), re.findall(r"\[([^\]]*)\]", m.group(2)), source=action.strip())]
    return []


# WebArena's native actions that take no argument (``go_back``, ``new_tab``, ...).
_BARE_NAMES = frozenset({"noop", "stop", "scroll"})

# BrowserGym (and WebArena-native) function name -> canonical verb (Table 9).
VERBS: dict[str, str] = {
    "click": "click",
    "dblclick": "click",
    "mouse_click": "click",
    "mouse_dblclick": "click",
    "fill": "type",
    "type": "type",
    "keyboard_type": "type",
    "keyboard_insert_text": "type",
    "select_option": "select",
    "press": "key",
    "keyboard_press": "key",
    "hover": "hover",
    "mouse_move": "hover",
    "focus": "focus",
    "clear": "clear",
    "scroll": "scroll",
    "scroll_at": "scroll",
    "goto": "navigate",
    "go_back": "navigate",
    "go_forward": "navigate",
    "drag_and_drop": "drag",
    "mouse_drag_and_drop": "drag",
    "upload_file": "upload",
    "mouse_upload_file": "upload",
    "send_msg_to_user": "stop",
    "report_infeasible": "stop",
    "stop": "stop",
    "noop": "noop",
}

# Accessibility role -> canonical role (Table 9); roles not listed are kept verbatim.
ROLES: dict[str, str] = {
    "option": "option",
    "menuitem": "option",
    "menuitemcheckbox": "option",
    "menuitemradio": "option",
    "textbox": "text_input",
    "searchbox": "text_input",
    "combobox": "select",
    "listbox": "select",
}

# Names of the arguments of each function, to label positional values in slots.
_ARG_NAMES: dict[str, tuple[str, ...]] = {
    "fill": ("bid", "text"),
    "type": ("bid", "text"),
    "select_option": ("bid", "options"),
    "press": ("bid", "key"),
    "keyboard_press": ("key",),
    "keyboard_type": ("text",),
    "keyboard_insert_text": ("text",),
    "goto": ("url",),
    "drag_and_drop": ("from_bid", "to_bid"),
    "upload_file": ("bid", "path"),
    "send_msg_to_user": ("message",),
    "report_infeasible": ("message",),
    "stop": ("message",),
    "scroll": ("delta_x", "delta_y"),
    "noop": ("wait_ms",),
    "tab_focus": ("index",),
    "mouse_click": ("x", "y"),
    "mouse_dblclick": ("x", "y"),
    "mouse_move": ("x", "y"),
}
_DEFAULT_ARGS = ("bid",)
_IMPLIED_ROLE = {"fill": "text_input", "type": "text_input", "select_option": "select"}


def map_role(ax_role: str) -> str:
    """Table 9's role mapping of an accessibility role.

    Example:
        >>> [map_role(r) for r in ("searchbox", "combobox", "menuitemradio", "LabelText")]
        ['text_input', 'select', 'option', 'labeltext']
    """
    low = ax_role.strip().lower()
    return ROLES.get(low, low or "element")


_AXTXT_LINE = re.compile(r"^\s*\[([^\]\s]+)\]\s+(\S+)(?:\s+('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"))?")


def element_from_axtree_txt(axtree_txt: str, bid: str) -> dict[str, str] | None:
    """Find ``[bid] role 'name'`` in BrowserGym's flattened accessibility tree.

    Example:
        >>> element_from_axtree_txt("RootWebArea 'x'\\n\\t[235] link 'CUSTOMERS'", "235")
        {'role': 'link', 'name': 'CUSTOMERS'}
    """
    for line in axtree_txt.splitlines():
        m = _AXTXT_LINE.match(line)
        if m is not None and m.group(1) == bid:
            name = _value(m.group(3)) if m.group(3) else ""
            return {"role": m.group(2), "name": name if isinstance(name, str) else str(name)}
    return None


def element_from_axtree_object(axtree: Any, bid: str) -> dict[str, str] | None:
    """Find the node with ``browsergym_id == bid`` in BrowserGym's CDP accessibility tree."""
    nodes = axtree.get("nodes") if isinstance(axtree, Mapping) else axtree
    if not isinstance(nodes, list):
        return None
    for node in nodes:
        if isinstance(node, Mapping) and str(node.get("browsergym_id")) == bid:
            role = node.get("role")
            name = node.get("name")
            return {
                "role": str(role.get("value", "")) if isinstance(role, Mapping) else str(role or ""),
                "name": str(name.get("value", "")) if isinstance(name, Mapping) else str(name or ""),
            }
    return None


def find_element(context: Mapping[str, Any] | None, bid: str | None) -> dict[str, str] | None:
    """The addressed element from a context (``element``, ``axtree_object``, ``axtree_txt``)."""
    if not context:
        return None
    el = context.get("element")
    if isinstance(el, Mapping):
        # the AX role; the MiniWoB env's records keep it as ``ax_role`` (``role`` is the ARIA attribute)
        role = el.get("role") or el.get("ax_role")
        if role:
            return {"role": str(role), "name": str(el.get("name", ""))}
    if bid is None:
        return None
    if "axtree_object" in context:
        found = element_from_axtree_object(context["axtree_object"], bid)
        if found is not None:
            return found
    if isinstance(context.get("axtree_txt"), str):
        return element_from_axtree_txt(context["axtree_txt"], bid)
    return None


def call_slots(call: Call) -> dict[str, Any]:
    """Label a call's arguments by name (``bid``, ``text``, ``key``, ``url``, ...)."""
    names = tuple(n for n in _ARG_NAMES.get(call.name, _DEFAULT_ARGS) if n not in call.kwargs)
    slots: dict[str, Any] = {"function": call.name}
    for i, val in enumerate(call.args):
        slots[names[i] if i < len(names) else f"arg{i}"] = val
    slots.update(call.kwargs)
    return slots


class BrowserGymCanonicalizer(Canonicalizer):
    """BrowserGym / WebArena action strings -> ``verb<role>`` (Table 9).

    Example:
        >>> c = BrowserGymCanonicalizer()
        >>> c("click('235')", {"axtree_txt": "[235] link 'CUSTOMERS'"}).token
        'click<link>'
        >>> c("fill('925', '03/01/2023')").token, c("goto('http://x')").token
        ('type<text_input>', 'navigate<element>')
        >>> c("send_msg_to_user('done')").slots["message"]
        'done'
    """

    name = "browsergym"
    glosses: Mapping[str, str] = {
        "click<link>": "follow a link",
        "click<button>": "press a button",
        "click<tab>": "switch tab",
        "click<option>": "choose a menu option",
        "click<checkbox>": "tick a checkbox",
        "click<radio>": "choose a radio button",
        "click<text_input>": "focus a text field",
        "click<element>": "click an unnamed element",
        "type<text_input>": "type into a text field",
        "select<select>": "pick a dropdown value",
        "key<text_input>": "press a key in a text field",
        "navigate<element>": "navigate (url/back/forward)",
        "scroll<element>": "scroll the page",
        "hover<option>": "hover a menu item",
        "stop<element>": "answer or stop",
        "noop<element>": "wait",
    }

    def canonicalize(self, action: str, context: Mapping[str, Any] | None = None) -> CanonicalAction:
        calls = parse_calls(action)
        if not calls:
            return parse_token_form(action) or catch_all(action)
        first = calls[0]
        verb = VERBS.get(first.name, first.name.lower())
        slots = call_slots(first)
        bid = slots.get("bid", slots.get("from_bid"))
        bid = None if bid is None else str(bid)
        element = find_element(context, bid)
        if element is not None:
            role = map_role(element["role"])
            slots.update(element_role=element["role"], element_name=element["name"], role_source="context")
        elif bid is not None and first.name in _IMPLIED_ROLE:
            role = _IMPLIED_ROLE[first.name]
            slots["role_source"] = "implied"
        else:
            role = "element"
            slots["role_source"] = "none"
        if len(calls) > 1:
            slots["calls"] = [c.source for c in calls]
        return CanonicalAction(verb, role, slots, action)

    def corpus_context(self, trajectory: Trajectory, index: int) -> dict[str, Any]:
        """The step's ``element`` or AXTree (step extra keys ``element``, ``axtree_txt``,
        ``axtree_object``), plus -- for the bid's role when the stored element has none -- the
        observation before the step (the previous step's observation, or the trajectory's
        ``initial_observation`` for step 0) as AXTree text."""
        step = trajectory.steps[index]
        ctx: dict[str, Any] = {
            k: step.extra[k] for k in ("element", "axtree_txt", "axtree_object") if k in step.extra
        }
        if "axtree_txt" in ctx or "axtree_object" in ctx:
            return ctx
        # an element without a role (or none) falls back to the page seen before the step
        before = (
            trajectory.steps[index - 1].observation
            if index > 0
            else trajectory.extra.get("initial_observation")
        )
        if isinstance(before, str) and before:
            ctx["axtree_txt"] = before
        return ctx


register_canonicalizer(BrowserGymCanonicalizer(), "webarena", "browser")
