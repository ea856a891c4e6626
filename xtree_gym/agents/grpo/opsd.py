"""OPSD's teacher context (X-Tree Eq. 4): which text is prepended to the student's prompt.

The teacher is the same model reading ``card + student prompt``: the card is written as one
chat system turn (``<|im_start|>system\\n{card}<|im_end|>\\n`` in ChatML) whose token ids are
put in front of the student's recorded prompt ids, so the student's own ids are never
re-tokenized and the teacher scores exactly the tokens the student sampled.

Banks (``opsd``):

* ``xtree`` — the tree's skill bank (:func:`xtree_gym.render.retrieval.build_skill_bank`),
  retrieved per task (task family on ScienceWorld, keyword rule on WebShop);
* ``empty`` — the same system turn with no text (controls for the turn itself);
* ``scrambled`` — the X-Tree cards with their words shuffled (Table 23's control);
* a ``.json`` path — a skill bank written by ``xtree cards``; any other path — one text file,
  the same for every task (e.g. an LLM-written bank to compare against).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ...errors import ConfigError
from ..types import Episode

CardFn = Callable[[Episode], str]


def bank_retriever(bank: Any, domain: str) -> CardFn:
    """Episode -> card text from a :class:`~xtree_gym.render.retrieval.SkillBank`.

    ScienceWorld episodes carry their task family (``Episode.task``), so it picks the card
    directly; WebShop uses the instruction's keywords and the goal's option types.
    """
    from .shaping import goal_options

    def card(ep: Episode) -> str:
        if domain == "webshop":
            opts = goal_options(ep)
            return str(bank.context(ep.goal, goal_options=dict.fromkeys(opts or [], "")))
        family = ep.task if ep.task in bank.cards else None
        return str(bank.context(ep.goal, family=family))

    return card


def scrambled_bank(bank: Any, seed: int = 0) -> Any:
    """A copy of ``bank`` whose every card has its words shuffled (seeded per card)."""
    from ...render.cards import scramble_card
    from ...render.retrieval import SkillBank

    cards = {k: scramble_card(c, seed=seed + i) for i, (k, c) in enumerate(sorted(bank.cards.items()))}
    return SkillBank(bank.domain, cards, bank.index)


def make_card_fn(
    kind: str, *, tree: Any = None, domain: str = "", usage: Any = None, seed: int = 0
) -> CardFn:
    """The card text each episode's teacher reads, for the bank named ``kind``.

    Example:
        >>> from xtree_gym.agents.types import Episode
        >>> make_card_fn("empty")(Episode("e", "env", "boil", "boil water", 0, 0, 0))
        ''
    """
    if kind == "none":
        raise ConfigError("OPSD is off (opsd 'none'): there is no teacher context")
    if kind == "empty":
        return lambda ep: ""
    path = Path(kind)
    if kind in ("xtree", "scrambled"):
        if tree is None:
            raise ConfigError(f"opsd {kind!r} needs a tree", fix="pass --tree TREE.json")
        from ...render.retrieval import build_skill_bank

        bank = build_skill_bank(tree, usage, domain or None, **_card_kw(tree, usage, domain))
        if kind == "scrambled":
            bank = scrambled_bank(bank, seed)
        return bank_retriever(bank, bank.domain if bank.domain == "webshop" else domain)
    if path.suffix.lower() == ".json":
        from ...render.retrieval import SkillBank

        bank = SkillBank.load(path)
        return bank_retriever(bank, bank.domain if bank.domain == "webshop" else domain)
    try:
        text = path.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise ConfigError(f"cannot read the OPSD bank file: {exc.strerror}", where=str(path)) from exc
    return lambda ep: text


def _card_kw(tree: Any, usage: Any, domain: str) -> dict[str, Any]:
    """Without a corpus and a rated node, WebShop cards get base rate 0 (chains stay unrated)."""
    if domain == "webshop" and usage is None and not any(n.success is not None for n in tree.nodes):
        return {"base_rate": 0.0}
    return {}


def card_prefix_ids(tokenizer: Any, card: str) -> list[int]:
    """Token ids of the card as a chat system turn (plain text + blank line without a template).

    Example:
        >>> class Tok:  # no chat template: the text itself
        ...     chat_template = None
        ...     def encode(self, text, add_special_tokens=False): return [ord(c) for c in text]
        >>> card_prefix_ids(Tok(), "ab")
        [97, 98, 10, 10]
    """
    if getattr(tokenizer, "chat_template", None):
        # return_dict=False: transformers 5 returns a BatchEncoding by default (4.x: the id list)
        ids = tokenizer.apply_chat_template(
            [{"role": "system", "content": card}], tokenize=True, return_dict=False
        )
        return [int(x) for x in ids]
    return [int(x) for x in tokenizer.encode(card + "\n\n", add_special_tokens=False)]


class TeacherContext:
    """Caches each card's prefix ids (cards repeat across a step's episodes)."""

    def __init__(self, card_fn: CardFn, tokenizer: Any) -> None:
        self.card_fn = card_fn
        self.tokenizer = tokenizer
        self._cache: dict[str, list[int]] = {}

    def prefix(self, ep: Episode) -> list[int]:
        card = self.card_fn(ep)
        if card not in self._cache:
            self._cache[card] = card_prefix_ids(self.tokenizer, card)
        return self._cache[card]
