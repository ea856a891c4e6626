"""The fast ReuseRL E-step gives exactly the plain greedy loop's dictionary, and is fast on a buffer."""

from __future__ import annotations

import random
import time

import pytest

import xtree_gym.reuserl.fast as mdl_fast
from xtree_gym.reuserl.fast import ROW_BUDGET, CoverRows, WindowTable, _n_rows, compositions
from xtree_gym.reuserl.mdl import (
    SMALL_CORPUS,
    MDLConfig,
    ReuseRLShaper,
    extract_dictionary,
    extract_dictionary_reference,
    segment,
)


def corpus(
    rng: random.Random, n: int, alphabet: str, motifs: list[str], lo: int = 2, hi: int = 9
) -> list[str]:
    out = []
    for _ in range(n):
        length, s = rng.randint(lo, hi), ""
        while len(s) < length:
            s += rng.choice(motifs) if motifs and rng.random() < 0.6 else rng.choice(alphabet)
        out.append(s[:length])
    return out


@pytest.mark.parametrize("seed", range(12))
def test_fast_equals_reference_on_random_buffers(seed: int) -> None:
    rng = random.Random(seed)
    alphabet = "ABCDEFGHIJ"[: rng.randint(2, 10)]
    motifs = [
        "".join(rng.choice(alphabet) for _ in range(rng.randint(2, 4))) for _ in range(rng.randint(0, 4))
    ]
    seqs = corpus(rng, rng.randint(40, 300), alphabet, motifs, hi=rng.randint(3, 14))
    assert sum(len(s) for s in seqs) >= SMALL_CORPUS  # the numpy path, not the small-corpus shortcut
    for cfg in (
        MDLConfig(),
        MDLConfig(max_len=2),
        MDLConfig(max_len=3, scan_all=False),
        MDLConfig(max_len=5),
    ):
        size = rng.choice([0, 5, 26])
        fast = extract_dictionary(seqs, None, cfg, alphabet_size=size)
        ref = extract_dictionary_reference(seqs, None, cfg, alphabet_size=size)
        assert fast.phrases == ref.phrases, (seed, cfg)


def test_fast_equals_reference_with_hashable_skills() -> None:
    rng = random.Random(5)
    seqs = [tuple(rng.choice([1, 2, ("x", 3), "go"]) for _ in range(rng.randint(2, 8))) for _ in range(80)]
    seqs += [(1, 2, ("x", 3), "go")] * 150
    fast = extract_dictionary(seqs, [1, 2, ("x", 3), "go", "unused"])
    assert fast.phrases == extract_dictionary_reference(seqs, [1, 2, ("x", 3), "go", "unused"]).phrases
    assert fast.merged  # the planted triple pays for itself


def test_window_table_segments_break_ties_like_segment() -> None:
    rng = random.Random(2)
    uniq = list(dict.fromkeys(tuple(s) for s in corpus(rng, 60, "ABC", ["AB", "BC", "ABC"])))
    phrases = [("A",), ("B",), ("C",), ("A", "B"), ("B", "C"), ("A", "B", "C"), ("C", "A")]
    table = WindowTable(uniq, [1] * len(uniq), 4)
    for p in phrases:
        table.add(p)
    ids = table.segment_ids().tolist()
    got = [[table.phrase(i) for i in row if i >= 0] for row in ids]
    assert got == [segment(s, set(phrases), 4) for s in uniq]
    assert table.totals([("C", "A", "B")]) == [
        sum(len(segment(s, {*phrases, ("C", "A", "B")}, 4)) for s in uniq)
    ]


@pytest.mark.parametrize("seed", range(10))
@pytest.mark.parametrize("rows", [True, False])
def test_both_fast_paths_equal_reference_on_short_sequences(
    seed: int, rows: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Short sequences (the in-loop buffer) take the cover rows; with no row budget, the DP rounds."""
    rng = random.Random(100 + seed)
    alphabet = "ABCDEFG"[: rng.randint(2, 7)]
    motifs = [
        "".join(rng.choice(alphabet) for _ in range(rng.randint(2, 4))) for _ in range(rng.randint(0, 3))
    ]
    seqs = corpus(rng, rng.randint(80, 260), alphabet, motifs, lo=1, hi=rng.randint(3, 8))
    assert sum(map(len, seqs)) >= SMALL_CORPUS  # the numpy paths, not the small-corpus shortcut
    table = WindowTable(list(dict.fromkeys(map(tuple, seqs))), [1] * len(set(seqs)), 5)
    assert _n_rows(table.lens, 5) <= ROW_BUDGET
    if not rows:
        monkeypatch.setattr(mdl_fast, "ROW_BUDGET", 0)
    for cfg in (
        MDLConfig(),
        MDLConfig(max_len=2),
        MDLConfig(max_len=3, scan_all=False),
        MDLConfig(max_len=5),
    ):
        size = rng.choice([0, 7, 26])
        fast = extract_dictionary(seqs, None, cfg, alphabet_size=size)
        ref = extract_dictionary_reference(seqs, None, cfg, alphabet_size=size)
        assert fast.phrases == ref.phrases, (seed, rows, cfg)


def test_compositions_list_segments_tie_order() -> None:
    assert compositions(4, 3) == ((3, 1), (2, 2), (1, 3), (2, 1, 1), (1, 2, 1), (1, 1, 2), (1, 1, 1, 1))
    assert all(sum(c) == 6 and max(c) <= 4 for c in compositions(6, 4)) and len(compositions(6, 4)) == 29


def test_cover_rows_score_every_candidate_exactly() -> None:
    rng = random.Random(7)
    uniq = list(dict.fromkeys(tuple(s) for s in corpus(rng, 80, "ABC", ["AB", "CA"], lo=1, hi=6)))
    weights = [rng.randint(1, 3) for _ in uniq]
    table = WindowTable(uniq, weights, 4)
    table.in_dict[1:] = table.id_len[1:] == 1
    phrases = {("A",), ("B",), ("C",)}
    rows = CoverRows(table)
    for added in [("A", "B"), ("C", "A", "B")]:
        table.in_dict[table.id(added)] = True
        rows.add(table.id(added))
        phrases.add(added)
        total, cats, _, totals = rows.round()
        assert total == sum(w * len(segment(s, phrases, 4)) for s, w in zip(uniq, weights))
        assert len(cats) > 3
        for c, t in zip(cats.tolist(), totals.tolist()):
            with_c = phrases | {table.phrase(c)}
            assert t == sum(w * len(segment(s, with_c, 4)) for s, w in zip(uniq, weights)), table.phrase(c)


@pytest.mark.slow
def test_buffer_update_is_fast() -> None:
    rng = random.Random(0)
    shaper = ReuseRLShaper(horizon=10, config=MDLConfig(buffer_size=256), alphabet="ABCDE")
    shaper.observe(corpus(rng, 256, "ABCDE", [], hi=6))
    shaper.refresh()
    t0 = time.process_time()
    for _ in range(20):
        shaper.refresh()
    assert (time.process_time() - t0) / 20 < 0.005  # generous: well under 1 ms on a quiet core
