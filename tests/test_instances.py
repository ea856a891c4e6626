"""Node instances of the ScienceWorld gold corpus and the ablation controls (random spans/tree, whole)."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from xtree_gym.errors import ConfigError, CorpusError
from xtree_gym.mining import mine
from xtree_gym.mining.config import MinerConfig
from xtree_gym.mining.tree import XTree
from xtree_gym.rewards.instances import (
    NodeInstance,
    depth_histogram,
    length_histogram,
    make_instances,
    node_instances,
    random_span_instances,
    random_tree,
    read_instances,
    whole_trajectory_instances,
    write_instances,
)


@pytest.fixture(scope="module")
def sw_instances(sw_gold_tokenized, sw_gold_tree):
    return node_instances(sw_gold_tokenized, sw_gold_tree)


def test_node_instances_are_the_tilings_node_segments(
    sw_gold_corpus, sw_gold_tree, sw_gold_tokens, sw_instances
):
    expected = sum(1 for toks in sw_gold_tokens for seg in sw_gold_tree.tile(toks) if seg.is_node)
    assert len(sw_instances) == expected > 0
    by_id = {t.id: (t, toks) for t, toks in zip(sw_gold_corpus, sw_gold_tokens)}
    for inst in sw_instances[::7]:
        traj, toks = by_id[inst.trajectory_id]
        node = sw_gold_tree[inst.node]
        assert [s["token"] for s in inst.gold] == list(node.expansion) == toks[inst.start : inst.end]
        assert inst.depth == node.depth and inst.length == node.length
        assert [s["action"] for s in inst.prefix] == traj.actions[: inst.start]
        assert inst.gold_actions == traj.actions[inst.start : inst.end]
        assert inst.goal == traj.goal and inst.initial_observation == traj.extra["initial_observation"]
    hist = depth_histogram(sw_instances)
    assert sum(hist.values()) == len(sw_instances) and min(hist) >= 1
    assert len(set(i.id for i in sw_instances)) == len(sw_instances)


def test_nested_instances_hold_every_occurrence(
    sw_gold_tokenized, sw_gold_tree, sw_gold_tokens, sw_instances
):
    trajs = sw_gold_tokenized[:60]
    nested = node_instances(trajs, sw_gold_tree, nested=True)
    assert len(nested) == sum(len(sw_gold_tree.find_matches(t)) for t in sw_gold_tokens[:60])
    top = {
        (i.trajectory_id, i.start, i.end, i.node)
        for i in sw_instances
        if i.trajectory_id in {t.id for t in trajs}
    }
    assert top <= {(i.trajectory_id, i.start, i.end, i.node) for i in nested}
    assert {i.kind for i in nested} == {"nested"}


def test_jsonl_round_trip_is_exact_and_byte_stable(tmp_path, sw_instances):
    sample = sw_instances[:300]
    path = tmp_path / "inst.jsonl"
    assert write_instances(path, sample) == 300
    back = read_instances(path)
    assert [i.to_dict() for i in back] == [i.to_dict() for i in sample]
    write_instances(tmp_path / "again.jsonl", back)
    assert (tmp_path / "again.jsonl").read_bytes() == path.read_bytes()
    lines = path.read_text().splitlines()
    assert len(lines) == 300 and all(
        json.loads(line)["id"] for line in lines
    )  # plain JSON, one object a line
    gz = tmp_path / "inst.jsonl.gz"
    write_instances(gz, sample[:5])
    assert [i.id for i in read_instances(gz)] == [i.id for i in sample[:5]]


def test_bad_instance_lines_name_file_and_line(tmp_path, sw_instances):
    path = tmp_path / "bad.jsonl"
    good = sw_instances[0].to_dict()
    broken = dict(good, end=good["end"] + 1)

    path.write_text(json.dumps(good) + "\n" + json.dumps(broken) + "\n")
    with pytest.raises(CorpusError, match=r"bad\.jsonl:2: span"):
        read_instances(path)
    path.write_text('{"id": "x"}\n')
    with pytest.raises(CorpusError, match=r":1: missing key"):
        read_instances(path)
    with pytest.raises(CorpusError, match="does not exist"):
        read_instances(tmp_path / "none.jsonl")


def test_random_spans_match_count_and_length_histogram(sw_gold_corpus, sw_gold_tokenized, sw_instances):
    spans = random_span_instances(sw_gold_tokenized, sw_instances, seed=3)
    assert len(spans) == len(sw_instances)
    assert length_histogram(spans) == length_histogram(sw_instances)
    assert depth_histogram(spans) == depth_histogram(sw_instances)
    by_id = {t.id: t for t in sw_gold_corpus}
    for s in spans[::11]:
        traj = by_id[s.trajectory_id]
        assert s.kind == "random_span" and s.node == "" and 0 <= s.start < s.end <= len(traj.steps)
        assert s.gold_actions == traj.actions[s.start : s.end]
    again = random_span_instances(sw_gold_tokenized, sw_instances[:500], seed=3)
    other = random_span_instances(sw_gold_tokenized, sw_instances[:500], seed=4)
    assert [s.id for s in again] == [s.id for s in spans[:500]]
    assert [s.id for s in other] != [s.id for s in again]
    # arbitrary positions: far fewer of them coincide with a tiling node than the real instances do
    real = {(i.trajectory_id, i.start, i.end) for i in sw_instances}
    assert sum((s.trajectory_id, s.start, s.end) in real for s in spans) < 0.5 * len(spans)


def test_random_tree_same_merges_uniform_pairs(tmp_path, sw_gold_tokenized):
    trajs = sw_gold_tokenized[::6]  # 138 episodes keep this test quick
    cfg = MinerConfig.preset("scienceworld", cap=30)
    mined = mine(trajs, cfg)
    rand = random_tree(trajs, len(mined), cfg, seed=0)
    assert len(rand) == len(mined) == 30
    assert [n.expansion for n in rand] != [n.expansion for n in mined]
    for n in rand:  # a well-formed tree: expansion = the children's, depth one more than the deeper child
        parts = [rand[c].expansion if c in rand else (c,) for c in n.children]
        assert n.expansion == parts[0] + parts[1] and n.length <= cfg.max_len
        assert n.depth == 1 + max(rand[c].depth if c in rand else 0 for c in n.children)
    assert rand.extra["control"] == {"kind": "random_tree", "seed": 0, "n_merges": 30}
    # seeded and byte-identical; another seed gives another tree; it saves and loads like a mined one
    assert random_tree(trajs, 30, cfg, seed=0).to_json() == rand.to_json()
    assert random_tree(trajs, 30, cfg, seed=1).to_json() != rand.to_json()
    rand.save(tmp_path / "random.json")
    assert XTree.load(tmp_path / "random.json").to_json() == rand.to_json()
    # shallower by construction (the paper: 88% vs 43% two-primitive nodes on WebArena)
    two = Counter(n.length == 2 for n in rand)[True] / len(rand)
    assert two >= Counter(n.length == 2 for n in mined)[True] / len(mined)
    inst = make_instances("random_tree", trajs, mined)
    assert inst and {i.kind for i in inst} == {"random_tree"}
    with pytest.raises(ConfigError, match="n_merges"):
        random_tree(trajs, -1, cfg)


def test_whole_trajectory_instances(sw_gold_tokenized):
    whole = whole_trajectory_instances(sw_gold_tokenized)
    assert len(whole) == sum(1 for t in sw_gold_tokenized if t.steps)
    assert all(i.start == 0 and i.end == len(i.gold) and not i.prefix and i.depth == 0 for i in whole)


def test_make_instances_dispatch_and_errors(sw_gold_corpus, sw_gold_tree):
    trajs = sw_gold_corpus.trajectories[:20]  # raw actions: the domain canonicalizes them
    assert [i.id for i in make_instances("node", trajs, sw_gold_tree, domain="scienceworld")] == [
        i.id for i in node_instances(trajs, sw_gold_tree, domain="scienceworld")
    ]
    assert {i.kind for i in make_instances("random_span", trajs, sw_gold_tree, domain="scienceworld")} == {
        "random_span"
    }
    with pytest.raises(ConfigError, match="unknown instance kind"):
        make_instances("spans", trajs, sw_gold_tree)
    with pytest.raises(ValueError, match="expected an object"):
        NodeInstance.from_dict([1])
