"""Skill cards: a tree written as plain text by fixed templates, with zero LLM calls.

Three templates (see docs/rendering.md for the exact line formats):

* :func:`webshop_cards` -- one card per goal-option type (``click<option-color>`` -> ``color``) plus a
  ``general`` card. Each lists up to six chains ranked by success with a tag against the corpus base
  rate and a gloss per token, and closes with a one-sentence plan (paper Appendix G.1, Table 22).
* :func:`family_cards` -- one card per task family (ScienceWorld): the family's most relevant chains
  written as actions with the varying objects replaced by ``<obj>``, with depth, episode count and
  the number of task types (the opsd cards of the authors' project page).
* :func:`generic_card` -- any domain, from the token glosses the domain declares.

:func:`empty_card` and :func:`scramble_card` give the ablation texts of Table 23.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError
from .stats import CorpusUsage, node_success

# token -> fixed phrase. The option rules in `gloss` come first for WebShop cards.
WEBSHOP_GLOSSES: dict[str, str] = {
    "search<query>": "search for the product",
    "click<item>": "open a result item",
    "click<buy>": "click Buy Now",
    "click<next>": "go to the next page of results",
    "click<prev>": "go back one page of results",
    "click<back>": "go back to the search page",
    "click<desc>": "open the description tab",
    "click<features>": "open the features tab",
    "click<reviews>": "open the reviews tab",
    "click<attrs>": "open the attributes tab",
}
BUY = "click<buy>"
WASTED_OPTION = "select an option the goal does NOT ask for (wasted step)"

# verb -> phrase pattern for tokens no table knows; {role} is the role with dashes as spaces.
_VERB_PHRASES: dict[str, str] = {
    "click": "click the {role}",
    "type": "type into the {role}",
    "fill": "fill the {role}",
    "select": "choose in the {role}",
    "open": "open the {role}",
    "close": "close the {role}",
    "navigate": "go to the {role}",
    "goto": "go to the {role}",
    "take": "pick up the {role}",
    "put": "put it into the {role}",
    "focus": "focus on the {role}",
    "observe": "look at the {role}",
    "look": "look at the {role}",
    "examine": "examine the {role}",
    "measure": "measure the {role}",
    "wait": "wait ({role})",
    "search": "search with a {role}",
    "connect": "connect the {role}",
    "activate": "switch on the {role}",
    "deactivate": "switch off the {role}",
    "scroll": "scroll the {role}",
}
_TOKEN_RE = re.compile(r"^(?P<verb>[^<>]*)<(?P<role>.*)>$")


@dataclass(frozen=True)
class Card:
    """One rendered card: a key for retrieval and its text lines (the first is the header).

    Example:
        >>> c = Card("color", ("### TASK: goal requires a color option ###", "Plan: ..."))
        >>> c.header
        '### TASK: goal requires a color option ###'
        >>> c.text.count("\\n")
        1
    """

    key: str
    """What retrieval looks it up by: an option type, ``general``, a family name, ``generic``."""
    lines: tuple[str, ...]
    """The card, one string per line; empty for the empty ablation card."""

    @property
    def header(self) -> str:
        return self.lines[0] if self.lines else ""

    @property
    def text(self) -> str:
        """The card as the reader sees it."""
        return "\n".join(self.lines)


def split_token(token: str) -> tuple[str, str]:
    """``"click<option-color>"`` -> ``("click", "option-color")``; a bare word gets role ``""``.

    Example:
        >>> split_token("click<option-color>")
        ('click', 'option-color')
    """
    m = _TOKEN_RE.match(token)
    return (m.group("verb"), m.group("role")) if m else (token, "")


def option_type(token: str) -> str | None:
    """The goal-option type a WebShop token selects (``flavor-name``), ``""`` for an untyped option.

    Example:
        >>> option_type("click<option-flavor-name>"), option_type("click<option>"), option_type("click<buy>")
        ('flavor-name', '', None)
    """
    verb, role = split_token(token)
    if verb != "click" or not (role == "option" or role.startswith("option-")):
        return None
    return role[len("option-") :] if role.startswith("option-") else ""


def default_gloss(token: str) -> str:
    """A phrase for a token no table knows, from its verb and role.

    Example:
        >>> default_gloss("navigate<living room>"), default_gloss("jump<fence>"), default_gloss("look")
        ('go to the living room', 'jump fence', 'look')
    """
    verb, role = split_token(token)
    if not role:
        return verb
    role = role.replace("-", " ").replace("_", " ")
    pattern = _VERB_PHRASES.get(verb.lower())
    return pattern.format(role=role) if pattern else f"{verb} {role}"


def gloss(token: str, glosses: Mapping[str, str] | None = None, *, options: bool = False) -> str:
    """The fixed phrase for ``token``: option rules (when ``options``), then ``glosses``, then the default.

    Example:
        >>> gloss("click<option-color>", options=True)
        "select the goal's color option"
        >>> gloss("click<option>", options=True)
        'select an option the goal does NOT ask for (wasted step)'
        >>> gloss("click<buy>", WEBSHOP_GLOSSES)
        'click Buy Now'
    """
    if options:
        kind = option_type(token)
        if kind == "":
            return WASTED_OPTION
        if kind == "goal":  # the WebShop canonicalizer's role for an option the goal names, type unknown
            return "select an option the goal names"
        if kind is not None:
            return f"select the goal's {kind.replace('-', ' ')} option"
    if glosses and token in glosses:
        return glosses[token]
    return default_gloss(token)


def domain_glosses(domain: str | None) -> dict[str, str]:
    """The token glosses for ``domain``: the canonicalizer's declared ``glosses`` over the built-in table."""
    table: dict[str, str] = dict(WEBSHOP_GLOSSES) if (domain or "").lower() == "webshop" else {}
    if domain:
        try:
            from ..canon import get_canonicalizer

            table.update(getattr(get_canonicalizer(domain), "glosses", {}) or {})
        except Exception:
            pass
    return table


def rate_tag(success: float, base: float, band: int = 1) -> str:
    """``ABOVE base`` / ``at base`` / ``BELOW base``: rounded percentages more than ``band`` points apart.

    Example:
        >>> rate_tag(0.58, 0.56), rate_tag(0.57, 0.56), rate_tag(0.14, 0.56)
        ('ABOVE base', 'at base', 'BELOW base')
    """
    diff = round(100 * success) - round(100 * base)
    if diff > band:
        return "ABOVE base"
    if diff < -band:
        return "BELOW base"
    return "at base"


def estimate_base_rate(tree: Any) -> float:
    """Without a corpus: the success of the most frequent node that has one (a universal macro).

    Example:
        >>> from types import SimpleNamespace as N
        >>> estimate_base_rate(N(nodes=[N(count=5, success=0.9), N(count=50, success=0.5), N(count=90, success=None)]))
        0.5
    """
    rated = [n for n in tree.nodes if n.success is not None]
    if not rated:
        raise ConfigError(
            "the tree has no node with a success rate, so the base rate is unknown",
            fix="pass the corpus (--corpus) or base_rate=",
        )
    return float(max(rated, key=lambda n: n.count).success)


def _rated_line(node: Any, rate: float, base: float, glosses: Mapping[str, str] | None, band: int) -> str:
    chain = " -> ".join(node.expansion)
    phrases = "; ".join(gloss(t, glosses, options=True) for t in node.expansion)
    return (
        f"- {chain}: {round(100 * rate)}% success ({node.count} episodes, {rate_tag(rate, base, band)})"
        f" -- {phrases}."
    )


def _ranked(tree: Any, usage: CorpusUsage | None, keep: Any, min_count: int) -> list[tuple[Any, float]]:
    """Nodes passing ``keep`` with a known success, best first (success, then count, then merge order)."""
    rows = []
    for order, node in enumerate(tree.nodes):
        rate = node_success(node, usage)
        if rate is None or node.count < min_count or not keep(node):
            continue
        rows.append((-rate, -node.count, order, node))
    return [(node, -neg) for neg, _, _, node in sorted(rows, key=lambda r: r[:3])]


def webshop_cards(
    tree: Any,
    usage: CorpusUsage | None = None,
    *,
    base_rate: float | None = None,
    max_chains: int = 6,
    min_count: int = 5,
    glosses: Mapping[str, str] | None = None,
    band: int = 1,
    before_buy: bool = True,
) -> dict[str, Card]:
    """One card per goal-option type in the tree plus ``general``; keys are option types (``color``).

    An option card lists the chains that select the option and (``before_buy``) end with ``click<buy>``;
    the general card lists the option-free chains.

    ``usage`` supplies the base rate and the success of nodes the tree leaves ``None``;
    without it, ``base_rate`` or :func:`estimate_base_rate` is used.
    """
    if max_chains < 1:
        raise ConfigError(f"max_chains is {max_chains}, expected >= 1", fix="pass max_chains=6")
    base = usage.base_rate if usage is not None else base_rate
    base = estimate_base_rate(tree) if base is None else base
    table = domain_glosses("webshop") if glosses is None else glosses
    kinds = sorted({k for n in tree.nodes for t in n.expansion if (k := option_type(t)) and k != "goal"})
    cards = {"general": _general_card(tree, usage, base, max_chains, min_count, table, band)}
    for kind in kinds:
        tok = f"click<option-{kind}>"
        ranked = _ranked(
            tree,
            usage,
            lambda n, tok=tok: tok in n.expansion and (not before_buy or n.expansion[-1] == BUY),
            min_count,
        )[:max_chains]
        word = kind.replace("-", " ")
        lines = [
            f"### TASK: goal requires a {word} option ###",
            f"The instruction names a {word}. Chains from the corpus that pick the goal's {word} on the"
            " product page before buying, and how often they succeeded:",
        ]
        lines += [_rated_line(n, r, base, table, band) for n, r in ranked] or ["- (no rated chain)"]
        lines.append(
            f"Plan: put the {word} value into the search words, open a matching item, click exactly the"
            f" {word} the instruction names (it must appear on the page), set every other named option"
            " the same way, then click Buy Now."
        )
        cards[kind] = Card(kind, tuple(lines))
    return cards


def _general_card(
    tree: Any,
    usage: CorpusUsage | None,
    base: float,
    max_chains: int,
    min_count: int,
    table: Mapping[str, str],
    band: int,
) -> Card:
    def option_free(n: Any) -> bool:
        return all(option_type(t) is None for t in n.expansion)

    ranked = _ranked(tree, usage, option_free, min_count)[:max_chains]
    size = f"{usage.n_trajectories} episodes, " if usage is not None else ""
    lines = [
        "### TASK: any product (general) ###",
        f"Corpus: {size}{round(100 * base)}% of episodes succeeded (the base rate). Chains that touch no"
        " product option, and how often they succeeded:",
    ]
    lines += [_rated_line(n, r, base, table, band) for n, r in ranked] or ["- (no rated chain)"]
    lines.append(
        "Plan: search with the product words of the instruction, open the best match on the first page of"
        " results, set every option the instruction names, then click Buy Now; paging deep into the results"
        " rarely pays."
    )
    return Card("general", tuple(lines))


def step_template(actions: Sequence[str], placeholder: str = "<obj>", keep_share: float = 0.8) -> str:
    """One action text for a chain position: the common action, else shared words around ``placeholder``.

    Example:
        >>> step_template(["move aluminum foil to yellow box", "move copper wire to purple box"])
        'move <obj> box'
        >>> step_template(["open door to hallway"] * 9 + ["open door to kitchen"])
        'open door to hallway'
    """
    if not actions:
        return placeholder
    counts = Counter(actions)
    top, n = min(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    if n / len(actions) >= keep_share:
        return top
    words = [a.split() for a in actions]
    shortest = min(len(w) for w in words)
    pre = 0
    while pre < shortest and all(w[pre] == words[0][pre] for w in words):
        pre += 1
    suf = 0
    while suf < shortest - pre and all(w[-1 - suf] == words[0][-1 - suf] for w in words):
        suf += 1
    first = words[0]
    parts = first[:pre] + [placeholder] + (first[len(first) - suf :] if suf else [])
    return " ".join(parts)


def family_cards(
    tree: Any,
    usage: CorpusUsage,
    *,
    max_chains: int = 6,
    min_coverage: float = 0.1,
    placeholder: str = "<obj>",
    successful_only: bool = True,
) -> dict[str, Card]:
    """One card per task family (``Trajectory.task``); keys are the family names.

    A node's relevance to a family is ``coverage * length / task_types``: the share of the family's
    episodes it occurs in, times how much it spells out, divided by how many families share it.
    """
    if not 0.0 <= min_coverage <= 1.0:
        raise ConfigError(f"min_coverage is {min_coverage}, expected a value in [0, 1]", fix="pass 0.1")
    n_types = {nid: max(1, len(usage.task_types(nid))) for nid in usage.nodes}
    cards: dict[str, Card] = {}
    for family, members in usage.families().items():
        if not family:
            continue
        wins = [i for i in members if usage.trajectories[i].success]
        episodes = set(wins) if successful_only and wins else set(members)
        kind = "successful episodes" if successful_only and wins else "episodes"
        rows = []
        for order, node in enumerate(tree.nodes):
            k = len(usage.nodes[node.id].episodes & episodes)
            cov = k / len(episodes)
            if k == 0 or cov < min_coverage:
                continue
            rows.append((-(cov * node.length / n_types[node.id]), -k, order, node, k))
        rows.sort(key=lambda r: r[:3])
        lines = [
            f"### TASK TYPE: {family.replace('-', ' ')} ###",
            f"{len(episodes)} {kind} of this task type are in the corpus. The chains they share, most"
            " relevant first:",
        ]
        for *_, node, k in rows[:max_chains]:
            occ = usage.actions_at(node.id, episodes)
            steps = [step_template([o[j] for o in occ], placeholder) for j in range(node.length)]
            types = f", {n_types[node.id]} task types" if n_types[node.id] > 1 else ""
            lines.append(f"- {' -> '.join(steps)}  [{node.id}, depth {node.depth}, {k} {kind}{types}]")
        if len(lines) == 2:
            lines.append("- (no mined chain recurs in this task type)")
        lines.append(
            f"Plan: follow the chain that fits where you are, put the object the instruction names where"
            f" {placeholder} stands, and use `focus on` only on the object the instruction asks for."
        )
        cards[family] = Card(family, tuple(lines))
    return cards


def generic_card(
    tree: Any,
    usage: CorpusUsage | None = None,
    *,
    domain: str | None = None,
    glosses: Mapping[str, str] | None = None,
    max_chains: int = 8,
    title: str = "reusable skills",
) -> Card:
    """A card for any domain: the most reused nodes (count x (length - 1)) glossed token by token.

    A node whose chain lies inside a chain already listed is skipped.
    """
    table = domain_glosses(domain) if glosses is None else glosses
    order = {n.id: i for i, n in enumerate(tree.nodes)}
    best: list[Any] = []
    for n in sorted(tree.nodes, key=lambda n: (-n.count * (n.length - 1), order[n.id])):
        # a chain already spelled out inside a listed one adds nothing for the reader
        if len(best) < max_chains and not any(_contains(b.expansion, n.expansion) for b in best):
            best.append(n)
    lines = [f"### SKILLS: {title} ###", "Recurring chains mined from the corpus, most reused first:"]
    for n in best:
        rate = node_success(n, usage)
        rated = f", {round(100 * rate)}% success" if rate is not None else ""
        phrases = "; ".join(gloss(t, table) for t in n.expansion)
        lines.append(
            f"- {' -> '.join(n.expansion)}: {n.count} occurrences, depth {n.depth}{rated} -- {phrases}."
        )
    lines.append(
        "Plan: when the first step of a chain fits your situation, carry the chain through in order."
    )
    return Card("generic", tuple(lines))


def _contains(outer: Sequence[str], inner: Sequence[str]) -> bool:
    """Whether ``inner`` occurs contiguously in ``outer``."""
    k = len(inner)
    return any(tuple(outer[i : i + k]) == tuple(inner) for i in range(len(outer) - k + 1))


def empty_card(key: str = "empty") -> Card:
    """The 'no privileged text' ablation card.

    Example:
        >>> empty_card().text
        ''
    """
    return Card(key, ())


def scramble_card(card: Card, seed: int = 0) -> Card:
    """Same words, same words per line, random order across the whole card (chains destroyed).

    Example:
        >>> c = Card("k", ("a b c", "d e"))
        >>> s = scramble_card(c, seed=1)
        >>> sorted(s.text.split()) == sorted(c.text.split()), [len(x.split()) for x in s.lines]
        (True, [3, 2])
    """
    words = [w for line in card.lines for w in line.split()]
    random.Random(seed).shuffle(words)
    out, i = [], 0
    for line in card.lines:
        k = len(line.split())
        out.append(" ".join(words[i : i + k]))
        i += k
    return Card(card.key, tuple(out))
