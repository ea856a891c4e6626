"""Discrete-action envs get X-Tree tokens: the ``discrete``/``minigrid`` domains and the DiscreteTokens wrapper.

Live MiniGrid envs throughout (real components); CartPole stands for "any other discrete env".
"""

from __future__ import annotations

import gymnasium as gym
import pytest

minigrid = pytest.importorskip("minigrid")

from experiments.minigrid_claim.solver import solver_action  # noqa: E402
from xtree_gym.canon import canonicalize, get_canonicalizer  # noqa: E402
from xtree_gym.corpus import Step, Trajectory  # noqa: E402
from xtree_gym.errors import EnvConfigError  # noqa: E402
from xtree_gym.mining import mine, trajectory_tokens  # noqa: E402
from xtree_gym.mining.config import MinerConfig  # noqa: E402
from xtree_gym.rewards import sequence_bonus  # noqa: E402
from xtree_gym.wrappers.discrete import DiscreteTokens, discrete_action_names, xtree_discrete  # noqa: E402


def _solve(env: gym.Env, seed: int) -> tuple[list[dict], float, list]:
    env.reset(seed=seed)
    xs, fronts = [], []
    while True:
        u = env.unwrapped
        cell = u.grid.get(*u.front_pos)
        fronts.append(None if cell is None else cell.type)
        _, r, term, trunc, info = env.step(solver_action(env))
        xs.append(info["xtree"])
        if term or trunc:
            return xs, float(r), fronts


def test_minigrid_tokens_name_the_front_cell_before_the_action() -> None:
    env = DiscreteTokens(gym.make("MiniGrid-DoorKey-5x5-v0"))
    xs, reward, fronts = _solve(env, seed=3)
    assert reward > 0
    toks = [x["token"] for x in xs]
    # the solver's plan, in order: take the key, open the door, walk onto the goal
    i, j, k = toks.index("pickup<key>"), toks.index("toggle<door>"), toks.index("forward<goal>")
    assert i < j < k == len(toks) - 1
    for x, front in zip(xs, fronts):
        assert x["role"] == (front or "empty")
        assert (
            x["raw"]
            == ("left", "right", "forward", "pickup", "drop", "toggle", "done")[x["slots"]["action_index"]]
        )
    assert xs[j]["slots"]["state"] == "locked" and xs[j]["slots"]["carrying"] == "key"


def test_minigrid_context_forms() -> None:
    c = get_canonicalizer("minigrid")
    assert c("pickup", {"front": {"type": "key", "color": "red"}}).slots["color"] == "red"
    assert c("5", {"role": "door"}).token == "toggle<door>"
    assert c("forward", {"front": None}).token == "forward<empty>"
    assert c("forward").token == "forward<unknown>"
    assert canonicalize("babyai", "left", {"front": "wall"}).token == "left<wall>"
    assert c("9", {"front": None}).token == "a9<empty>"  # out of range: named by index, never an error


def test_discrete_domain_any_env() -> None:
    env = DiscreteTokens(gym.make("CartPole-v1"))
    assert discrete_action_names(env) == ["a0", "a1"] and env.domain == "discrete"
    env.reset(seed=0)
    assert env.step(1)[4]["xtree"]["token"] == "a1<none>"
    named = DiscreteTokens(
        gym.make("CartPole-v1"), action_names=["push left", "push right"], role_fn=lambda e: "cart"
    )
    named.reset(seed=0)
    x = named.step(0)[4]["xtree"]
    assert x["token"] == "push_left<cart>" and x["slots"]["action_index"] == 0
    assert (
        canonicalize("discrete", "2", {"action_names": ["a", "b", "Jump!"], "role": "Ledge"}).token
        == "jump<ledge>"
    )


def test_bad_actions_and_spaces_are_clear_errors() -> None:
    env = DiscreteTokens(gym.make("MiniGrid-Empty-5x5-v0"))
    env.reset(seed=0)
    with pytest.raises(EnvConfigError, match="not one of the 7 discrete actions"):
        env.step(7)
    with pytest.raises(EnvConfigError, match="not Discrete"):
        DiscreteTokens(gym.make("Pendulum-v1"))


def test_stored_corpus_canonicalizes_like_the_live_env() -> None:
    """A corpus that kept the front cell (not the token) gives the live env's tokens."""
    env = DiscreteTokens(gym.make("MiniGrid-DoorKey-5x5-v0"))
    xs, _, _ = _solve(env, seed=5)
    steps = [Step(x["raw"], extra={"front": {k: x["slots"][k] for k in ("color", "state") if k in x["slots"]} | {"type": x["role"]}}) for x in xs]  # fmt: skip
    traj = Trajectory("t", steps, True, env="minigrid")
    assert trajectory_tokens([traj], domain="minigrid") == [[x["token"] for x in xs]]


def test_bonus_on_a_discrete_env_equals_the_offline_sum() -> None:
    """xtree_discrete = tokens + XTreeBonus: the live ledger pays what sequence_bonus pays offline."""
    tok_env = DiscreteTokens(gym.make("MiniGrid-DoorKey-5x5-v0"))
    corpus = []
    for s in range(12):
        xs, r, _ = _solve(tok_env, seed=100 + s)
        corpus.append(Trajectory(str(s), [Step(x["raw"], token=x["token"]) for x in xs], r > 0))
    tree = mine(corpus, MinerConfig(cap=6, min_freq=3))
    assert len(tree) > 0
    env = xtree_discrete(gym.make("MiniGrid-DoorKey-5x5-v0"), tree, weight="record")
    for seed in (7, 8):
        env.reset(seed=seed)
        toks, total = [], None
        while total is None:
            _, _, term, trunc, info = env.step(solver_action(env))
            toks.append(info["xtree"]["token"])
            if term or trunc:
                total = info["xtree"]["episode_bonus"]
        assert total == pytest.approx(sequence_bonus(tree, toks).total)
        assert total > 0  # the solver's episodes execute mined nodes
    with pytest.raises(EnvConfigError, match="without a tree"):
        xtree_discrete(gym.make("MiniGrid-Empty-5x5-v0"), weight="record")
