"""The sharded miner (``xtree mine --ray``): the same merges and the same tree file as one process.

The algorithm is tested without Ray (the same worker and driver code with in-process workers); one
slow test runs it on a local 2-worker Ray cluster (Ray takes ~20 s to start on a loaded 2-core box).
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import os
import subprocess
import sys
from importlib.resources import files
from pathlib import Path

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from xtree_gym.cli import main
from xtree_gym.corpus.columnar import FastPathUnavailable
from xtree_gym.corpus.encoded import EncodedCorpus
from xtree_gym.corpus.shards import plan_shards
from xtree_gym.mining.config import MinerConfig
from xtree_gym.mining.fast import fast_mine
from xtree_gym.mining.sharded import ShardWorker, file_workers, in_process, mine_sharded
from xtree_gym.mining.tree import XTree

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = Path(str(files("xtree_gym") / "data/scienceworld_gold_sample.jsonl.gz"))
FREQ_ONLY = ["--p-len", "0", "--p-succ", "0", "--eta", "0", "--max-len", "1000000", "--min-freq", "2"]
FREQ_ONLY += ["--min-succ", "0", "--min-task-types", "1", "--cap", "200"]


def _bench_writer():  # the benchmark's generator (benchmarks/bench_miner.py), shapes as bench_mine_e2e.py
    spec = importlib.util.spec_from_file_location("bench_miner", ROOT / "benchmarks" / "bench_miner.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.write_jsonl


SHAPES = {"short": 1, "medium": 3, "long": 13}


def _sharded(seqs, success, tasks, cuts, cfg):
    """mine_sharded over contiguous shards of the sequences cut at ``cuts`` (empty shards allowed)."""
    bounds = [0, *sorted(cuts), len(seqs)]
    workers = [
        ShardWorker(encoded=EncodedCorpus.from_tokens(seqs[a:b], success[a:b], tasks[a:b]))
        for a, b in itertools.pairwise(bounds)
    ]
    return mine_sharded(in_process(workers), len(workers), cfg)[0]


CASES = {  # (sequences, success, tasks, cut points, config overrides)
    "self pairs (a a a a)": ([list("aaaa"), list("aaa"), list("aaaaa"), list("baaab")], [1, 1, 0, 1], [1, 2]),
    "empty trajectories": ([[], list("abab"), [], list("abab"), [], list("ab")], [1, 0, 1, 1, 1, 1], [2, 5]),
    "ties": ([list("ab"), list("cd"), list("ab"), list("cd"), list("ba"), list("dc")], [1] * 6, [3]),
    "runs across shards": ([list("aab"), list("aab"), list("aab")] * 3, [1, 0, 1] * 3, [1, 4, 8]),
}


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("min_task_types", [1, 2])
def test_sharded_merges_equal_fast_mine_on_the_hard_cases(name: str, min_task_types: int) -> None:
    seqs, ok, cuts = CASES[name]
    success = [bool(x) for x in ok]
    tasks = [f"t{i % 3}" for i in range(len(seqs))]
    cfg = MinerConfig(
        p_len=1, p_succ=0, eta=0.0, min_freq=2, cap=10, max_len=6, min_task_types=min_task_types
    )
    want = fast_mine(EncodedCorpus.from_tokens(seqs, success, tasks), cfg)
    got = _sharded(seqs, success, tasks, cuts, cfg)
    assert got == want
    assert len(want) >= (1 if min_task_types == 1 else 0)  # compared something where merges exist


@st.composite
def corpora(draw):
    alphabet = draw(st.integers(1, 4))
    seqs = draw(st.lists(st.lists(st.sampled_from("abcd"[:alphabet]), max_size=12), min_size=1, max_size=12))
    success = draw(st.lists(st.booleans(), min_size=len(seqs), max_size=len(seqs)))
    tasks = draw(st.lists(st.sampled_from(["x", "y", "z"]), min_size=len(seqs), max_size=len(seqs)))
    cuts = draw(st.lists(st.integers(0, len(seqs)), max_size=3))
    cfg = MinerConfig(
        p_len=draw(st.sampled_from([0.0, 1.0])),
        p_succ=draw(st.sampled_from([0.0, 1.0])),
        eps=0.001,
        eta=draw(st.sampled_from([0.0, 0.5])),
        min_freq=2,
        min_succ=draw(st.sampled_from([0.0, 0.5])),
        max_len=draw(st.sampled_from([3, 8])),
        min_task_types=draw(st.sampled_from([1, 2])),
        cap=8,
    )
    return seqs, success, tasks, cuts, cfg


@settings(max_examples=150, deadline=None)
@given(corpora())
def test_sharded_merges_equal_fast_mine_on_any_corpus(case) -> None:
    seqs, success, tasks, cuts, cfg = case
    want = fast_mine(EncodedCorpus.from_tokens(seqs, success, tasks), cfg)
    assert _sharded(seqs, success, tasks, cuts, cfg) == want


def _one_process_tree(corpus: list[Path], out: Path, extra: list[str]) -> bytes:
    assert main(["mine", *map(str, corpus), *extra, "-o", str(out)]) == 0
    return out.read_bytes()


def _sharded_tree(corpus: list[Path], n: int, extra_cfg: MinerConfig) -> bytes:
    workers = file_workers(corpus, n)
    merges, facts, examples, _ = mine_sharded(in_process(workers), len(workers), extra_cfg)
    return XTree.from_facts(merges, facts, examples, extra_cfg).to_json().encode()


FREQ_CFG = MinerConfig.preset(
    "scienceworld",
    p_len=0.0,
    p_succ=0.0,
    eta=0.0,
    max_len=10**6,
    min_freq=2,
    min_succ=0.0,
    min_task_types=1,
    cap=200,
)  # floats where the CLI's options are (the file records 0.0)


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_sharded_tree_file_is_byte_identical_on_each_benchmark_shape(shape: str, tmp_path: Path) -> None:
    corpus = tmp_path / f"{shape}.jsonl"
    _bench_writer()(corpus, 1500, SHAPES[shape])
    want = _one_process_tree([corpus], tmp_path / "one.json", FREQ_ONLY)
    assert len(json.loads(want)["nodes"]) == 200
    for n in (2, 3):
        assert _sharded_tree([corpus], n, FREQ_CFG) == want
    default = _one_process_tree([corpus], tmp_path / "default.json", [])
    assert _sharded_tree([corpus], 2, MinerConfig.preset("scienceworld")) == default


def _lines(ids: list[str], tokens: str) -> str:
    step = '{{"action": "do {0}", "token": "{0}<>"}}'
    return "".join(
        f'{{"id": "{i}", "success": {str(k % 3 > 0).lower()}, "task": "t{k % 2}", "env": "e", '
        f'"steps": [{", ".join(step.format(t) for t in tokens[k % 4 :] + tokens[: k % 3])}]}}\n'
        for k, i in enumerate(ids)
    )


def test_shards_whose_ids_interleave_are_placed_by_global_id_rank(tmp_path: Path) -> None:
    ids = [f"r{(k * 37) % 101:03d}" for k in range(101)]  # every shard spans the whole id range
    corpus = tmp_path / "c.jsonl"
    corpus.write_text(_lines(ids, "abcabcab"))
    want = _one_process_tree([corpus], tmp_path / "one.json", FREQ_ONLY)
    assert len(json.loads(want)["nodes"]) > 3
    assert _sharded_tree([corpus], 3, FREQ_CFG) == want
    dup = tmp_path / "dup.jsonl"  # an id in two shards: the one-process reader's policy applies
    dup.write_text(_lines(ids, "abcab") + _lines(ids[:1], "abc"))
    with pytest.raises(FastPathUnavailable, match="duplicate ids"):
        _sharded_tree([dup], 2, FREQ_CFG)


def test_gz_files_go_whole_to_one_shard_and_give_the_same_tree(tmp_path: Path) -> None:
    import gzip

    a, b = tmp_path / "a.jsonl.gz", tmp_path / "b.jsonl"
    a.write_bytes(gzip.compress(_lines([f"a{k:03d}" for k in range(60)], "abcabd").encode()))
    b.write_text(_lines([f"b{k:03d}" for k in range(200)], "abcab"))
    plan = plan_shards([a, b], 3)
    pieces = [p for shard in plan for p in shard]
    assert [p for p in pieces if p[0] == 0] == [(0, 0, -1)]  # the .gz file is never cut
    assert len(plan) == 3 and sum(1 for p in pieces if p[0] == 1) == 3  # the plain file is
    want = _one_process_tree([a, b], tmp_path / "one.json", FREQ_ONLY)
    assert _sharded_tree([a, b], 3, FREQ_CFG) == want


@settings(max_examples=60, deadline=None)
@given(lens=st.lists(st.integers(0, 30), min_size=1, max_size=20), n=st.integers(1, 6), end=st.booleans())
def test_plan_shards_cuts_at_line_starts_and_covers_every_byte(lens, n, end) -> None:
    import tempfile

    data = b"\n".join(b"x" * k for k in lens) + (b"\n" if end else b"")
    assume(data)  # an empty file has no shard (and nothing to mine: the one-process reader says so)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "c.jsonl"
        path.write_bytes(data)
        plan = plan_shards([path], n)
    pieces = [p for shard in plan for p in shard]
    assert 1 <= len(plan) <= n and all(len(s) == 1 for s in plan)
    assert pieces[0][1] == 0 and pieces[-1][2] == len(data)
    assert all(a[2] == b[1] for a, b in itertools.pairwise(pieces))  # contiguous, in order
    assert all(data[p[1] - 1 : p[1]] == b"\n" for p in pieces[1:])  # each later piece starts a line


def test_mine_ray_without_ray_is_one_line_naming_the_extra(tmp_path: Path, monkeypatch, capsys) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "ray" else real(name, *a)
    )
    code = main(["mine", str(SAMPLE), "--domain", "scienceworld", "--ray", "-o", str(tmp_path / "t.json")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1 and len(err) == 1 and "xtree_gym[ray]" in err[0] and "Traceback" not in err[0]
    assert not (tmp_path / "t.json").exists()


def test_mine_ray_at_an_address_nobody_answers_is_one_error_at_once(tmp_path: Path, capsys) -> None:
    pytest.importorskip("ray")
    import socket

    with socket.socket() as s:  # a port that was free a moment ago: nothing listens there now
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    corpus = tmp_path / "c.jsonl"
    corpus.write_text(_lines(["a", "b", "c"], "abcab"))
    out = tmp_path / "t.json"
    assert main(["mine", str(corpus), "--ray", "--ray-address", f"127.0.0.1:{port}", "-o", str(out)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert (
        len(err) == 1
        and f"no Ray cluster answers at 127.0.0.1:{port}" in err[0]
        and "--ray-address" in err[0]
    )
    assert not out.exists()


def test_mine_ray_on_a_missing_file_is_the_one_process_error_alone(tmp_path: Path, capsys) -> None:
    pytest.importorskip("ray")
    missing = tmp_path / "nope.jsonl"
    assert main(["mine", str(missing), "--ray", "-o", str(tmp_path / "t.json")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "does not exist" in err[0] and "--ray" not in err[0]


def test_importing_the_miner_and_building_the_parser_imports_no_ray() -> None:
    code = (
        "import sys, xtree_gym.mining, xtree_gym.mining.cli, xtree_gym.mining.sharded\n"
        "from xtree_gym.cli import build_parser\n"
        "build_parser(); xtree_gym.mining.fast_mine\n"
        "print(sorted(m for m in sys.modules if m == 'ray' or m.startswith('ray.')))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.slow
def test_mine_ray_on_a_local_two_worker_cluster_writes_the_one_process_tree(tmp_path: Path, capsys) -> None:
    ray = pytest.importorskip("ray")
    write = _bench_writer()
    corpora = []
    for shape in ("short", "long"):
        corpus = tmp_path / f"{shape}.jsonl"
        write(corpus, 2000, SHAPES[shape])
        corpora.append(corpus)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        for corpus in [*corpora, SAMPLE]:  # the sample has no tokens: --ray says so and one process mines it
            extra = ["--domain", "scienceworld"] if corpus == SAMPLE else FREQ_ONLY
            want = _one_process_tree([corpus], tmp_path / f"{corpus.name}.one.json", extra)
            out = tmp_path / f"{corpus.name}.ray.json"
            assert main(["mine", str(corpus), *extra, "--ray", "--ray-workers", "2", "-o", str(out)]) == 0
            assert out.read_bytes() == want
            err = capsys.readouterr().err
            assert ("mined in one process" in err) == (corpus == SAMPLE)
        out = tmp_path / "three.json"  # more workers than the cluster's CPUs: one error, no wait
        assert main(["mine", str(corpora[0]), "--ray", "--ray-workers", "3", "-o", str(out)]) == 1
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "the Ray cluster has 2 CPU(s)" in err[0] and not out.exists()
    finally:
        ray.shutdown()
