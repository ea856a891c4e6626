"""Issue 16, "Data and files": the four rules every command must keep, each checked on real files.

1. Never overwrite an input (through ``..``, symlinks, hard links), in every command that writes.
2. One clear error, never a traceback (deep JSON, lone surrogates, mistyped tree fields, deep chains,
   invalid UTF-8, a directory as input, an unwritable output).
3. Nothing accepted silently that would skew a tree (duplicate ids, NaN/Infinity, impossible trees).
4. No debris: a killed write leaves the old file and, by the next run, no temp file.

The last test runs the whole bad-input sweep (``benchmarks/bad_input_sweep.py``) and wants every
case handled.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from xtree_gym import read_corpus
from xtree_gym.cli import main
from xtree_gym.errors import CorpusError, TreeFormatError
from xtree_gym.mining.tree import XTree

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).parent / "data" / "render"
SWEEP_PATH = ROOT / "benchmarks" / "bad_input_sweep.py"


def _sweep_module():
    spec = importlib.util.spec_from_file_location("bad_input_sweep", SWEEP_PATH)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


SWEEP = _sweep_module()


def _corpus(tmp_path: Path, lines: list[str] | None = None, name: str = "c.jsonl") -> Path:
    p = tmp_path / name
    p.write_text("\n".join(SWEEP.good_lines() if lines is None else lines) + "\n")
    return p


def _digest(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def _one_error(capsys, command: str) -> str:
    err = capsys.readouterr().err
    assert err.startswith(f"xtree {command}: error: ") and err.count("\n") == 1, err
    return err


# -- 1. never overwrite an input ----------------------------------------------------------------------
WRITERS = {  # command -> argv builder (tree, corpus, output)
    "mine": lambda t, c, o: ["mine", c, "-o", o],
    "canon": lambda t, c, o: ["canon", c, "--domain", "scienceworld", "-o", o],
    "convert": lambda t, c, o: ["canon", c, "--format", "agentlab", "-o", o],
    "report-corpus": lambda t, c, o: ["report", t, "--corpus", c, "-o", o],
    "cards": lambda t, c, o: ["cards", t, "--corpus", c, "-o", o],
    "mdl": lambda t, c, o: ["mdl", c, "--json", o],
}


@pytest.mark.parametrize("alias", ["same", "dotdot", "symlink", "hardlink"])
@pytest.mark.parametrize("command", sorted(WRITERS))
def test_no_command_writes_over_its_input(tmp_path: Path, capsys, command: str, alias: str) -> None:
    corpus = _corpus(tmp_path)
    tree = tmp_path / "tree.json"
    tree.write_text((DATA / "sw_tree.json").read_text())
    (tmp_path / "sub").mkdir()
    out = {
        "same": corpus,
        "dotdot": tmp_path / "sub" / ".." / corpus.name,
        "symlink": tmp_path / "link.jsonl",
        "hardlink": tmp_path / "hard.jsonl",
    }[alias]
    if alias == "symlink":
        out.symlink_to(corpus)
    elif alias == "hardlink":
        os.link(corpus, out)
    before = _digest(corpus)
    assert main(WRITERS[command](str(tree), str(corpus), str(out))) == 1
    assert "is the input file" in _one_error(capsys, command.split("-")[0].replace("convert", "canon"))
    assert _digest(corpus) == before


@pytest.mark.parametrize("command", ["report", "cards", "plot"])
def test_report_cards_plot_refuse_to_write_over_the_tree(tmp_path: Path, capsys, command: str) -> None:
    tree = tmp_path / "tree.json"
    tree.write_text((DATA / "sw_tree.json").read_text())
    before = _digest(tree)
    if command == "plot":  # the folder holds an input under a name plot writes
        png = tmp_path / "hierarchy.png"
        png.write_bytes(b"my own picture")
        assert main(["plot", str(tree), "--corpus", str(png), "-o", str(tmp_path)]) == 1
        assert png.read_bytes() == b"my own picture"
    else:
        os.link(tree, tmp_path / "hard.json")
        assert main([command, str(tree), "-o", str(tmp_path / "hard.json")]) == 1
    assert "is the input file" in _one_error(capsys, command)
    assert _digest(tree) == before


# -- 2. one clear error, never a traceback ------------------------------------------------------------
BAD_LINES = {
    "deep": ("[" * 100_000 + "]" * 100_000, "nested deeper than 100 levels"),
    "surrogate": (
        '{"id": "x", "success": true, "steps": [{"action": "open \\ud83d door"}]}',
        "lone surrogate escape",
    ),
    "nan": ('{"id": "x", "success": true, "reward": NaN, "steps": []}', "NaN is not a number JSON allows"),
    "infinity": (
        '{"id": "x", "success": true, "steps": [], "score": -Infinity}',
        "-Infinity is not a number",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_LINES))
@pytest.mark.parametrize("command", ["mine", "stats", "canon", "report"])
def test_bad_line_is_one_error_with_its_line_and_skippable(tmp_path: Path, capsys, command, case) -> None:
    line, problem = BAD_LINES[case]
    corpus = _corpus(tmp_path, [*SWEEP.good_lines(), line])
    argv = {
        "mine": ["mine", str(corpus), "-o", str(tmp_path / "t.json")],
        "stats": ["stats", str(corpus)],
        "canon": ["canon", str(corpus), "--domain", "scienceworld", "-o", str(tmp_path / "o.jsonl")],
        "report": [
            "report",
            str(DATA / "sw_tree.json"),
            "--corpus",
            str(corpus),
            "-o",
            str(tmp_path / "r.html"),
        ],
    }[command]
    assert main(argv) == 1
    err = _one_error(capsys, command)
    assert f"c.jsonl:{len(SWEEP.good_lines()) + 1}: {problem}" in err, err
    assert main([*argv, "--skip-bad"]) == 0  # the 12 good records go on; the bad one is reported
    assert "skipped" in capsys.readouterr().err


def test_invalid_utf8_names_its_line_and_skip_bad_skips_it(tmp_path: Path) -> None:
    p = tmp_path / "c.jsonl"
    good = SWEEP.good_lines(3)
    p.write_bytes((good[0] + "\n" + good[1] + "\n").encode() + b'{"id": "\xff"}\n' + good[2].encode() + b"\n")
    with pytest.raises(CorpusError, match=r"c\.jsonl:3: not UTF-8 text"):
        read_corpus(p)
    c = read_corpus(p, skip_bad=True)
    assert [t.id for t in c] == ["ep0", "ep1", "ep2"] and [b.line for b in c.skipped] == [3]


def test_a_surrogate_that_reaches_a_writer_is_one_error_and_no_temp(tmp_path: Path) -> None:
    from xtree_gym.corpus import Step, Trajectory, write_corpus

    out = tmp_path / "o.jsonl"
    with pytest.raises(CorpusError, match="lone surrogate"):
        write_corpus(out, [Trajectory("a", [Step("open \ud83d door")], True)])
    assert list(tmp_path.iterdir()) == []


TREE_FIELDS = {  # top-level or node field -> a wrong value, the message
    "config": ([1, 2], "config is list"),
    "corpus": ("sw", "corpus is str"),
    "primitive_counts": (["a"], "primitive_counts is list"),
    "example": (7, "example is 7"),
}


@pytest.mark.parametrize("field", sorted(TREE_FIELDS))
def test_tree_with_a_mistyped_field_is_one_error(tmp_path: Path, capsys, field: str) -> None:
    d = json.loads((DATA / "sw_tree.json").read_text())
    value, message = TREE_FIELDS[field]
    (d["nodes"][0] if field == "example" else d)[field] = value
    p = tmp_path / "t.json"
    p.write_text(json.dumps(d))
    for argv in (["show", str(p)], ["report", str(p), "-o", str(tmp_path / "r.html")]):
        assert main(argv) == 1
        assert message in _one_error(capsys, argv[0])


def test_show_hierarchy_walks_a_1500_deep_chain(tmp_path: Path, capsys) -> None:
    p = tmp_path / "chain.json"
    p.write_text(json.dumps(SWEEP.chain_tree(1500)))
    assert main(["show", str(p), "--hierarchy"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].startswith("S1499  d=1500") and lines[1501] == "  " * 1500 + "a"
    assert lines[-1] == f"  t{1499 % 7}"  # preorder, left child first: the root's right token comes last
    assert len(lines) == 1 + 1500 + 1500 + 1  # header, nodes, their right tokens, the leftmost "a"


def test_a_directory_is_called_a_directory(tmp_path: Path, capsys) -> None:
    for argv in (
        ["stats", str(tmp_path)],
        ["show", str(tmp_path)],
        ["canon", str(tmp_path), "--format", "eto", "--domain", "webshop", "-o", str(tmp_path / "o.jsonl")],
    ):
        assert main(argv) == 1
        assert "is a directory" in _one_error(capsys, argv[0])


def test_an_unwritable_output_is_named_not_its_temp_file(tmp_path: Path, capsys) -> None:
    corpus = _corpus(tmp_path)
    assert main(["mine", str(corpus), "-o", "/proc/xtree-cannot-write.json"]) == 1
    err = _one_error(capsys, "mine")
    assert "/proc/xtree-cannot-write.json:" in err and ".tmp" not in err


# -- 3. nothing accepted silently ------------------------------------------------------------------
def test_duplicate_ids_are_an_error_or_kept_and_counted(tmp_path: Path, capsys) -> None:
    good = SWEEP.good_lines()
    corpus = _corpus(tmp_path, [*good, good[3]])
    with pytest.raises(
        CorpusError, match=r"c\.jsonl:13: trajectory id 'ep3' again \(first at .*c\.jsonl:4\)"
    ):
        read_corpus(corpus)
    across = _corpus(tmp_path, [good[3]], name="more.jsonl")  # across files too
    with pytest.raises(CorpusError, match=r"more\.jsonl:1: trajectory id 'ep3' again"):
        read_corpus([_corpus(tmp_path, good, name="a.jsonl"), across])
    assert main(["mine", str(corpus), "-o", str(tmp_path / "t.json")]) == 1
    assert "--keep-duplicates" in _one_error(capsys, "mine")
    assert main(["stats", str(corpus), "--keep-duplicates", "--json"]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out)["n_duplicate_ids"] == 1 and json.loads(out.out)["n_trajectories"] == 13
    assert "kept 1 record(s) with a repeated id" in out.err


TREE_EDITS = {
    "impossible depth": (lambda d: d["nodes"][0].update(depth=7), "depth 7, but its children give 1"),
    "negative count": (lambda d: d["nodes"][0].update(count=-2), "count is -2"),
    "n_nodes disagrees": (lambda d: d.update(n_nodes=999), "n_nodes is 999 but the file lists"),
    "version None": (lambda d: d.update(format_version=None), "format_version is None (NoneType), expected"),
    "version '1'": (
        lambda d: d.update(format_version="1"),
        "format_version is '1' (str), expected the integer 1",
    ),
    "version 2": (lambda d: d.update(format_version=2), "format_version 2 is newer"),
}


@pytest.mark.parametrize("case", sorted(TREE_EDITS))
def test_an_impossible_tree_is_rejected_on_load(tmp_path: Path, case: str) -> None:
    d = json.loads((DATA / "sw_tree.json").read_text())
    edit, message = TREE_EDITS[case]
    edit(d)
    p = tmp_path / "t.json"
    p.write_text(json.dumps(d))
    with pytest.raises(TreeFormatError, match=message.replace("(", r"\(").replace(")", r"\)")):
        XTree.load(p)


def test_nan_success_rejected_and_version_1_0_accepted(tmp_path: Path) -> None:
    text = (DATA / "sw_tree.json").read_text()
    d = json.loads(text)
    d["nodes"][0]["success"] = 0.5
    p = tmp_path / "t.json"
    p.write_text(json.dumps(d).replace('"success": 0.5', '"success": NaN', 1))
    with pytest.raises(TreeFormatError, match="NaN is not a number"):
        XTree.load(p)
    with pytest.raises(TreeFormatError, match="success is nan"):
        XTree.from_dict({**d, "nodes": [{**d["nodes"][0], "success": float("nan")}, *d["nodes"][1:]]})
    d["format_version"] = 1.0
    assert len(XTree.from_dict(d)) == len(d["nodes"])


# -- 4. no debris ------------------------------------------------------------------------------------
_WRITER = textwrap.dedent(
    """
    import os, signal, sys, time
    from xtree_gym.corpus.io import atomic_open, install_cleanup_handlers
    install_cleanup_handlers()
    with atomic_open(sys.argv[1]) as fh:
        fh.write("new text, half written")
        fh.flush()
        print("writing", flush=True)
        time.sleep(60)
    """
)


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_a_killed_write_leaves_the_old_file_and_no_temp(tmp_path: Path, sig: int) -> None:
    target = tmp_path / "tree.json"
    target.write_text("old text")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(target)], stdout=subprocess.PIPE, env=env, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline() == "writing\n"
    assert len(list(tmp_path.glob(".tree.json.*.tmp"))) == 1  # the temp exists while the write runs
    proc.send_signal(sig)
    proc.wait(timeout=30)
    assert target.read_text() == "old text"
    if sig == signal.SIGTERM:  # unwound: the writer removed its own temp
        assert list(tmp_path.glob(".*.tmp")) == []
    # SIGKILL cannot be caught: the next write of the file sweeps what the dead writer left
    from xtree_gym.corpus.io import atomic_write_text

    atomic_write_text(target, "next run")
    assert target.read_text() == "next run" and list(tmp_path.glob(".*.tmp")) == []


# -- the whole sweep ---------------------------------------------------------------------------------
def test_bad_input_sweep_is_handled_everywhere(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("XTREE_PROGRESS", "0")
    counts = SWEEP.sweep(tmp_path)
    assert counts["handled"] > 500
    assert {k: v for k, v in counts.items() if k != "handled"} == {}


def test_collect_webshop_refuses_to_write_over_its_data(tmp_path: Path, capsys) -> None:
    pytest.importorskip("rapidfuzz", reason="the WebShop env needs the webshop extra")
    from xtree_gym.envs.webshop_data import CATALOGUE_FILE, write_demo_data

    write_demo_data(tmp_path)
    catalogue = tmp_path / CATALOGUE_FILE
    before = _digest(catalogue)
    argv = ["collect", "webshop", "--data-dir", str(tmp_path), "--episodes", "1", "-o", str(catalogue)]
    assert main(argv) == 1
    assert "is the input file" in _one_error(capsys, "collect")
    assert _digest(catalogue) == before
