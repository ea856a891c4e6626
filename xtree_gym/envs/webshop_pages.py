"""WebShop pages: the browsing state, what each page shows, and what can be clicked on it.

Five pages, as in the original site:

* **search** -- ``WebShop``, the instruction and a ``Search`` button (type ``search[query]``);
* **results** -- ``Back to Search``, ``Page N (Total results: T)``, ``< Prev`` / ``Next >``, then ten
  products (ASIN link, title, price);
* **item** -- ``Back to Search``, ``< Prev``, each option group with its values, title, price,
  rating, ``Description`` / ``Features`` / ``Reviews`` (``Attributes`` when shown) and ``Buy Now``;
* **sub page** -- ``Back to Search``, ``< Prev`` and the description, bullets, reviews or attributes;
* **done** -- the thank-you page with the score.

A page is a list of :class:`Element`; :func:`render` turns it into the plain ``[SEP]`` text or
the ``[button] ... [button_]`` rich text the original produces from its HTML.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .webshop_data import Product

PRODUCT_WINDOW = 10  # products per results page

BACK_TO_SEARCH = "Back to Search"
NEXT_PAGE = "Next >"
PREV_PAGE = "< Prev"
BUY_NOW = "Buy Now"
SUB_PAGES = ("Description", "Features", "Reviews", "Attributes")


@dataclass(frozen=True)
class Element:
    """One visible text of a page."""

    kind: str
    """``text`` (not clickable), ``button``, ``option`` (a radio value) or ``link`` (a product ASIN)."""
    text: str
    """What the page shows."""
    group: str = ""
    """Option group of an ``option`` element."""
    selected: bool = False
    """Option chosen / product already visited (rich text marks it ``[clicked button]``)."""


@dataclass
class BrowserState:
    """Where the agent is and what it has chosen."""

    page: str = "search"
    """``search``, ``results``, ``item``, ``sub`` or ``done``."""
    keywords: str = ""
    """Current query."""
    page_no: int = 1
    """Results page number, from 1."""
    results: list[int] = field(default_factory=list)
    """Catalogue indices of the query's hits (at most 50), best first."""
    asin: str | None = None
    """Product on the item page."""
    options: dict[str, str] = field(default_factory=dict)
    """Chosen options: group -> value."""
    sub_page: str = ""
    """Which sub page (``Description`` ...) when ``page == "sub"``."""
    visited: list[str] = field(default_factory=list)
    """ASINs opened since the last search page (rich text marks them)."""


def _instruction(instruction: str) -> list[Element]:
    return [Element("text", "Instruction:"), Element("text", instruction)]


def search_page(instruction: str) -> list[Element]:
    return [Element("text", "WebShop"), *_instruction(instruction), Element("button", "Search")]


def results_page(instruction: str, state: BrowserState, products: list[Product]) -> list[Element]:
    total = len(state.results)
    els = [*_instruction(instruction), Element("button", BACK_TO_SEARCH)]
    els.append(Element("text", f"Page {state.page_no} (Total results: {total})"))
    if state.page_no > 1:
        els.append(Element("button", PREV_PAGE))
    if state.page_no * PRODUCT_WINDOW < total:
        els.append(Element("button", NEXT_PAGE))
    start = (state.page_no - 1) * PRODUCT_WINDOW
    for idx in state.results[start : start + PRODUCT_WINDOW]:
        p = products[idx]
        els.append(Element("link", p.asin, selected=p.asin in state.visited))
        els.append(Element("text", p.title))
        els.append(Element("text", p.price_tag))
    return els


def item_page(instruction: str, state: BrowserState, product: Product, show_attrs: bool) -> list[Element]:
    els = [*_instruction(instruction), Element("button", BACK_TO_SEARCH), Element("button", PREV_PAGE)]
    for group, values in product.options.items():
        els.append(Element("text", group))
        chosen = state.options.get(group)
        els.extend(Element("option", v, group=group, selected=v == chosen) for v in values)
    els += [
        Element("text", product.title),
        Element("text", f"Price: {product.price_tag}"),
        Element("text", f"Rating: {product.rating}"),
    ]
    els += [Element("button", s) for s in SUB_PAGES if s != "Attributes" or show_attrs]
    els.append(Element("button", BUY_NOW))
    return els


def sub_page(instruction: str, state: BrowserState, product: Product) -> list[Element]:
    els = [*_instruction(instruction), Element("button", BACK_TO_SEARCH), Element("button", PREV_PAGE)]
    if state.sub_page == "Description":
        els.append(Element("text", product.description or "No Description"))
    elif state.sub_page == "Features":
        els.extend(Element("text", b) for b in product.bullet_points if b)
    elif state.sub_page == "Reviews":
        els.append(Element("text", "No reviews found"))  # the 1000-product release has no review file
    else:
        els.extend(Element("text", a) for a in product.attributes)
    return els


def done_page(reward: float) -> list[Element]:
    return [
        Element("text", "Thank you for shopping with us!"),
        Element("text", "Your score (min 0.0, max 1.0)"),
        Element("text", f"{reward}"),
    ]


def clickables(elements: list[Element]) -> dict[str, Element]:
    """Lower-cased text -> element, for everything clickable (options win a clash, as in the original)."""
    table: dict[str, Element] = {}
    for el in elements:
        if el.kind in ("button", "link"):
            table[el.text.lower()] = el
    for el in elements:
        if el.kind == "option":
            table[el.text] = el
    return table


def render(elements: list[Element], rich: bool) -> str:
    """Plain ``a [SEP] b`` text, or the rich form with ``[button] x [button_]`` marks.

    Example:
        >>> els = [Element("text", "size"), Element("option", "m", "size", True), Element("button", "Buy Now")]
        >>> render(els, rich=False)
        'size [SEP] m [SEP] Buy Now'
        >>> print(render(els, rich=True), end="")
        You have clicked m.
        size
          [clicked button] m [clicked button_]
        [button] Buy Now [button_]
    """
    if not rich:
        return " [SEP] ".join(el.text for el in elements)
    head: list[str] = []
    lines: list[str] = []
    for el in elements:
        if el.kind == "button":
            lines.append(f"[button] {el.text} [button_]")
        elif el.kind == "option":
            if el.selected:
                head.insert(0, f"You have clicked {el.text}.")
                lines.append(f"  [clicked button] {el.text} [clicked button_]")
            else:
                lines.append(f"  [button] {el.text} [button_]")
        elif el.kind == "link":
            mark = "clicked button" if el.selected else "button"
            lines.append(f"\n[{mark}] {el.text} [{mark}_]")
        else:
            lines.append(el.text)
    return "".join(line + "\n" for line in head + lines)
