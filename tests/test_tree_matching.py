"""Tree file, released trees, tiling and matching (offline and streaming)."""

from __future__ import annotations

import itertools
import json
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xtree_gym import MinerConfig, Step, Trajectory, XTree, mine
from xtree_gym.errors import TreeFormatError
from xtree_gym.mining.matching import StreamingMatcher, find_matches, naive_find_matches


@pytest.fixture()
def small_tree() -> XTree:
    corpus = [
        Trajectory(str(i), [Step(f"do {t}", token=t) for t in "abcabd"], success=i % 3 != 0, task=f"t{i % 2}")
        for i in range(9)
    ]
    return mine(corpus, MinerConfig(min_freq=3, eta=0.5, cap=10))


def test_save_load_roundtrip_is_byte_identical(small_tree: XTree, tmp_path) -> None:
    p = tmp_path / "tree.json"
    small_tree.save(p)
    again = XTree.load(p)
    q = tmp_path / "again.json"
    again.save(q)
    assert p.read_bytes() == q.read_bytes()
    data = json.loads(p.read_text())
    assert data["n_nodes"] == len(small_tree) == len(data["nodes"])
    node = data["nodes"][0]
    for key in ("id", "children", "depth", "length", "expansion", "count", "success", "example"):
        assert key in node
    assert isinstance(node["success"], float)  # the corpus had failures
    assert {"score", "success_count", "task_types"} <= set(node)
    assert data["format_version"] == 1
    assert data["corpus"]["successful_only"] is False


@pytest.mark.parametrize(
    "name,n_nodes", [("webarena", 256), ("scienceworld", 80), ("webshop", 48), ("miniwob", 90)]
)
def test_load_released_trees(shared_dir, name: str, n_nodes: int) -> None:
    tree = XTree.load(shared_dir / "reference/xtree-site/trees" / f"{name}.json")
    assert len(tree) == n_nodes
    # Every node's expansion is its children's expansions joined (checked on load) and tiles to itself.
    for node in tree.nodes[:40]:
        segs = tree.tile(list(node.expansion))
        assert sum(s.length for s in segs) == node.length
        assert any(m.node == node.id for m in tree.find_matches(list(node.expansion)))


def test_bad_tree_files(tmp_path) -> None:
    p = tmp_path / "t.json"
    p.write_text("{not json")
    with pytest.raises(TreeFormatError, match=r"t\.json:1"):
        XTree.load(p)
    p.write_text(
        json.dumps(
            {
                "nodes": [
                    {
                        "id": "S0",
                        "children": ["a", "b"],
                        "depth": 1,
                        "length": 2,
                        "expansion": ["a", "c"],
                        "count": 3,
                    }
                ]
            }
        )
    )
    with pytest.raises(TreeFormatError, match="S0: expansion does not match"):
        XTree.load(p)
    with pytest.raises(TreeFormatError, match="does not exist"):
        XTree.load(tmp_path / "missing.json")


def test_tiling_leaves_unknown_tokens_as_primitives(small_tree: XTree) -> None:
    segs = small_tree.tile(["a", "b", "c", "zz<top>", "a", "b", "d"])
    unknown = [s for s in segs if s.symbol == "zz<top>"]
    assert len(unknown) == 1 and not unknown[0].is_node and unknown[0].start == 3
    assert segs[0].is_node and segs[0].symbol in small_tree
    assert segs[0].start == 0 and segs[-1].end == 7
    assert all(a.end == b.start for a, b in itertools.pairwise(segs))


patterns_st = st.lists(
    st.tuples(
        st.sampled_from(["S0", "S1", "S2", "S3"]), st.lists(st.sampled_from("abc"), min_size=1, max_size=4)
    ),
    min_size=1,
    max_size=6,
)


@settings(max_examples=200, deadline=None)
@given(patterns=patterns_st, tokens=st.lists(st.sampled_from("abcd"), max_size=30))
def test_aho_corasick_equals_naive(patterns, tokens) -> None:
    pats = [(n, tuple(e)) for n, e in patterns]
    fast = sorted(find_matches(pats, tokens), key=lambda m: (m.end, m.length, m.node))
    assert fast == naive_find_matches(pats, tokens)


def test_streaming_reports_shortest_first_and_resets() -> None:
    m = StreamingMatcher([("S1", ("a", "b", "c")), ("S0", ("b", "c")), ("S2", ("c",))])
    got = [m.feed(t) for t in "abc"]
    assert [x.node for x in got[2]] == ["S2", "S0", "S1"]
    assert [(x.start, x.end) for x in got[2]] == [(2, 3), (1, 3), (0, 3)]
    m.reset()
    assert m.feed("c")[0].start == 0


def test_streaming_matches_offline_on_mined_tree(small_tree: XTree) -> None:
    rng = random.Random(1)
    tokens = [rng.choice("abcd") for _ in range(200)]
    m = small_tree.matcher()
    streamed = [x for t in tokens for x in m.feed(t)]
    assert sorted(streamed) == sorted(small_tree.find_matches(tokens))
    assert streamed  # the tree's skills occur in a random stream of its alphabet
