"""``xtree mine``'s one-pass reader (``xtree_gym.corpus.stream``): same trees, same errors, less imported.

Every tree is compared byte for byte with the object path (``read_corpus`` -> ``Trajectory`` ->
``mine``), the way trees were made before the reader existed; every input the reader must not judge
is checked to go to the validator, which names the line as before.
"""

from __future__ import annotations

import gzip
import json
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from xtree_gym import MinerConfig, read_corpus
from xtree_gym.cli import main
from xtree_gym.corpus.columnar import FastPathUnavailable
from xtree_gym.errors import CorpusError
from xtree_gym.mining import mine

pytest.importorskip("msgspec")
from xtree_gym.corpus.stream import StreamCorpus, read_encoded

ROOT = Path(__file__).resolve().parent.parent
CFG = MinerConfig(min_freq=2, eta=0.5, cap=12, p_len=1, p_succ=1)


def records(n: int, seed: int = 0, int_ids: bool = False) -> list[dict[str, Any]]:
    """n trajectories with repeated motifs, every optional field used somewhere, shuffled."""
    rng = random.Random(seed)
    motifs = [["open<door>", "go<room>"], ["take<obj>", "put<obj,dest>", "look<>"]]
    out = []
    for i in range(n):
        toks: list[str] = []
        while len(toks) < rng.randint(2, 9):
            toks += (
                rng.choice(motifs) if rng.random() < 0.6 else [rng.choice(["wait<>", "ünï<>", "go<room>"])]
            )
        steps: list[dict[str, Any]] = []
        for j, t in enumerate(toks):
            step: dict[str, Any] = {"action": f"{t.split('<')[0]} thing{j}", "token": t}
            if j % 2 == 0:
                step["observation"] = f"obs {i}.{j} [x] {{y}}"
            if j == 1:
                step["thought"] = None if i % 2 else "hmm"
            if j == 0:
                step["slots"] = {"X": f"thing{j}", "nested": {"deep": [1, {"k": None}]}}
            if j == 2:
                step["extra_key"] = [1, 2.5, "s"]
            steps.append(step)
        rec: dict[str, Any] = {
            "id": rng.randrange(10**9) * 1000 + i if int_ids else f"t{rng.randrange(10**6):06d}-{i}",
            "success": rng.random() < 0.7,
            "steps": steps,
        }
        if i % 4:
            rec["env"] = rng.choice(["toy", "sim"])
            rec["task"] = rng.choice(["boil", "cook", "melt"])
        if i % 3 == 0:
            rec["reward"] = rng.choice([1, 0.5, None])
            rec["seed"] = {"any": ["thing"]}
        out.append(rec)
    rng.shuffle(out)
    return out


def write(path: Path, recs: list[dict[str, Any]], sep: str = "\n", extra: str = "") -> Path:
    path.write_text(
        sep.join(json.dumps(r, ensure_ascii=False) for r in recs) + "\n" + extra, encoding="utf-8"
    )
    return path


def write_case(tmp_path: Path, recs: list[dict[str, Any]], case: str, split: int) -> list[Path]:
    """The corpus files of a test case: blank lines or CRLF between records, or two files (the second
    gzipped, from record ``split`` on), else one plain JSONL file."""
    if case == "two_files_and_gz":
        gz = tmp_path / "b.jsonl.gz"
        gz.write_bytes(gzip.compress(write(tmp_path / "b.jsonl", recs[split:]).read_bytes()))
        return [write(tmp_path / "a.jsonl", recs[:split]), gz]
    sep = {"blank_lines": "\n\n  \n", "crlf": "\r\n"}.get(case, "\n")
    return [write(tmp_path / "a.jsonl", recs, sep)]


def object_tree(paths: list[Path], cfg: MinerConfig = CFG) -> str:
    """The tree the object path makes (what every ``xtree mine`` wrote before the one-pass reader)."""
    return mine(read_corpus(paths).trajectories, cfg, name="toy").to_json()


@pytest.mark.parametrize(
    "case",
    ["plain", "int_ids", "blank_lines", "crlf", "two_files_and_gz", "sorted_input", "empty_steps"],
)
def test_one_pass_tree_is_byte_identical_to_the_object_path(tmp_path: Path, case: str) -> None:
    recs = records(150, seed=len(case), int_ids=case == "int_ids")
    if case == "empty_steps":
        recs[3]["steps"] = []
    if case == "sorted_input":
        recs.sort(key=lambda r: str(r["id"]))
    paths = write_case(tmp_path, recs, case, split=70)
    corpus = read_encoded(paths)
    assert isinstance(corpus, StreamCorpus) and len(corpus) == len(recs)
    assert corpus.ids == sorted(str(r["id"]) for r in recs)
    expected = object_tree(paths)
    tree = mine(corpus, CFG, name="toy")
    assert len(tree) > 3  # it really mined
    assert tree.to_json() == expected
    assert mine([str(p) for p in paths], CFG, name="toy").to_json() == expected  # the API given paths
    out = tmp_path / "tree.json"
    assert main(["mine", *map(str, paths), "-o", str(out), "--name", "toy", "--cap", "12"]) == 0
    cfg = MinerConfig.preset("scienceworld", cap=12)
    assert out.read_text() == mine(read_corpus(paths).trajectories, cfg, name="toy").to_json()


def test_examples_are_the_records_the_validator_reads(tmp_path: Path) -> None:
    recs = records(40, seed=7)
    p = write(tmp_path / "c.jsonl", recs)
    corpus = read_encoded(p)
    expected = {t.id: t for t in read_corpus(p).trajectories}
    for i in (0, 17, len(recs) - 1):
        assert corpus[i] == expected[corpus.ids[i]]
    assert len(list(corpus)) == len(recs)


def test_a_file_changed_under_the_reader_is_one_clear_error(tmp_path: Path) -> None:
    recs = records(10, seed=2)
    p = write(tmp_path / "c.jsonl", recs)
    corpus = read_encoded(p)
    recs.sort(key=lambda r: str(r["id"]), reverse=True)
    write(p, recs)
    with pytest.raises(CorpusError, match="mine again"):
        corpus.prefetch(range(len(corpus)))


@pytest.mark.parametrize(
    "line,problem",
    [
        ('{"id": "x", "success": true, "steps": [{"action": "a"}]}', None),  # no token: canonicalizer
        ('{"id": "x", "success": true, "steps": [], "junk": ' + "[" * 100 + "]" * 100 + "}", "nested deeper"),
        ('{"id": "x", "success": true, "steps": [], "n": ' + "7" * 4301 + "}", "4300"),
        ('{"id": "x", "success": true, "steps": [], "r": NaN}', "NaN"),
        ('{"id": "x", "success": true, "reward": 1e400, "steps": []}', "infinity"),
        ('{"id": "x", "success": true, "steps": [], "score": -2.5E+999}', "infinity"),  # a key it skips
        ('{"id": "x\\ud83d", "success": true, "steps": []}', "surrogate"),
        ('{"id": "x", "success": true, "env": null, "steps": []}', "env is None"),
        ('{"id": "x", "success": true, "steps": []} {"id": "y", "success": true, "steps": []}', "valid JSON"),
        ('{"id": "x", "success": true,\n"steps": []}', "valid JSON"),
        ('{"id": true, "success": true, "steps": []}', "id is True"),
        ('{"id": "x", "success": true, "steps": [{"action": "a", "token": "t", "slots": [1]}]}', "slots"),
    ],
)
def test_what_the_reader_must_not_judge_goes_to_the_validator(
    tmp_path: Path, line: str, problem: str | None
) -> None:
    p = write(tmp_path / "c.jsonl", records(20), extra=line + "\n")
    with pytest.raises(FastPathUnavailable):
        read_encoded(p)
    if problem is None:  # valid, but tokenless: the canonicalizer's path says so
        with pytest.raises(Exception, match="token"):
            mine(str(p), CFG)
        return
    with pytest.raises(CorpusError, match=problem) as exc:
        mine(str(p), CFG)
    assert "c.jsonl:21" in str(exc.value)
    assert main(["mine", str(p), "-o", str(tmp_path / "t.json")]) == 1
    assert not (tmp_path / "t.json").exists()


def test_exponent_shapes_that_do_not_overflow_stay_on_the_one_pass(tmp_path: Path) -> None:
    """Hex ids ("5e123...") and 1e300 look like 1e400 to the substring prefilter; decoding clears them."""
    recs = records(20)
    for i, r in enumerate(recs):
        r["id"] = f"{i:02d}5e123abc"
    recs[3]["score"] = 1e300
    p = write(tmp_path / "c.jsonl", recs)
    assert isinstance(read_encoded(p), StreamCorpus)
    assert mine(str(p), CFG, name="toy").to_json() == object_tree([p])


def test_depth_at_the_limit_stays_on_the_one_pass(tmp_path: Path) -> None:
    """Exactly 100 levels is allowed (record 1, steps 2, step 3, slots 4, then 96 lists), 101 is not."""
    ok = {"id": "z", "success": True, "steps": [{"action": "a", "token": "t", "slots": {"k": []}}]}
    text = json.dumps(ok).replace("[]", "[" * 96 + "]" * 96)
    p = write(tmp_path / "c.jsonl", records(20), extra=text + "\n")
    assert isinstance(read_encoded(p), StreamCorpus)
    assert mine(str(p), CFG, name="toy").to_json() == object_tree([p])
    p.write_text(p.read_text().replace("[" * 96, "[" * 97).replace("]" * 96, "]" * 97))
    with pytest.raises(FastPathUnavailable):
        read_encoded(p)
    with pytest.raises(CorpusError, match="nested deeper"):
        read_corpus(p)


def test_repeated_ids_keep_the_validators_policy(tmp_path: Path) -> None:
    recs = records(20)
    p = write(tmp_path / "c.jsonl", [*recs, recs[4]])
    with pytest.raises(FastPathUnavailable):
        read_encoded(p)
    assert main(["mine", str(p), "-o", str(tmp_path / "t.json")]) == 1
    assert main(["mine", str(p), "-o", str(tmp_path / "t.json"), "--keep-duplicates", "--cap", "5"]) == 0


def test_xtree_mine_imports_neither_pyarrow_nor_gymnasium(tmp_path: Path) -> None:
    """A corpus above the columnar size rule (4 MiB): read in one pass, nothing else imported."""
    line = json.dumps(records(1, seed=5)[0])
    with open(tmp_path / "big.jsonl", "w", encoding="utf-8") as fh:
        for i in range((5 << 20) // len(line) + 1):
            fh.write(line.replace('"id": "', f'"id": "{i:07d}', 1) + "\n")
    code = (
        "import sys\nfrom xtree_gym.cli import main\nrc = main(sys.argv[1:])\n"
        "print('LOADED', sorted({'pyarrow', 'gymnasium', 'torch'} & set(sys.modules)), rc)"
    )
    out = tmp_path / "tree.json"
    argv = ["mine", str(tmp_path / "big.jsonl"), "-o", str(out), "--cap", "5", "--min-task-types", "1"]
    proc = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, cwd=ROOT)
    assert "LOADED [] 0" in proc.stdout, proc.stderr[-2000:]
    assert json.loads(out.read_text())["corpus"]["n_trajectories"] > 1000


@pytest.mark.parametrize("probe_first", [False, True])
def test_envs_register_when_gymnasium_is_imported_after_xtree_gym(probe_first: bool) -> None:
    """``probe_first``: an extras check (``find_spec("gymnasium")``) runs before the import; it used to use up
    the registration hook, so ``gym.make("XTree-...")`` then found no id."""
    pytest.importorskip("gymnasium")
    probe = "import importlib.util\nassert importlib.util.find_spec('gymnasium')\n" if probe_first else ""
    code = (
        f"import sys, xtree_gym\n{probe}assert 'gymnasium' not in sys.modules\nimport gymnasium as gym\n"
        "print('IDS', sum(k.startswith('XTree-') for k in gym.registry))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    from xtree_gym.envs import ENV_SPECS

    assert f"IDS {len(ENV_SPECS)}" in proc.stdout, proc.stderr[-2000:]


def plain_records(n: int, seed: int = 0, int_ids: bool = False) -> list[dict[str, Any]]:
    """:func:`records` with only the format's own keys and scalar slots: the lines the one-call decode takes."""
    out = records(n, seed, int_ids)
    for r in out:
        r.pop("seed", None)
        for s in r["steps"]:
            s.pop("extra_key", None)
            if "slots" in s:
                s["slots"] = {"X": s["slots"]["X"]}
    return out


@pytest.mark.parametrize("case", ["plain", "int_ids", "blank_lines", "crlf", "two_files_and_gz", "mixed"])
def test_small_blocks_give_the_same_tree_and_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    """Many blocks of a few lines each: whole blocks decoded in one call where they are plain JSONL,
    line by line where they are not; the tree and every record read back equal the validator's."""
    import xtree_gym.corpus.stream as stream

    monkeypatch.setattr(stream, "STREAM_CHUNK_BYTES", 700)
    calls = {"one_call": 0, "blocks": 0}
    object_lines = stream._object_lines

    def spy(block: bytes) -> int:
        calls["blocks"] += 1
        n = object_lines(block)
        calls["one_call"] += n > 0
        return n

    monkeypatch.setattr(stream, "_object_lines", spy)
    recs = plain_records(120, seed=3, int_ids=case == "int_ids")
    if case == "mixed":
        recs[10:20] = records(10, seed=9)  # unknown keys: those blocks go line by line
    paths = write_case(tmp_path, recs, case, split=50)
    corpus = read_encoded(paths)
    assert len(corpus) == len(recs) and calls["blocks"] > 10
    if case in ("blank_lines", "crlf"):
        assert calls["one_call"] <= 1  # at most a block of the last line alone (a bare newline ends it)
    else:
        assert calls["one_call"] > calls["blocks"] // 2
    assert mine(corpus, CFG, name="toy").to_json() == object_tree(paths)
    expected = {t.id: t for t in read_corpus(paths).trajectories}
    rows = [*range(0, len(recs), 7), len(recs) - 1]
    corpus.prefetch(rows)
    assert [corpus[i] for i in rows] == [expected[corpus.ids[i]] for i in rows]
    assert len(rows) == 19


@pytest.mark.parametrize(
    "extra",
    [
        '{"id": "x", "success": true, "steps": []}{"id": "y", "success": true, "steps": []}\n\n',
        '{"id": "x", "success": true, "steps": [\n{"action": "a", "token": "t"}]}\n'
        '{"id": "y", "success": true, "steps": []}{"id": "z", "success": true, "steps": []}\n',
    ],
)
def test_lines_that_only_add_up_still_go_to_the_validator(tmp_path: Path, extra: str) -> None:
    """Two records on one line beside a blank line, or beside a record split over two lines: the
    counts agree with one record a line, the lines do not; the validator names the line."""
    p = write(tmp_path / "c.jsonl", plain_records(5), extra=extra)
    with pytest.raises(FastPathUnavailable):
        read_encoded(p)
    with pytest.raises(CorpusError, match=r"c\.jsonl:6"):
        read_corpus(p)
