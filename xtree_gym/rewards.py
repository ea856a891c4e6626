"""Rewards from the tree: node bonus designs, the nesting rule, Eq. 3 group rewards, Eq. 2 node reward.

Everything here is a pure function or a small stateful object with no Gymnasium dependency;
:mod:`xtree_gym.wrappers.reward` puts it on an environment, the adapters at the end put it in a
trainer. The paper's formulas (X-Tree, §3.2, §3.3, §4, Table 7):

* Eq. 2, offline node instance: ``r = (1 - α) · matched/ℓ_v + α · (1 + γ·d_v) · c_v`` (α = 0.3, γ = 0.5).
* Eq. 3, online group: ``r_i = R_out(τ_i) + λ_g Σ_{v ∈ matched(τ_i)} b_v`` with
  ``λ_g = λ0 · clip(1 − w_g / w_ref, 0, 1)`` (λ0 = 0.75; w_ref = 0.4 ScienceWorld, 0.85 WebShop).
* ``b_v``: ``1 + γ·d_v`` (ScienceWorld, with the nesting rule) or ``s_v · k_v / T × 10`` (WebShop).
"""

from __future__ import annotations

import functools
import math
import re
from collections import deque
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from .errors import ConfigError

if TYPE_CHECKING:
    from .tree import XTree

ALPHA = 0.3
"""Eq. 2: weight of the completion term (Table 7)."""
GAMMA = 0.5
"""Eq. 2 and the depth design: depth factor 1 + γ·d_v (Table 7)."""
LAMBDA0 = 0.75
"""Eq. 3: bonus weight when no rollout of the group succeeds (Table 7)."""
W_REF = {"scienceworld": 0.4, "webshop": 0.85}
"""Eq. 3: the win rate at which the bonus weight reaches zero, per domain (Table 7)."""
INVALID_PENALTY = 0.1
"""Reward subtracted for an action the environment rejects (Table 7)."""


class NodeLike(Protocol):
    """What a bonus design reads from a node (:class:`xtree_gym.tree.Node` has all of it)."""

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
    """The nesting rule is the depth design's (§4); other designs pay every node in full."""
    return isinstance(design, DepthBonus)


# ----------------------------------------------------------------------------- Eq. 3


def lambda_g(win_rate: float, lambda0: float = LAMBDA0, w_ref: float = W_REF["scienceworld"]) -> float:
    """Eq. 3 bonus weight: ``λ0 · clip(1 − w_g / w_ref, 0, 1)``.

    Example:
        >>> lambda_g(0.0), lambda_g(0.2), lambda_g(0.4), lambda_g(0.9)
        (0.75, 0.375, 0.0, 0.0)
    """
    if not w_ref > 0:
        raise ConfigError(f"w_ref = {w_ref!r}", fix="use a win rate in (0, 1], e.g. 0.4 (ScienceWorld)")
    return lambda0 * min(1.0, max(0.0, 1.0 - win_rate / w_ref))


def group_rewards(
    outcomes: Sequence[float],
    bonuses: Sequence[float],
    won: Sequence[bool] | None = None,
    lambda0: float = LAMBDA0,
    w_ref: float = W_REF["scienceworld"],
    *,
    win_threshold: float = 1.0,
) -> list[float]:
    """Eq. 3 for one GRPO group: ``r_i = R_out(τ_i) + λ_g · bonus_i``.

    ``bonuses[i]`` is Σ b_v of rollout i (``info["xtree"]["episode_bonus"]`` of the wrapper in
    ``weight="record"`` mode, or :func:`sequence_bonus`). ``won[i]`` says whether the verifier
    counts rollout i as a success; when omitted, ``outcomes[i] >= win_threshold``.

    Example:
        >>> group_rewards([0, 0], [4.0, 1.5], [False, False])  # all-fail: only the bonus separates
        [3.0, 1.125]
        >>> group_rewards([1, 0], [4.0, 1.5], [True, False], w_ref=0.85)  # w_g = 0.5
        [2.235294117647059, 0.4632352941176471]
    """
    n = len(outcomes)
    if len(bonuses) != n or (won is not None and len(won) != n):
        raise ConfigError(
            f"group sizes differ: {n} outcomes, {len(bonuses)} bonuses, {None if won is None else len(won)} won",
            fix="pass one outcome, one bonus and one won flag per rollout",
        )
    if n == 0:
        return []
    flags = [o >= win_threshold for o in outcomes] if won is None else [bool(w) for w in won]
    lam = lambda_g(sum(flags) / n, lambda0, w_ref)
    return [float(o) + lam * float(b) for o, b in zip(outcomes, bonuses)]


class RunningWinRate:
    """Per-task win rate over the last ``window`` episodes: λ_g for single-env RL libraries.

    Eq. 3 needs the group's win rate, known only when the group ends. A library that steps one
    env at a time has no group; this estimate (the share of wins among the task's last
    ``window`` finished episodes, 0 before any) stands in for it. It is an approximation: it
    lags the policy by up to ``window`` episodes and mixes rollouts of different policy versions.

    Example:
        >>> w = RunningWinRate(window=4)
        >>> for won in (True, False, False, False, True):
        ...     w.update("boil", won)
        >>> w.rate("boil"), w.rate("melt"), w.weight("boil", w_ref=0.4)
        (0.25, 0.0, 0.28125)
    """

    def __init__(self, window: int = 8) -> None:
        if not isinstance(window, int) or window < 1:
            raise ConfigError(f"window = {window!r}", fix="use an integer >= 1 (a GRPO group size such as 8)")
        self.window = window
        self._hist: dict[Hashable, deque[bool]] = {}  # task -> last `window` outcomes

    def update(self, task: Hashable, won: bool) -> None:
        self._hist.setdefault(task, deque(maxlen=self.window)).append(bool(won))

    def rate(self, task: Hashable) -> float:
        h = self._hist.get(task)
        return sum(h) / len(h) if h else 0.0

    def weight(self, task: Hashable, lambda0: float = LAMBDA0, w_ref: float = W_REF["scienceworld"]) -> float:
        return lambda_g(self.rate(task), lambda0, w_ref)


# ----------------------------------------------------------------------------- Eq. 2


def normalize_action(action: str) -> str:
    """An action as compared with the gold one: thought removed, whitespace collapsed.

    A thought is whatever precedes the last ``Action:`` marker (ReAct style), if any.

    Example:
        >>> normalize_action("Thought: the door first.\\nAction:  open   door to kitchen ")
        'open door to kitchen'
    """
    idx = action.rfind("Action:")
    if idx >= 0:
        action = action[idx + len("Action:") :]
    return " ".join(action.split())


def matched_steps(actions: Sequence[str], gold: Sequence[str]) -> int:
    """How many steps reproduce the gold actions before the first mismatch (a rollout stops there).

    Example:
        >>> matched_steps(["a", "x", "c"], ["a", "b", "c"])
        1
    """
    n = 0
    for a, g in zip(actions, gold):
        if normalize_action(a) != normalize_action(g):
            break
        n += 1
    return n


def node_completion_reward(
    actions: Sequence[str], gold: Sequence[str], depth: int, alpha: float = ALPHA, gamma: float = GAMMA
) -> float:
    """Eq. 2: ``(1 − α) · matched/ℓ_v + α · (1 + γ·d_v) · c_v``, ``c_v = 1`` iff every step matched.

    ``actions`` are the rollout's actions (at most ``ℓ_v = len(gold)`` are read); the rollout
    stops at the first mismatch, so later actions never count.

    Example:
        >>> round(node_completion_reward(["fill from", "fill to", "apply"], ["fill from", "fill to", "apply"], 2), 4)
        1.3
        >>> round(node_completion_reward(["fill from", "apply"], ["fill from", "fill to", "apply"], 2), 4)
        0.2333
    """
    if not gold:
        raise ConfigError("the gold node has no steps", fix="pass the node's gold actions (ℓ_v >= 1)")
    if not 0.0 <= alpha <= 1.0:
        raise ConfigError(f"alpha = {alpha!r}", fix="use a weight in [0, 1] (0.3 in the paper)")
    k = matched_steps(actions, gold)
    complete = 1.0 if k == len(gold) else 0.0
    return (1.0 - alpha) * k / len(gold) + alpha * (1.0 + gamma * depth) * complete


NODE_REWARDS = ("hier", "plain", "outcome")
"""Offline node-RL rewards (Tables 1-2's reward controls): Eq. 2, its step share alone, the binary outcome."""


def node_reward(
    actions: Sequence[str],
    gold: Sequence[str],
    depth: int,
    mode: str = "hier",
    alpha: float = ALPHA,
    gamma: float = GAMMA,
) -> float:
    """The reward of one node rollout under ``mode``.

    ``hier`` is Eq. 2 (:func:`node_completion_reward`); ``plain`` keeps only the step-matching
    share ``matched/ℓ_v`` (no completion bonus, no depth factor: the flat reward of "plain mixing");
    ``outcome`` is the binary ``c_v`` (1 only when every gold step was reproduced).

    Example:
        >>> gold = ["fill from", "fill to", "apply"]
        >>> [round(node_reward(["fill from", "apply"], gold, 2, m), 4) for m in NODE_REWARDS]
        [0.2333, 0.3333, 0.0]
        >>> [round(node_reward(gold, gold, 2, m), 4) for m in NODE_REWARDS]
        [1.3, 1.0, 1.0]
    """
    if mode == "hier":
        return node_completion_reward(actions, gold, depth, alpha, gamma)
    if not gold:
        raise ConfigError("the gold node has no steps", fix="pass the node's gold actions (ℓ_v >= 1)")
    k = matched_steps(actions, gold)
    if mode == "plain":
        return k / len(gold)
    if mode == "outcome":
        return 1.0 if k == len(gold) else 0.0
    raise ConfigError(f"node reward {mode!r}", fix=f"use one of {list(NODE_REWARDS)}")


# ----------------------------------------------------------------------------- trainer adapters


def _finite(x: Any, what: str) -> float:
    v = float(x)
    if not math.isfinite(v):
        raise ConfigError(f"{what} is {x!r}", fix="pass a finite number")
    return v


def grouped_rewards(
    outcomes: Sequence[float],
    bonuses: Sequence[float],
    groups: Sequence[Hashable],
    won: Sequence[bool] | None = None,
    lambda0: float = LAMBDA0,
    w_ref: float = W_REF["scienceworld"],
    *,
    win_threshold: float = 1.0,
) -> tuple[list[float], dict[Hashable, float]]:
    """Eq. 3 over a flat batch whose rollouts carry a group key; returns (rewards, key -> λ_g).

    Example:
        >>> r, lam = grouped_rewards([0, 0, 1, 0], [2.0, 0.0, 2.0, 2.0], ["a", "a", "b", "b"], w_ref=0.85)
        >>> r, lam["a"]
        ([1.5, 0.0, 1.6176470588235294, 0.6176470588235294], 0.75)
    """
    n = len(outcomes)
    if len(bonuses) != n or len(groups) != n or (won is not None and len(won) != n):
        raise ConfigError("outcomes, bonuses, groups (and won) must have one entry per rollout")
    members: dict[Hashable, list[int]] = {}  # group key -> rollout indices
    for i, g in enumerate(groups):
        members.setdefault(g, []).append(i)
    out = [0.0] * n
    lambdas: dict[Hashable, float] = {}
    for g, idx in members.items():
        sub_won = None if won is None else [won[i] for i in idx]
        flags = [outcomes[i] >= win_threshold for i in idx] if sub_won is None else sub_won
        lambdas[g] = lambda_g(sum(bool(f) for f in flags) / len(idx), lambda0, w_ref)
        for i in idx:
            out[i] = _finite(outcomes[i], "outcome") + lambdas[g] * float(bonuses[i])
    return out, lambdas


def completion_actions(completion: Any) -> list[str]:
    """The actions of a TRL completion: a string or a chat message list, one action per line.

    Example:
        >>> completion_actions([{"role": "assistant", "content": "open door to kitchen\\n\\ngo to kitchen"}])
        ['open door to kitchen', 'go to kitchen']
    """
    if isinstance(completion, list):
        text = "\n".join(
            str(m.get("content", ""))
            for m in completion
            if isinstance(m, Mapping) and m.get("role") == "assistant"
        )
    else:
        text = str(completion)
    return [line.strip() for line in text.splitlines() if line.strip()]


class XTreeRewardFunction:
    """A TRL ``GRPOTrainer`` reward function: ``(prompts, completions, **kwargs) -> list[float]``.

    Per rollout it reads the canonical tokens from the ``tokens_key`` column (a list of
    tokens), else canonicalizes the ``actions_key`` column, else the completion's lines, with
    ``domain``'s canonicalizer; the outcome R_out from ``outcome_fn(prompt, completion, **row)``
    or the ``outcome_key`` column; ``won`` from the ``won_key`` column or ``R_out >= win_threshold``.
    Rollouts are grouped by the ``group_key`` column, else by identical prompt (TRL puts a
    prompt's generations in one call; a group split across processes is weighted by the part
    this process sees). With ``include_outcome=False`` it returns only ``λ_g Σ b_v``, to be summed
    with a separate outcome reward function.

    Example:
        >>> from xtree_gym import MinerConfig, Step, Trajectory, mine
        >>> trajs = [Trajectory(str(i), [Step(t, token=t) for t in "abcab"], True) for i in range(6)]
        >>> tree = mine(trajs, MinerConfig(min_freq=3, eta=0.5, cap=5))  # S0 = a b (depth 1), ...
        >>> fn = XTreeRewardFunction(tree, w_ref=0.4)
        >>> fn(["p", "p"], ["", ""], xtree_tokens=[["a", "b"], ["b"]], outcome=[0.0, 0.0])  # all fail: λ = 0.75
        [1.125, 0.0]
    """

    __name__ = "xtree_bonus"  # TRL logs each reward function under its __name__

    def __init__(
        self,
        tree: XTree,
        *,
        bonus: str | BonusDesign = "depth",
        nesting: bool | None = None,
        domain: str | None = None,
        outcome_fn: Callable[..., float] | None = None,
        lambda0: float = LAMBDA0,
        w_ref: float = W_REF["scienceworld"],
        include_outcome: bool = True,
        win_threshold: float = 1.0,
        tokens_key: str = "xtree_tokens",
        actions_key: str = "actions",
        outcome_key: str = "outcome",
        won_key: str = "won",
        group_key: str | None = None,
        goal_options_key: str = "goal_options",
        matching: str = "stream",
    ) -> None:
        self.tree = tree
        self.design = resolve_bonus(bonus)
        self.nesting = default_nesting(self.design) if nesting is None else nesting
        if matching not in MATCHING:
            raise ConfigError(f"matching = {matching!r}", fix=f"use one of {list(MATCHING)}")
        self.matching = matching
        self.canon = None
        if domain is not None:
            from .canon import get_canonicalizer

            self.canon = get_canonicalizer(domain)
        lambda_g(0.0, lambda0, w_ref)  # validates w_ref now, not at the first batch
        self.outcome_fn, self.lambda0, self.w_ref = outcome_fn, lambda0, w_ref
        self.include_outcome, self.win_threshold = include_outcome, win_threshold
        self.tokens_key, self.actions_key, self.outcome_key = tokens_key, actions_key, outcome_key
        self.won_key, self.group_key, self.goal_options_key = won_key, group_key, goal_options_key
        self.last_lambdas: dict[Hashable, float] = {}
        """group key -> λ_g of the last call, for logging."""

    def _tokens(self, i: int, completion: Any, kw: Mapping[str, Any]) -> list[str]:
        tokens_key, actions_key = self.tokens_key, self.actions_key
        if kw.get(tokens_key) is not None and kw[tokens_key][i] is not None:
            return list(kw[tokens_key][i])
        actions = kw[actions_key][i] if kw.get(actions_key) is not None else completion_actions(completion)
        if self.canon is None:
            raise ConfigError(
                f"no {tokens_key!r} column and no canonicalizer",
                fix=f"add a {tokens_key!r} column (list of tokens per rollout) or pass domain='scienceworld'",
            )
        return [self.canon(a).token for a in actions]

    def __call__(self, prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any) -> list[float]:
        outcome_key, group_key = self.outcome_key, self.group_key
        n = len(completions)
        rows = [
            {k: v[i] for k, v in kwargs.items() if isinstance(v, (list, tuple)) and len(v) == n}
            for i in range(n)
        ]
        if self.outcome_fn is not None:
            outcomes = [float(self.outcome_fn(prompts[i], completions[i], **rows[i])) for i in range(n)]
        elif kwargs.get(outcome_key) is not None:
            outcomes = [float(x) for x in kwargs[outcome_key]]
        else:
            raise ConfigError(
                f"no outcome: no outcome_fn and no {outcome_key!r} column", fix="pass outcome_fn="
            )
        bonuses = []
        for i in range(n):
            opts = rows[i].get(self.goal_options_key)
            goal_options = list(opts) if isinstance(opts, (list, tuple, dict)) else None
            res = sequence_bonus(
                self.tree, self._tokens(i, completions[i], kwargs), self.design,
                nesting=self.nesting, goal_options=goal_options, matching=self.matching,
            )  # fmt: skip
            bonuses.append(res.total)
        won = kwargs.get(self.won_key)
        groups = (
            kwargs[group_key]
            if group_key and kwargs.get(group_key) is not None
            else [repr(p) for p in prompts]
        )
        rewards, self.last_lambdas = grouped_rewards(
            outcomes, bonuses, groups, won, self.lambda0, self.w_ref, win_threshold=self.win_threshold
        )
        if not self.include_outcome:
            rewards = [self.last_lambdas[g] * b for g, b in zip(groups, bonuses)]
        return rewards


def verl_agent_rewards(
    episode_rewards: Sequence[float],
    uids: Sequence[Hashable],
    token_sequences: Sequence[Sequence[str]],
    tree: XTree,
    *,
    won: Sequence[bool] | None = None,
    bonus: str | BonusDesign = "depth",
    nesting: bool | None = None,
    lambda0: float = LAMBDA0,
    w_ref: float = W_REF["scienceworld"],
    win_threshold: float = 1.0,
    matching: str = "stream",
) -> tuple[list[float], dict[Hashable, float]]:
    """verl-agent-style hook: episode rewards + group uids + token sequences -> Eq. 3 rewards.

    verl-agent keeps one ``uid`` per GRPO group in ``non_tensor_batch["uid"]`` and the episode
    reward per rollout; call this where the episode rewards are assembled, before advantages.
    Returns the adjusted rewards and ``uid -> λ_g`` (log its mean as the paper's Figure 7 does).
    """
    design = resolve_bonus(bonus)
    bonuses = [
        sequence_bonus(tree, seq, design, nesting=nesting, matching=matching).total for seq in token_sequences
    ]
    return grouped_rewards(episode_rewards, bonuses, uids, won, lambda0, w_ref, win_threshold=win_threshold)
