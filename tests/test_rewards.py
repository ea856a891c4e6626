"""Pure reward functions: Eq. 2, Eq. 3, λ_g, the nesting rule, b_v designs, trainer adapters."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xtree_gym.corpus import Step, Trajectory
from xtree_gym.errors import ConfigError
from xtree_gym.mining import mine
from xtree_gym.mining.config import MinerConfig
from xtree_gym.rewards import (
    BonusContext,
    DepthBonus,
    EpisodeBonus,
    RunningWinRate,
    WebShopBonus,
    XTreeRewardFunction,
    goal_steps,
    group_rewards,
    grouped_rewards,
    lambda_g,
    matched_steps,
    node_completion_reward,
    normalize_action,
    resolve_bonus,
    sequence_bonus,
    verl_agent_rewards,
)


@pytest.fixture(scope="module")
def abc_tree():
    """S0 = a b (depth 1, b 1.5), S1 = S0 c (depth 2, b 2.0), S2 = S1 S0 (depth 3, b 2.5)."""
    trajs = [Trajectory(str(i), [Step(t, token=t) for t in "abcab"], True) for i in range(6)]
    tree = mine(trajs, MinerConfig(min_freq=3, eta=0.5, cap=5))
    assert [(n.id, n.expansion, n.depth) for n in tree] == [
        ("S0", ("a", "b"), 1),
        ("S1", ("a", "b", "c"), 2),
        ("S2", ("a", "b", "c", "a", "b"), 3),
    ]
    return tree


# ----------------------------------------------------------------------------- Eq. 2


@pytest.mark.parametrize(
    ("actions", "depth", "expected"),
    [
        (["f1", "f2", "apply"], 2, 0.7 + 0.3 * 2.0),  # every step matched: completion bonus x (1 + 0.5 * 2)
        (["f1", "apply", "f2"], 2, 0.7 / 3),  # tau_1 of Figure 2a: stops at step 2, 1/3 matching, no bonus
        (["x"], 2, 0.0),
        ([], 1, 0.0),
        (["f1", "f2"], 3, 0.7 * 2 / 3),  # rollout ended early: not complete
        (["f1", "f2", "apply", "extra"], 0, 0.7 + 0.3),  # steps past l_v are never read
    ],
)
def test_node_completion_reward_hand_values(actions, depth, expected):
    assert node_completion_reward(actions, ["f1", "f2", "apply"], depth) == pytest.approx(expected)


def test_node_completion_reward_alpha_gamma_and_errors():
    assert node_completion_reward(["a", "b"], ["a", "b"], 4, alpha=0.5, gamma=1.0) == pytest.approx(
        0.5 + 0.5 * 5
    )
    assert node_completion_reward(["a", "x"], ["a", "b"], 4, alpha=1.0) == 0.0
    with pytest.raises(ConfigError, match="no steps"):
        node_completion_reward(["a"], [], 1)
    with pytest.raises(ConfigError, match="alpha"):
        node_completion_reward(["a"], ["a"], 1, alpha=1.5)


def test_action_normalization_excludes_thought_and_whitespace():
    assert normalize_action("Thought: go\nAction:   click  [12] ") == "click [12]"
    assert (
        matched_steps(["Thought: hm. Action: open door", "go  to\tkitchen"], ["open door", "go to kitchen"])
        == 2
    )
    assert matched_steps(["Open door"], ["open door"]) == 0  # case matters: the same action and element


# ----------------------------------------------------------------------------- Eq. 3


@pytest.mark.parametrize(
    ("w_ref", "win_rate", "expected"),
    [
        (0.4, 0.0, 0.75),
        (0.4, 0.2, 0.375),
        (0.4, 0.4, 0.0),
        (0.4, 0.9, 0.0),
        (0.85, 0.425, 0.375),
        (0.85, 0.85, 0.0),
    ],
)
def test_lambda_g_at_zero_half_and_past_w_ref(w_ref, win_rate, expected):
    assert lambda_g(win_rate, 0.75, w_ref) == pytest.approx(expected)


def test_lambda_g_rejects_bad_w_ref():
    with pytest.raises(ConfigError, match="w_ref"):
        lambda_g(0.1, 0.75, 0.0)


def test_all_fail_group_the_bonus_alone_separates():
    outcomes = [0.0, 0.0, 0.0, 0.0]
    bonuses = [4.0, 1.5, 0.0, 2.5]
    r = group_rewards(outcomes, bonuses, [False] * 4, 0.75, 0.4)
    assert r == pytest.approx([3.0, 1.125, 0.0, 1.875])
    # the outcome terms cancel: every in-group difference is λ0 times the bonus difference
    assert r[0] - r[1] == pytest.approx(0.75 * (4.0 - 1.5))


def test_group_rewards_partial_and_full_win_rate():
    # w_g = 1/4 with w_ref = 0.4: λ = 0.75 * (1 - 0.625) = 0.28125
    r = group_rewards([1.0, 0.0, 0.0, 0.0], [2.0, 2.0, 0.0, 4.0], [True, False, False, False], 0.75, 0.4)
    assert r == pytest.approx([1.5625, 0.5625, 0.0, 1.125])
    # w_g = 1/2 >= w_ref: the bonus is absent, rewards are the verifier's
    assert group_rewards([1.0, 0.0], [5.0, 3.0], [True, False], 0.75, 0.4) == [1.0, 0.0]
    # won defaults to outcome >= win_threshold
    assert group_rewards([1.0, 0.3], [0.0, 2.0], w_ref=0.85) == pytest.approx(
        [1.0, 0.3 + 0.75 * (1 - 0.5 / 0.85) * 2]
    )
    assert group_rewards([], []) == []
    with pytest.raises(ConfigError, match="group sizes differ"):
        group_rewards([0.0, 1.0], [1.0])


def test_grouped_rewards_weights_each_group_by_its_own_win_rate():
    r, lam = grouped_rewards([0, 0, 1, 1], [2.0, 1.0, 2.0, 0.0], ["u1", "u1", "u2", "u2"], w_ref=0.4)
    assert lam == {"u1": 0.75, "u2": 0.0}
    assert r == pytest.approx([1.5, 0.75, 1.0, 1.0])


def test_running_win_rate_window_and_weight():
    w = RunningWinRate(window=2)
    assert w.weight("t") == 0.75  # no evidence yet: full weight
    w.update("t", True)
    assert w.rate("t") == 1.0
    w.update("t", False)
    w.update("t", False)  # the first win left the window
    assert w.rate("t") == 0.0
    w.update("t", True)
    assert w.weight("t", 0.75, 0.85) == pytest.approx(0.75 * (1 - 0.5 / 0.85))
    with pytest.raises(ConfigError):
        RunningWinRate(window=0)


# ----------------------------------------------------------------------------- nesting rule


def test_nesting_chain_earns_its_largest_member():
    led = EpisodeBonus(nesting=True)
    paid = [led.grant("A", 2, 4, 1.5), led.grant("B", 1, 4, 2.0), led.grant("C", 0, 6, 2.5)]
    assert paid == [1.5, 0.5, 0.5] and led.total == 2.5


def test_nesting_outer_smaller_than_inner_earns_nothing_but_keeps_the_credit():
    led = EpisodeBonus(nesting=True)
    assert led.grant("Inner", 1, 3, 3.0) == 3.0
    assert led.grant("Outer", 0, 4, 2.0) == 0.0  # never below 0
    assert led.grant("Top", 0, 6, 4.0) == 1.0  # 4 - max(3, credited 3) -> the family is worth 4
    assert led.total == 4.0


def test_nesting_siblings_and_overlaps():
    led = EpisodeBonus(nesting=True)
    # two disjoint children inside one parent: the parent pays b minus the LARGEST inside, not the sum
    assert [led.grant("A", 0, 2, 1.5), led.grant("B", 2, 4, 1.5), led.grant("C", 0, 4, 2.0)] == [
        1.5,
        1.5,
        0.5,
    ]
    # an overlapping occurrence that is not inside pays in full
    assert led.grant("D", 3, 5, 1.5) == 1.5
    assert led.total == 5.0


def test_repeated_node_is_rewarded_once_and_an_unpaid_repeat_is_not_credited():
    led = EpisodeBonus(nesting=True)
    assert led.grant("A", 0, 2, 1.5) == 1.5
    assert led.grant("A", 5, 7, 1.5) == 0.0  # once per episode
    assert led.grant("B", 5, 8, 2.0) == 2.0  # the A inside [5, 8) earned nothing, so nothing is taken off
    assert list(led.matched) == ["A", "B"]
    led.reset()
    assert led.total == 0.0 and not led.matched and led.grant("A", 0, 2, 1.5) == 1.5


def test_without_nesting_every_new_node_pays_in_full():
    led = EpisodeBonus(nesting=False)
    assert [led.grant("A", 0, 2, 1.5), led.grant("B", 0, 3, 2.0), led.grant("A", 3, 5, 1.5)] == [
        1.5,
        2.0,
        0.0,
    ]


def test_sequence_bonus_shortest_first_at_one_step(abc_tree):
    # at step 5, S0 [3,5) and S2 [0,5) complete together; S0 was already paid, S2 pays 2.5 - 2.0
    res = sequence_bonus(abc_tree, list("abcab"))
    assert res.per_step == [0.0, 1.5, 0.5, 0.0, 0.5]
    assert res.matched == {"S0": 1.5, "S1": 0.5, "S2": 0.5}
    assert sequence_bonus(abc_tree, list("abcab"), nesting=False).total == 6.0
    assert sequence_bonus(abc_tree, list("zzcab")).matched == {"S0": 1.5}


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from("abcz"), max_size=30))
def test_nesting_bounds_property(abc_tree, tokens):
    nest = sequence_bonus(abc_tree, tokens)
    flat = sequence_bonus(abc_tree, tokens, nesting=False)
    assert nest.matched.keys() == flat.matched.keys()
    assert sum(nest.per_step) == pytest.approx(nest.total)
    assert nest.total <= flat.total + 1e-12
    values = [1.0 + 0.5 * abc_tree[n].depth for n in flat.matched]
    assert nest.total >= (max(values) if values else 0.0) - 1e-12
    assert set(flat.matched) == {m.node for m in abc_tree.find_matches(tokens)}


# ----------------------------------------------------------------------------- b_v designs


def test_depth_and_webshop_designs():
    node = SimpleNamespace(id="S14", depth=4, length=5, success=0.92, expansion=(
        "search<query>", "click<item>", "click<option-size>", "click<option-color>", "click<buy>"))  # fmt: skip
    assert DepthBonus()(node, BonusContext()) == 3.0
    assert resolve_bonus("webshop")(node, BonusContext(t=5, goal_options=frozenset({"size", "color"}))) == (
        pytest.approx(0.92 * 5 / 5 * 10)
    )
    # the goal names only a color: the size click does not help; T = 8 steps so far
    assert WebShopBonus()(node, BonusContext(t=8, goal_options=frozenset({"color"}))) == pytest.approx(
        0.92 * 4 / 8 * 10
    )
    unknown = SimpleNamespace(success=None, expansion=("search<query>",))
    assert WebShopBonus(scale=1.0)(unknown, BonusContext(t=2)) == 0.5
    with pytest.raises(ConfigError, match="unknown bonus design"):
        resolve_bonus("breadth")


def test_goal_steps_counts_goal_typed_tokens_only():
    assert goal_steps(["search<query>", "click<next>", "click<prev>", "click<option>"]) == 1
    assert goal_steps(["click<option-flavor-name>", "click<option-size>"], ["flavor name"]) == 1
    assert goal_steps(["click<option-flavor-name>", "click<option-size>"], None) == 2
    assert goal_steps(["click<item>", "click<buy>", "click<back>"], []) == 2


def test_authors_page_bonuses_are_the_tiling_sums(shared_dir):
    """The project page's RLVR groups: Σ b_v over the distinct nodes of the top-level tiling."""
    from xtree_gym.mining.tree import XTree

    site = shared_dir / "reference" / "xtree-site"
    text = (site / "integ_data.js").read_text()
    records = json.loads(text[text.index("=") + 1 :].strip().rstrip(";"))["rlvr"]
    tree = XTree.load(site / "trees" / "scienceworld.json")
    checked = 0
    for rec in records:
        if rec["env"] != "ScienceWorld":
            continue
        for rollout in rec["group"]:
            tokens = [s["tok"] for s in rollout["steps"]]
            res = sequence_bonus(tree, tokens, "depth", matching="tiling")
            assert res.total == pytest.approx(rollout["bonus"]), rec["label"]
            assert sorted(res.matched) == sorted(rollout["nodes"])
            checked += 1
    assert checked == 12


# ----------------------------------------------------------------------------- trainer adapters


def test_trl_reward_function_groups_by_prompt_and_reads_columns(abc_tree):
    fn = XTreeRewardFunction(abc_tree, w_ref=0.4)
    assert fn.__name__ == "xtree_bonus"
    prompts = ["p1", "p1", "p2", "p2"]
    r = fn(
        prompts, [""] * 4, xtree_tokens=[list("abc"), list("b"), list("ab"), list("ab")], outcome=[0, 0, 1, 0]
    )
    # p1 all fail: λ 0.75, bonuses 2.0 / 0; p2 w_g = 0.5 >= 0.4: λ 0
    assert r == pytest.approx([1.5, 0.0, 1.0, 0.0])
    assert fn.last_lambdas == {repr("p1"): 0.75, repr("p2"): 0.0}
    bonus_only = XTreeRewardFunction(abc_tree, include_outcome=False, group_key="uid")
    r = bonus_only(prompts, [""] * 4, xtree_tokens=[list("ab")] * 4, outcome=[0, 0, 0, 1], uid=[1, 1, 1, 1])
    assert r == pytest.approx([0.75 * (1 - 0.25 / 0.4) * 1.5] * 3 + [0.28125 * 1.5])


def test_trl_reward_function_canonicalizes_completions_and_actions(sw_gold_tree):
    pytest.importorskip("xtree_gym.canon.scienceworld")
    node = next(n for n in sw_gold_tree if n.example and n.depth == 1)
    actions = list(node.example)
    fn = XTreeRewardFunction(sw_gold_tree, domain="scienceworld", outcome_fn=lambda p, c, **kw: 0.0)
    chat = [{"role": "user", "content": "go"}, {"role": "assistant", "content": "\n".join(actions)}]
    from_text = fn(["p", "p"], [chat, "look around"])
    from_column = fn(["p", "p"], ["", ""], actions=[actions, ["look around"]])
    assert from_text == from_column
    assert from_text[0] >= 0.75 * 1.5 and from_text[1] == 0.0
    with pytest.raises(ConfigError, match="no outcome"):
        XTreeRewardFunction(sw_gold_tree, domain="scienceworld")(["p"], ["look around"])
    with pytest.raises(ConfigError, match="canonicalizer"):
        XTreeRewardFunction(sw_gold_tree)(["p"], ["look around"], outcome=[0.0])


def test_verl_agent_hook(abc_tree):
    rewards, lam = verl_agent_rewards(
        [0.0, 0.0, 1.0, 0.0, 0.0], ["g1", "g1", "g2", "g2", "g2"],
        [list("abcab"), list("ab"), list("ab"), [], list("abc")], abc_tree, w_ref=0.85,
    )  # fmt: skip
    lam2 = 0.75 * (1 - (1 / 3) / 0.85)
    assert lam["g1"] == 0.75 and lam["g2"] == pytest.approx(lam2)
    assert rewards == pytest.approx([0.75 * 2.5, 0.75 * 1.5, 1.0 + lam2 * 1.5, 0.0, lam2 * 2.0])
