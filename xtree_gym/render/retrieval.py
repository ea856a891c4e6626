"""Which card a task gets: the family of its task line (ScienceWorld) or its option keywords (WebShop).

A :class:`SkillBank` holds the rendered cards of one tree and answers ``retrieve(task)``; its
``context(task)`` string is what the OPSD self-teacher reads as privileged text.
"""

from __future__ import annotations

import itertools
import json
import math
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..corpus.io import atomic_write_text, loads_strict
from ..errors import ConfigError, TreeFormatError
from .cards import Card, family_cards, generic_card, option_type, webshop_cards
from .stats import CorpusUsage

_WORD = re.compile(r"[a-z0-9]+(?:\.[0-9]+)?")


def task_line(text: str) -> str:
    """The first non-empty line of a task text (the line ScienceWorld prompts open with).

    Example:
        >>> task_line("\\n Your task is to boil water. More.\\nNext line")
        'Your task is to boil water. More.'
    """
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return ""


def _features(text: str) -> frozenset[str]:
    """Word unigrams and bigrams of the lower-cased text."""
    words = _WORD.findall(text.lower())
    return frozenset(words) | frozenset(f"{a} {b}" for a, b in itertools.pairwise(words))


@dataclass
class FamilyIndex:
    """Nearest-neighbour family lookup over the task lines of a corpus.

    The score of a stored line is the set cosine of word unigrams + bigrams; the best line's family
    wins (ties: the family name sorting first).

    Example:
        >>> idx = FamilyIndex([("boil", "Your task is to boil water."), ("melt", "Your task is to melt ice.")])
        >>> idx.classify("Your task is to boil chocolate.")
        'boil'
    """

    entries: list[tuple[str, str]]
    """``(family, task line)`` pairs, deduplicated, in a fixed order."""
    _feats: list[frozenset[str]] = field(default_factory=list, repr=False)

    def __post_init__(self) -> None:
        self.entries = sorted(set(self.entries))
        if not self.entries:
            raise ConfigError(
                "the family index has no task lines", fix="build it from a corpus with task names"
            )
        self._feats = [_features(text) for _, text in self.entries]

    @classmethod
    def from_trajectories(cls, trajectories: Iterable[Any]) -> FamilyIndex:
        return cls([(t.task, task_line(t.goal)) for t in trajectories if t.task and t.goal])

    def scores(self, text: str) -> dict[str, float]:
        """family -> best similarity of ``text`` to one of its lines."""
        q = _features(task_line(text))
        best: dict[str, float] = defaultdict(float)
        for (family, _), f in zip(self.entries, self._feats):
            if q and f:
                s = len(q & f) / math.sqrt(len(q) * len(f))
                best[family] = max(best[family], s)
        return dict(best)

    def classify(self, text: str) -> str | None:
        """The family whose task line is most like ``text`` (``None`` when nothing overlaps)."""
        sc = self.scores(text)
        if not sc or max(sc.values()) == 0.0:
            return None
        return min(sc, key=lambda fam: (-sc[fam], fam))


def webshop_keys(
    instruction: str, kinds: Sequence[str], goal_options: Mapping[str, Any] | None = None
) -> list[str]:
    """Card keys for a WebShop instruction: ``general``, then each option type named as ``type:``.

    Option types come in the order they appear in the instruction; ``goal_options`` keys not
    written in the text follow, in their order.

    Example:
        >>> webshop_keys("i need shoes [SEP] size: 9 [SEP] color: black", ["color", "size"])
        ['general', 'size', 'color']
        >>> webshop_keys("a sofa", ["color", "flavor-name"], {"flavor name": "x"})
        ['general', 'flavor-name']
    """
    text = instruction.lower()
    found: list[tuple[int, str]] = []
    for kind in kinds:
        spellings = {kind, kind.replace("-", " "), kind.replace("-", "_")}
        hits = [m.start() for s in spellings for m in re.finditer(rf"(?<![a-z]){re.escape(s)}\s*:", text)]
        if hits:
            found.append((min(hits), kind))
    keys = [k for _, k in sorted(found)]
    norm = {k.replace("-", " "): k for k in kinds}
    for name in goal_options or {}:
        named = norm.get(str(name).lower().replace("_", " ").replace("-", " "))
        if named and named not in keys:
            keys.append(named)
    return ["general", *keys]


@dataclass
class SkillBank:
    """The cards of one tree plus the rule that picks them for a task.

    Example:
        >>> bank = SkillBank("webshop", {"general": Card("general", ("G",)), "color": Card("color", ("C",))})
        >>> bank.context("a grey sofa [SEP] color: grey")
        'G\\n\\nC'
    """

    domain: str
    """``webshop`` (keyword rule), a family domain such as ``scienceworld``, or any other (generic card)."""
    cards: dict[str, Card]
    """card key -> card."""
    index: FamilyIndex | None = None
    """Task line -> family, for family cards."""

    def retrieve(
        self, task: str, *, family: str | None = None, goal_options: Mapping[str, Any] | None = None
    ) -> list[Card]:
        """The cards for ``task``, in reading order."""
        if self.domain.lower() == "webshop":
            kinds = [k for k in self.cards if k != "general"]
            return [self.cards[k] for k in webshop_keys(task, kinds, goal_options) if k in self.cards]
        if family is None and self.index is not None:
            family = self.index.classify(task)
        if family is not None and family in self.cards:
            return [self.cards[family]]
        return [self.cards["generic"]] if "generic" in self.cards else []

    def context(self, task: str, **kw: Any) -> str:
        """The retrieved cards as one text, separated by blank lines."""
        return "\n\n".join(c.text for c in self.retrieve(task, **kw))

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": "xtree-skill-bank/1",
            "domain": self.domain,
            "cards": {k: list(c.lines) for k, c in self.cards.items()},
            "index": [list(e) for e in self.index.entries] if self.index else None,
        }

    def save(self, path: str | Path) -> None:
        atomic_write_text(path, json.dumps(self.to_dict(), indent=1, ensure_ascii=False) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> SkillBank:
        try:
            d = loads_strict(Path(path).read_text(encoding="utf-8"))
            cards = {k: Card(k, tuple(v)) for k, v in d["cards"].items()}
            index = FamilyIndex([tuple(e) for e in d["index"]]) if d.get("index") else None  # type: ignore[misc]
            return cls(d["domain"], cards, index)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise TreeFormatError(
                f"cannot read the skill bank: {exc}", where=str(path), fix="write it with SkillBank.save"
            ) from exc


def build_skill_bank(
    tree: Any, usage: CorpusUsage | None = None, domain: str | None = None, **card_kw: Any
) -> SkillBank:
    """Render every card of ``tree`` for ``domain`` and attach the retrieval rule.

    WebShop (or any tree with ``click<option-*>`` tokens) gets option cards; a corpus with task
    families gets family cards and a family index; every bank also holds a ``generic`` card.
    """
    dom = (domain or "").lower()
    is_shop = dom == "webshop" or (
        not dom and any(option_type(t) is not None for n in tree.nodes for t in n.expansion)
    )
    cards: dict[str, Card] = {}
    index = None
    if is_shop:
        cards.update(webshop_cards(tree, usage, **card_kw))
        dom = "webshop"
    elif usage is not None and any(t.task for t in usage.trajectories):
        cards.update(family_cards(tree, usage, **card_kw))
        index = FamilyIndex.from_trajectories(usage.trajectories)
    cards["generic"] = generic_card(tree, usage, domain=dom or None)
    return SkillBank(dom or "generic", cards, index)
