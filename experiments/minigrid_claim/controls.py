"""The controls: a random tree per seed, subgoal shaping, held-out layouts.

* :func:`exact_random_tree`: the X-Tree's node count and length histogram exactly, every merge a
  uniform draw among the corpus's candidate pairs of a still-wanted length (no success filter:
  the miner config's ``min_succ`` is 0); a draw that runs out of pairs is thrown away and redrawn.
* :func:`subgoal_bonus`: the env's hand-named subgoals (``pickup<key>``, ``toggle<door>``), each paid
  once per episode, each worth half what a demonstration success earns from the X-Tree (same scale).
* :func:`layout_split`: layouts (grid + agent pose) split by a hash; training seeds come from one
  side, evaluation seeds from the other, and the two sets of layouts are checked disjoint.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from xtree_gym.corpus import Trajectory
from xtree_gym.errors import ConfigError
from xtree_gym.mining.config import MinerConfig
from xtree_gym.mining.tree import XTree
from xtree_gym.rewards import sequence_bonus
from xtree_gym.rewards.instances import random_tree


def length_histogram(tree: XTree) -> dict[int, int]:
    """Node count per node length (primitives)."""
    return dict(sorted(Counter(n.length for n in tree.nodes).items()))


def exact_random_tree(
    corpus: Sequence[Trajectory], tree: XTree, miner: MinerConfig, seed: int, tries: int
) -> XTree:
    """A random tree with ``tree``'s node count and length histogram exactly (draws ``seed·10⁴ + k``)."""
    lengths = [n.length for n in tree.nodes]
    for k in range(tries):
        try:
            cand = random_tree(corpus, len(tree), miner, seed=seed * 10_000 + k, name=f"random-tree-s{seed}",
                               lengths=lengths, exact=True)  # fmt: skip
        except ConfigError:
            continue
        if len(cand) == len(tree) and length_histogram(cand) == length_histogram(tree):
            cand.extra["control"]["tries"] = k + 1
            return cand
    raise ConfigError(
        f"no random tree matched the X-Tree's length histogram in {tries} draws (seed {seed})",
        fix="raise random_tree_draws",
    )


def subgoal_bonus(tokens: Iterable[str], value: float, subgoals: Sequence[str]) -> float:
    """``value`` per distinct subgoal token the episode holds.

    Example:
        >>> subgoal_bonus(["left<wall>", "pickup<key>", "pickup<key>", "toggle<door>"], 2.0, ("pickup<key>", "toggle<door>"))
        4.0
        >>> subgoal_bonus(["toggle<wall>"], 2.0, ("pickup<key>", "toggle<door>"))
        0.0
    """
    seen = set(tokens)
    return value * sum(s in seen for s in subgoals)


def subgoal_value(corpus: Sequence[Trajectory], tree: XTree, n_subgoals: int) -> float:
    """Per-subgoal value: the X-Tree's mean Σ b_v over the corpus's successes, split over the subgoals."""
    wins = [t for t in corpus if t.success]
    if not wins or n_subgoals < 1:
        return 0.0
    total = sum(sequence_bonus(tree, [s.token or s.action for s in t.steps]).total for t in wins)
    return total / len(wins) / n_subgoals


def layout_key(env: Any) -> str:
    """A digest of a reset env's layout: the encoded grid, the agent's cell and direction."""
    u = env.unwrapped
    raw = u.grid.encode().tobytes() + bytes([int(u.agent_pos[0]), int(u.agent_pos[1]), int(u.agent_dir)])
    return hashlib.sha1(raw).hexdigest()


def eval_side(key: str) -> bool:
    """A layout goes to evaluation when its digest is 0 mod 4 (a quarter of layouts)."""
    return int(key[:8], 16) % 4 == 0


def layout_split(env_id: str, max_steps: int, train_pool: int, eval_episodes: int) -> dict[str, Any]:
    """Training seeds in ``[0, train_pool)`` on the training side, ``eval_episodes`` seeds from 20000 on
    the evaluation side, the distinct layout counts, and the overlap (0 by construction, checked)."""
    import gymnasium as gym

    env = gym.make(env_id, max_steps=max_steps, disable_env_checker=True)
    train: list[int] = []
    train_keys: set[str] = set()
    for s in range(train_pool):
        env.reset(seed=s)
        key = layout_key(env)
        if not eval_side(key):
            train.append(s)
            train_keys.add(key)
    evals: list[int] = []
    eval_keys: set[str] = set()
    s = 20_000
    while len(evals) < eval_episodes and s < 20_000 + 200 * eval_episodes:
        env.reset(seed=s)
        key = layout_key(env)
        if eval_side(key):
            evals.append(s)
            eval_keys.add(key)
        s += 1
    env.close()
    overlap = len(train_keys & eval_keys)
    if overlap or len(evals) < eval_episodes or not train:
        raise ConfigError(f"layout split failed: {overlap} shared layouts, {len(evals)} eval seeds",
                          fix="use heldout seeds for this env")  # fmt: skip
    return {"train_seeds": train, "eval_seeds": evals, "train_layouts": len(train_keys),
            "eval_layouts": len(eval_keys), "shared_layouts": overlap}  # fmt: skip
