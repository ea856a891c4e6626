"""``XTree-NodeReplay-v0``: offline RL on gold trajectories, one node instance per episode (X-Tree §3.2, App. E).

An episode replays one :class:`~xtree_gym.rewards.instances.NodeInstance`. The first observation is the gold
history before the node (goal, initial observation, then each gold action and what the env
answered) ending with the current gold observation. An action that equals the recorded gold action
(thought excluded, whitespace normalized) gets the recorded next observation and the rollout goes
on; any other action ends it -- the env never invents an observation for a state the gold trajectory
does not contain. The last step pays Eq. 2 (:func:`~xtree_gym.rewards.node_completion_reward`):
``(1 − α)·matched/ℓ_v + α·(1 + γ·d_v)·c_v``; earlier steps pay 0. ``reward="plain"`` pays the
step share alone and ``"outcome"`` the binary ``c_v`` (the reward controls of
:func:`~xtree_gym.rewards.node_reward`).
"""

from __future__ import annotations

import os
import string
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
from gymnasium import spaces

from ..canon import catch_all, get_canonicalizer
from ..errors import EnvConfigError
from ..rewards.constants import ALPHA, GAMMA
from ..rewards.instances import KINDS, NodeInstance, make_instances, read_instances
from ..rewards.node import NODE_REWARDS, node_reward, normalize_action

_TEXT = spaces.Text(max_length=1 << 20, charset=string.printable)


def render_history(inst: NodeInstance, upto: int | None = None) -> str:
    """The text a policy reads: goal, initial observation, gold prefix (+ ``upto`` matched node steps).

    Example:
        >>> inst = NodeInstance("t@1:2", "t", "node", "S0", 1, 1, 2, goal="Boil water.",
        ...     initial_observation="A hallway.", prefix=[{"action": "look", "observation": "Still a hallway."}],
        ...     gold=[{"action": "go to kitchen", "observation": "A kitchen.", "token": "navigate<kitchen>"}])
        >>> print(render_history(inst))
        Goal: Boil water.
        Observation: A hallway.
        Action: look
        Observation: Still a hallway.
    """
    steps = list(inst.prefix) + list(inst.gold[: upto or 0])
    lines = [f"Goal: {inst.goal}"] if inst.goal else []
    if inst.initial_observation:
        lines.append(f"Observation: {inst.initial_observation}")
    for s in steps:
        lines.append(f"Action: {s['action']}")
        lines.append(f"Observation: {s.get('observation', '')}")
    return "\n".join(lines)


def _current_observation(inst: NodeInstance, upto: int) -> str:
    """The latest gold observation after the prefix and ``upto`` node steps."""
    if upto:
        return str(inst.gold[upto - 1].get("observation", ""))
    if inst.prefix:
        return str(inst.prefix[-1].get("observation", ""))
    return inst.initial_observation


def _load_instances(
    corpus: Any, tree: Any, instances: Any, kind: str, domain: str | None, seed: int
) -> list[NodeInstance]:
    if instances is not None:
        if isinstance(instances, (str, os.PathLike)):
            return read_instances(instances)
        return list(instances)
    if corpus is None or (tree is None and kind not in ("whole",)):
        raise EnvConfigError(
            "XTree-NodeReplay-v0 needs instances=, or corpus= and tree=",
            fix="gym.make('XTree-NodeReplay-v0', corpus='gold.jsonl', tree='tree.json')",
        )
    from ..corpus.records import read_corpus
    from ..mining.tree import XTree

    if isinstance(corpus, (str, os.PathLike)) or (
        isinstance(corpus, Sequence) and corpus and isinstance(corpus[0], (str, os.PathLike))
    ):
        corpus = read_corpus(corpus)
    trajs = list(corpus)
    if isinstance(tree, (str, os.PathLike)):
        tree = XTree.load(Path(tree))
    return make_instances(kind, trajs, tree, seed=seed, domain=domain)


class NodeReplayEnv(gym.Env[str, str]):
    """Gold-replay environment: each episode is one node instance, rewarded by Eq. 2.

    Build it from ``instances`` (a list or a JSONL path from :func:`~xtree_gym.rewards.instances.write_instances`)
    or from ``corpus`` and ``tree`` (paths or objects; ``kind`` picks the instance set, see
    :data:`~xtree_gym.rewards.instances.KINDS`). ``reset(options={"index": i})`` or ``{"instance": id}`` picks
    an instance; otherwise ``order="random"`` draws one with the env's seeded generator and
    ``"sequential"`` cycles through them. ``obs_mode="full"`` returns the whole history each step,
    ``"last"`` only the new observation. ``info`` carries ``instance``, ``node``, ``depth``, ``length``,
    ``matched``, ``complete``, ``won`` (the node was completed) and, for reward wrappers,
    ``xtree`` (the action's token: the gold token on a match, else ``domain``'s canonicalizer's,
    else the catch-all's).

    Example:
        >>> inst = NodeInstance("t@0:2", "t", "node", "S0", 1, 0, 2, goal="Boil water.",
        ...     gold=[{"action": "open door", "observation": "Open.", "token": "open<door>"},
        ...           {"action": "go to kitchen", "observation": "A kitchen.", "token": "navigate<kitchen>"}])
        >>> env = NodeReplayEnv(instances=[inst])
        >>> obs, info = env.reset(seed=0)
        >>> env.step("open   door")[:3]
        ('Goal: Boil water.\\nAction: open door\\nObservation: Open.', 0.0, False)
        >>> obs, r, term, trunc, info = env.step("go to kitchen")
        >>> round(r, 4), term, info["complete"]  # 0.7 · 2/2 + 0.3 · (1 + 0.5 · 1)
        (1.15, True, True)
    """

    metadata = {"render_modes": ["ansi"]}  # noqa: RUF012 - gymnasium declares it an instance attribute

    def __init__(
        self,
        corpus: Any = None,
        tree: Any = None,
        instances: Sequence[NodeInstance] | str | os.PathLike[str] | None = None,
        *,
        kind: str = "node",
        domain: str | None = None,
        alpha: float = ALPHA,
        gamma: float = GAMMA,
        reward: str = "hier",
        order: str = "random",
        obs_mode: str = "full",
        seed: int = 0,
        render_mode: str | None = None,
    ) -> None:
        if kind not in KINDS:
            raise EnvConfigError(f"kind={kind!r}", fix=f"use one of {list(KINDS)}")
        if order not in ("random", "sequential"):
            raise EnvConfigError(f"order={order!r}", fix="use 'random' or 'sequential'")
        if obs_mode not in ("full", "last"):
            raise EnvConfigError(f"obs_mode={obs_mode!r}", fix="use 'full' or 'last'")
        if not 0.0 <= alpha <= 1.0:
            raise EnvConfigError(f"alpha={alpha!r}", fix="use a weight in [0, 1] (0.3 in the paper)")
        if reward not in NODE_REWARDS:
            raise EnvConfigError(f"reward={reward!r}", fix=f"use one of {list(NODE_REWARDS)}")
        self.reward_mode = reward
        self.instances = _load_instances(corpus, tree, instances, kind, domain, seed)
        if not self.instances:
            raise EnvConfigError(
                "no node instances", fix="check the corpus and tree (does the tree tile it?)"
            )
        self._by_id = {inst.id: i for i, inst in enumerate(self.instances)}  # instance id -> index
        self._canon = get_canonicalizer(domain) if domain else None
        self.alpha, self.gamma = alpha, gamma
        self.order, self.obs_mode, self.render_mode = order, obs_mode, render_mode
        self.observation_space = _TEXT
        self.action_space = _TEXT
        self._next = 0
        self.instance: NodeInstance | None = None
        self._actions: list[str] = []
        self._done = True

    def _pick(self, options: dict[str, Any]) -> int:
        if "index" in options:
            i = int(options["index"])
            if not 0 <= i < len(self.instances):
                raise EnvConfigError(f"index {i} is out of range", fix=f"use 0..{len(self.instances) - 1}")
            return i
        if "instance" in options:
            try:
                return self._by_id[options["instance"]]
            except KeyError:
                raise EnvConfigError(
                    f"no instance {options['instance']!r}", fix="use an id from env.instances"
                ) from None
        if self.order == "sequential":
            i, self._next = self._next, (self._next + 1) % len(self.instances)
            return i
        return int(self.np_random.integers(len(self.instances)))

    def _info(self) -> dict[str, Any]:
        inst = self.instance
        assert inst is not None
        matched = sum(1 for _ in self._matched_iter())
        return {
            "instance": inst.id,
            "node": inst.node,
            "depth": inst.depth,
            "length": inst.length,
            "task": inst.task,
            "matched": matched,
            "complete": matched == inst.length,
        }

    def _matched_iter(self) -> Any:
        inst = self.instance
        assert inst is not None
        for a, g in zip(self._actions, inst.gold):
            if normalize_action(a) != normalize_action(g["action"]):
                return
            yield a

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        self.instance = self.instances[self._pick(dict(options or {}))]
        self._actions = []
        self._done = False
        first = (
            render_history(self.instance)
            if self.obs_mode == "full"
            else _current_observation(self.instance, 0)
        )
        return first, self._info()

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if self._done or self.instance is None:
            raise EnvConfigError("step() after the episode ended", fix="call env.reset()")
        inst = self.instance
        j = len(self._actions)
        gold = inst.gold[j]
        self._actions.append(str(action))
        ok = normalize_action(str(action)) == normalize_action(gold["action"])
        if ok and gold.get("token"):
            xtree: dict[str, Any] = {"token": gold["token"], "raw": str(action)}
        else:
            ca = self._canon(str(action)) if self._canon else catch_all(normalize_action(str(action)))
            xtree = ca.to_info()
        terminated = not ok or j + 1 == inst.length
        reward = 0.0
        if terminated:
            self._done = True
            reward = node_reward(
                self._actions, inst.gold_actions, inst.depth, self.reward_mode, self.alpha, self.gamma
            )
        shown = j + 1 if ok else j  # gold steps whose observation the policy has seen
        obs = render_history(inst, shown) if self.obs_mode == "full" else _current_observation(inst, shown)
        info = self._info()
        info["xtree"] = xtree
        info["match"] = ok
        info["won"] = bool(terminated and info["complete"])  # a rollout "wins" when it completed the node
        if terminated:
            info["gold_action"] = gold["action"]
        return obs, reward, terminated, False, info

    def render(self) -> str | None:
        if self.instance is None:
            return None
        return render_history(self.instance, len(list(self._matched_iter())))
