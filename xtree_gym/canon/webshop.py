"""WebShop: ``search[q]`` / ``click[X]`` -> ``verb<role>`` (paper Table 11).

``click[X]`` is typed by what X is: a product id (``click<item>``), one of the fixed buttons
(``click<buy>``, ``click<back>``, ...), a value the goal names (``click<option-TYPE>``, TYPE the
option group, lower case, spaces as ``-``), or any other value (``click<option>``, which in
practice marks a wasted option click).

Context: ``{"goal_options": ...}``, in any of these shapes

* ``{"color": "blue", "flavor name": "caramel"}`` -- the authors' shape (data.js), group -> value;
  a group may also map to a list of values;
* ``[["color", "blue"], ...]`` or ``[{"type": "color", "value": "blue"}, ...]``;
* ``["blue", "16 foot"]`` -- values without groups (WebShop's human goals); the group then comes
  from ``page_options`` (``{"color": ["blue", "black"], ...}``, the item page's option groups),
  or, when no group is known, the role is ``option-goal``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from . import register_canonicalizer
from .base import CanonicalAction, Canonicalizer, catch_all, parse_token_form

if TYPE_CHECKING:
    from ..corpus.records import Trajectory

# Fixed buttons of the WebShop site: normalized label -> role.
BUTTONS: dict[str, str] = {
    "buy now": "buy",
    "buy": "buy",
    "back to search": "back",
    "next >": "next",
    "next": "next",
    "< prev": "prev",
    "prev": "prev",
    "description": "desc",
    "features": "features",
    "reviews": "reviews",
    "attributes": "attrs",
    "search": "search",
}

# Option groups of the WebShop catalogue (items_shuffle ``customization_options`` keys), used
# to read the item page's groups from a text observation when no structured page is given.
OPTION_GROUPS: tuple[str, ...] = (
    "color",
    "size",
    "style",
    "flavor name",
    "flavor",
    "fit type",
    "scent",
    "pattern name",
    "item package quantity",
    "material type",
    "item shape",
    "product packaging",
    "number of items",
    "capacity",
    "configuration",
    "length",
    "team name",
    "edition",
    "design",
    "color name",
    "size name",
    "style name",
)

# An ASIN: "B0" + 8 alphanumerics, or a 10-character ISBN (books).
_ASIN = re.compile(r"^(?:b0[a-z0-9]{8}|\d{9}[\dx])$", re.IGNORECASE)
_ACTION = re.compile(r"^\s*(search|click)\s*\[(.*)\]\s*$", re.IGNORECASE | re.DOTALL)


def _norm(value: str) -> str:
    return " ".join(value.lower().split())


def _compact(value: str) -> str:
    return re.sub(r"[^a-z0-9]", "", value.lower())


def option_type_name(group: str) -> str:
    """The role suffix of an option group: lower case, runs of spaces/underscores as ``-``.

    Example:
        >>> option_type_name("Flavor Name")
        'flavor-name'
    """
    return re.sub(r"[\s_]+", "-", group.strip().lower())


def goal_option_pairs(goal_options: Any) -> list[tuple[str | None, str]]:
    """Normalize any accepted ``goal_options`` shape to ``[(group or None, value), ...]``.

    Example:
        >>> goal_option_pairs({"color": "blue", "size": ["16 foot", "16foot"]})
        [('color', 'blue'), ('size', '16 foot'), ('size', '16foot')]
        >>> goal_option_pairs(["blue"])
        [(None, 'blue')]
    """
    pairs: list[tuple[str | None, str]] = []
    if isinstance(goal_options, Mapping):
        for group, val in goal_options.items():
            vals = val if isinstance(val, (list, tuple)) else [val]
            pairs.extend((str(group), str(v)) for v in vals if v is not None)
    elif isinstance(goal_options, (list, tuple)):
        for item in goal_options:
            if isinstance(item, str):
                pairs.append((None, item))
            elif isinstance(item, Mapping) and "value" in item:
                group = item.get("type", item.get("name", item.get("group")))
                pairs.append((None if group is None else str(group), str(item["value"])))
            elif isinstance(item, (list, tuple)) and len(item) == 2:
                pairs.append((str(item[0]), str(item[1])))
    return pairs


def _same_value(a: str, b: str) -> bool:
    return _norm(a) == _norm(b) or (bool(_compact(a)) and _compact(a) == _compact(b))


def _group_on_page(value: str, page_options: Any) -> str | None:
    if not isinstance(page_options, Mapping):
        return None
    for group, vals in page_options.items():
        if isinstance(vals, (list, tuple)) and any(_same_value(value, str(v)) for v in vals):
            return str(group)
    return None


def page_options_from_text(observation: str) -> dict[str, list[str]]:
    """Read an item page's option groups from WebShop's ``[SEP]``-joined text observation.

    Example:
        >>> page_options_from_text("Back to Search [SEP] < Prev [SEP] size [SEP] 3foot [SEP] 16foot"
        ...     " [SEP] color [SEP] blue [SEP] USB cord [SEP] Price: $9.99 [SEP] Buy Now")
        {'size': ['3foot', '16foot'], 'color': ['blue', 'USB cord']}
    """
    parts = [p.strip() for p in re.split(r"\[SEP\]|\n", observation) if p.strip()]
    groups: dict[str, list[str]] = {}
    current: str | None = None
    for part in parts:
        low = _norm(part)
        if low in OPTION_GROUPS:
            current = low
            groups.setdefault(current, [])
        elif low.startswith("price:") or low in BUTTONS or low.startswith("rating:"):
            current = None
        elif current is not None:
            groups[current].append(part)
    # The title follows the last group's values with no separator of its own; a reader who
    # needs exact groups passes ``page_options`` from the page's structure instead.
    return groups


class WebShopCanonicalizer(Canonicalizer):
    """WebShop actions -> ``search<query>``, ``click<item>``, ``click<option-TYPE>``, buttons.

    Example:
        >>> c = WebShopCanonicalizer()
        >>> ctx = {"goal_options": {"flavor name": "caramel", "size": "4.41 ounce"}}
        >>> [c(a, ctx).token for a in ["search[wafers]", "click[b085qmttsc]", "click[caramel]",
        ...     "click[vanilla]", "click[buy now]"]]
        ['search<query>', 'click<item>', 'click<option-flavor-name>', 'click<option>', 'click<buy>']
    """

    name = "webshop"
    glosses: Mapping[str, str] = {
        "search<query>": "search the catalogue",
        "click<item>": "open a product from the results",
        "click<buy>": "buy the item",
        "click<back>": "go back to search",
        "click<next>": "next results page",
        "click<prev>": "previous page",
        "click<desc>": "read the description",
        "click<features>": "read the features",
        "click<reviews>": "read the reviews",
        "click<attrs>": "read the attributes",
        "click<option-color>": "select the goal's color option",
        "click<option-size>": "select the goal's size option",
        "click<option-style>": "select the goal's style option",
        "click<option-flavor-name>": "select the goal's flavor option",
        "click<option-flavor>": "select the goal's flavor option",
        "click<option-scent>": "select the goal's scent option",
        "click<option-fit-type>": "select the goal's fit type option",
        "click<option-pattern-name>": "select the goal's pattern option",
        "click<option-goal>": "select an option the goal names",
        "click<option>": "wasted step (untyped option)",
    }

    def canonicalize(self, action: str, context: Mapping[str, Any] | None = None) -> CanonicalAction:
        m = _ACTION.match(action)
        if m is None:
            return parse_token_form(action) or catch_all(action)
        verb, arg = m.group(1).lower(), m.group(2)
        if verb == "search":
            return CanonicalAction("search", "query", {"query": arg}, action)
        low = _norm(arg)
        if _ASIN.match(low):
            return CanonicalAction("click", "item", {"item": arg}, action)
        if low in BUTTONS:
            return CanonicalAction("click", BUTTONS[low], {"button": arg}, action)
        ctx = context or {}
        slots: dict[str, Any] = {"value": arg}
        for group, value in goal_option_pairs(ctx.get("goal_options")):
            if _same_value(arg, value):
                group = group or _group_on_page(arg, ctx.get("page_options"))
                slots["goal_group"] = group
                role = f"option-{option_type_name(group)}" if group else "option-goal"
                return CanonicalAction("click", role, slots, action)
        return CanonicalAction("click", "option", slots, action)

    def corpus_context(self, trajectory: Trajectory, index: int) -> dict[str, Any]:
        """``goal_options`` from the trajectory's extra keys; ``page_options`` from the step's
        extra (or read from the previous observation when the goal options have no groups)."""
        extra = trajectory.extra
        ctx: dict[str, Any] = {}
        goal = extra.get("goal_options")
        if goal is None and isinstance(extra.get("goal"), Mapping):
            goal = extra["goal"].get("goal_options")
        if goal is not None:
            ctx["goal_options"] = goal
        step = trajectory.steps[index]
        if isinstance(step.extra.get("page_options"), Mapping):
            ctx["page_options"] = step.extra["page_options"]
        elif goal is not None and _needs_groups(goal) and index > 0:
            ctx["page_options"] = page_options_from_text(trajectory.steps[index - 1].observation)
        return ctx


def _needs_groups(goal_options: Any) -> bool:
    pairs: Iterable[tuple[str | None, str]] = goal_option_pairs(goal_options)
    return any(group is None for group, _ in pairs)


register_canonicalizer(WebShopCanonicalizer(), "web_shop")
