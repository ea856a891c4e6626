"""The fast ReuseRL E-step gives exactly the plain greedy loop's dictionary, and is fast on a buffer."""

from __future__ import annotations

import random
import time

import pytest

from xtree_gym.mdl import (
    SMALL_CORPUS,
    MDLConfig,
    ReuseRLShaper,
    extract_dictionary,
    extract_dictionary_reference,
    segment,
)
from xtree_gym.mdl_fast import WindowTable


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
