"""WebShop data: the product catalogue, purchase prices and the goal set.

Reads the benchmark's two JSON files (``items_shuffle_1000.json``: product records;
``items_ins_v2_1000.json``: attributes and synthetic instructions per ASIN) and turns them into
:class:`Product` and :class:`Goal` records the way the original WebShop loader does:

* titles, bullet points, descriptions and option values are the raw record's fields
  (option values lower-cased, ``/`` replaced by `` | ``);
* a price string ``"$22.99$25.99"`` becomes the range ``[22.99, 25.99]`` shown as
  ``"$22.99 to $25.99"``; a missing price is ``$100.0``;
* the purchase price of a ranged product is one uniform draw inside its range;
* goals are the original's *synthetic* goals: one per product with an instruction and per
  combination of that product's option values, with a price bound drawn from the four
  multiples of ten above the price, then shuffled with ``random.Random(233)``.

The original draws prices and price bounds from Python's unseeded global generator, so its
bounds change at every start. Here they come from ``random.Random(seed)`` in the same order of
draws; the goal order, target products, options and attributes at every index equal the
original's, only the price bounds depend on ``seed``.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from ..errors import EnvConfigError

CATALOGUE_FILE = "items_shuffle_1000.json"
INSTRUCTIONS_FILE = "items_ins_v2_1000.json"
DATA_ENV_VAR = "XTREE_WEBSHOP_DATA"

PRICE_STEPS = [10.0 * i for i in range(1, 100)]  # candidate price bounds: $10 .. $990
GOAL_SHUFFLE_SEED = 233  # the original shuffles its goal list with this seed
NO_PRICE_BOUND = 1_000_000.0
TEST_GOALS = 500  # peers evaluate on goals 0..499 and train on the rest


@dataclass(frozen=True)
class Product:
    """One catalogue product, with the fields the pages and the reward read."""

    asin: str
    """Amazon id, upper case (``B07B6DVG41``); pages show it, clicks use it lower-cased."""
    title: str
    """The product name (``name`` in the record)."""
    price_tag: str
    """Price as shown: ``"$34.0"`` or ``"$22.99 to $25.99"``."""
    pricing: tuple[float, ...]
    """One price, or the (low, high) range."""
    options: dict[str, list[str]]
    """Option group name (lower case) -> its values in page order."""
    bullet_points: list[str]
    """Feature bullets (``small_description``)."""
    description: str
    """Full description, possibly empty."""
    attributes: list[str]
    """Attribute phrases of the product (from the instruction file)."""
    category: str
    """Top-level category (beauty, electronics, garden, fashion, grocery)."""
    query: str
    """The search query the product was scraped under, lower-cased and stripped."""
    product_category: str
    """Breadcrumb joined by `` › ``."""
    rating: str = "N.A."
    """Shown on the item page; the 1000-product files carry no review data, so always N.A."""


@dataclass(frozen=True)
class Goal:
    """One shopping instruction with what the reward compares a purchase against."""

    index: int
    """Position in the shuffled goal list (0..499 is the peers' test split)."""
    asin: str
    """The product the instruction was generated from."""
    instruction: str
    """Text shown to the agent: instruction, options and price bound."""
    attributes: list[str]
    """Attribute phrases the instruction asks for."""
    goal_options: dict[str, str]
    """Option group -> the value the instruction names."""
    price_upper: float
    """Price bound; ``1e6`` when the product is too expensive to get one."""
    name: str
    """Title of the target product (type reward compares nouns against it)."""
    query: str
    """Scrape query of the target (type reward)."""
    category: str
    """Top-level category of the target."""
    product_category: str
    """Breadcrumb of the target (type reward)."""

    def to_info(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "asin": self.asin,
            "instruction": self.instruction,
            "attributes": list(self.attributes),
            "goal_options": dict(self.goal_options),
            "price_upper": self.price_upper,
        }


@dataclass
class Catalogue:
    """Products in file order, an ASIN index, and the instruction records."""

    products: list[Product]
    by_asin: dict[str, Product] = field(default_factory=dict)  # ASIN (upper) -> product
    instructions: dict[str, dict[str, Any]] = field(default_factory=dict)  # ASIN -> instruction record

    def __post_init__(self) -> None:
        if not self.by_asin:
            self.by_asin = {p.asin: p for p in self.products}


_ENV_OPTION = "data_dir=DIR (from the CLI: --env-arg data_dir=DIR in xtree eval, --env-kwargs data_dir=DIR in xtree train)"


def resolve_data_dir(data_dir: str | os.PathLike[str] | None, *, option: str = _ENV_OPTION) -> Path:
    """The data directory: ``data_dir``, else ``$XTREE_WEBSHOP_DATA``; both files must be there.

    ``option`` is how the caller's user passes the folder (``--data-dir DIR`` on the command line),
    so the error names what they can type.

    Example:
        >>> import os
        >>> os.environ.pop(DATA_ENV_VAR, None) and None
        >>> try:
        ...     resolve_data_dir(None, option="--data-dir DIR")
        ... except EnvConfigError as exc:
        ...     print(exc.fix)
        pass --data-dir DIR or set XTREE_WEBSHOP_DATA to a folder holding items_shuffle_1000.json and items_ins_v2_1000.json (the WebShop 1000-product files; see README.md, "WebShop data")
    """
    raw = data_dir if data_dir is not None else os.environ.get(DATA_ENV_VAR)
    files = f'{CATALOGUE_FILE} and {INSTRUCTIONS_FILE} (the WebShop 1000-product files; see README.md, "WebShop data")'
    if raw is None or str(raw) == "":
        raise EnvConfigError(
            "XTree-WebShop-v0 needs the WebShop data files and no data directory was given",
            fix=f"pass {option} or set {DATA_ENV_VAR} to a folder holding {files}",
        )
    path = Path(raw).expanduser()
    for name in (CATALOGUE_FILE, INSTRUCTIONS_FILE):
        if not (path / name).is_file():
            raise EnvConfigError(
                f"{name!r} is not in the WebShop data directory {str(path)!r}",
                where=str(path / name),
                fix=f"point {option.split()[0].rstrip('=.')} (or ${DATA_ENV_VAR}) at the folder holding {files}",
            )
    return path


def parse_pricing(raw: Any) -> tuple[tuple[float, ...], str]:
    """``"$22.99$25.99"`` -> ``((22.99, 25.99), "$22.99 to $25.99")``; empty -> ``$100.0``.

    Example:
        >>> parse_pricing("$34.00")
        ((34.0,), '$34.0')
        >>> parse_pricing("$1,022.99$1,225.00")
        ((1022.99, 1225.0), '$1022.99 to $1225.0')
        >>> parse_pricing("")
        ((100.0,), '$100.0')
    """
    if not raw or not isinstance(raw, str):
        return (100.0,), "$100.0"
    values = [float(Decimal(re.sub(r"[^\d.]", "", part))) for part in raw.split("$")[1:]]
    if len(values) == 1:
        return (values[0],), f"${values[0]}"
    return (values[0], values[1]), f"${values[0]} to ${values[1]}"


def _options(raw: Any) -> dict[str, list[str]]:
    # option name (lower) -> values, in the record's order; a null group is dropped
    options: dict[str, list[str]] = {}
    if not isinstance(raw, dict):
        return options
    for name, contents in raw.items():
        if contents is None:
            continue
        options[name.lower()] = [str(c["value"]).strip().replace("/", " | ").lower() for c in contents]
    return options


def _product(record: dict[str, Any], instruction: dict[str, Any]) -> Product:
    pricing, tag = parse_pricing(record.get("pricing"))
    bullets = record.get("small_description")
    bullet_points = bullets if isinstance(bullets, list) else [str(bullets or "")]
    return Product(
        asin=record["asin"],
        title=record.get("name") or "",
        price_tag=tag,
        pricing=pricing,
        options=_options(record.get("customization_options")),
        bullet_points=[str(b) for b in bullet_points],
        description=record.get("full_description") or "",
        attributes=list(instruction.get("attributes", ["DUMMY_ATTR"])),
        category=record.get("category") or "",
        query=(record.get("query") or "").lower().strip(),
        product_category=record.get("product_category") or "",
    )


def _read_json(path: Path) -> Any:
    try:
        with path.open(encoding="utf-8") as fh:
            return json.load(fh)
    except json.JSONDecodeError as exc:
        raise EnvConfigError(
            f"{path.name!r} is not valid JSON ({exc.msg})",
            where=f"{path}:{exc.lineno}",
            fix="restore the file from the WebShop release",
        ) from None


def load_catalogue(data_dir: Path) -> Catalogue:
    """Read both files; skips records without a usable ASIN or repeated ASINs like the original."""
    records = _read_json(data_dir / CATALOGUE_FILE)
    instructions = _read_json(data_dir / INSTRUCTIONS_FILE)
    if not isinstance(records, list) or not isinstance(instructions, dict):
        raise EnvConfigError(
            "the WebShop files have the wrong shape (want a list of products and an object of instructions)",
            where=str(data_dir),
            fix=f"use {CATALOGUE_FILE} and {INSTRUCTIONS_FILE} from the WebShop release",
        )
    products: list[Product] = []
    seen: set[str] = set()
    for record in records:
        asin = str(record.get("asin", ""))
        if asin in ("", "nan") or len(asin) > 10 or asin in seen:
            continue
        seen.add(asin)
        products.append(_product(record, instructions.get(asin, {"attributes": ["DUMMY_ATTR"]})))
    return Catalogue(products=products, instructions=instructions)


def draw_prices(products: Sequence[Product], rng: random.Random) -> dict[str, float]:
    """Purchase price of every product: fixed, or one uniform draw inside its range (file order)."""
    prices: dict[str, float] = {}  # ASIN -> price paid
    for p in products:
        prices[p.asin] = p.pricing[0] if len(p.pricing) == 1 else rng.uniform(p.pricing[0], p.pricing[1])
    return prices


def _price_bound(price: float, rng: random.Random) -> tuple[float, str]:
    steps = [s for s in PRICE_STEPS if s > price][:4]
    if len(steps) < 2:
        return NO_PRICE_BOUND, ""
    _, upper = sorted(rng.sample(steps, 2))
    return upper, f", and price lower than {upper:.2f} dollars"


def build_goals(catalogue: Catalogue, prices: dict[str, float], rng: random.Random) -> list[Goal]:
    """The synthetic goal list in the original's order (before and after its seeded shuffle)."""
    raw: list[dict[str, Any]] = []
    for p in catalogue.products:
        ins = catalogue.instructions.get(p.asin, {})
        text = ins.get("instruction")
        if text is None:
            continue
        attrs = list(ins.get("instruction_attributes") or [])
        upper, price_text = _price_bound(prices[p.asin], rng)
        names = sorted(p.options)
        for combo in itertools.product(*(p.options[n] for n in names)):
            goal_options = dict(zip(names, combo))
            opt_text = ", and ".join(f"{k}: {v}" for k, v in goal_options.items())
            opt_text = f" with {opt_text}" if opt_text else ""
            raw.append(
                {
                    "asin": p.asin,
                    "instruction": f"{text}{opt_text}{price_text}",
                    "attributes": attrs,
                    "goal_options": goal_options,
                    "price_upper": upper,
                    "name": p.title,
                    "query": p.query,
                    "category": p.category,
                    "product_category": p.product_category,
                }
            )
    random.Random(GOAL_SHUFFLE_SEED).shuffle(raw)
    return [Goal(index=i, **g) for i, g in enumerate(raw)]


def split_indices(n_goals: int, split: str) -> range:
    """Goal indices of a split: ``test`` = 0..499, ``train`` = 500.., ``all`` = every goal.

    Example:
        >>> split_indices(6910, "test"), split_indices(6910, "train")
        (range(0, 500), range(500, 6910))
    """
    if split == "test":
        return range(min(TEST_GOALS, n_goals))
    if split == "train":
        return range(min(TEST_GOALS, n_goals), n_goals)
    if split == "all":
        return range(n_goals)
    raise EnvConfigError(f"unknown WebShop split {split!r}", fix="use 'train', 'test' or 'all'")


def write_demo_data(folder: str | os.PathLike[str]) -> Path:
    """Write a three-product catalogue in the WebShop file format (for examples and tests).

    Example:
        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     cat = load_catalogue(write_demo_data(tmp))
        >>> [p.asin for p in cat.products], cat.products[0].options
        (['B000DEMO01', 'B000DEMO02', 'B000DEMO03'], {'size': ['small', 'large']})
    """

    def record(asin: str, name: str, price: str, options: Any, query: str, crumbs: str) -> dict[str, Any]:
        return {
            "asin": asin,
            "name": name,
            "pricing": price,
            "customization_options": options,
            "small_description": [f"{name.lower()}, machine washable"],
            "full_description": "",
            "category": "fashion",
            "query": query,
            "product_category": crumbs,
            "images": [""],
        }

    sizes = {"Size": [{"value": "Small"}, {"value": "Large"}]}
    products = [
        record(
            "B000DEMO01",
            "Cotton Crew Neck T-Shirt",
            "$12.00",
            sizes,
            "men's shirts",
            "Clothing › Men › Shirts",
        ),
        record("B000DEMO02", "Wool Winter Hat", "$8.50$11.00", "", "men's hats", "Clothing › Men › Hats"),
        record("B000DEMO03", "Ceramic Coffee Mug", "", "", "mugs", "Home & Kitchen › Kitchen › Mugs"),
    ]
    ins = {
        "B000DEMO01": {
            "attributes": ["cotton", "machine washable"],
            "instruction": "Find me machine washable men's shirts with cotton",
            "instruction_attributes": ["machine washable", "cotton"],
        },
        "B000DEMO02": {"attributes": ["wool"]},
        "B000DEMO03": {"attributes": []},
    }
    path = Path(folder)
    path.mkdir(parents=True, exist_ok=True)
    (path / CATALOGUE_FILE).write_text(json.dumps(products), encoding="utf-8")
    (path / INSTRUCTIONS_FILE).write_text(json.dumps(ins), encoding="utf-8")
    return path
