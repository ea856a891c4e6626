"""The WebShop purchase reward (Yao et al. 2022), as pure functions.

``reward = r_type * (attribute matches + option matches + price ok) / (n_attributes + n_options + 1)``

This follows the original's ``web_agent_site/engine/goal.py`` on its master branch (64fa2a5):

* **attributes**: a goal attribute matches when its fuzzy token-set ratio with one of the
  product's attributes is above 85, or when it is a substring of the product's title, bullet
  points or description (lower-cased);
* **options**: a goal option matches when one purchased option value fuzzy-matches it (> 85),
  colours normalized to a base colour first. There is no exact match for sizes and no
  title/bullets/description fallback. The original passes the goal's options as
  ``dict.items()``, so each goal option is a ``(name, value)`` pair: it becomes a base colour
  when either element *is* one, and is otherwise compared as the text of the pair
  (``"('size', 'large')"``: the option's name takes part in the fuzzy match);
* **price**: the price paid is at most the goal's bound;
* **type** ``r_type``: 1 when the scrape query matches, or two breadcrumb levels are shared, or
  more than 20 % of the goal title's nouns are in the bought title; 0.5 when none of these
  hold; 0.1 when under 10 % of the nouns are shared; 0 when none are.

Fuzzy scores reproduce ``thefuzz.fuzz.token_set_ratio`` (characters 128-255 dropped, lower
case, punctuation to spaces, rounded to an integer) with ``rapidfuzz``. Nouns come from spaCy's
``en_core_web_sm`` as in the original when that model is installed, else from TextBlob's
Pattern tagger (its lexicon ships inside the wheel) on the title split at ``-`` and ``/``
the way spaCy's tokenizer splits ``T-Shirt``; see ``docs/webshop.md``.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from ..errors import missing_dependency
from .webshop_data import Goal, Product

FUZZY_THRESHOLD = 85
SPACY_MODEL = "en_core_web_sm"
"""The spaCy pipeline the original loads for the type reward (used when installed)."""

# Base colours in the original's order; the first one contained in a value wins.
COLOR_SET = [
    "alabaster",
    "apricot",
    "aqua",
    "ash",
    "asphalt",
    "azure",
    "banana",
    "beige",
    "black",
    "blue",
    "blush",
    "bordeaux",
    "bronze",
    "brown",
    "burgundy",
    "camel",
    "camo",
    "caramel",
    "champagne",
    "charcoal",
    "cheetah",
    "chestnut",
    "chocolate",
    "christmas",
    "coffee",
    "cognac",
    "copper",
    "coral",
    "cranberry",
    "cream",
    "crystal",
    "dark",
    "denim",
    "eggplant",
    "elephant",
    "espresso",
    "fuchsia",
    "gold",
    "granite",
    "grape",
    "graphite",
    "grass",
    "gray",
    "green",
    "grey",
    "heather",
    "indigo",
    "ivory",
    "ivy",
    "khaki",
    "lavender",
    "lemon",
    "leopard",
    "light",
    "lilac",
    "lime",
    "magenta",
    "maroon",
    "mauve",
    "merlot",
    "midnight",
    "mint",
    "mocha",
    "multicolor",
    "mushroom",
    "mustard",
    "natural",
    "navy",
    "nude",
    "olive",
    "orange",
    "peach",
    "pewter",
    "pink",
    "plum",
    "purple",
    "rainbow",
    "red",
    "rose",
    "royal",
    "rust",
    "sand",
    "sapphire",
    "seashell",
    "silver",
    "skull",
    "slate",
    "steel",
    "stone",
    "stonewash",
    "sunflower",
    "tan",
    "taupe",
    "teal",
    "tiger",
    "turquoise",
    "violet",
    "walnut",
    "wheat",
    "white",
    "wine",
    "yellow",
]


def normalize_color(value: Any) -> Any:
    """The first base colour ``in`` ``value``, else ``value`` unchanged (the original's rule).

    For a string that is a substring test; for a ``(name, value)`` pair (how the original
    passes goal options) it is element equality, so only a value that *is* a colour maps.

    Example:
        >>> normalize_color("black forest"), normalize_color("violet lavender"), normalize_color("webshop")
        ('black', 'lavender', 'webshop')
        >>> normalize_color(("color", "navy")), normalize_color(("color", "navy blue"))
        ('navy', ('color', 'navy blue'))
    """
    for color in COLOR_SET:
        if color in value:
            return color
    return value


_HIGH_LATIN1 = {i: None for i in range(128, 256)}  # thefuzz's force_ascii drops exactly these


def fuzzy_score(a: Any, b: Any) -> int:
    """``thefuzz``'s token-set ratio: ``str()`` of each side, characters 128-255 dropped,
    lower case, punctuation as spaces, rounded.

    Example:
        >>> fuzzy_score("Sulfate-Free", "sulfate free"), fuzzy_score("fuzzy was a bear", "fuzzy fuzzy was a bear")
        (100, 100)
        >>> fuzzy_score("hair growth", "hair loss") < 85
        True
        >>> fuzzy_score("navy", ("color", "navy blue"))   # the pair's text: "color navy blue"
        100
    """
    from rapidfuzz import fuzz, utils

    a = utils.default_process(str(a).translate(_HIGH_LATIN1))
    b = utils.default_process(str(b).translate(_HIGH_LATIN1))
    return round(fuzz.token_set_ratio(a, b))


def _in_text(phrase: str, product: Product) -> bool:
    return (
        phrase in product.title.lower()
        or phrase in " ".join(product.bullet_points).lower()
        or phrase in product.description.lower()
    )


def attribute_matches(product: Product, goal_attributes: Sequence[str]) -> int:
    """How many goal attributes the product has (fuzzy on its attributes, else substring of its text)."""
    n = 0
    for g in goal_attributes:
        if any(fuzzy_score(p, g) > FUZZY_THRESHOLD for p in product.attributes) or _in_text(g, product):
            n += 1
    return n


def goal_option_keys(goal_options: Mapping[str, str] | Sequence[Any]) -> list[Any]:
    """The goal options as the original's option reward sees them, colours normalized.

    A dict gives its ``(name, value)`` items (the original passes ``dict.items()``); a list
    is taken as it is.

    Example:
        >>> goal_option_keys({"size": "large", "color": "black"})
        [('size', 'large'), 'black']
        >>> goal_option_keys(["large", "black forest"])
        ['large', 'black']
    """
    items = list(goal_options.items()) if isinstance(goal_options, Mapping) else list(goal_options)
    return [normalize_color(o) for o in items]


def option_matches(goal_options: Mapping[str, str] | Sequence[Any], chosen: Mapping[str, str]) -> int:
    """How many goal options one of the purchased option values fuzzy-matches (> 85).

    Example (the issue's case: goal size 28" x 28", bought 16" x 16" -- no match):
        >>> option_matches({"size": '28" x 28"'}, {"size": '16" x 16"'})
        0
        >>> option_matches({"size": '28" x 28"'}, {"size": '28" x 28"'})
        1
        >>> option_matches({"color": "navy blue", "size": "x-large"}, {"color": "navy", "size": "large"})
        2
    """
    purchased = [normalize_color(v) for v in chosen.values()]
    n = 0
    for g in goal_option_keys(goal_options):
        if any(fuzzy_score(p, g) > FUZZY_THRESHOLD for p in purchased):
            n += 1
    return n


@functools.lru_cache(maxsize=1)
def _pattern_tagger() -> Callable[[str], list[tuple[str, str]]]:
    try:
        from textblob.en.taggers import PatternTagger
    except ImportError:
        raise missing_dependency("textblob", "webshop", "the WebShop type reward") from None
    tagger = PatternTagger()
    return lambda text: [(w, t) for w, t in tagger.tag(text)]


@functools.lru_cache(maxsize=1)
def spacy_pipeline() -> Any:
    """spaCy's ``en_core_web_sm`` when both are installed (the original's tagger), else None."""
    try:
        import spacy
        import spacy.util
    except ImportError:
        return None
    if not spacy.util.is_package(SPACY_MODEL):
        return None
    return spacy.load(SPACY_MODEL, disable=["parser", "ner", "lemmatizer"])


def noun_backend() -> str:
    """``"spacy"`` (``en_core_web_sm`` installed, as the original) or ``"textblob"`` (the fallback)."""
    return "spacy" if spacy_pipeline() is not None else "textblob"


def spacy_nouns(nlp: Any, title: str) -> tuple[str, ...]:
    """The original's rule on a spaCy pipeline: lower-cased tokens whose POS is NOUN or PROPN.

    Example (tokens as spaCy's English tokenizer and tagger give them for ``Men's T-Shirt``):
        >>> from types import SimpleNamespace as Tok
        >>> doc = [Tok(text="Men", pos_="NOUN"), Tok(text="'s", pos_="PART"), Tok(text="T", pos_="NOUN"),
        ...        Tok(text="-", pos_="PUNCT"), Tok(text="Shirt", pos_="PROPN")]
        >>> spacy_nouns(lambda text: doc, "Men's T-Shirt")
        ('men', 't', 'shirt')
    """
    return tuple(t.text.lower() for t in nlp(title) if t.pos_ in ("PNOUN", "NOUN", "PROPN"))


_SPLIT_HYPHEN_SLASH = re.compile(r"[-/]")


def textblob_nouns(title: str) -> tuple[str, ...]:
    """Nouns by TextBlob's Pattern tagger, the title first split at ``-`` and ``/`` (as spaCy
    splits ``T-Shirt`` into ``T``, ``-``, ``Shirt``); one-letter nouns are kept, punctuation
    tagged NN is not.

    Example:
        >>> textblob_nouns("Cotton T-Shirt for Men")
        ('cotton', 't', 'shirt', 'men')
    """
    tagged = _pattern_tagger()(_SPLIT_HYPHEN_SLASH.sub(" ", title))
    return tuple(w.lower() for w, t in tagged if t.startswith("NN") and any(c.isalnum() for c in w))


@functools.lru_cache(maxsize=4096)
def title_nouns(title: str) -> tuple[str, ...]:
    """Lower-cased nouns and proper nouns of a title, in order, repeats kept (spaCy when
    ``en_core_web_sm`` is installed, else :func:`textblob_nouns`).

    Example:
        >>> nouns = title_nouns("Bright Citrus Deodorant by Earth Mama")
        >>> {"citrus", "deodorant", "earth", "mama"} <= set(nouns)
        True
    """
    nlp = spacy_pipeline()
    return spacy_nouns(nlp, title) if nlp is not None else textblob_nouns(title)


def type_reward(
    product: Product, goal: Goal, nouns: Callable[[str], Sequence[str]] = title_nouns
) -> dict[str, Any]:
    """``r_type`` and what decided it (query match, category overlap, title noun overlap)."""
    query_match = product.query == goal.query
    bought = {x.strip() for x in product.product_category.split("›")}
    wanted = {x.strip() for x in goal.product_category.split("›")}
    category_match = len(bought & wanted) >= 2
    desired = list(nouns(goal.name))  # repeats count in the denominator, as in the original
    shared = set(nouns(product.title)) & set(desired)
    title_score = len(shared) / len(desired) if desired else 0.2
    r_type = 1.0
    if not (query_match or category_match or title_score > 0.2):
        r_type = 0.5
    if title_score < 0.1:
        r_type = 0.1
    if title_score == 0.0:
        r_type = 0.0
    return {
        "r_type": r_type,
        "query_match": query_match,
        "category_match": category_match,
        "title_score": title_score,
    }


@dataclass(frozen=True)
class RewardBreakdown:
    """The reward of one purchase and its parts (the original's ``verbose`` info, plus counts)."""

    reward: float
    """Final reward in [0, 1]."""
    r_type: float
    """Type factor in {1, 0.5, 0.1, 0}."""
    r_att: float
    """Fraction of goal attributes matched."""
    r_option: float | None
    """Fraction of goal options matched (None when the goal names no option)."""
    r_price: bool
    """Price paid is within the bound."""
    n_attr_matches: int
    """Matched attributes."""
    n_option_matches: int
    """Matched options."""
    w_att: float
    """Weight of the attribute part: n_attributes / (n_attributes + n_options + 1)."""
    w_option: float
    """Weight of the option part."""
    w_price: float
    """Weight of the price part."""
    query_match: bool
    """Same scrape query as the target."""
    category_match: bool
    """At least two shared breadcrumb levels."""
    title_score: float
    """Share of the goal title's nouns found in the bought title."""

    def to_info(self) -> dict[str, Any]:
        return asdict(self)


def purchase_reward(
    product: Product,
    goal: Goal,
    price: float,
    chosen_options: Mapping[str, str],
    nouns: Callable[[str], Sequence[str]] = title_nouns,
) -> RewardBreakdown:
    """Reward of buying ``product`` at ``price`` with ``chosen_options`` (group -> value) for ``goal``.

    Example (a fake noun function keeps the doctest free of the tagger):
        >>> from xtree_gym.envs.webshop_data import Goal, Product
        >>> p = Product("B1", "Red Cotton Shirt", "$9.0", (9.0,), {"size": ["small", "medium"]}, ["soft"], "",
        ...             ["cotton"], "fashion", "shirts", "Clothing › Men › Shirts")
        >>> g = Goal(0, "B1", "...", ["cotton"], {"size": "medium"}, 20.0, "Red Cotton Shirt", "shirts", "fashion",
        ...          "Clothing › Men › Shirts")
        >>> nouns = lambda t: t.lower().split()
        >>> purchase_reward(p, g, 9.0, {"size": "medium"}, nouns).reward
        1.0
        >>> round(purchase_reward(p, g, 9.0, {"size": "small"}, nouns).reward, 4)   # (1 + 0 + 1) / 3
        0.6667
    """
    r_type = type_reward(product, goal, nouns)
    n_att = attribute_matches(product, goal.attributes)
    goal_values = list(goal.goal_options.values())
    n_opt = option_matches(goal.goal_options, chosen_options)
    r_price = price <= goal.price_upper if goal.price_upper > 0 else True
    denom = len(goal.attributes) + len(goal_values) + 1
    total = (n_att + n_opt + int(r_price)) / denom * r_type["r_type"]
    return RewardBreakdown(
        reward=total,
        r_type=r_type["r_type"],
        r_att=n_att / len(goal.attributes) if goal.attributes else 0.0,
        r_option=n_opt / len(goal_values) if goal_values else None,
        r_price=bool(r_price),
        n_attr_matches=n_att,
        n_option_matches=n_opt,
        w_att=len(goal.attributes) / denom,
        w_option=len(goal_values) / denom,
        w_price=1 / denom,
        query_match=r_type["query_match"],
        category_match=r_type["category_match"],
        title_score=r_type["title_score"],
    )
