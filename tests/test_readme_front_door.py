"""The README is a front door: the two commands, what works, one current figure of each kind with its command.

History belongs in each area's doc; these checks keep the README from turning back into a log.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def section(title: str, text: str = README) -> str:
    """The body of the ``## title`` section of ``text``.

    Example:
        >>> section("B", "## A\\na\\n## B\\nb1\\nb2\\n## C\\nc\\n")
        'b1\\nb2\\n'
    """
    start = text.index(f"## {title}\n") + len(f"## {title}\n")
    end = text.find("\n## ", start)
    return text[start : end + 1 if end >= 0 else len(text)]


def bullets(body: str) -> list[str]:
    """Top-level ``* `` bullets of a section, each with its continuation lines joined.

    Example:
        >>> bullets("intro\\n* **a** one\\n  two\\n* **b** three\\n")
        ['**a** one two', '**b** three']
    """
    out: list[str] = []
    for line in body.splitlines():
        if line.startswith("* "):
            out.append(line[2:].strip())
        elif out and line.startswith("  ") and line.strip():
            out[-1] += " " + line.strip()
    return out


def test_the_two_commands_lead() -> None:
    body = section("Two commands")
    assert "make demo" in body and "make test" in body
    assert README.index("## Two commands") < README.index("## What it measured")


def test_each_measured_kind_appears_once_with_a_command_that_exists() -> None:
    items = bullets(section("What it measured"))
    assert len(items) >= 8
    kinds = [re.match(r"\*\*(.+?)\*\*", item) for item in items]
    assert all(kinds), [i[:60] for i, k in zip(items, kinds) if not k]
    names = [k.group(1) for k in kinds if k]
    assert len(names) == len(set(names)), names  # one current figure of each kind: no second generation
    for item in items:
        scripts = re.findall(r"\b((?:benchmarks|tests|scripts)/[\w/]+\.py)\b", item)
        assert scripts, f"no command to run it again: {item[:80]}"
        missing = [s for s in scripts if not (ROOT / s).is_file()]
        assert missing == [], missing


def test_what_the_tests_run_is_not_listed_as_not_run() -> None:
    assert README.count("Not run here") == 1
    not_run = README.split("Not run here", 1)[1].split("\n\n", 1)[0]  # that paragraph
    interop = (ROOT / "tests" / "test_interop.py").read_text(encoding="utf-8")
    assert "GRPOTrainer(" in interop  # TRL's own trainer trains in the tests ...
    assert "TRL" not in not_run and "trl" not in not_run  # ... so the README must not say it is not run
