"""In-context advice (n-gram ranking on hand-made utterances) and corpus gaps on small fixed corpora."""

from __future__ import annotations

from pathlib import Path

import pytest

from xtree_gym.corpus import read_corpus
from xtree_gym.errors import ConfigError
from xtree_gym.mining.tree import XTree
from xtree_gym.render.advice import Advisor, utterance_overlap
from xtree_gym.render.gaps import find_gaps
from xtree_gym.render.stats import CorpusUsage

DATA = Path(__file__).parent / "data" / "render"


@pytest.fixture(scope="module")
def shop() -> tuple[XTree, CorpusUsage]:
    tree = XTree.load(DATA / "shop_tree.json")
    return tree, CorpusUsage.build(tree, read_corpus([DATA / "shop_corpus.jsonl"]))


def test_overlap_hand_computed():
    # query n-grams: 6 unigrams (5 shared), 5 bigrams (4 shared), 4 trigrams (3 shared)
    q, g = "i want a red hat please", "i want a red hat [SEP] color: red"
    assert utterance_overlap(q, g) == pytest.approx((5 / 6 + 4 / 5 + 3 / 4) / 3)
    assert utterance_overlap(q, g, n_max=1) == pytest.approx(5 / 6)
    assert utterance_overlap("", g) == 0.0
    assert utterance_overlap("x y z", "a b c") == 0.0


def test_advice_ranks_nodes_of_the_nearest_task_first(shop):
    tree, usage = shop
    picked = Advisor(tree, usage, top_k=8).select("i want a red hat please")
    # shop-0 ("i want a red hat ...") holds S0, S2, S3; ties in score go to the deeper node
    assert [a.node_id for a in picked[:3]] == ["S3", "S2", "S0"]
    assert picked[0].score == pytest.approx((5 / 6 + 4 / 5 + 3 / 4) / 3)
    assert all(a.score <= picked[0].score for a in picked)
    assert len(picked) == 8 and len({a.node_id for a in picked}) == 8
    lamp = Advisor(tree, usage, top_k=3).select("a cheap floor lamp")
    # both lamp episodes score (3/4 + 1/3 + 0/2) / 3; S4 and S6 occur there (equal depth: count decides),
    # S0 only in episodes with a lower overlap
    assert [a.node_id for a in lamp[:2]] == ["S4", "S6"]
    assert lamp[0].score == pytest.approx((3 / 4 + 1 / 3) / 3) and lamp[2].score < lamp[0].score


def test_hint_lists_chains_and_tracks_progress(shop):
    tree, usage = shop
    adv = Advisor(tree, usage, top_k=3, options=True)
    text = adv.hint("i want a red hat please", history=["search<query>", "click<item>"])
    lines = text.splitlines()
    assert lines[0].startswith("Advice:")
    assert lines[1].startswith(
        "1. search<query> -> click<item> -> click<option-color> -> click<buy> (depth 3"
    )
    assert any(
        ln.startswith(
            "Now: your last 2 step(s) match chain 1 (2 of 4 done); its next step is click<option-color>"
        )
        and "select the goal's color option" in ln
        for ln in lines
    )
    assert "Now:" not in adv.hint("i want a red hat please", history=["click<buy>"])
    with pytest.raises(ConfigError):
        Advisor(tree, usage, top_k=0)


def test_gaps_on_the_shop_corpus(shop):
    tree, usage = shop
    gaps = find_gaps(tree, usage, min_count=2, margin=0.1, thin_successes=8)
    assert gaps.has_failures and gaps.base_rate == pytest.approx(7 / 12)
    # S4 (untyped option -> buy) occurs in 4 failed episodes; S6 (search -> next) in 2
    assert [(p.symbols, p.count, p.success) for p in gaps.failing_nodes] == [
        (("S4",), 4, 0.0),
        (("S6",), 2, 0.0),
    ]
    pairs = {p.symbols: p for p in gaps.failing_pairs}
    assert ("S0", "S4") in pairs and pairs[("S0", "S4")].success == 0.0
    assert all(p.success <= gaps.base_rate - 0.1 for p in gaps.failing_pairs)
    assert [(t.task, t.n_trajectories, t.n_successful) for t in gaps.thin_tasks] == [("shop", 12, 7)]
    assert gaps.unmerged_tokens == []  # every token of this corpus is inside some node
    assert any(line.startswith("failing node S4") for line in gaps.lines())


def test_gaps_on_a_successful_only_corpus():
    tree = XTree.load(DATA / "sw_tree.json")
    usage = CorpusUsage.build(tree, read_corpus([DATA / "sw_corpus.jsonl"]))
    gaps = find_gaps(tree, usage)
    assert not gaps.has_failures and gaps.failing_nodes == [] and gaps.failing_pairs == []
    assert [(u.token, u.count) for u in gaps.unmerged_tokens] == [("navigate<workshop>", 3)]
    assert {t.task for t in gaps.thin_tasks} == {
        "use-thermometer",
        "test-conductivity",
    }  # 3 < 5 successes each
    with pytest.raises(ConfigError):
        find_gaps(tree, usage, margin=2.0)
