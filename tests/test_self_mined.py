"""A signal the agent mines for itself: the tree and its values from the run's own episodes only.

``self_mine`` is the one rule (``xtree train rlvr --remine-every K`` without ``--tree``, ``XTreeBonus.self_mine``
with a rollout buffer, the claim check's ``self_mined`` arm): mine a tree from the buffer, value it on the
same buffer, and pick the mode by what the buffer holds (both labels ``contrastive_gated``, successes only
``eq3``, no success ``none``).
"""

from __future__ import annotations

import gymnasium as gym
import pytest

from xtree_gym import MinerConfig, Step, Trajectory
from xtree_gym.agents.grpo.config import GRPOConfig
from xtree_gym.agents.grpo.remine import NO_BONUS, RolloutBuffer, mined_state, self_mine
from xtree_gym.agents.types import Episode, Turn
from xtree_gym.errors import ConfigError
from xtree_gym.wrappers.reward import XTreeBonus

WIN = ["search<query>", "click<item>", "click<option-size>", "click<buy>"]
LOSE = ["search<query>", "click<item>", "click<back>", "search<query>"]
CONFIG = MinerConfig(min_freq=3, eta=0.5, cap=6)


def _trajs(wins: int, losses: int) -> list[Trajectory]:
    chains = [(WIN, True)] * wins + [(LOSE, False)] * losses
    return [Trajectory(str(i), [Step(t, token=t) for t in toks], ok) for i, (toks, ok) in enumerate(chains)]


def _episode(i: int, tokens: list[str], won: bool) -> Episode:
    turns = [Turn([], [], [], t, t, "", token=t) for t in tokens]
    return Episode(str(i), "webshop", "t", "g", 0, 0, 0, turns=turns, success=won, reward=float(won))


@pytest.mark.parametrize(
    ("wins", "losses", "mode"), [(4, 4, "contrastive_gated"), (6, 0, "eq3"), (0, 6, NO_BONUS)]
)
def test_the_mode_follows_what_the_buffer_holds(wins: int, losses: int, mode: str) -> None:
    got = self_mine(_trajs(wins, losses), CONFIG)
    assert (got.mode, got.successes, got.failures) == (mode, wins, losses)
    assert got.tree.corpus["n_trajectories"] == wins + losses and got.tree.corpus["n_successful"] == wins
    assert len(got.tree) > 0  # a tree is mined in every case; only how it is paid changes
    if mode == "contrastive_gated":  # the nodes holding the buy separate; the shared prefix does not
        assert got.values is not None and len(got.values) == len(got.tree)
        assert max(got.values.values()) == 1.0 and min(got.values.values()) == 0.0
    else:
        assert got.values is None
    assert mined_state(got.tree)[0] == mode  # the tree file says how it is paid (a resumed run reads it)
    assert self_mine(_trajs(0, 6), CONFIG, mode="potential").mode == "potential"  # an explicit mode is kept


def test_remine_every_alone_is_a_self_mined_run() -> None:
    cfg = GRPOConfig(shaping="xtree", remine_every=2).resolved()  # no --tree, no --miner: allowed now
    assert cfg.tree is None and cfg.bonus_mode == "auto"
    GRPOConfig(
        shaping="xtree", remine_every=2, bonus_mode="contrastive_normalized"
    ).resolved()  # valued on the buffer
    with pytest.raises(ConfigError, match="needs a tree"):
        GRPOConfig(shaping="xtree").resolved()  # no tree and nothing to mine one from
    with pytest.raises(ConfigError, match="separates the tree's successes"):  # a given tree needs its corpus
        GRPOConfig(shaping="xtree", tree="t.json", bonus_mode="potential").resolved()


class _Echo(gym.Env):
    """Reports each action as its token; wins on ``click<buy>``."""

    observation_space = action_space = gym.spaces.Text(32)

    def reset(self, *, seed=None, options=None):
        return "", {}

    def step(self, action):
        won = action == "click<buy>"
        return "", float(won), won, False, {"xtree": {"token": action}}


def _play(env: XTreeBonus, tokens: list[str]) -> float:
    env.reset()
    return float(sum(env.step(t)[4]["xtree"]["bonus"] for t in tokens))


def test_xtree_bonus_mines_its_tree_from_a_rollout_buffer() -> None:
    env = XTreeBonus(_Echo(), None)  # no tree yet: nothing is paid
    assert len(env.tree) == 0 and _play(env, WIN) == 0.0
    buf = RolloutBuffer(8)
    buf.add(_episode(i, LOSE, False) for i in range(10))  # the FIFO keeps the last 8: failures only
    got = env.self_mine(buf, CONFIG)
    assert (got.mode, env.bonus_mode, got.failures) == (NO_BONUS, NO_BONUS, 8) and len(env.tree) > 0
    assert _play(env, LOSE) == 0.0  # no success in the window: a bonus would pay the failing habit
    buf.add(_episode(10 + i, WIN, True) for i in range(4))  # now 4 wins and 4 failures
    got = env.self_mine(buf, CONFIG)
    assert (env.bonus_mode, got.successes, got.failures) == ("contrastive_gated", 4, 4)
    assert env.tree.corpus["n_trajectories"] == len(buf) == 8
    assert _play(env, WIN) == pytest.approx(1.0)  # the separating family, its largest member once
    assert _play(env, LOSE) == 0.0  # the shared prefix separates nothing


def test_miner_overrides_are_checked_with_the_config() -> None:
    cfg = GRPOConfig(shaping="xtree", remine_every=1, miner="webshop:min_freq=1").resolved()
    assert cfg.miner == "webshop:min_freq=1"
    for bad, why in [
        ("webshop:min_freq=0", "min_freq = 0"),
        ("webshop:min_frq=1", "min_frq"),
        ("nope", "preset"),
    ]:
        with pytest.raises(ConfigError, match=why):
            GRPOConfig(shaping="xtree", remine_every=1, miner=bad).resolved()
