"""Reward-shaping wrappers: the X-Tree node bonus (Eq. 3) and the invalid-action penalty (Table 7).

Follow one action: ``env.step(action)`` -> the env's ``info["xtree"]["token"]`` (or this
wrapper's canonicalizer) -> :meth:`StreamingMatcher.feed` -> nodes completed at this step ->
:class:`~xtree_gym.rewards.EpisodeBonus` (once per node, nesting rule) -> ``b_v`` ->
``reward + weight · bonus``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, SupportsFloat

import gymnasium as gym

from ..errors import ConfigError, EnvConfigError
from ..rewards.bonus import (
    MATCHING,
    BonusContext,
    BonusDesign,
    EpisodeBonus,
    default_nesting,
    resolve_bonus,
    sequence_bonus,
)
from ..rewards.constants import INVALID_PENALTY, LAMBDA0, W_REF
from ..rewards.group import RunningWinRate, lambda_g

if TYPE_CHECKING:
    from ..mining.tree import XTree

_BREAK = "\x00invalid"  # a token no node contains: feeding it breaks every partial match


def is_invalid(info: Mapping[str, Any]) -> bool:
    """Whether the env rejected the action, as the env itself reports it.

    Every XTree-* env sets ``info["invalid_action"]`` and ``info["xtree"]["invalid"]``
    (ScienceWorld's included: it flags the simulator's "No known action matches that input.");
    ``info["invalid"]`` (the original WebShop key) is read too. No env-specific text is matched here.

    Example:
        >>> is_invalid({"xtree": {"invalid": True}}), is_invalid({"invalid_action": False}), is_invalid({})
        (True, False, False)
    """
    if info.get("invalid_action") or info.get("invalid"):
        return True
    x = info.get("xtree")
    return bool(x.get("invalid")) if type(x) is dict or isinstance(x, Mapping) else False


def invalid_step(obs: Any, info: Mapping[str, Any]) -> bool:
    """The default ``invalid_fn(obs, info)`` of both wrappers: :func:`is_invalid` on ``info``.

    ``obs`` is part of the signature so a custom test can read the observation of an env that flags
    nothing; the default ignores it.

    Example:
        >>> invalid_step("No known action matches that input.", {}), invalid_step("", {"invalid_action": True})
        (False, True)
    """
    return is_invalid(info)


def _default_won(reward: float, info: Mapping[str, Any]) -> bool:
    for key in ("won", "success"):
        if key in info:
            return bool(info[key])
    return reward >= 1.0


def _default_task(info: Mapping[str, Any]) -> Hashable:
    """The reset info's task: ``task`` (ScienceWorld ...), else the goal's ``index`` (WebShop)."""
    if "task" in info:
        return str(info["task"])
    goal = info.get("goal")
    if isinstance(goal, Mapping) and "index" in goal:
        return f"goal-{goal['index']}"
    return ""


def _goal_options(info: Mapping[str, Any]) -> frozenset[str] | None:
    """Option types the goal names: ``info["goal_options"]`` or ``info["goal"]["goal_options"]`` (WebShop)."""
    opts = info.get("goal_options")
    goal = info.get("goal")
    if opts is None and isinstance(goal, Mapping):
        opts = goal.get("goal_options")
    return frozenset(opts) if isinstance(opts, (list, tuple, set, frozenset, Mapping)) else None


def _load_tree(tree: XTree | str | os.PathLike[str] | None) -> XTree:
    from ..mining.tree import XTree

    if tree is None:  # no tree yet (:meth:`XTreeBonus.self_mine` mines one): pays nothing
        return XTree([])
    if isinstance(tree, (str, os.PathLike)):
        return XTree.load(tree)
    return tree


def _resolve_canon(canonicalizer: str | Callable[[str], Any] | None) -> Callable[[str], Any] | None:
    if canonicalizer is None or callable(canonicalizer):
        return canonicalizer
    from ..canon import get_canonicalizer

    return get_canonicalizer(canonicalizer)


class XTreeBonus(gym.Wrapper):
    """Grant each node's bonus ``b_v`` the first time the episode completes it (Eq. 3 of X-Tree).

    The env must report the canonical token of each action in ``info["xtree"]["token"]`` (every
    XTree-* env does), or ``canonicalizer`` (a domain name or ``action -> CanonicalAction | str``)
    is applied to the raw action. Each step adds to ``info["xtree"]``: ``completed`` (node ids
    whose expansion ends here, shortest span first), ``bonus`` (earned at this step), ``episode_bonus``
    (Σ so far), ``matched`` (node ids rewarded this episode, first-completion order) and ``weight``.

    ``weight`` says how the bonus enters the reward:

    * ``"record"`` (default): the reward is untouched; combine ``episode_bonus`` per group with
      :func:`~xtree_gym.rewards.group_rewards` for Eq. 3 exactly.
    * a float: ``reward + weight · bonus`` (a fixed λ).
    * ``"running"``: ``λ = λ0 · clip(1 − ŵ/w_ref, 0, 1)`` with ŵ the task's win rate over its last
      ``window`` episodes (:class:`~xtree_gym.rewards.RunningWinRate`), an approximation of
      the group win rate for libraries that step one env at a time.
    * ``"potential"`` (issue 34): potential-based shaping, ``reward + γ Φ(s') − Φ(s)`` with
      ``Φ = potential_margin · min(B_t / B_max, 1)`` (B_t the bonus collected so far, B_max the tree's
      Σ b_v) and Φ = 0 once the env terminates (a truncation keeps it): Ng et al.'s policy-invariant form.

    ``node_values`` (issue 34) pays each node a value from a table instead of ``bonus``: e.g.
    :func:`~xtree_gym.rewards.contrastive.contrastive_values` over the corpus the tree was mined from
    (the nesting rule on, each node once per episode). ``tree_corpus`` (that labelled corpus: a path or
    trajectories) is the default design of issue 34's evidence, ``auto``: given successes and failures, each
    node is paid its contrastive value and :attr:`bonus_mode` is ``contrastive_gated``, the group rule to combine
    ``episode_bonus`` with (:func:`~xtree_gym.rewards.modes.shaped_group_rewards` ``mode=env.bonus_mode``);
    without both (or without a corpus) the ``bonus`` design is paid and :attr:`bonus_mode` is ``eq3``.

    ``tree=None`` starts with no tree (nothing is paid) for an agent that mines its own: :meth:`self_mine`
    (between episodes) mines a tree from a rollout buffer of its episodes and values it on them, the rule of
    ``xtree train rlvr --remine-every K`` (:func:`~xtree_gym.rewards.self_mined.self_mine`).

    ``bonus`` is a b_v design (``"depth"``, ``"webshop"`` or a callable); the WebShop design reads the
    goal's option types from the reset info (``goal_options`` or ``goal["goal_options"]``). An action
    the env flags as invalid (``invalid_fn(obs, info)``, by default :func:`is_invalid` on ``info``)
    executed nothing, so it earns nothing and breaks every partial match (matched(τ) holds the nodes
    τ actually executes, §3.3; a canonicalizer still gives "open door to nowhere" the token
    ``open<door>``, and counting it would let a policy farm bonuses with refused actions);
    ``count_invalid=True`` counts its token anyway;
    ``matching="tiling"`` pays the episode's top-level tiling at its last step instead of streaming.

    Example:
        >>> import gymnasium as gym
        >>> from xtree_gym.wrappers.reward import XTreeBonus
        >>> class Echo(gym.Env):  # reports each action as its token
        ...     observation_space = action_space = gym.spaces.Text(32)
        ...     def reset(self, *, seed=None, options=None):
        ...         return "", {}
        ...     def step(self, action):
        ...         return "", 0.0, False, False, {"xtree": {"token": action}}
        >>> from xtree_gym import MinerConfig, Step, Trajectory, mine
        >>> trajs = [Trajectory(str(i), [Step(t, token=t) for t in "abcab"], True) for i in range(6)]
        >>> tree = mine(trajs, MinerConfig(min_freq=3, eta=0.5, cap=5))  # S0 = a b, S1 = S0 c, S2 = S1 S0
        >>> env = XTreeBonus(Echo(), tree, weight=0.5)  # depth design, nesting rule on
        >>> _ = env.reset()
        >>> [env.step(a)[1] for a in "abcab"]  # 0.5 · (1.5, 2 − 1.5, 2.5 − 2): the family is worth 2.5
        [0.0, 0.75, 0.25, 0.0, 0.25]
        >>> env.step("b")[4]["xtree"]["matched"]
        ('S0', 'S1', 'S2')
    """

    def __init__(
        self,
        env: gym.Env,
        tree: XTree | str | os.PathLike[str] | None,
        bonus: str | BonusDesign = "depth",
        weight: str | float = "record",
        *,
        nesting: bool | None = None,
        canonicalizer: str | Callable[[str], Any] | None = None,
        lambda0: float = LAMBDA0,
        w_ref: float = W_REF["scienceworld"],
        window: int = 8,
        count_invalid: bool = False,
        invalid_fn: Callable[[Any, Mapping[str, Any]], bool] = invalid_step,
        matching: str = "stream",
        task_fn: Callable[[Mapping[str, Any]], Hashable] = _default_task,
        won_fn: Callable[[float, Mapping[str, Any]], bool] = _default_won,
        node_values: Mapping[str, float] | None = None,
        potential_margin: float = 0.09,
        gamma: float = 1.0,
        tree_corpus: str | os.PathLike[str] | Iterable[Any] | None = None,
    ) -> None:
        super().__init__(env)
        self.tree = _load_tree(tree)
        self.bonus_mode = "eq3"
        self._own_design = resolve_bonus(bonus)  # what a self-mined tree pays under ``eq3``
        if tree_corpus is not None and node_values is None:
            node_values = self._auto_values(tree_corpus)
        if node_values is not None:
            from ..rewards.contrastive import NodeValueBonus

            bonus = NodeValueBonus(dict(node_values))
        self.design = resolve_bonus(bonus)
        self.nesting = default_nesting(self.design) if nesting is None else bool(nesting)
        if not (
            weight in ("record", "running", "potential")
            or (isinstance(weight, (int, float)) and not isinstance(weight, bool))
        ):
            raise ConfigError(
                f"weight = {weight!r}",
                fix="use 'record', 'running', 'potential' or a number (a fixed λ such as 0.75)",
            )
        if not (potential_margin > 0 and 0 < gamma <= 1):
            raise ConfigError(
                f"potential_margin = {potential_margin!r}, gamma = {gamma!r}",
                fix="use a margin > 0 and 0 < γ <= 1",
            )
        self.potential_margin, self.gamma = float(potential_margin), float(gamma)
        self._b_max = self._max_bonus()
        self._phi = 0.0  # Φ(s) of the current state (weight "potential")
        lambda_g(0.0, lambda0, w_ref)  # validates w_ref
        if matching not in MATCHING:
            raise ConfigError(f"matching = {matching!r}", fix=f"use one of {list(MATCHING)}")
        self.matching = matching
        self._tokens: list[str] = []  # this episode's tokens (tiling mode only)
        self.weight_mode = weight
        self.lambda0, self.w_ref = lambda0, w_ref
        self.win_rate = RunningWinRate(window)
        self.count_invalid, self.invalid_fn = count_invalid, invalid_fn
        self._flags_only = invalid_fn is invalid_step  # the default test reads the env's flags only
        self.task_fn, self.won_fn = task_fn, won_fn
        self._canon = _resolve_canon(canonicalizer)
        self._nodes = {n.id: n for n in self.tree.nodes}  # node id -> Node
        self._matcher = self.tree.matcher()
        self.ledger = EpisodeBonus(nesting=self.nesting)
        self._t = 0
        self._task: Hashable = ""
        self._goal_options: frozenset[str] | None = None
        self._weight: float | None = (
            None if isinstance(weight, str) else float(weight)
        )  # set at reset if running
        self._matched: tuple[str, ...] = ()

    def _max_bonus(self) -> float:
        """B_max: Σ b_v over the tree's nodes, each read at its largest (weight ``potential``)."""
        return float(sum(max(0.0, self.design(n, BonusContext(t=max(1, n.length)))) for n in self.tree.nodes))

    def self_mine(self, episodes: Iterable[Any], config: Any, *, mode: str = "auto") -> Any:
        """Replace the tree by one mined from ``episodes`` (labelled trajectories or a
        :class:`~xtree_gym.agents.grpo.remine.RolloutBuffer` of the agent's own) and valued on them; call it
        between episodes. ``auto``: both labels -> contrastive values, :attr:`bonus_mode` ``contrastive_gated``;
        successes only -> the ``bonus`` design, ``eq3``; no success -> nothing paid, ``none``. Returns the
        :class:`~xtree_gym.rewards.self_mined.SelfMined` record (tree size, mode, successes, failures).
        """
        from ..rewards.contrastive import NodeValueBonus
        from ..rewards.self_mined import NO_BONUS, self_mine

        trajs = episodes.trajectories() if hasattr(episodes, "trajectories") else list(episodes)
        got = self_mine(trajs, config, mode=mode)
        self.tree, self.bonus_mode = got.tree, got.mode
        values = {} if got.mode == NO_BONUS else got.values
        self.design = self._own_design if values is None else NodeValueBonus(values)
        self.nesting = default_nesting(self.design)
        self._b_max = self._max_bonus()
        self._nodes = {n.id: n for n in self.tree.nodes}
        self._matcher = self.tree.matcher()
        return got

    def _auto_values(self, tree_corpus: str | os.PathLike[str] | Iterable[Any]) -> dict[str, float] | None:
        """The default bonus mode (``auto``): contrastive node values when the corpus holds successes and
        failures (:attr:`bonus_mode` ``contrastive_gated``), else ``None`` (the ``bonus`` design, ``eq3``)."""
        from ..rewards.contrastive import corpus_values
        from ..rewards.modes import AUTO_MODE, pick_bonus_mode

        trajs: list[Any]
        if isinstance(tree_corpus, (str, os.PathLike)):
            from ..corpus.records import read_corpus

            trajs = list(read_corpus(tree_corpus).trajectories)
        else:
            trajs = list(tree_corpus)
        self.bonus_mode = pick_bonus_mode(AUTO_MODE, [bool(t.success) for t in trajs])
        return corpus_values(self.tree, trajs) if self.bonus_mode == "contrastive_gated" else None

    # -- episode state ------------------------------------------------------------------
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(seed=seed, options=options)
        self._matcher.reset()
        self.ledger.reset()
        self._t = 0
        self._phi = 0.0
        self._matched = ()
        self._tokens = []
        self._task = self.task_fn(info)
        self._goal_options = _goal_options(info)
        if self.weight_mode == "running":
            self._weight = self.win_rate.weight(self._task, self.lambda0, self.w_ref)
        return obs, info

    def _token(self, action: Any, info: dict[str, Any]) -> dict[str, Any]:
        """The env gave no token: canonicalize the raw action and put it in ``info["xtree"]``."""
        if self._canon is None:
            raise EnvConfigError(
                "the env put no info['xtree']['token'] and XTreeBonus has no canonicalizer",
                fix="pass canonicalizer='<domain>' (e.g. 'scienceworld') or a callable action -> token",
            )
        ca = self._canon(action)
        x = {"token": ca} if isinstance(ca, str) else ca.to_info()
        info["xtree"] = x
        return x

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        # The hot path (benchmarks/bench_bonus.py): one feed, a ledger look-up per completed node,
        # five info keys.
        obs, reward, terminated, truncated, info = self.env.step(action)
        x = info.get("xtree")
        if x is None or "token" not in x:
            x = self._token(action, info)
        self._t += 1
        token = x["token"]
        if not self.count_invalid:
            if self._flags_only:  # is_invalid inlined: x is info["xtree"], already at hand
                refused = x.get("invalid") or info.get("invalid_action") or info.get("invalid")
            else:
                refused = self.invalid_fn(obs, info)
            if refused:
                token = _BREAK
        if self.matching == "tiling":
            return self._tiling_step(obs, reward, terminated, truncated, info, x, token)
        completed = self._matcher.feed(token)
        earned = 0.0
        if completed:
            ledger = self.ledger
            matched = ledger.matched
            for m in completed:  # shortest span first, as the nesting rule needs
                if m.node not in matched:
                    ctx = BonusContext(self._t, self._goal_options, str(self._task))
                    earned += ledger.grant(m.node, m.start, m.end, self.design(self._nodes[m.node], ctx))
            if len(matched) != len(self._matched):
                self._matched = tuple(matched)
        ids = [m.node for m in completed]
        return self._finish(obs, reward, terminated, truncated, info, x, ids, earned)

    def _tiling_step(
        self,
        obs: Any,
        reward: SupportsFloat,
        terminated: bool,
        truncated: bool,
        info: dict[str, Any],
        x: dict[str, Any],
        token: str,
    ) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        """Tiling mode: the episode's top-level tiling is known only at its end; pay it all then."""
        self._tokens.append(token)
        earned, completed = 0.0, []
        if terminated or truncated:
            res = sequence_bonus(
                self.tree, self._tokens, self.design, nesting=self.nesting, goal_options=self._goal_options,
                task=str(self._task), matching="tiling",
            )  # fmt: skip
            self.ledger.matched.update(res.matched)
            self.ledger.total = earned = res.total
            completed = list(res.matched)
            self._matched = tuple(res.matched)
        return self._finish(obs, reward, terminated, truncated, info, x, completed, earned)

    def _finish(
        self,
        obs: Any,
        reward: SupportsFloat,
        terminated: bool,
        truncated: bool,
        info: dict[str, Any],
        x: dict[str, Any],
        completed: list[str],
        earned: float,
    ) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        w = self._weight
        env_reward = reward
        if w is not None and earned:
            reward = float(reward) + w * earned
        if self.weight_mode == "potential":
            from ..rewards.contrastive import potential

            phi = 0.0 if terminated else potential(self.ledger.total, self._b_max, self.potential_margin)
            x["shaping"] = self.gamma * phi - self._phi
            reward = float(reward) + x["shaping"]
            self._phi = phi
        x["completed"] = completed
        x["bonus"] = earned
        x["episode_bonus"] = self.ledger.total
        x["matched"] = self._matched
        x["weight"] = w
        if (terminated or truncated) and self.weight_mode == "running":
            self.win_rate.update(self._task, self.won_fn(float(env_reward), info))  # the verifier's, unshaped
        return obs, reward, terminated, truncated, info


class InvalidActionPenalty(gym.Wrapper):
    """Subtract ``penalty`` (0.1, Table 7) when the env rejects an action.

    An action is invalid when the env says so: ``info["invalid_action"]``, ``info["invalid"]`` or
    ``info["xtree"]["invalid"]`` is true (:func:`is_invalid`; every XTree-* env sets the first and
    the last). Pass ``invalid_fn(obs, info) -> bool`` for an env that flags nothing.
    ``info["invalid_penalty"]`` records what was subtracted.

    Example:
        >>> import gymnasium as gym
        >>> class Picky(gym.Env):
        ...     observation_space = action_space = gym.spaces.Text(8)
        ...     def reset(self, *, seed=None, options=None):
        ...         return "", {}
        ...     def step(self, action):
        ...         return "", 1.0, False, False, {"invalid_action": action == "bad"}
        >>> env = InvalidActionPenalty(Picky())
        >>> _ = env.reset()
        >>> env.step("bad")[1], env.step("ok")[1]
        (0.9, 1.0)
    """

    def __init__(
        self,
        env: gym.Env,
        penalty: float = INVALID_PENALTY,
        invalid_fn: Callable[[Any, Mapping[str, Any]], bool] = invalid_step,
    ) -> None:
        super().__init__(env)
        self.invalid_fn = invalid_fn
        if not isinstance(penalty, (int, float)) or isinstance(penalty, bool) or penalty < 0:
            raise ConfigError(f"penalty = {penalty!r}", fix="use a number >= 0 (0.1 in the paper)")
        self.penalty = float(penalty)

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        cut = self.penalty if self.invalid_fn(obs, info) else 0.0
        info["invalid_penalty"] = cut
        return obs, float(reward) - cut, terminated, truncated, info
