"""Corpus format (round trip, errors with file:line) and the core CLI commands."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from xtree_gym import read_corpus, write_corpus
from xtree_gym.cli import main
from xtree_gym.corpus import from_hf_dataset
from xtree_gym.errors import CorpusError

RECORD = {
    "id": "t1",
    "env": "toy",
    "task": "boil",
    "goal": "boil water",
    "success": True,
    "reward": 1.0,
    "steps": [
        {
            "action": "open door",
            "observation": "ok",
            "token": "open<door>",
            "slots": {"X": "door"},
            "extra_step": 1,
        }
    ],
    "custom": {"keep": [1, 2]},
}


def test_roundtrip_keeps_unknown_keys(tmp_path: Path) -> None:
    p = tmp_path / "c.jsonl"
    p.write_text(json.dumps(RECORD) + "\n")
    corpus = read_corpus(p)
    assert corpus[0].extra == {"custom": {"keep": [1, 2]}}
    assert corpus[0].steps[0].extra == {"extra_step": 1}
    out = tmp_path / "out.jsonl.gz"
    write_corpus(out, corpus)
    again = json.loads(gzip.decompress(out.read_bytes()).decode())
    assert again == RECORD


@pytest.mark.parametrize(
    "line,problem",
    [
        ("{bad json", "not valid JSON"),
        ('{"id": "x", "success": true}', "missing required key 'steps'"),
        ('{"id": "x", "success": "yes", "steps": []}', "success is 'yes'"),
        ('{"id": "x", "success": true, "steps": [{"observation": "o"}]}', r"steps\[0\]\.action is None"),
        ("[1, 2]", "record is list, expected a JSON object"),
    ],
)
def test_malformed_line_names_file_and_line(tmp_path: Path, line: str, problem: str) -> None:
    p = tmp_path / "bad.jsonl"
    p.write_text(json.dumps(RECORD) + "\n\n" + line + "\n")
    with pytest.raises(CorpusError, match=rf"bad\.jsonl:3: {problem}"):
        read_corpus(p)
    corpus = read_corpus(p, skip_bad=True)
    assert len(corpus) == 1 and [b.line for b in corpus.skipped] == [3]


def test_hf_dataset_loader() -> None:
    datasets = pytest.importorskip(
        "datasets", reason="the HF datasets bridge is tested when `datasets` is installed"
    )
    ds = datasets.Dataset.from_list([{k: v for k, v in RECORD.items() if k != "custom"}])
    corpus = from_hf_dataset(ds)
    assert corpus[0].steps[0].token == "open<door>"


def test_hf_rows_bad_row_index() -> None:
    with pytest.raises(CorpusError, match="dataset row 1"):
        from_hf_dataset([RECORD, {"id": "y"}])


def _corpus_file(tmp_path: Path, n: int = 12) -> Path:
    rows = []
    for i in range(n):
        toks = ["open<door>", "navigate<hallway>", "take<substance>", "observe<room>"]
        rows.append(
            {
                "id": f"t{i}",
                "task": f"task{i % 3}",
                "success": i % 4 != 0,
                "steps": [{"action": t.replace("<", " ").rstrip(">"), "token": t} for t in toks * 2],
            }
        )
    p = tmp_path / "corpus.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return p


def test_cli_mine_show_tile_stats(tmp_path: Path, capsys) -> None:
    corpus = _corpus_file(tmp_path)
    out = tmp_path / "tree.json"
    assert main(["mine", str(corpus), "--preset", "webshop", "--min-freq", "3", "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert "depth histogram" in text and "compression ratio" in text and "bound reached" in text
    assert main(["show", str(out)]) == 0
    table = capsys.readouterr().out
    assert "S0" in table
    assert main(["show", str(out), "--hierarchy"]) == 0
    assert "d=" in capsys.readouterr().out
    assert main(["tile", str(out), str(corpus), "--limit", "2"]) == 0
    assert "coverage:" in capsys.readouterr().out
    assert main(["stats", str(corpus), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["n_trajectories"] == 12


def test_cli_errors_are_one_line(tmp_path: Path, capsys) -> None:
    assert main(["mine", str(tmp_path / "nope.jsonl"), "-o", str(tmp_path / "t.json")]) == 1
    err = capsys.readouterr().err
    assert "does not exist" in err and "Traceback" not in err and err.count("\n") == 1
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    assert main(["mine", str(empty), "-o", str(tmp_path / "t.json")]) == 1
    assert "no trajectories" in capsys.readouterr().err
    raw = tmp_path / "raw.jsonl"
    raw.write_text(json.dumps({"id": "a", "success": True, "steps": [{"action": "look around"}]}) + "\n")
    assert main(["mine", str(raw), "-o", str(tmp_path / "t.json")]) == 1
    assert "--domain" in capsys.readouterr().err


def test_binary_and_fake_gzip_inputs_are_one_line_errors(tmp_path: Path, capsys) -> None:
    (tmp_path / "bin.jsonl").write_bytes(b"\xff\xfe\x00garbage\n")
    (tmp_path / "fake.jsonl.gz").write_bytes(b"not gzip at all")
    # Invalid UTF-8 is a bad line (named, skippable); a fake gzip makes the whole file unreadable.
    for name, problem in (
        ("bin.jsonl", r"bin.jsonl:1: not UTF-8"),
        ("fake.jsonl.gz", "cannot read the file"),
    ):
        with pytest.raises(CorpusError, match=problem):
            read_corpus(tmp_path / name)
        assert main(["stats", str(tmp_path / name)]) == 1
        err = capsys.readouterr().err
        assert name in err and err.count("\n") == 1
    tree = tmp_path / "tree.json"
    tree.write_bytes(b"\xff\xfe")
    assert main(["show", str(tree)]) == 1
    assert "not UTF-8" in capsys.readouterr().err


def test_unwritable_output_is_one_line_error(tmp_path: Path, capsys) -> None:
    corpus = _corpus_file(tmp_path)
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert main(["mine", str(corpus), "--min-freq", "3", "-o", str(blocker / "sub" / "t.json")]) == 1
    err = capsys.readouterr().err
    assert "error" in err and err.count("\n") == 1


def test_a_reader_that_stops_early_is_not_an_error(tmp_path: Path, capsys) -> None:
    """``xtree show tree.json | head -3``: the pipe closes under the writer; exit 0, nothing on stderr."""
    import subprocess
    import sys

    corpus = _corpus_file(tmp_path)
    out = tmp_path / "tree.json"
    assert main(["mine", str(corpus), "--preset", "webshop", "--min-freq", "3", "-o", str(out)]) == 0
    capsys.readouterr()
    for args in (["show", str(out)], ["show", str(out), "--json"], ["stats", str(corpus)]):
        proc = subprocess.Popen(
            [sys.executable, "-m", "xtree_gym", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.close()  # before the first write: every write meets a closed pipe
        err = proc.stderr.read().decode()
        assert proc.wait(timeout=60) == 0, (args, err)
        assert err == "", (args, err)
