"""Docs, tests, scripts and benchmarks name no one machine's own folders (Hardening IV, item 8).

A reader elsewhere cannot type the development machine's own checkout, venv or wheel folder: write a
placeholder (``DIR``), the shared folder beside the checkout (``../shared/...``), an environment
variable (``$XTREE_WEBSHOP_DATA``), and in tests pytest's ``tmp_path``.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCANNED = ("README.md", "docs", "tests", "benchmarks", "scripts", "experiments")
SUFFIXES = {".md", ".py", ".txt", ".tsv", ".sh", ".toml", ".yaml", ".yml", ".cfg", ".ini", ".html"}
MACHINE_PATH = re.compile(r"(?<![\w.~-])/(?:" + "|".join(("work", "opt", "root", "tmp")) + r")/")
"""An absolute path under a folder of one machine (a checkout, a venv, a wheel cache, a home, a temp dir)."""


def scanned_files(root: Path = ROOT) -> list[Path]:
    """The text files of :data:`SCANNED` that a reader copies from (data files and caches left out)."""
    out: list[Path] = []
    for name in SCANNED:
        path = root / name
        found = [path] if path.is_file() else sorted(path.rglob("*")) if path.is_dir() else []
        out += [p for p in found if p.is_file() and p.suffix in SUFFIXES and "__pycache__" not in p.parts]
    return out


def machine_paths(text: str) -> list[tuple[int, str]]:
    """(line number, line) of each line naming a machine's own folder.

    Example:
        >>> [n for n, _ in machine_paths("xtree mine ../shared/a.jsonl\\nxtree mine /" + "work/shared/a.jsonl")]
        [2]
        >>> [n for n, _ in machine_paths("file:///" + "tmp/x")]
        [1]
        >>> machine_paths("http://host/work/x ./tmp/y src/opt/z $TMPDIR/x")
        []
    """
    return [(i, line) for i, line in enumerate(text.splitlines(), 1) if MACHINE_PATH.search(line)]


def test_no_machine_paths_in_docs_tests_scripts_or_benchmarks() -> None:
    files = scanned_files()
    found = [
        f"{p.relative_to(ROOT)}:{i}: {line.strip()[:120]}"
        for p in files
        for i, line in machine_paths(p.read_text(encoding="utf-8", errors="replace"))
    ]
    assert found == [], "\n".join(found)
    names = {p.relative_to(ROOT).parts[0] for p in files}
    assert {"README.md", "docs", "tests", "benchmarks", "scripts"} <= names and len(files) > 100


def test_the_scan_sees_a_planted_path(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "x.md").write_text("ok ../shared/data\n" + "python " + "/work" + "/venv/bin/x\n")
    (tmp_path / "README.md").write_text("nothing here\n")
    files = scanned_files(tmp_path)
    assert [p.name for p in files] == ["README.md", "x.md"]
    assert [n for p in files for n, _ in machine_paths(p.read_text())] == [2]
