"""Pure helpers over BrowserGym actions, accessibility trees and DOM snapshots (no browser needed).

An AXTree here is BrowserGym's ``obs["axtree_object"]``: ``{"nodes": [node, ...]}`` where a
node is Chrome's CDP ``AXNode`` dict (``nodeId``, ``role: {"value"}``, ``name: {"value"}``,
``childIds``, ``properties``, optional ``value: {"value"}``) plus ``browsergym_id`` (the bid
that actions address) on nodes BrowserGym marked.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator, Mapping
from typing import Any

# BrowserGym functions whose first argument (or ``bid=``/``from_bid=``) is an element bid.
BID_FUNCTIONS = frozenset(
    {
        "fill",
        "check",
        "uncheck",
        "select_option",
        "click",
        "dblclick",
        "hover",
        "press",
        "focus",
        "clear",
        "drag_and_drop",
        "upload_file",
    }
)
# Roles an agent acts on; only these borrow a preceding text as ``label`` when unnamed.
INTERACTIVE_ROLES = frozenset(
    {
        "button",
        "link",
        "textbox",
        "searchbox",
        "combobox",
        "listbox",
        "option",
        "checkbox",
        "radio",
        "switch",
        "slider",
        "spinbutton",
        "tab",
        "menuitem",
        "menuitemcheckbox",
        "menuitemradio",
        "treeitem",
    }
)
_CALL_RE = re.compile(r"""^\s*([A-Za-z_]\w*)\s*\(\s*(?:bid\s*=\s*)?(?:(['"])(.*?)\2)?""", re.S)


def parse_action(action: str) -> tuple[str, str | None]:
    """The first function name of a BrowserGym action and the bid it addresses (None if none).

    Example:
        >>> parse_action("fill('12', 'hello')")
        ('fill', '12')
        >>> parse_action('click(bid="a7", button="left")')
        ('click', 'a7')
        >>> parse_action("scroll(0, 200)")
        ('scroll', None)
        >>> parse_action("click('3'")   # unbalanced: still read by the fallback
        ('click', '3')
        >>> parse_action("nonsense")
        ('', None)
    """
    try:
        tree = ast.parse(action.strip(), mode="exec")
        calls = [n.value for n in tree.body if isinstance(n, ast.Expr) and isinstance(n.value, ast.Call)]
    except SyntaxError:
        calls = []
    if calls and isinstance(calls[0].func, ast.Name):
        call = calls[0]
        name = calls[0].func.id
        if name not in BID_FUNCTIONS:
            return name, None
        bid_node: ast.expr | None = call.args[0] if call.args else None
        for kw in call.keywords:
            if kw.arg in ("bid", "from_bid"):
                bid_node = kw.value
        if isinstance(bid_node, ast.Constant) and bid_node.value is not None:
            return name, str(bid_node.value)
        return name, None
    m = _CALL_RE.match(action)
    if not m:
        return "", None
    name = m.group(1)
    return name, (m.group(3) if name in BID_FUNCTIONS and m.group(2) else None)


def _value(node: Mapping[str, Any], key: str) -> Any:
    field = node.get(key)
    return field.get("value") if isinstance(field, Mapping) else None


def node_role(node: Mapping[str, Any]) -> str:
    """The accessibility role of one AX node (``""`` when absent)."""
    return str(_value(node, "role") or "")


def node_name(node: Mapping[str, Any]) -> str:
    """The accessible name of one AX node, trimmed (``""`` when absent).

    Chromium keeps the blank of ``<label><input> Accept terms</label>`` in the name
    (``" Accept terms"``); BrowserGym's flattened text and the label a reader sees have none.

    Example:
        >>> node_name({"name": {"value": " Accept terms"}}), node_name({})
        ('Accept terms', '')
    """
    return str(_value(node, "name") or "").strip()


def find_node(axtree: Mapping[str, Any] | None, bid: str) -> Mapping[str, Any] | None:
    """The AX node carrying ``browsergym_id == bid``, or None."""
    for node in (axtree or {}).get("nodes", ()):
        if node.get("browsergym_id") == bid:
            return node
    return None


def iter_elements(axtree: Mapping[str, Any] | None) -> Iterator[dict[str, Any]]:
    """Every marked node in document (depth-first) order, with a ``label`` for unnamed ones.

    Yields ``{"bid", "role", "name", "label", "value", "checked"}``; ``label`` is the node's
    name, or else the last static text seen before it (how MiniWoB labels its text fields).

    Example:
        >>> tree = {"nodes": [
        ...     {"nodeId": "1", "role": {"value": "RootWebArea"}, "childIds": ["2", "3"]},
        ...     {"nodeId": "2", "role": {"value": "StaticText"}, "name": {"value": "Username"}},
        ...     {"nodeId": "3", "role": {"value": "textbox"}, "name": {"value": ""},
        ...      "browsergym_id": "16"}]}
        >>> [(e["bid"], e["role"], e["label"]) for e in iter_elements(tree)]
        [('16', 'textbox', 'Username')]
    """
    nodes = list((axtree or {}).get("nodes", ()))
    if not nodes:
        return
    by_id = {n.get("nodeId"): n for n in nodes}  # nodeId -> node
    last_text = ""
    stack = [nodes[0]]
    seen: set[Any] = set()
    while stack:
        node = stack.pop()
        if node.get("nodeId") in seen:
            continue
        seen.add(node.get("nodeId"))
        role, name = node_role(node), node_name(node)
        if role == "StaticText" and name.strip():
            last_text = name.strip()
        bid = node.get("browsergym_id")
        if bid is not None and role not in ("generic", "none", "StaticText", "InlineTextBox"):
            checked = next(
                (p["value"].get("value") for p in node.get("properties", ()) if p.get("name") == "checked"),
                None,
            )
            yield {
                "bid": str(bid),
                "role": role,
                "name": name,
                "label": name or (last_text if role in INTERACTIVE_ROLES else ""),
                "value": _value(node, "value"),
                "checked": checked,
            }
        children = [by_id[c] for c in node.get("childIds", ()) if c in by_id]
        stack.extend(reversed(children))


def element_of(axtree: Mapping[str, Any] | None, bid: str | None) -> dict[str, str] | None:
    """``{"role", "name"}`` of the element ``bid`` addresses (plus ``label`` when unnamed), or None.

    Example:
        >>> tree = {"nodes": [{"nodeId": "1", "role": {"value": "button"},
        ...                    "name": {"value": "Submit"}, "browsergym_id": "7"}]}
        >>> element_of(tree, "7")
        {'role': 'button', 'name': 'Submit'}
        >>> element_of(tree, "8") is None
        True
    """
    if bid is None:
        return None
    node = find_node(axtree, bid)
    if node is None:
        return None
    element = {"role": node_role(node), "name": node_name(node)}
    if not element["name"]:
        label = next((e["label"] for e in iter_elements(axtree) if e["bid"] == bid), "")
        if label:
            element["label"] = label
    return element


def dom_element_of(dom_object: Mapping[str, Any] | None, bid: str | None) -> dict[str, str] | None:
    """DOM facts of the element ``bid`` from BrowserGym's ``obs["dom_object"]`` (a CDP DOM snapshot).

    Returns ``{"tag", "type", "id", "class", "aria_role"}`` (lower-case tag; keys with no
    value left out), or None when no element carries that bid.

    Example:
        >>> snap = {"strings": ["INPUT", "type", "checkbox", "bid", "18", "id", "ch0"],
        ...         "documents": [{"nodes": {"nodeName": [0], "attributes": [[1, 2, 3, 4, 5, 6]]}}]}
        >>> dom_element_of(snap, "18")
        {'tag': 'input', 'type': 'checkbox', 'id': 'ch0'}
    """
    if bid is None or not dom_object:
        return None
    strings = dom_object.get("strings", [])
    for doc in dom_object.get("documents", ()):
        nodes = doc.get("nodes", {})
        for name_idx, attrs in zip(nodes.get("nodeName", ()), nodes.get("attributes", ())):
            # attrs is a flat [name_idx, value_idx, name_idx, value_idx, ...] list into `strings`
            pairs = {strings[attrs[j]]: strings[attrs[j + 1]] for j in range(0, len(attrs) - 1, 2)}
            if pairs.get("bid") != bid:
                continue
            out = {"tag": strings[name_idx].lower()}
            for src, dst in (("type", "type"), ("id", "id"), ("class", "class"), ("role", "aria_role")):
                if pairs.get(src):
                    out[dst] = pairs[src]
            return out
    return None
