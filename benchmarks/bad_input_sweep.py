"""Feed every reading command bad files and count the outcomes: handled, traceback, silent, destroyed.

    python benchmarks/bad_input_sweep.py            # prints the counts and every case that is not "handled"

An outcome is

* ``handled``: exit 1 with one ``xtree CMD: error: ...`` line on stderr (or, under ``--skip-bad``
  for a bad *line*, exit 0 with the skip reported on stderr);
* ``traceback``: an exception other than the project's typed errors left ``main``;
* ``silent``: exit 0 on an input that must be refused (or a skip nobody was told about);
* ``destroyed``: an input file changed on disk.

Each case runs in-process through ``xtree_gym.cli.main`` on a tiny corpus, so the sweep takes seconds.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import io
import json
import os
import sys
import tempfile
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

GOOD_STEPS = [
    {"action": a, "token": t}
    for a, t in [
        ("open door to kitchen", "open<door>"),
        ("go to kitchen", "go<room>"),
        ("pick up thermometer", "pick<tool>"),
        ("focus on water", "focus<substance>"),
    ]
]


def good_record(i: int, **over: Any) -> dict[str, Any]:
    rec: dict[str, Any] = {
        "id": f"ep{i}",
        "env": "scienceworld",
        "task": f"t{i % 3}",
        "goal": f"Your task is to boil water ({i}).",
        "success": i % 4 != 0,
        "reward": 1.0,
        "steps": [dict(s) for s in GOOD_STEPS],
    }
    rec.update(over)
    return rec


def good_lines(n: int = 12) -> list[str]:
    return [json.dumps(good_record(i)) for i in range(n)]


def _deep(n: int) -> str:
    return "[" * n + "]" * n


# name -> (file name, raw bytes, bad_line): bad_line says --skip-bad may skip it and go on
def corpus_cases() -> dict[str, tuple[str, bytes, bool]]:
    g = good_lines()
    text = "\n".join(g) + "\n"

    def with_line(line: str | bytes, name: str = "c.jsonl") -> tuple[str, bytes, bool]:
        raw = line if isinstance(line, bytes) else line.encode("utf-8")
        return name, text.encode() + raw + b"\n", True

    rec = good_record(99)
    surrogate = json.dumps(rec).replace('"open door to kitchen"', '"open \\ud83d door"')
    deep_field = json.dumps(rec)[:-1] + ', "x": ' + _deep(500) + "}"
    cases: dict[str, tuple[str, bytes, bool]] = {
        "deep-100k": with_line(_deep(100_000)),
        "deep-field-500": with_line(deep_field),
        "lone-surrogate-action": with_line(surrogate),
        "lone-surrogate-id": with_line(json.dumps(rec).replace('"ep99"', '"\\udc80"')),
        "nan-reward": with_line(json.dumps(rec).replace('"reward": 1.0', '"reward": NaN')),
        "inf-reward": with_line(json.dumps(rec).replace('"reward": 1.0', '"reward": Infinity')),
        "overflow-1e400-reward": with_line(json.dumps(rec).replace('"reward": 1.0', '"reward": 1e400')),
        "overflow-1e400-extra": with_line(json.dumps(rec)[:-1] + ', "score": -2.5E+999}'),
        "huge-int-reward": with_line(json.dumps(rec).replace('"reward": 1.0', '"reward": 1' + "0" * 400)),
        "int-5000-digits": with_line(json.dumps(rec)[:-1] + ', "n": ' + "7" * 5000 + "}"),
        "neg-inf-extra": with_line(json.dumps(rec)[:-1] + ', "score": -Infinity}'),
        "invalid-utf8-line": with_line(b'{"id": "x\xff\xfe", "success": true, "steps": []}'),
        "nul-bytes": with_line(b"\x00\x00\x00"),
        "bom-line": with_line("\ufeff" + json.dumps(rec)),
        "record-is-list": with_line("[1, 2]"),
        "success-string": with_line(json.dumps(good_record(99, success="yes"))),
        "steps-not-list": with_line(json.dumps(good_record(99, steps={"a": 1}))),
        "action-int": with_line(json.dumps(good_record(99, steps=[{"action": 3}]))),
        "reward-string": with_line(json.dumps(good_record(99, reward="1"))),
        "id-bool": with_line(json.dumps(good_record(99, id=True))),
        "id-null": with_line(json.dumps(good_record(99, id=None))),
        "token-int": with_line(json.dumps(good_record(99, steps=[{"action": "a", "token": 1}]))),
        "slots-list": with_line(json.dumps(good_record(99, steps=[{"action": "a", "slots": [1]}]))),
        "trailing-garbage": with_line(json.dumps(rec) + " xyz"),
        "truncated-line": with_line(json.dumps(rec)[:40]),
        "duplicate-id": ("c.jsonl", (text + g[3] + "\n").encode(), False),
        "empty-file": ("c.jsonl", b"", False),
        "only-blank-lines": ("c.jsonl", b"\n\n  \n", False),
        "binary-file": ("c.jsonl", bytes(range(256)) * 4, False),
        "fake-gzip": ("c.jsonl.gz", b"not gzip at all", False),
        "truncated-gzip": ("c.jsonl.gz", gzip.compress(text.encode())[:60], False),
    }
    return cases


def tree_cases(good_tree: dict[str, Any]) -> dict[str, bytes]:
    def edit(fn: Callable[[dict[str, Any]], None]) -> bytes:
        d = json.loads(json.dumps(good_tree))
        fn(d)
        return json.dumps(d).encode()

    def node(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
        return lambda d: d["nodes"][0].__setitem__(key, value)

    def top(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
        return lambda d: d.__setitem__(key, value)

    raw = json.dumps(good_tree)
    return {
        "deep-100k": _deep(100_000).encode(),
        "config-list": edit(top("config", [1, 2])),
        "config-string": edit(top("config", "cap=5")),
        "corpus-string": edit(top("corpus", "sw")),
        "corpus-list": edit(top("corpus", [1])),
        "primitive-counts-list": edit(top("primitive_counts", ["a"])),
        "primitive-counts-negative": edit(top("primitive_counts", {"open<door>": -3})),
        "example-int": edit(node("example", 7)),
        "example-list-of-ints": edit(node("example", [1, 2])),
        "depth-impossible": edit(node("depth", 9)),
        "depth-zero": edit(node("depth", 0)),
        "depth-string": edit(node("depth", "1")),
        "count-negative": edit(node("count", -5)),
        "success-1e400": raw.replace('"success": ', '"success": 1e400, "_": ', 1).encode(),
        "success-nan": raw.replace('"success": ', '"success": NaN, "_": ', 1).encode(),
        "success-above-one": edit(node("success", 1.5)),
        "n-nodes-disagrees": edit(top("n_nodes", len(good_tree["nodes"]) + 7)),
        "version-1.0-ok": edit(top("format_version", 1.0)),
        "version-None": edit(top("format_version", None)),
        "version-string": edit(top("format_version", "1")),
        "version-2": edit(top("format_version", 2)),
        "lone-surrogate-token": raw.replace('"open<door>"', '"open\\ud800<door>"').encode(),
        "nodes-not-list": edit(top("nodes", {"S0": 1})),
        "top-level-list": b"[1, 2, 3]",
        "children-three": edit(node("children", ["a", "b", "c"])),
        "node-missing-depth": edit(lambda d: d["nodes"][0].pop("depth")),
        "binary": bytes(range(256)),
        "invalid-utf8": raw.encode()[:50] + b"\xff" + raw.encode()[50:],
    }


def chain_tree(depth: int) -> dict[str, Any]:
    """A valid tree whose nodes form one chain ``depth`` deep (S_k = S_{k-1} + t_k)."""
    nodes = []
    exp: list[str] = ["a"]
    prev = "a"
    for k in range(depth):
        tok = f"t{k % 7}"
        exp = [*exp, tok]
        nodes.append(
            {
                "id": f"S{k}",
                "children": [prev, tok],
                "depth": k + 1,
                "length": len(exp),
                "expansion": exp,
                "count": 2,
            }
        )
        prev = f"S{k}"
    return {"environment": "toy", "n_nodes": depth, "nodes": nodes}


def _digest(paths: list[Path]) -> dict[Path, str]:
    return {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in paths if p.is_file()}


def run_cli(argv: list[str]) -> tuple[str, int | None, str]:
    """('ok'|'traceback', exit code, stderr) of ``xtree ARGV`` run in this process."""
    from xtree_gym.cli import main

    err, out = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            rc = main(argv)
    except SystemExit as exc:  # argparse
        return "ok", int(exc.code or 0), err.getvalue()
    except BaseException as exc:  # counting what escapes is the point
        return "traceback", None, f"{type(exc).__name__}: {str(exc)[:200]}"
    return "ok", rc, err.getvalue()


def classify(argv: list[str], inputs: list[Path], must_fail: bool, may_skip: bool) -> tuple[str, str]:
    before = _digest(inputs)
    kind, rc, err = run_cli(argv)
    if _digest(inputs) != before:
        return "destroyed", err
    if kind == "traceback":
        return "traceback", err
    lines = err.strip().splitlines()
    errors = [ln for ln in lines if ln.startswith("xtree ") and ": error: " in ln]
    notices = [ln for ln in lines if ln not in errors]  # the --skip-bad report may precede the error
    one_line = len(errors) == 1 and all(ln.startswith(("skipped", "kept")) for ln in notices)
    if rc == 1 and one_line:
        return "handled", err
    if rc == 0 and not must_fail:
        return "handled", err
    if rc == 0 and may_skip and "skipped" in err and err.count("error:") == 0:
        return "handled", err
    return ("silent" if rc == 0 else "messy"), err


class _Tally:
    """Outcome counts plus one line per case that was not handled."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.problems: list[str] = []

    def record(self, label: str, outcome: str, err: str) -> None:
        self.counts[outcome] += 1
        if outcome != "handled":
            self.problems.append(f"{outcome:9} {label}: {err.strip()[:160]}")


def _named_directory(outcome: str, label: str, err: str) -> str:
    return "messy" if outcome == "handled" and label == "directory" and "directory" not in err else outcome


def _sweep_corpora(work: Path, tree_path: Path, out: Path, tally: _Tally) -> None:
    corpus_cmds: list[tuple[str, Callable[[Path], list[str]], bool]] = [  # name, argv, has --skip-bad
        ("mine", lambda c: ["mine", str(c), "-o", str(out / "t.json")], True),
        ("stats", lambda c: ["stats", str(c)], True),
        ("tile", lambda c: ["tile", str(tree_path), str(c)], True),
        ("canon", lambda c: ["canon", str(c), "--domain", "scienceworld", "-o", str(out / "c.jsonl")], True),
        ("report", lambda c: ["report", str(tree_path), "--corpus", str(c), "-o", str(out / "r.html")], True),
        ("cards", lambda c: ["cards", str(tree_path), "--corpus", str(c), "-o", str(out / "b.json")], True),
        ("mdl", lambda c: ["mdl", str(c)], False),
        ("convert", lambda c: ["canon", str(c), "--format", "agentlab", "-o", str(out / "a.jsonl")], False),
    ]
    for case, (name, raw, bad_line) in corpus_cases().items():
        d = work / f"c-{case}"
        d.mkdir()
        path = d / name
        path.write_bytes(raw)
        for cmd, argv_fn, has_skip in corpus_cmds:
            for skip in (False, True) if has_skip else (False,):
                argv = argv_fn(path) + (["--skip-bad"] if skip else [])
                outcome, err = classify(argv, [path, tree_path], True, skip and bad_line)
                tally.record(f"corpus {case} {cmd}{' --skip-bad' if skip else ''}", outcome, err)
    for label, path in (("directory", work), ("missing", work / "nope.jsonl")):
        for cmd, argv_fn, _ in corpus_cmds:
            outcome, err = classify(argv_fn(path), [tree_path], True, False)
            tally.record(f"corpus {label} {cmd}", _named_directory(outcome, label, err), err)


def _sweep_trees(work: Path, good: Path, good_tree: dict[str, Any], out: Path, tally: _Tally) -> None:
    tree_cmds: list[tuple[str, Callable[[Path], list[str]]]] = [
        ("show", lambda t: ["show", str(t)]),
        ("show --hierarchy", lambda t: ["show", str(t), "--hierarchy"]),
        ("show --json", lambda t: ["show", str(t), "--json"]),
        ("tile", lambda t: ["tile", str(t), str(good)]),
        ("report", lambda t: ["report", str(t), "--corpus", str(good), "-o", str(out / "r.html")]),
        ("cards", lambda t: ["cards", str(t), "-o", str(out / "b.json")]),
    ]
    cases = [*tree_cases(good_tree).items(), ("chain-1500-ok", json.dumps(chain_tree(1500)).encode())]
    for case, raw in cases:
        path = work / f"t-{case}.json"
        path.write_bytes(raw)
        for cmd, argv_fn in tree_cmds:
            outcome, err = classify(argv_fn(path), [path, good], not case.endswith("-ok"), False)
            tally.record(f"tree {case} {cmd}", outcome, err)
    for label, path in (("directory", work), ("missing", work / "nope.json")):
        for cmd, argv_fn in tree_cmds:
            outcome, err = classify(argv_fn(path), [good], True, False)
            tally.record(f"tree {label} {cmd}", _named_directory(outcome, label, err), err)


def _sweep_outputs(work: Path, good: Path, tree_path: Path, tally: _Tally) -> None:
    """Outputs that are inputs: the same path, through ``..``, a symlink, a hard link."""
    sub = work / "sub"
    sub.mkdir()
    link, hard, tlink = work / "link.jsonl", work / "hard.jsonl", work / "tree_link.json"
    link.symlink_to(good)
    os.link(good, hard)
    os.link(tree_path, tlink)
    aliases = {"same": good, "dotdot": sub / ".." / "good.jsonl", "symlink": link, "hardlink": hard}
    for label, alias_path in aliases.items():
        alias, tree_alias = str(alias_path), str(tlink if label == "hardlink" else tree_path)
        writers = {
            "mine": ["mine", str(good), "-o", alias],
            "canon": ["canon", str(good), "--domain", "scienceworld", "-o", alias],
            "report-corpus": ["report", str(tree_path), "--corpus", str(good), "-o", alias],
            "report-tree": ["report", str(tree_path), "-o", tree_alias],
            "cards": ["cards", str(tree_path), "--corpus", str(good), "-o", alias],
            "mdl": ["mdl", str(good), "--json", alias],
            "convert": ["canon", str(good), "--format", "agentlab", "-o", alias],
        }
        for cmd, argv in writers.items():
            outcome, err = classify(argv, [good, tree_path], True, False)
            tally.record(f"output=input {label} {cmd}", outcome, err)


def sweep(work: Path, *, verbose: bool = False) -> Counter[str]:
    """Run every case in ``work`` (a scratch folder); returns outcome -> count."""
    from xtree_gym.cli import main

    good = work / "good.jsonl"
    good.write_text("\n".join(good_lines()) + "\n")
    tree_path = work / "good_tree.json"
    with contextlib.redirect_stdout(io.StringIO()):
        main(["mine", str(good), "--preset", "scienceworld", "--min-freq", "2", "--min-task-types", "1",
              "--min-succ", "0", "-o", str(tree_path)])  # fmt: skip
    tally = _Tally()
    out = work / "out"
    _sweep_corpora(work, tree_path, out, tally)
    _sweep_trees(work, good, json.loads(tree_path.read_text()), out, tally)
    _sweep_outputs(work, good, tree_path, tally)
    if verbose:
        print("\n".join(tally.problems))
    return tally.counts


def main() -> int:
    with tempfile.TemporaryDirectory() as d:
        os.environ.setdefault("XTREE_PROGRESS", "0")
        counts = sweep(Path(d), verbose=True)
    total = sum(counts.values())
    print(
        f"{total} bad inputs: "
        + ", ".join(f"{counts[k]} {k}" for k in ("handled", "traceback", "silent", "messy", "destroyed"))
    )
    return 0 if counts["handled"] == total else 1


if __name__ == "__main__":
    sys.exit(main())
