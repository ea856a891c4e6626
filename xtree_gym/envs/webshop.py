"""``XTree-WebShop-v0``: the WebShop benchmark (Yao et al. 2022) as a small, fast text environment.

Same pages, actions and reward as the original (Flask site + Lucene index + spaCy), rebuilt on
its 1000-product data with ``bm25s`` search, ``rapidfuzz`` matching and a Pattern POS tagger:
it starts in about a second and keeps one shared, read-only catalogue per process.

Actions are ``search[query]`` (on the search page) and ``click[value]`` for anything clickable on
the current page (value lower-cased: ``click[b07b6dvg41]``, ``click[next >]``, ``click[large]``,
``click[buy now]``). Anything else is an *invalid action*: reward 0, not done, nothing changes,
``info["invalid"] = info["invalid_action"] = True`` (the second key is the convention every
X-Tree env shares; ``info["xtree"]["invalid"]`` says the same). ``click[buy now]`` ends the
episode with the purchase reward; ``info["won"]`` is ``reward == 1.0``. Every step puts the canonical token of the action in
``info["xtree"]`` (canonicalized with the goal's options as context).
"""

from __future__ import annotations

import functools
import os
import random
import re
import string
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from ..errors import EnvConfigError, missing_dependency
from .webshop_data import Catalogue, Goal, Product, build_goals, draw_prices, load_catalogue, resolve_data_dir
from .webshop_data import split_indices as _split_indices
from .webshop_pages import (
    BACK_TO_SEARCH,
    BUY_NOW,
    NEXT_PAGE,
    PREV_PAGE,
    SUB_PAGES,
    BrowserState,
    Element,
    clickables,
    done_page,
    item_page,
    render,
    results_page,
    search_page,
    sub_page,
)
from .webshop_reward import RewardBreakdown, purchase_reward
from .webshop_search import ProductSearch

try:
    import gymnasium as gym
    from gymnasium import spaces
except ImportError:  # pragma: no cover - the env needs gymnasium; the module still imports
    gym = None  # type: ignore[assignment]
    spaces = None  # type: ignore[assignment]

OBSERVATION_MODES = ("text", "text_rich")
_ACTION = re.compile(r"^\s*(\w+)\s*\[(.*)\]\s*$", re.DOTALL)


@dataclass(frozen=True)
class WebShopConfig:
    """Arguments of :class:`WebShopEnv` (all keyword arguments of ``gym.make``)."""

    data_dir: str | None = None
    """Folder with ``items_shuffle_1000.json`` and ``items_ins_v2_1000.json``; default ``$XTREE_WEBSHOP_DATA``."""
    observation_mode: str = "text"
    """``text`` (``[SEP]``-joined) or ``text_rich`` (``[button] ... [button_]`` marks)."""
    split: str = "train"
    """Goals ``reset`` draws from: ``test`` (0..499), ``train`` (500..) or ``all``."""
    price_seed: int = 0
    """Seed of the purchase prices of ranged products and of the goals' price bounds."""
    max_steps: int | None = 15
    """Steps before the episode is truncated (``None``: never)."""
    show_attrs: bool = False
    """Show the ``Attributes`` button on item pages (the original's ``show_attrs``)."""
    strict_search: bool = True
    """``search[...]`` is valid only on the search page; ``False`` allows it anywhere, like the original."""

    def check(self) -> None:
        if self.observation_mode not in OBSERVATION_MODES:
            raise EnvConfigError(
                f"unknown observation_mode {self.observation_mode!r}", fix=f"use one of {OBSERVATION_MODES}"
            )
        if self.max_steps is not None and (not isinstance(self.max_steps, int) or self.max_steps < 1):
            raise EnvConfigError(f"max_steps must be a positive int or None, got {self.max_steps!r}")
        _split_indices(1000, self.split)


@dataclass(frozen=True)
class WebShopData:
    """Everything read-only an environment needs; one per (data folder, price seed) per process."""

    catalogue: Catalogue
    search: ProductSearch
    prices: dict[str, float]  # ASIN -> price paid
    goals: list[Goal]
    index_of: dict[str, int]  # ASIN -> catalogue index
    charset: str  # every character an observation can contain


def _charset(products: list[Product]) -> str:
    chars = set(string.printable)
    for p in products:
        chars.update(p.title, p.description, p.price_tag, *p.bullet_points, *p.attributes)
        for group, values in p.options.items():
            chars.update(group, *values)
    return "".join(sorted(chars))


@functools.lru_cache(maxsize=4)
def _load_data(path: str, mtime: float, price_seed: int) -> WebShopData:
    catalogue = load_catalogue(Path(path))
    rng = random.Random(price_seed)
    prices = draw_prices(catalogue.products, rng)  # prices first, bounds second: the original's order
    goals = build_goals(catalogue, prices, rng)
    return WebShopData(
        catalogue=catalogue,
        search=ProductSearch(catalogue.products),
        prices=prices,
        goals=goals,
        index_of={p.asin: i for i, p in enumerate(catalogue.products)},
        charset=_charset(catalogue.products),
    )


def load_webshop_data(data_dir: str | os.PathLike[str] | None = None, price_seed: int = 0) -> WebShopData:
    """The shared data of a data folder (cached per process; re-read when the catalogue changes)."""
    path = resolve_data_dir(data_dir)
    catalogue_file = path / "items_shuffle_1000.json"
    return _load_data(str(path.resolve()), catalogue_file.stat().st_mtime, price_seed)


def parse_action(action: str) -> tuple[str, str | None]:
    """``"click[Buy Now]"`` -> ``("click", "buy now")``; anything else -> ``(text, None)``.

    Example:
        >>> parse_action("search[Red Shoes ]"), parse_action("Click[< Prev]"), parse_action("look")
        (('search', 'red shoes'), ('click', '< prev'), ('look', None))
    """
    m = _ACTION.match(action)
    if m is None:
        return action.strip().lower(), None
    return m.group(1).lower(), m.group(2).strip().lower()


_Base: Any = gym.Env if gym is not None else object


class WebShopEnv(_Base):
    """The WebShop shopping task on the 1000-product catalogue (see module doc for actions).

    Example (on a three-product demo catalogue; real use: the benchmark's data folder):
        >>> import tempfile
        >>> from xtree_gym.envs.webshop_data import write_demo_data
        >>> tmp = tempfile.TemporaryDirectory()
        >>> env = WebShopEnv(data_dir=str(write_demo_data(tmp.name)), split="all")
        >>> obs, info = env.reset(seed=0, options={"goal_idx": 0})
        >>> obs
        "WebShop [SEP] Instruction: [SEP] Find me machine washable men's shirts with cotton with size: large, and price lower than 50.00 dollars [SEP] Search"
        >>> obs, *_ = env.step("search[cotton shirt]")
        >>> obs.split(" [SEP] ")[3:7]
        ['Page 1 (Total results: 1)', 'B000DEMO01', 'Cotton Crew Neck T-Shirt', '$12.0']
        >>> for action in ["click[b000demo01]", "click[large]", "click[buy now]"]:
        ...     obs, reward, terminated, truncated, info = env.step(action)
        ...     print(info["xtree"]["token"], reward, terminated)
        click<item> 0.0 False
        click<option-size> 0.0 False
        click<buy> 1.0 True
        >>> info = env.step("click[nowhere]")[4]
        >>> info["invalid"], info["invalid_action"], info["xtree"]["invalid"]
        (True, True, True)
        >>> tmp.cleanup()
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["ansi"]}

    def __init__(self, render_mode: str | None = None, **kwargs: Any) -> None:
        if gym is None:
            raise missing_dependency("gymnasium", "webshop", "XTree-WebShop-v0")
        known = {f.name for f in fields(WebShopConfig)}
        unknown = sorted(set(kwargs) - known)
        if unknown:
            raise EnvConfigError(f"unknown WebShopEnv argument(s) {unknown}", fix=f"use only {sorted(known)}")
        self.config = WebShopConfig(**kwargs)
        self.config.check()
        if render_mode not in (None, "ansi"):
            raise EnvConfigError(f"unknown render_mode {render_mode!r}", fix="use None or 'ansi'")
        self.render_mode = render_mode
        self.data = load_webshop_data(self.config.data_dir, self.config.price_seed)
        self.goal_indices = _split_indices(len(self.data.goals), self.config.split)
        self.observation_space = spaces.Text(max_length=1_000_000, min_length=0, charset=self.data.charset)
        self.action_space = spaces.Text(max_length=1000, min_length=0, charset=self.data.charset)
        self._canon = _webshop_canonicalizer()
        self.goal: Goal | None = None
        self.state = BrowserState()
        self._elements: list[Element] = []
        self._clickables: dict[str, Element] = {}
        self._steps = 0
        self._done = False
        self.last_reward: RewardBreakdown | None = None

    # -- public helpers ---------------------------------------------------------------------
    @property
    def products(self) -> list[Product]:
        return self.data.catalogue.products

    @property
    def goals(self) -> list[Goal]:
        return self.data.goals

    def product(self, asin: str) -> Product:
        return self.data.catalogue.by_asin[asin.upper()]

    def get_available_actions(self) -> dict[str, Any]:
        """``{"has_search_bar": bool, "clickables": [...]}`` like the original text env."""
        return {"has_search_bar": self.state.page == "search", "clickables": list(self._clickables)}

    def valid_actions(self) -> list[str]:
        """The admissible actions as text: ``search[<your query>]`` on the search page, then ``click[value]``
        for every clickable (the list verl-agent's WebShop prompt shows)."""
        avail = self.get_available_actions()
        search = ["search[<your query>]"] if avail["has_search_bar"] else []
        return search + [f"click[{c}]" for c in avail["clickables"] if c != "search"]

    @property
    def observation(self) -> str:
        return render(self._elements, rich=self.config.observation_mode == "text_rich")

    # -- gymnasium API ----------------------------------------------------------------------
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        options = options or {}
        if "goal_idx" in options:
            idx = options["goal_idx"]
            if isinstance(idx, (int, np.integer)) and not isinstance(idx, bool):
                idx = int(idx)  # numpy integers from a sampler are fine
            if not isinstance(idx, int) or isinstance(idx, bool) or not 0 <= idx < len(self.data.goals):
                raise EnvConfigError(
                    f"goal_idx {idx!r} is out of range", fix=f"use 0..{len(self.data.goals) - 1}"
                )
        else:
            idx = self.goal_indices[int(self.np_random.integers(len(self.goal_indices)))]
        self.goal = self.data.goals[idx]
        self.state = BrowserState()
        self._steps = 0
        self._done = False
        self.last_reward = None
        self._show()
        info = {
            "goal": self.goal.to_info(),
            "page": "search",
            "available_actions": self.get_available_actions(),
        }
        return self.observation, info

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if self.goal is None:
            raise EnvConfigError("step() called before reset()", fix="call env.reset() first")
        if not isinstance(action, str):
            raise EnvConfigError(
                f"WebShop actions are strings, got {type(action).__name__}: {action!r}",
                fix="pass 'search[query]' or 'click[value]'",
            )
        name, arg = parse_action(action)
        reward, invalid = 0.0, False
        info: dict[str, Any] = {}
        if self._done:
            invalid = True
        elif name == "search" and arg and (self.state.page == "search" or not self.config.strict_search):
            self._search(arg)
        elif name == "click" and arg is not None and arg in self._clickables and arg != "search":
            reward = self._click(arg, info)
        else:
            invalid = True
        self._steps += 1
        won = self._done and reward == 1.0
        truncated = (
            not self._done and self.config.max_steps is not None and self._steps >= self.config.max_steps
        )
        canon = self._canon(action, {"goal_options": dict(self.goal.goal_options)})
        xtree = canon.to_info()
        xtree["invalid"] = invalid
        info.update(
            {
                "invalid": invalid,
                "invalid_action": invalid,
                "won": won,
                "page": self.state.page,
                "goal_idx": self.goal.index,
                "available_actions": self.get_available_actions(),
                "xtree": xtree,
            }
        )
        return self.observation, reward, self._done, truncated, info

    def render(self) -> str | None:
        return self.observation if self.render_mode == "ansi" else None

    # -- transitions ------------------------------------------------------------------------
    def _search(self, keywords: str) -> None:
        self.state = BrowserState(
            page="results",
            keywords=keywords,
            results=self.data.search.search(keywords),
            visited=self.state.visited,
        )
        self._show()

    def _click(self, arg: str, info: dict[str, Any]) -> float:
        el = self._clickables[arg]
        st = self.state
        if el.kind == "option":
            st.options[el.group] = el.text
        elif el.kind == "link":
            st.page, st.asin, st.options = "item", el.text, {}
            st.visited.append(el.text)
        elif el.text == BACK_TO_SEARCH:
            self.state = BrowserState()
        elif el.text == NEXT_PAGE:
            st.page_no += 1
        elif el.text == PREV_PAGE:
            # sub page -> item page -> results (options are dropped on the results page)
            if st.page == "sub":
                st.page = "item"
            elif st.page == "item":
                st.page, st.asin, st.options = "results", None, {}
            else:
                st.page_no -= 1
        elif el.text in SUB_PAGES:
            st.page, st.sub_page = "sub", el.text
        elif el.text == BUY_NOW:
            return self._buy(info)
        self._show()
        return 0.0

    def _buy(self, info: dict[str, Any]) -> float:
        assert self.goal is not None and self.state.asin is not None
        product = self.product(self.state.asin)
        price = self.data.prices[product.asin]
        breakdown = purchase_reward(product, self.goal, price, self.state.options)
        self.last_reward = breakdown
        self._done = True
        self.state.page = "done"
        self._elements = done_page(breakdown.reward)
        self._clickables = {}
        info["reward_components"] = breakdown.to_info()
        info["purchased"] = {"asin": product.asin, "options": dict(self.state.options), "price": price}
        return breakdown.reward

    def _show(self) -> None:
        """Rebuild the current page's elements and clickables from the state."""
        assert self.goal is not None
        st, text = self.state, self.goal.instruction
        if st.page == "search":
            self._elements = search_page(text)
        elif st.page == "results":
            self._elements = results_page(text, st, self.products)
        elif st.page == "item":
            assert st.asin is not None
            self._elements = item_page(text, st, self.product(st.asin), self.config.show_attrs)
        else:
            assert st.asin is not None
            self._elements = sub_page(text, st, self.product(st.asin))
        self._clickables = clickables(self._elements)


def _webshop_canonicalizer() -> Any:
    """The ``webshop`` canonicalizer, or the generic catch-all while that module is absent."""
    from ..canon import get_canonicalizer
    from ..errors import CanonicalizationError

    try:
        return get_canonicalizer("webshop")
    except CanonicalizationError:
        return get_canonicalizer("generic")
