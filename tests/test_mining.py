"""The miner: pure helpers on hand-computed cases, the exact rules, fast == reference."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from xtree_gym import MinerConfig, Step, Trajectory, mine
from xtree_gym.errors import CanonicalizationError, ConfigError, CorpusError
from xtree_gym.mining import (
    EncodedCorpus,
    is_candidate,
    merge_pair,
    pair_counts,
    pair_positions,
    reference_mine,
    trajectory_tokens,
    x_score,
)
from xtree_gym.mining.fast import fast_mine


def traj(
    tokens: str | list[str], success: bool = True, task: str = "t", tid: str | None = None
) -> Trajectory:
    toks = list(tokens)
    return Trajectory(tid or "".join(toks), [Step(f"raw {t}", token=t) for t in toks], success, task=task)


# -- pure helpers ------------------------------------------------------------------------------


def test_pair_counts_non_overlapping_runs() -> None:
    assert pair_counts(list("aaa")) == {("a", "a"): 1}
    assert pair_counts(list("aaaa")) == {("a", "a"): 2}
    assert pair_counts(list("aaaaa")) == {("a", "a"): 2}
    assert pair_counts(list("abab")) == {("a", "b"): 2, ("b", "a"): 1}
    assert pair_counts([]) == {}


def test_merge_and_positions_agree() -> None:
    seq = list("aaabaa")
    assert pair_positions(seq, ("a", "a")) == [0, 4]
    assert merge_pair(seq, ("a", "a"), "Z") == ["Z", "a", "b", "Z"]
    assert merge_pair(list("abab"), ("a", "b"), "Z") == ["Z", "Z"]


def test_x_score_hand_computed() -> None:
    cfg = MinerConfig(p_len=1, p_succ=1, eps=0.001)
    # 7 * 3 * (5/7 + 0.001)
    assert x_score(7, 3, 5 / 7, cfg) == 7.0 * 3.0 * (5 / 7 + 0.001)
    assert x_score(7, 3, 0.0, MinerConfig(p_len=0, p_succ=0)) == 7.0
    assert x_score(4, 2, 1.0, MinerConfig(p_len=2, p_succ=1.5, eps=0.0)) == 16.0


def test_candidate_rule_each_condition() -> None:
    cfg = MinerConfig(eta=0.5, min_freq=3, max_len=4, min_succ=0.5, min_task_types=2)
    assert is_candidate(5, 2, 0.6, 2, cfg)
    assert not is_candidate(2, 2, 1.0, 2, cfg)  # min_freq
    assert not is_candidate(9, 5, 1.0, 2, cfg)  # max_len
    assert not is_candidate(3, 4, 1.0, 2, cfg)  # compression: 3 - 1 > 0.5 * 4 is false
    assert not is_candidate(5, 2, 0.4, 2, cfg)  # min_succ
    assert not is_candidate(5, 2, 1.0, 1, cfg)  # task types


def test_config_validation_and_presets() -> None:
    assert MinerConfig.preset("scienceworld").min_succ == 0.9
    assert MinerConfig.preset("webarena").cap == 256
    assert MinerConfig.preset("miniwob").p_succ == 1.5
    assert MinerConfig.preset("webshop").eta == 0.5
    with pytest.raises(ConfigError, match="unknown preset 'nope'"):
        MinerConfig.preset("nope")
    with pytest.raises(ConfigError, match="min_succ = 2"):
        MinerConfig(min_succ=2)


# -- exact rules -------------------------------------------------------------------------------


def test_success_term_prefers_reliable_pair() -> None:
    # (a, b) occurs 6 times, all in failures; (c, d) 5 times, all in successes.
    corpus = [traj("ab", False, tid=f"f{i}") for i in range(6)] + [
        traj("cd", True, tid=f"s{i}") for i in range(5)
    ]
    tree = mine(corpus, MinerConfig(min_freq=2, eta=0.5, cap=1))
    assert tree.nodes[0].expansion == ("c", "d")
    assert tree.nodes[0].success == 1.0
    freq_only = mine(corpus, MinerConfig(min_freq=2, eta=0.5, cap=1, p_succ=0))
    assert freq_only.nodes[0].expansion == ("a", "b")
    assert freq_only.nodes[0].success == 0.0


def test_tie_breaks_on_expansion_then_left_length() -> None:
    # (a, b), (b, z), (z, b), (b, c) tie on X, f and length: the smallest expansion wins.
    corpus = [traj("abzbc", tid=str(i)) for i in range(4)]
    tree = mine(corpus, MinerConfig(min_freq=2, eta=0.5, cap=1))
    assert tree.nodes[0].children == ("a", "b")


def test_min_task_types_counts_distinct_types() -> None:
    one_type = [traj("ab", task="boil", tid=str(i)) for i in range(5)]
    assert len(mine(one_type, MinerConfig(min_freq=2, min_task_types=2))) == 0
    two_types = [*one_type, traj("ab", task="freeze", tid="x")]
    tree = mine(two_types, MinerConfig(min_freq=2, min_task_types=2))
    assert tree.nodes[0].task_types == ["boil", "freeze"]


def test_bound_is_reported() -> None:
    corpus = [traj("abcabc", tid=str(i)) for i in range(10)]
    assert mine(corpus, MinerConfig(min_freq=2, cap=1)).bound == "cap"
    assert mine(corpus, MinerConfig(min_freq=2, cap=50)).bound == "compression"


def test_node_fields_depth_length_example() -> None:
    corpus = [traj("abc", tid=str(i)) for i in range(5)]
    tree = mine(corpus, MinerConfig(min_freq=2, eta=0.5))
    s0, s1 = tree.nodes
    assert (s0.depth, s0.length, s1.depth, s1.length) == (1, 2, 2, 3)
    assert s1.children == ("S0", "c")
    assert s1.example == ["raw a", "raw b", "raw c"]
    assert s1.success is None  # successful-only corpus
    assert tree.corpus["successful_only"] is True


def test_errors_on_empty_corpus_and_missing_tokens() -> None:
    with pytest.raises(CorpusError, match="empty"):
        mine([], "webshop")
    no_tokens = [Trajectory("t1", [Step("look around")], True)]
    with pytest.raises(CanonicalizationError, match="'t1' has steps without a 'token'"):
        mine(no_tokens, "webshop")


def test_line_order_does_not_change_the_file(tmp_path) -> None:
    rng = random.Random(0)
    corpus = [
        traj([rng.choice("abcd") for _ in range(12)], rng.random() < 0.7, tid=str(i)) for i in range(60)
    ]
    shuffled = corpus[:]
    rng.shuffle(shuffled)
    cfg = MinerConfig(min_freq=3, eta=0.3, cap=20)
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    mine(corpus, cfg).save(a)
    mine(shuffled, cfg).save(b)
    assert a.read_bytes() == b.read_bytes()


# -- fast == reference -------------------------------------------------------------------------


def _random_corpus(rng: random.Random) -> tuple[list[list[str]], list[bool], list[str]]:
    alphabet = [f"v{i}<r>" for i in range(rng.randint(1, 6))]
    skills = [[rng.choice(alphabet) for _ in range(rng.randint(2, 5))] for _ in range(3)]
    seqs = []
    for _ in range(rng.randint(1, 40)):
        s: list[str] = []
        for _ in range(rng.randint(0, 7)):
            r = rng.random()
            if r < 0.5:
                s += rng.choice(skills)  # planted skill
            elif r < 0.7:
                s += [rng.choice(alphabet)] * rng.randint(2, 6)  # run of one token
            else:
                s.append(rng.choice(alphabet))  # noise
        seqs.append(s)
    success = [rng.random() < 0.7 for _ in seqs]
    tasks = [rng.choice("xyz") for _ in seqs]
    return seqs, success, tasks


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 10**9),
    p_len=st.sampled_from([0.0, 1.0, 2.0]),
    p_succ=st.sampled_from([0.0, 1.0, 1.5]),
    eta=st.sampled_from([0.0, 0.3, 0.5]),
    cap=st.integers(0, 30),
    max_len=st.integers(2, 10),
    min_freq=st.integers(1, 4),
    min_succ=st.sampled_from([0.0, 0.5, 0.9]),
    min_task_types=st.integers(1, 2),
)
def test_fast_miner_equals_reference(
    seed, p_len, p_succ, eta, cap, max_len, min_freq, min_succ, min_task_types
):
    seqs, success, tasks = _random_corpus(random.Random(seed))
    cfg = MinerConfig(
        p_len=p_len,
        p_succ=p_succ,
        eta=eta,
        cap=cap,
        max_len=max_len,
        min_freq=min_freq,
        min_succ=min_succ,
        min_task_types=min_task_types,
    )
    enc = EncodedCorpus.from_tokens(seqs, success, tasks)
    assert fast_mine(enc, cfg) == reference_mine(enc, cfg)


def test_tiling_reproduces_the_mined_segmentation() -> None:
    rng = random.Random(3)
    seqs, success, tasks = _random_corpus(rng)
    corpus = [
        Trajectory(f"{i:03d}", [Step(t, token=t) for t in s], ok, task=task)
        for i, (s, ok, task) in enumerate(zip(seqs, success, tasks))
    ]
    cfg = MinerConfig(min_freq=2, eta=0.0, cap=25)
    tree = mine(corpus, cfg)
    # Each merge turns `count` pairs into one symbol, so the corpus tiled by the tree has
    # exactly n_tokens - sum(count) symbols.
    n_tokens = sum(len(s) for s in seqs)
    n_symbols = sum(len(tree.tile(s)) for s in seqs)
    assert n_symbols == n_tokens - sum(n.count for n in tree)
    assert tree.compression_ratio == pytest.approx(n_tokens / n_symbols)


def test_stored_tokens_win_and_missing_ones_use_the_domain() -> None:
    steps = [Step("look around", token="custom<x>"), Step("open door to kitchen")]
    tokens = trajectory_tokens([Trajectory("t", steps, True)], "scienceworld")
    assert tokens == [["custom<x>", "open<door>"]]
