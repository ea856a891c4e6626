"""Node bonus designs b_v and the nesting rule: what one execution of a node earns in an episode.

* ``b_v``: ``1 + γ·d_v`` (ScienceWorld, with the nesting rule) or ``s_v · k_v / T × 10`` (WebShop).
* :class:`EpisodeBonus` grants each node's b_v the first time in the episode, minus the largest bonus
  already granted inside its span (X-Tree §4); :func:`sequence_bonus` does it for a whole action list.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from ..errors import ConfigError
from .constants import GAMMA

if TYPE_CHECKING:
    from ..mining.tree import XTree


class NodeLike(Protocol):
    """What a bonus design reads from a node (:class:`xtree_gym.mining.tree.Node` has all of it)."""

    id: str
    depth: int
    length: int
    expansion: tuple[str, ...]
    success: float | None


@dataclass(frozen=True)
class BonusContext:
    """What a bonus design may know about the episode when a node completes."""

    t: int = 1
    """Steps taken so far in the episode, the completing step included (T of the WebShop design)."""
    goal_options: frozenset[str] | None = None
    """Option types the goal names (``{"color", "size"}``); ``None`` when unknown."""
    task: str = ""
    """Task (family) name, when known."""


BonusDesign = Callable[[NodeLike, BonusContext], float]
"""``b(node, context) -> float``: the value one execution of a node earns."""


# ----------------------------------------------------------------------------- b_v designs


@dataclass(frozen=True)
class DepthBonus:
    """ScienceWorld design (§4): ``b_v = 1 + γ·d_v``; a deeper node is a longer, harder composition.

    Example:
        >>> from types import SimpleNamespace
        >>> DepthBonus()(SimpleNamespace(depth=2), BonusContext())
        2.0
    """

    gamma: float = GAMMA
    """Depth slope γ (0.5 in the paper)."""

    def __call__(self, node: NodeLike, ctx: BonusContext | None = None) -> float:
        return 1.0 + self.gamma * node.depth


_OPTION_PREFIX = "option-"


def _norm_option(name: str) -> str:
    return re.sub(r"[\s_]+", "-", name.strip().lower())


def goal_steps(expansion: Sequence[str], goal_options: Iterable[str] | None = None) -> int:
    """k_v of the WebShop design: how many of a node's steps help the goal.

    A step helps when its token is goal-typed: a search (``search<…>``), opening an item
    (``click<item>``), buying (``click<buy>``), or selecting an option the goal names
    (``click<option-color>`` when the goal names a color; any typed ``click<option-…>`` when the
    goal's options are unknown). Untyped options (``click<option>``), paging (``click<next>``,
    ``click<prev>``), going back and anything else do not help.

    Example:
        >>> goal_steps(["search<query>", "click<item>", "click<option-color>", "click<buy>"], {"color"})
        4
        >>> goal_steps(["search<query>", "click<next>", "click<option>", "click<option-size>"], {"color"})
        1
    """
    wanted = None if goal_options is None else {_norm_option(o) for o in goal_options}
    k = 0
    for tok in expansion:
        verb, _, rest = tok.partition("<")
        role = rest[:-1] if rest.endswith(">") else rest
        if (
            verb == "search"
            or (verb == "click" and role in ("item", "buy"))
            or (
                verb == "click"
                and role.startswith(_OPTION_PREFIX)
                and (wanted is None or role[len(_OPTION_PREFIX) :] in wanted)
            )
        ):
            k += 1
    return k


@functools.lru_cache(maxsize=4096)
def _goal_steps_cached(expansion: tuple[str, ...], goal_options: frozenset[str] | None) -> int:
    # (expansion, goal option types) -> k_v: the wrapper asks once per new node per episode
    return goal_steps(expansion, goal_options)


@dataclass(frozen=True)
class WebShopBonus:
    """WebShop design (§4, Table 7): ``b_v = s_v · k_v / T × scale``.

    ``s_v`` is the node's corpus success rate, ``k_v`` :func:`goal_steps`, ``T`` the episode
    length so far (``ctx.t``). A node whose success is unknown (``null`` in the released trees)
    uses ``unknown_success``.

    Example:
        >>> from types import SimpleNamespace
        >>> node = SimpleNamespace(success=0.5, expansion=("search<query>", "click<item>"))
        >>> WebShopBonus()(node, BonusContext(t=4))
        2.5
    """

    scale: float = 10.0
    """Multiplier (× 10 in Table 7; the authors' project page shows the unscaled value)."""
    unknown_success: float = 1.0
    """s_v used when the tree has no success rate for the node."""

    def __call__(self, node: NodeLike, ctx: BonusContext | None = None) -> float:
        ctx = ctx or BonusContext()
        s = self.unknown_success if node.success is None else float(node.success)
        k = _goal_steps_cached(tuple(node.expansion), ctx.goal_options)
        return s * k / max(ctx.t, 1) * self.scale


BONUS_DESIGNS: dict[str, Callable[[], BonusDesign]] = {"depth": DepthBonus, "webshop": WebShopBonus}
"""Named b_v designs: ``"depth"`` (ScienceWorld) and ``"webshop"``."""


def resolve_bonus(bonus: str | BonusDesign) -> BonusDesign:
    """A b_v design from a name in :data:`BONUS_DESIGNS` or a callable ``(node, ctx) -> float``.

    Example:
        >>> resolve_bonus("depth")
        DepthBonus(gamma=0.5)
    """
    if isinstance(bonus, str):
        try:
            return BONUS_DESIGNS[bonus.lower()]()
        except KeyError:
            raise ConfigError(
                f"unknown bonus design {bonus!r}", fix=f"use one of {sorted(BONUS_DESIGNS)} or a callable"
            ) from None
    if not callable(bonus):
        raise ConfigError(
            f"bonus is {bonus!r}", fix="pass 'depth', 'webshop' or a callable (node, ctx) -> float"
        )
    return bonus


# ----------------------------------------------------------------------------- nesting rule


@dataclass
class EpisodeBonus:
    """Per-episode bonus ledger: each node rewarded once, nested occurrences not paid twice.

    :meth:`grant` is called for every node occurrence completed, in completion order (at one
    step, shortest span first). A node already rewarded in the episode earns nothing. With
    ``nesting`` (the ScienceWorld rule of §4), an occurrence over ``[start, end)`` earns its
    ``b_v`` minus the largest value already credited to a paid occurrence lying inside it
    (never below 0), and is credited with ``max(b_v, that largest value)``: a nested family
    thus earns what its largest member is worth. Occurrences that earned nothing because
    their node was already rewarded are not credited.

    Example:
        >>> led = EpisodeBonus(nesting=True)
        >>> led.grant("A", 0, 2, 1.5), led.grant("B", 0, 3, 2.0), led.grant("A", 3, 5, 1.5)
        (1.5, 0.5, 0.0)
        >>> led.total, list(led.matched)
        (2.0, ['A', 'B'])
    """

    nesting: bool = True
    """Apply the nesting rule; without it every newly matched node earns its full b_v."""
    matched: dict[str, float] = field(default_factory=dict)
    """node id -> bonus it earned this episode, in first-completion order."""
    total: float = 0.0
    """Sum of the bonuses earned this episode."""
    _credits: list[tuple[int, int, float]] = field(default_factory=list, repr=False)
    # (start, end, credited value) of each paid occurrence

    def reset(self) -> None:
        self.matched.clear()
        self._credits.clear()
        self.total = 0.0

    def grant(self, node_id: str, start: int, end: int, value: float) -> float:
        """Record one completed occurrence; returns the bonus it earns."""
        if node_id in self.matched:
            return 0.0
        paid = value
        if self.nesting:
            inside = 0.0
            for s, e, credit in self._credits:
                if s >= start and e <= end and credit > inside:
                    inside = credit
            paid = max(0.0, value - inside)
            self._credits.append((start, end, max(value, inside)))
        self.matched[node_id] = paid
        self.total += paid
        return paid


@dataclass(frozen=True)
class BonusResult:
    """The bonus a whole token sequence earns (the offline twin of the wrapper's running sum)."""

    total: float
    """Σ of the bonuses earned (Σ b_v of Eq. 3, after the nesting rule when on)."""
    matched: dict[str, float]
    """node id -> bonus earned, in first-completion order."""
    per_step: list[float]
    """Bonus earned at each step."""


MATCHING = ("stream", "tiling")
"""How matched(τ) is read: every completed occurrence as it streams (default), or the nodes of
the episode's top-level tiling (what the authors' project page shows; known at episode end)."""


def sequence_bonus(
    tree: XTree,
    tokens: Sequence[str],
    bonus: str | BonusDesign = "depth",
    *,
    nesting: bool | None = None,
    goal_options: Iterable[str] | None = None,
    task: str = "",
    matching: str = "stream",
) -> BonusResult:
    """Σ b_v that one episode's token sequence earns, exactly as :class:`XTreeBonus` pays it.

    ``nesting=None`` means on for the depth design and off otherwise. With ``matching="tiling"``
    the matched nodes are the distinct nodes of ``tree.tile(tokens)`` (tiles never nest), valued
    with ``T`` the episode length and paid at the last step.

    Example:
        >>> from xtree_gym import MinerConfig, Step, Trajectory, mine
        >>> trajs = [Trajectory(str(i), [Step(t, token=t) for t in "abcab"], True) for i in range(6)]
        >>> tree = mine(trajs, MinerConfig(min_freq=3, eta=0.5, cap=5))  # S0 = a b, S1 = S0 c, S2 = S1 S0
        >>> res = sequence_bonus(tree, list("abcab"))
        >>> res.total, res.matched, res.per_step
        (2.5, {'S0': 1.5, 'S1': 0.5, 'S2': 0.5}, [0.0, 1.5, 0.5, 0.0, 0.5])
        >>> sequence_bonus(tree, list("abcab"), nesting=False).total  # 1.5 + 2 + 2.5
        6.0
        >>> sequence_bonus(tree, list("abzab"), matching="tiling").matched  # tiling: S0 z S0
        {'S0': 1.5}
    """
    design = resolve_bonus(bonus)
    ledger = EpisodeBonus(nesting=default_nesting(design) if nesting is None else nesting)
    options = None if goal_options is None else frozenset(goal_options)
    per_step: list[float] = []
    if matching == "tiling":
        ctx = BonusContext(len(tokens), options, task)
        for seg in tree.tile(tokens):
            if seg.is_node and seg.symbol not in ledger.matched:
                ledger.grant(seg.symbol, seg.start, seg.end, design(tree[seg.symbol], ctx))
        per_step = [0.0] * len(tokens)
        if per_step:
            per_step[-1] = ledger.total
        return BonusResult(ledger.total, dict(ledger.matched), per_step)
    if matching != "stream":
        raise ConfigError(f"matching = {matching!r}", fix=f"use one of {list(MATCHING)}")
    matcher = tree.matcher()
    matcher.reset()
    for t, tok in enumerate(tokens, start=1):
        earned = 0.0
        for m in matcher.feed(tok):  # m.node is a node id
            if m.node not in ledger.matched:
                value = design(tree[m.node], BonusContext(t, options, task))
                earned += ledger.grant(m.node, m.start, m.end, value)
        per_step.append(earned)
    return BonusResult(ledger.total, dict(ledger.matched), per_step)


def default_nesting(design: BonusDesign) -> bool:
    """The nesting rule is the depth design's (§4) and any design that says it nests (``nests = True``:
    the contrastive node values); other designs pay every node in full."""
    return isinstance(design, DepthBonus) or bool(getattr(design, "nests", False))
