"""Hand-computed checks of the GRPO objective: shaping → advantages, clip, KL, OPSD, normalisation, rows."""

from __future__ import annotations

import math

import pytest
import torch

from xtree_gym.agents.grpo.advantages import group_advantages
from xtree_gym.agents.grpo.losses import clipped_policy_loss, k3_kl, loss_weights, opsd_term
from xtree_gym.agents.grpo.rows import (
    Row,
    collate,
    episode_rows,
    micro_batches,
    teacher_to_student,
    turn_rows,
)
from xtree_gym.agents.grpo.shaping import SegCostShaping, plain_rewards, xtree_rewards
from xtree_gym.agents.types import Episode, Turn
from xtree_gym.errors import ConfigError


def _group(wins: list[bool], invalid: list[int] | None = None) -> list[Episode]:
    eps = []
    for i, w in enumerate(wins):
        bad = [Turn([], [], [], "", None, "", invalid=True) for _ in range((invalid or [0] * len(wins))[i])]
        eps.append(Episode(str(i), "env", "boil", "g", 0, 0, i, turns=bad, success=w, reward=float(w)))
    return eps


def test_all_fail_group_gets_advantages_from_the_bonus_alone() -> None:
    eps = _group([False] * 4)
    plain = plain_rewards(eps, invalid_penalty=0.1).rewards
    assert group_advantages(plain) == [0.0] * 4  # outcome alone: zero variance, no signal
    # Σ b_v = 3.0, 1.5, 0, 0; nobody wins: λ_g = λ0 = 0.75 -> rewards 2.25, 1.125, 0, 0
    shaped = xtree_rewards(eps, [3.0, 1.5, 0.0, 0.0], invalid_penalty=0.1, lambda0=0.75, w_ref=0.4)
    assert shaped.rewards == [2.25, 1.125, 0.0, 0.0]
    assert shaped.lambdas == [0.75] * 4
    # mean 0.84375; centred 1.40625, 0.28125, -0.84375, -0.84375; sample var = 3.48047/3, std = 1.07711
    std = math.sqrt((1.40625**2 + 0.28125**2 + 2 * 0.84375**2) / 3)
    adv = group_advantages(shaped.rewards)
    assert adv == pytest.approx(
        [1.40625 / std, 0.28125 / std, -0.84375 / std, -0.84375 / std], abs=1e-5
    )  # ε = 1e-6
    assert adv[0] == pytest.approx(1.3056, abs=1e-4)


@pytest.mark.parametrize("wins", [[True, True, False, False], [True, True, True, True]])
def test_group_at_or_above_w_ref_gets_no_bonus(wins: list[bool]) -> None:
    eps = _group(wins)
    # w_g = 0.5 or 1.0 >= w_ref 0.4: λ_g = 0, rewards are the outcomes only
    shaped = xtree_rewards(eps, [3.0, 1.5, 2.0, 9.0], invalid_penalty=0.1, lambda0=0.75, w_ref=0.4)
    assert shaped.lambdas == [0.0] * 4
    assert shaped.rewards == [float(w) for w in wins]


def test_group_below_w_ref_gets_a_partial_bonus() -> None:
    eps = _group([True, False, False, False, False])  # w_g = 0.2: λ_g = 0.75 · (1 - 0.2/0.4) = 0.375
    shaped = xtree_rewards(eps, [0.0, 2.0, 0.0, 0.0, 0.0], invalid_penalty=0.1, lambda0=0.75, w_ref=0.4)
    assert shaped.rewards == [1.0, 0.75, 0.0, 0.0, 0.0]


def test_invalid_penalty_per_step() -> None:
    eps = _group([True, False], invalid=[2, 3])
    assert plain_rewards(eps, invalid_penalty=0.1).rewards == pytest.approx([0.8, -0.3])


def test_segcost_keeps_its_buffer_across_steps() -> None:
    def ep(i: int, toks: str, won: bool) -> Episode:
        turns = [Turn([], [], [], "", "a", "", token=t) for t in toks]
        return Episode(str(i), "env", "x", "g", 0, 0, i, turns=turns, success=won, reward=10.0 * won)

    sc = SegCostShaping(horizon=10, lam=10.0, buffer_size=8)
    sc.rewards([ep(0, "abcd", True), ep(1, "dd", False)], invalid_penalty=0.0)
    assert sc.state()["buffer"] == [list("abcd")]  # only successes enter the buffer
    out = sc.rewards([ep(0, "abce", True), ep(1, "abd", True), ep(2, "cab", True)], invalid_penalty=0.0)
    assert out.rewards == [7.0, 8.0, 8.0]  # ('a','b') merged thanks to the buffered 'abcd' (mdl.py example)


def test_clip_cases() -> None:
    m = torch.ones(1, 1)
    lp = torch.zeros(1, 1)
    for rho, adv, expected, clipped in [
        (1.5, 1.0, -1.2, 1.0),  # A > 0, ρ above 1 + ε: clipped at 1.2
        (1.1, 1.0, -1.1, 0.0),  # inside the band: unclipped
        (0.5, 1.0, -0.5, 0.0),  # A > 0, ρ below 1 - ε: min keeps the smaller ρ·A, no clip
        (0.5, -1.0, 0.8, 1.0),  # A < 0, ρ below 1 - ε: clipped at 0.8 (−min(−0.5, −0.8) = 0.8)
        (1.5, -1.0, 1.5, 0.0),  # A < 0, ρ above: the pessimistic unclipped term
    ]:
        old = torch.full((1, 1), -math.log(rho))
        loss, frac = clipped_policy_loss(lp, old, torch.tensor([adv]), m, eps_low=0.2, eps_high=0.2)
        assert loss.item() == pytest.approx(expected, abs=1e-6), (rho, adv)
        assert frac.item() == clipped


def test_clip_higher_and_gradient_stops_when_clipped() -> None:
    old = torch.full((1, 1), -math.log(1.25))
    lp = torch.zeros(1, 1, requires_grad=True)
    loss, _ = clipped_policy_loss(lp, old, torch.tensor([1.0]), torch.ones(1, 1), eps_low=0.2, eps_high=0.28)
    assert loss.item() == pytest.approx(-1.25)  # ε_high 0.28: 1.25 is still inside
    loss.backward()
    assert lp.grad is not None and lp.grad.item() == pytest.approx(-1.25)  # ∂(−ρA)/∂logp = −ρA
    lp2 = torch.zeros(1, 1, requires_grad=True)
    loss2, _ = clipped_policy_loss(lp2, old, torch.tensor([1.0]), torch.ones(1, 1), eps_low=0.2, eps_high=0.2)
    loss2.backward()
    assert lp2.grad is not None
    assert loss2.item() == pytest.approx(-1.2) and lp2.grad.item() == 0.0  # clipped: no gradient


def test_k3_kl_cases() -> None:
    logp = torch.tensor([0.0, -1.0, -2.0])
    ref = torch.tensor([0.0, 0.0, -3.0])
    # r = ref − logp = 0, 1, −1: e^r − r − 1 = 0, e − 2, e^{-1}
    assert k3_kl(logp, ref).tolist() == pytest.approx([0.0, math.e - 2, math.exp(-1)], abs=1e-6)
    x = torch.tensor([-0.7], requires_grad=True)
    k3_kl(x, torch.tensor([-0.2])).sum().backward()
    assert x.grad is not None and x.grad.item() == pytest.approx(
        1 - math.exp(0.5), abs=1e-6
    )  # ∂/∂logp = 1 − e^r


def test_opsd_term_value_and_gradient_masked_two_sequences() -> None:
    s = torch.tensor([[-1.0, -2.0, -0.5], [-2.0, -1.0, -4.0]], requires_grad=True)
    t = torch.tensor([[-0.5, -2.0, -9.0], [-1.0, -3.0, -9.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 0.0]])
    beta, c = 2.0, 0.5
    # δ: row 0 = [0.5, 0]; row 1 = [1.0, −2.0]; g = σ(2δ)
    g = [[1 / (1 + math.exp(-1.0)), 0.5], [1 / (1 + math.exp(-2.0)), 1 / (1 + math.exp(4.0))]]
    row0 = (g[0][0] * 0.5 + g[0][1] * 0.0) / 2
    row1 = (g[1][0] * 1.0 + g[1][1] * -2.0) / 2
    term = opsd_term(s, t, mask, beta=beta, c=c)
    assert term.item() == pytest.approx(c * (row0 + row1) / 2, abs=1e-6)
    term.backward()
    # ∂/∂s_t = −c · g_t / (|y| · B) with |y| = 2, B = 2; masked positions get 0; the teacher gets none
    expected = [[-c * g[0][0] / 4, -c * g[0][1] / 4, 0.0], [-c * g[1][0] / 4, -c * g[1][1] / 4, 0.0]]
    assert s.grad is not None
    assert s.grad.tolist() == [pytest.approx(r, abs=1e-7) for r in expected]


def test_loss_weights_sum_to_one_over_micro_batches() -> None:
    masks = [torch.tensor([[1.0, 1.0, 1.0]]), torch.tensor([[1.0, 0.0, 0.0], [1.0, 1.0, 0.0]])]
    for norm in ("token", "sequence"):
        total = sum(loss_weights(m, norm=norm, total_tokens=6, total_rows=3).sum().item() for m in masks)
        assert total == pytest.approx(1.0)
    # sequence-mean weighs a 1-token row like a 3-token row
    w = loss_weights(masks[1], norm="sequence", total_tokens=6, total_rows=3)
    assert w[0, 0].item() == pytest.approx(1 / 3) and w[1, 0].item() == pytest.approx(1 / 6)


def test_token_mean_accumulation_equals_one_batch() -> None:
    torch.manual_seed(0)
    logp = torch.randn(3, 4, requires_grad=True)
    old = logp.detach() + 0.1 * torch.randn(3, 4)
    adv = torch.tensor([1.0, -0.5, 2.0])
    mask = torch.tensor([[1.0, 1, 1, 0], [1, 0, 0, 0], [1, 1, 1, 1]])
    whole = clipped_policy_loss(logp, old, adv, mask)[0]
    parts = torch.stack(
        [
            clipped_policy_loss(
                logp[i : i + 1],
                old[i : i + 1],
                adv[i : i + 1],
                loss_weights(mask[i : i + 1], norm="token", total_tokens=8, total_rows=3),
                denom=1.0,
            )[0]
            for i in range(3)
        ]
    ).sum()
    assert parts.item() == pytest.approx(whole.item(), abs=1e-6)


def _ep(turns: list[Turn], group: int = 0) -> Episode:
    return Episode("e", "env", "t", "g", 0, group, 0, turns=turns)


def test_turn_rows_and_episode_rows() -> None:
    t0 = Turn([1, 2], [3], [-0.5], "", "a", "")
    t1 = Turn([7, 8], [4, 5], [-0.1, -0.2], "", "b", "")
    rows = turn_rows([_ep([t0, t1])], [0.5])
    assert [r.input_ids for r in rows] == [[1, 2, 3], [7, 8, 4, 5]]
    assert all(r.advantage == 0.5 for r in rows) and [r.turn for r in rows] == [0, 1]
    with pytest.raises(ConfigError, match="rows 'turn'"):
        episode_rows([_ep([t0, t1])], [0.5])  # turn 1's prompt does not extend turn 0
    t1b = Turn([1, 2, 3, 6], [4, 5], [-0.1, -0.2], "", "b", "")
    (row,) = episode_rows([_ep([t0, t1b])], [0.5])
    assert row.input_ids == [1, 2, 3, 6, 4, 5] and row.old_logprobs == [0, 0, -0.5, 0, -0.1, -0.2]


def test_logprob_count_mismatch_is_one_error() -> None:
    with pytest.raises(ConfigError, match="2 logprobs for 1 completion tokens"):
        turn_rows([_ep([Turn([1], [2], [-1.0, -2.0], "", "a", "")])], [1.0])


def test_micro_batches_respect_the_budget() -> None:
    rows = [Row([0] * k, [True] * k, [0.0] * k) for k in (4, 4, 4, 9, 1, 1)]
    batches = micro_batches(rows, 8)
    assert sorted(i for b in batches for i in b) == list(range(6))
    for b in batches:
        assert len(b) == 1 or len(b) * max(len(rows[i]) for i in b) <= 8
    assert micro_batches(rows, 10, prefix_len=4) == [[0], [1], [2], [3], [4, 5]]  # 2 · (1 + 4) <= 10


def test_teacher_prefix_alignment() -> None:
    rows = [
        Row([5, 6, 7], [False, True, True], [0, 0, 0], teacher_prefix=[1, 2]),
        Row([5, 8], [False, True], [0, 0]),
    ]
    tb = collate(rows, 0, prefixes=True)
    sb = collate(rows, 0)
    # teacher labels shifted by each row's prefix line up with the student's labels
    aligned = teacher_to_student(rows, tb.labels.float())
    assert (aligned * sb.mask).tolist() == (sb.labels.float() * sb.mask).tolist()


def test_opsd_banks_xtree_scrambled_empty_file(tmp_path) -> None:
    from xtree_gym import MinerConfig, Step, Trajectory, mine
    from xtree_gym.agents.grpo.opsd import card_prefix_ids, make_card_fn

    toks = ["search<query>", "click<item>", "click<option-size>", "click<buy>"]
    trajs = [
        Trajectory(str(i), [Step(t, token=t) for t in toks], i < 6, env="webshop", task="webshop")
        for i in range(8)
    ]
    tree = mine(trajs, MinerConfig(min_freq=3, eta=0.5, cap=5))
    ep = Episode(
        "e", "webshop", "webshop", "a shirt [SEP] size: large", 0, 0, 0, meta={"goal_options": ["size"]}
    )
    card = make_card_fn("xtree", tree=tree, domain="webshop")(ep)
    assert "### TASK: goal requires a size option ###" in card  # the keyword rule picked the size card
    scrambled = make_card_fn("scrambled", tree=tree, domain="webshop")(ep)
    assert scrambled != card and sorted(scrambled.split()) == sorted(card.split())  # same words, new order
    assert make_card_fn("empty")(ep) == ""
    bank = tmp_path / "bank.txt"
    bank.write_text("Buy after choosing options.\n")
    assert make_card_fn(str(bank))(ep) == "Buy after choosing options."

    class Tok:
        chat_template = "x"

        def apply_chat_template(self, msgs, tokenize=True, return_dict=False):
            return [len(m["content"]) for m in msgs]

    assert card_prefix_ids(Tok(), "abc") == [3]  # the card goes in as one system turn
