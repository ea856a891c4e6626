"""Issue 34's tree-derived bonus designs: contrastive node values, once per episode, potential-based shaping.

Every number is computed by hand from a four-episode corpus over the tree S0 = a b, S1 = S0 c, S2 = S1 S0.
"""

from __future__ import annotations

import pytest

from xtree_gym.corpus import Step, Trajectory
from xtree_gym.errors import ConfigError
from xtree_gym.mining import mine
from xtree_gym.mining.config import MinerConfig
from xtree_gym.rewards import sequence_bonus
from xtree_gym.rewards.contrastive import (
    NodeValueBonus,
    completed_nodes,
    contrastive_values,
    corpus_values,
    potential,
    potential_return,
    potential_shaping,
    separation,
)
from xtree_gym.rewards.modes import BONUS_MODES, CONTRASTIVE_MODES, shaped_group_rewards

EPISODES = [("abcab", True), ("abczz", True), ("abzzz", False), ("abzab", False)]


@pytest.fixture(scope="module")
def tree():
    trajs = [Trajectory(str(i), [Step(t, token=t) for t in "abcab"], True) for i in range(6)]
    t = mine(trajs, MinerConfig(min_freq=3, eta=0.5, cap=5))
    assert [n.expansion for n in t.nodes] == [("a", "b"), ("a", "b", "c"), ("a", "b", "c", "a", "b")]
    return t


def test_contrastive_values_by_hand(tree) -> None:
    # S0 completes in all 4 episodes: separates nothing -> 0. S1 (abc) in both successes only: 1 − 0 = 1.
    # S2 (abcab) in episode 0 only: 1 − 1/3 = 2/3. Normalised by the largest (1).
    got = contrastive_values(tree, [(list(s), ok) for s, ok in EPISODES])
    assert got == pytest.approx({"S0": 0.0, "S1": 1.0, "S2": 2 / 3})
    assert len(got) == len(tree) == 3
    # a node more frequent in failures is clipped at 0; normalisation by the largest remaining
    flipped = contrastive_values(tree, [(list(s), not ok) for s, ok in EPISODES])
    assert flipped == {"S0": 0.0, "S1": 0.0, "S2": 0.0}
    trajs = [Trajectory(str(i), [Step(t, token=t) for t in s], ok) for i, (s, ok) in enumerate(EPISODES)]
    assert corpus_values(tree, trajs) == got


def test_separation_and_errors(tree) -> None:
    assert separation([True, False, False, True], [True, False, True, False]) == pytest.approx(0.0)
    assert separation([False, False], [True, False]) == 0.0  # never completed
    with pytest.raises(ConfigError, match="completion flags"):
        separation([True], [True, False])
    with pytest.raises(ConfigError, match="no episodes"):
        contrastive_values(tree, [])


def test_once_per_episode_a_looped_node_pays_once(tree) -> None:
    """EpisodeBonus pays a node at its first completion only: looping S0 (a b) ten times pays once."""
    values = NodeValueBonus({"S0": 0.25, "S1": 1.0, "S2": 0.5})
    loop = list("ab" * 10)
    res = sequence_bonus(tree, loop, values, nesting=True)
    assert res.total == 0.25 and res.matched == {"S0": 0.25}
    assert res.per_step.count(0.25) == 1 and len(res.per_step) == 20
    assert completed_nodes(tree, loop) == {"S0"}
    # abcab: S0 0.25 at step 2; S1 1.0 − 0.25 nested inside = 0.75 at step 3; S2 0.5 − 1.0 -> 0; S0 again: 0
    full = sequence_bonus(tree, list("abcab"), values, nesting=True)
    assert full.per_step == [0.0, 0.25, 0.75, 0.0, 0.0] and full.total == 1.0 <= values.total() == 1.75


def test_potential_shaping_telescopes(tree) -> None:
    values = NodeValueBonus(contrastive_values(tree, [(list(s), ok) for s, ok in EPISODES]))
    b_max = values.total()  # 1 + 2/3
    toks = list("abczz")
    res = sequence_bonus(tree, toks, values, nesting=True)  # S1 at step 3 pays 1
    phis = [0.0] + [potential(sum(res.per_step[: t + 1]), b_max, 0.09) for t in range(len(toks))]
    assert phis[3] == pytest.approx(0.09 / b_max) and phis[2] == 0.0
    for terminated in (False, True):
        f = potential_shaping(phis, terminated)
        assert len(f) == len(toks)
        assert sum(f) == pytest.approx(potential_return(phis[-1], len(toks), terminated))
    assert potential_return(phis[-1], 5, terminated=True) == 0.0
    # discounted: Σ γ^t F_t = γ^T Φ_T − Φ_0
    g = 0.9
    f = potential_shaping(phis, False, g)
    assert sum(g**t * x for t, x in enumerate(f)) == pytest.approx(potential_return(phis[-1], 5, False, g))


def test_modes_by_hand() -> None:
    assert set(CONTRASTIVE_MODES) <= set(BONUS_MODES) and BONUS_MODES[0] == "eq3"
    # potential: a truncated failure earns margin · B/B_max; a terminated episode earns nothing more
    r, lam = shaped_group_rewards(
        [0.9, 0.0, 0.0], [2.0, 1.0, 4.0], [True, False, False], mode="potential", max_bonus=2.0, margin=0.08,
        terminated=[True, False, True],
    )  # fmt: skip
    assert r == pytest.approx([0.9, 0.04, 0.0]) and lam == 1.0
    # the same group under contrastive_normalized: λ_g at w_g 1/3 (w_ref 0.4) = 0.75 · (1 − 5/6), scale / λ0
    r, lam = shaped_group_rewards(
        [0.9, 0.0, 0.0], [2.0, 1.0, 4.0], [True, False, False], mode="contrastive_normalized", max_bonus=2.0,
        margin=0.08, w_ref=0.4,
    )  # fmt: skip
    assert lam == pytest.approx(0.125) and r == pytest.approx([0.9 + 0.08 / 6, 0.04 / 6, 0.08 / 6])
    assert shaped_group_rewards([0, 0], [1.0, 0.0], [False, False], mode="contrastive_gated") == (
        [0.75, 0.0],
        0.75,
    )
    assert shaped_group_rewards([1, 0], [1.0, 3.0], [True, False], mode="contrastive_gated") == (
        [1.0, 0.0],
        0.0,
    )
    with pytest.raises(ConfigError, match="terminated flags"):
        shaped_group_rewards([0, 0], [1.0, 0.0], [False, False], mode="potential", terminated=[True])


def test_xtree_bonus_node_values_and_potential_weight(tree) -> None:
    """The wrapper pays the table once per node and adds F = γΦ(s') − Φ(s); its episode sum telescopes."""
    import gymnasium as gym

    from xtree_gym.wrappers.reward import XTreeBonus

    class Echo(gym.Env):
        observation_space = action_space = gym.spaces.Text(8)

        def reset(self, *, seed=None, options=None):
            self.t = 0
            return "", {}

        def step(self, action):
            self.t += 1
            done = action == "!"
            return "", float(done), done, False, {"xtree": {"token": action}}

    values = {"S0": 0.25, "S1": 1.0, "S2": 0.5}  # B_max 1.75
    env = XTreeBonus(Echo(), tree, node_values=values, weight="potential", potential_margin=0.07)
    env.reset()
    steps = [env.step(a) for a in "abcab"]
    assert [s[4]["xtree"]["bonus"] for s in steps] == [0.0, 0.25, 0.75, 0.0, 0.0]  # nesting: S1 1 − 0.25
    shaping = [s[4]["xtree"]["shaping"] for s in steps]
    assert shaping == pytest.approx([0.0, 0.01, 0.03, 0.0, 0.0])  # Φ: 0.07·0.25/1.75, then 0.07·1/1.75
    assert sum(s[1] for s in steps) == pytest.approx(0.04)  # truncated here: Φ(s_T) = 0.04
    last = env.step("!")  # terminates: Φ -> 0, F = −0.04; the win's 1.0 is the whole return
    assert last[4]["xtree"]["shaping"] == pytest.approx(-0.04) and last[1] == pytest.approx(0.96)
    with pytest.raises(ConfigError, match="potential_margin"):
        XTreeBonus(Echo(), tree, weight="potential", potential_margin=0.0)


def test_rlvr_contrastive_mode_needs_the_corpus() -> None:
    from xtree_gym.agents.grpo.config import GRPOConfig, check_config

    cfg = GRPOConfig(shaping="xtree", tree="t.json", bonus_mode="potential")
    with pytest.raises(ConfigError, match="--tree-corpus"):
        check_config(cfg)


def test_xtree_bonus_auto_pays_contrastive_values_given_a_labelled_corpus(tmp_path) -> None:
    """``tree_corpus`` with successes and failures: each node pays its contrastive value and the wrapper says
    ``contrastive_gated``; successes only: the depth design and ``eq3`` (the values would all be 0)."""
    import gymnasium as gym

    from xtree_gym.corpus import write_corpus
    from xtree_gym.rewards.contrastive import corpus_values
    from xtree_gym.wrappers.reward import XTreeBonus

    class Echo(gym.Env):
        observation_space = action_space = gym.spaces.Text(8)

        def reset(self, *, seed=None, options=None):
            return "", {}

        def step(self, action):
            return "", 0.0, False, False, {"xtree": {"token": action}}

    trajs = [Trajectory(str(i), [Step(t, token=t) for t in "abcab"], True) for i in range(6)]
    tree = mine(trajs, MinerConfig(min_freq=3, eta=0.5, cap=5))
    labelled = [*trajs[:2], Trajectory("f0", [Step(t, token=t) for t in "abzzz"], False)]
    write_corpus(tmp_path / "c.jsonl", labelled)
    values = corpus_values(tree, labelled)
    assert values == {"S0": 0.0, "S1": 1.0, "S2": 1.0}  # S0 = a b is in the failure too
    for source in (tmp_path / "c.jsonl", labelled):
        env = XTreeBonus(Echo(), tree, tree_corpus=source)
        env.reset()
        paid = [env.step(a)[4]["xtree"]["bonus"] for a in "abcab"]
        assert env.bonus_mode == "contrastive_gated"
        # S1 pays its value 1; S2 (also worth 1) nests S1, so it pays 1 − 1 (the nesting rule)
        assert paid == [0.0, 0.0, 1.0, 0.0, 0.0]
    plain = XTreeBonus(Echo(), tree, tree_corpus=trajs)
    plain.reset()
    assert plain.bonus_mode == "eq3" and sum(plain.step(a)[4]["xtree"]["bonus"] for a in "abcab") == 2.5
