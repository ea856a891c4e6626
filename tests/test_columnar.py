"""The columnar corpus path: same trees as the object path, the validator's errors, Parquet, datasets."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from xtree_gym import MinerConfig, read_corpus, write_corpus
from xtree_gym.cli import main
from xtree_gym.corpus import Corpus, from_hf_dataset
from xtree_gym.corpus.columnar import ColumnarCorpus, load_corpus, read_columnar
from xtree_gym.errors import CorpusError
from xtree_gym.mining import mine

pa = pytest.importorskip("pyarrow")

CFG = MinerConfig(min_freq=2, eta=0.5, cap=12, p_len=1, p_succ=1)


@pytest.fixture(autouse=True)
def _columns_for_small_files(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests' files are small; the size rule would send them to the object path."""
    import xtree_gym.corpus.columnar

    monkeypatch.setattr(xtree_gym.corpus.columnar, "COLUMNAR_MIN_BYTES", 0)


def records(n: int, seed: int = 0, with_tokens: bool = True) -> list[dict[str, Any]]:
    """n trajectories over a small vocabulary with repeated motifs, in a shuffled line order."""
    rng = random.Random(seed)
    motifs = [["open<door>", "go<room>"], ["take<obj>", "put<obj,dest>", "look<>"]]
    out = []
    for i in range(n):
        toks: list[str] = []
        while len(toks) < rng.randint(3, 9):
            toks += (
                rng.choice(motifs) if rng.random() < 0.6 else [rng.choice(["wait<>", "look<>", "go<room>"])]
            )
        steps = []
        for j, t in enumerate(toks):
            step: dict[str, Any] = {"action": f"{t.split('<')[0]} thing{j}", "observation": f"obs {i}.{j}"}
            if with_tokens:
                step["token"] = t
            if j == 0:
                step["slots"] = {"X": f"thing{j}", "nested": {"deep": [1, {"k": None}]}}
            steps.append(step)
        rec = {
            "id": f"t{rng.randrange(10**6):06d}-{i}",
            "env": "toy",
            "task": rng.choice(["boil", "cook", "melt"]),
            "goal": "do it",
            "success": rng.random() < 0.7,
            "steps": steps,
        }
        if i % 3 == 0:
            rec["reward"] = 1.0
            rec["seed"] = i
        out.append(rec)
    rng.shuffle(out)
    return out


def write_lines(path: Path, recs: list[dict[str, Any]], extra: str = "") -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in recs) + extra, encoding="utf-8")
    return path


def test_columnar_tree_is_byte_identical_to_object_path(tmp_path: Path) -> None:
    recs = records(120)
    p = write_lines(tmp_path / "c.jsonl", recs)
    cc = load_corpus(p)
    assert isinstance(cc, ColumnarCorpus)
    assert cc.id_list() == sorted(r["id"] for r in recs)
    fast = mine(cc, CFG, name="toy")
    slow = mine(read_corpus(p).trajectories, CFG, name="toy")
    assert len(fast) > 3
    assert fast.to_json() == slow.to_json()
    # any line order, and the Python API given a path, give the same bytes
    random.Random(1).shuffle(recs)
    q = write_lines(tmp_path / "d.jsonl", recs)
    assert mine(str(q), CFG, name="toy").to_json() == fast.to_json()


def test_cli_mine_same_file_as_object_path_and_gz(tmp_path: Path) -> None:
    import gzip

    recs = records(60, seed=3)
    p = write_lines(tmp_path / "c.jsonl", recs)
    gz = tmp_path / "c.jsonl.gz"
    gz.write_bytes(gzip.compress(p.read_bytes()))
    args = ["--min-freq", "2", "--cap", "10", "--preset", "webshop"]
    assert main(["mine", str(gz), "-o", str(tmp_path / "a.json"), *args]) == 0
    cfg = MinerConfig.preset("webshop", min_freq=2, cap=10)
    expected = mine(read_corpus(p).trajectories, cfg)
    assert (tmp_path / "a.json").read_text() == expected.to_json()


@pytest.mark.parametrize(
    "bad,problem",
    [
        ("{bad json", "not valid JSON"),
        ('{"id": "x", "success": "yes", "steps": []}', "success is 'yes'"),
        ('{"id": "x", "success": true, "steps": [{"observation": "o"}]}', "action is None"),
        ('{"id": "x", "success": true, "task": null, "steps": []}', "task is None"),
        (
            '{"id": "x", "success": true, "steps": []} {"id": "y", "success": true, "steps": []}',
            "not valid JSON",
        ),
        ('{"id": "x", "success": true, "steps": [{"action": "a", "observation": 5}]}', "observation"),
    ],
)
def test_bad_line_falls_back_to_the_validator_with_file_line(tmp_path: Path, bad: str, problem: str) -> None:
    recs = records(30)
    p = write_lines(tmp_path / "c.jsonl", recs, extra="\n" + bad + "\n")
    with pytest.raises(CorpusError, match=problem) as exc:
        load_corpus(p)
    assert f"c.jsonl:{len(recs) + 2}" in str(exc.value)
    # --skip-bad keeps counting, and the good lines still mine
    corpus = load_corpus(p, skip_bad=True)
    assert isinstance(corpus, Corpus) and len(corpus.skipped) == 1 and corpus.skipped[0].line == len(recs) + 2
    assert mine(corpus, CFG).to_json() == mine(read_corpus(p, skip_bad=True), CFG).to_json()
    assert main(["mine", str(p), "-o", str(tmp_path / "t.json"), "--skip-bad", "--cap", "3"]) == 0


def test_cli_bad_line_is_one_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = write_lines(tmp_path / "c.jsonl", records(5), extra='{"id": 1, "success": true, "steps": {}}\n')
    assert main(["mine", str(p), "-o", str(tmp_path / "t.json")]) != 0
    err = capsys.readouterr().err
    assert "c.jsonl:6" in err and "steps is dict" in err and "Traceback" not in err
    assert not (tmp_path / "t.json").exists()


def test_tokenless_steps_go_through_the_canonicalizer(tmp_path: Path) -> None:
    recs = records(40, with_tokens=False)
    p = write_lines(tmp_path / "c.jsonl", recs)
    assert isinstance(load_corpus(p), Corpus)  # the object path: the canonicalizer needs the trajectory
    tree = mine(str(p), CFG, domain="scienceworld")
    assert tree.to_json() == mine(read_corpus(p).trajectories, CFG, domain="scienceworld").to_json()


def test_duplicate_ids_leave_the_tie_to_content(tmp_path: Path) -> None:
    recs = records(40)
    twin = json.loads(json.dumps(recs[0]))
    twin["success"] = not twin["success"]
    recs.append(twin)
    p = write_lines(tmp_path / "c.jsonl", recs)
    try:
        corpus = load_corpus(p)
    except CorpusError as exc:  # the reader may refuse duplicate ids: then it names them
        assert recs[0]["id"] in str(exc)
        return
    assert isinstance(corpus, Corpus)  # never the columnar path: content must break the tie
    a = mine(corpus, CFG).to_json()
    random.Random(2).shuffle(recs)
    assert mine(str(write_lines(tmp_path / "d.jsonl", recs)), CFG).to_json() == a


def test_integer_ids_and_blank_lines_stay_on_the_fast_path(tmp_path: Path) -> None:
    recs = records(20)
    for i, r in enumerate(recs):
        r["id"] = 1000 + i
    text = (
        "\n".join(json.dumps(r) for r in recs[:10])
        + "\n\n   \n"
        + "\n".join(json.dumps(r) for r in recs[10:])
    )
    p = tmp_path / "c.jsonl"
    p.write_text(text + "\n")
    cc = load_corpus(p)
    assert isinstance(cc, ColumnarCorpus) and len(cc) == 20
    assert mine(cc, CFG).to_json() == mine(read_corpus(p), CFG).to_json()


def test_tile_prints_line_order_on_both_paths(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    recs = records(15)
    p = write_lines(tmp_path / "c.jsonl", recs)
    mine(str(p), CFG).save(tmp_path / "t.json")
    assert main(["tile", str(tmp_path / "t.json"), str(p)]) == 0
    fast = capsys.readouterr().out
    q = write_lines(tmp_path / "q.jsonl", recs, extra="not json\n")
    assert main(["tile", str(tmp_path / "t.json"), str(q), "--skip-bad"]) == 0
    slow = capsys.readouterr().out
    assert [line.split(":")[0] for line in fast.splitlines()[:-1]] == [r["id"] for r in recs]
    assert fast.splitlines() == slow.splitlines()


def test_parquet_round_trip_convert_and_mine(tmp_path: Path) -> None:
    recs = records(50)
    p = write_lines(tmp_path / "c.jsonl", recs)
    write_corpus(tmp_path / "ref.jsonl", read_corpus(p))  # the canonical JSONL of these records
    assert main(["convert", str(p), str(tmp_path / "c.parquet")]) == 0
    assert main(["convert", str(tmp_path / "c.parquet"), str(tmp_path / "back.jsonl")]) == 0
    assert (tmp_path / "back.jsonl").read_bytes() == (tmp_path / "ref.jsonl").read_bytes()
    pq = read_corpus(tmp_path / "c.parquet")
    assert [t.to_dict() for t in pq] == [t.to_dict() for t in read_corpus(p)]
    assert isinstance(read_columnar(tmp_path / "c.parquet"), ColumnarCorpus)
    assert mine(str(tmp_path / "c.parquet"), CFG).to_json() == mine(read_corpus(p), CFG).to_json()
    # written twice: the same bytes
    write_corpus(tmp_path / "again.parquet", pq)
    write_corpus(tmp_path / "again2.parquet", pq)
    assert (tmp_path / "again.parquet").read_bytes() == (tmp_path / "again2.parquet").read_bytes()


def test_convert_never_overwrites_its_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = write_lines(tmp_path / "c.jsonl", records(3))
    before = p.read_bytes()
    assert main(["convert", str(p), str(p)]) != 0
    assert "is the input file" in capsys.readouterr().err and p.read_bytes() == before


def test_parquet_bad_row_names_the_row(tmp_path: Path) -> None:
    recs = records(4)
    recs[2]["steps"][0]["action"] = None
    write_corpus(tmp_path / "c.parquet", recs)
    with pytest.raises(CorpusError, match=r"c\.parquet row 3: steps\[0\]\.action is None"):
        load_corpus(tmp_path / "c.parquet")


def test_hf_dataset_is_read_from_arrow_not_row_dicts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    datasets = pytest.importorskip("datasets")
    recs = records(30)
    p = write_lines(tmp_path / "c.jsonl", recs)
    write_corpus(tmp_path / "c.parquet", read_corpus(p))
    ds = datasets.Dataset(pa.parquet.read_table(tmp_path / "c.parquet"))

    def no_rows(self: Any) -> Any:
        raise AssertionError("iterated row dicts")

    monkeypatch.setattr(datasets.Dataset, "__iter__", no_rows)
    monkeypatch.setattr(datasets.Dataset, "__getitem__", no_rows)
    assert mine(ds, CFG).to_json() == mine(read_corpus(p), CFG).to_json()
    assert [t.to_dict() for t in from_hf_dataset(ds)] == [t.to_dict() for t in read_corpus(p)]


# -- the block scans: numpy reductions equal the obviously-correct line loops ----------------------
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from xtree_gym.corpus.columnar import _n_records, _strict_problem, _strict_problem_slow  # noqa: E402

_LINE = st.one_of(
    st.just(b""),
    st.sampled_from([b" ", b"\t", b" \r", b"\x0b", b"\x0c "]),
    st.builds(lambda k: b'{"a": ' + b"[" * k + b"1" + b"]" * k + b"}", st.integers(0, 130)),
    st.builds(lambda k: b'{"a": ' + b"[{" * k + b"}]" * k + b"}", st.integers(0, 70)),
    st.builds(lambda k: b'{"n": ' + b"7" * k + b"}", st.sampled_from([1, 4299, 4300, 4301, 5000])),
    st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"")),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_LINE, max_size=8), st.booleans())
def test_block_scans_equal_the_line_by_line_versions(lines: list[bytes], final_newline: bool) -> None:
    block = b"\n".join(lines) + (b"\n" if final_newline and lines else b"")
    assert _strict_problem(block) == _strict_problem_slow(block)
    assert _n_records(block) == sum(1 for line in block.split(b"\n") if line.strip())
