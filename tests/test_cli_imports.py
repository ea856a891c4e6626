"""What the ``xtree`` command imports at run time: nothing heavy until a command needs it.

A newcomer's ``make demo`` installs the scienceworld extra only, and ``pip install xtree_gym`` the
core only: building the parser (every subcommand's flags) must work there, and ``xtree mine`` must not
pay for torch. Each check runs in a fresh interpreter and reads ``sys.modules`` afterwards.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
HEAVY = (
    "torch",
    "transformers",
    "accelerate",
    "peft",
    "playwright",
    "browsergym",
    "scienceworld",
    "pyarrow",
    "pandas",
    "matplotlib",
    "datasets",
    "trl",
)
SAMPLE = ROOT / "xtree_gym" / "data" / "scienceworld_gold_sample.jsonl.gz"

_REPORT = """
import json, sys
heavy = sorted({m.split(".")[0] for m in sys.modules} & set(HEAVY))
print("HEAVY=" + json.dumps(heavy))
"""


def _heavy_after(
    code: str, *args: str, block: tuple[str, ...] = ()
) -> tuple[list[str], subprocess.CompletedProcess[str]]:
    """Run ``code`` in a fresh interpreter (``block``: packages made unimportable); the heavy modules it left."""
    pre = "import sys\n" + "".join(f"sys.modules[{b!r}] = None\n" for b in block)
    script = f"HEAVY = {HEAVY!r}\n{pre}{code}\n{_REPORT}"
    proc = subprocess.run(
        [sys.executable, "-c", script, *args], capture_output=True, text=True, cwd=ROOT, timeout=300
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("HEAVY=")]
    assert lines, f"no report; stderr:\n{proc.stderr[-3000:]}"
    return json.loads(lines[-1][len("HEAVY=") :]), proc


def test_import_xtree_gym_imports_nothing_heavy() -> None:
    heavy, _ = _heavy_after("import xtree_gym")
    assert heavy == []


def test_building_the_parser_imports_nothing_heavy() -> None:
    heavy, _ = _heavy_after("import xtree_gym.cli as c\nc.build_parser()")
    assert heavy == []


def test_every_subcommand_help_imports_nothing_heavy() -> None:
    code = """
import argparse, contextlib, io
import xtree_gym.cli as c
parser = c.build_parser()

def commands(p, prefix=()):
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield prefix + (name,)
                yield from commands(sub, prefix + (name,))

seen = 0
for argv in commands(parser):
    with contextlib.redirect_stdout(io.StringIO()) as out, contextlib.suppress(SystemExit):
        c.build_parser().parse_args([*argv, "--help"])
    assert "usage:" in out.getvalue(), argv
    seen += 1
print("COMMANDS", seen)
"""
    heavy, proc = _heavy_after(code)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert int(proc.stdout.split("COMMANDS ")[1].split()[0]) >= 20  # mine, train rlvr, eval, collect ...
    assert heavy == []


def test_xtree_mine_on_a_small_corpus_imports_nothing_heavy(tmp_path: Path) -> None:
    code = "from xtree_gym.cli import main\nrc = main(sys.argv[1:])\nprint('RC', rc)"
    out = tmp_path / "tree.json"
    heavy, proc = _heavy_after(code, "mine", str(SAMPLE), "--domain", "scienceworld", "-o", str(out))
    assert "RC 0" in proc.stdout, proc.stderr[-3000:]
    assert json.loads(out.read_text())["nodes"]  # it really mined
    assert heavy == []


@pytest.mark.parametrize(
    "argv",
    [
        ["train", "sft", "--rows", "rows.jsonl", "--model", "tiny-random", "-o", "OUT"],
        ["train", "rlvr", "--config", "webshop-cpu-smoke", "-o", "OUT"],
        ["eval", "XTree-ScienceWorld-v0", "--model", "tiny-random", "--harness", "rlvmr", "-o", "OUT"],
    ],
)
def test_a_command_whose_extra_is_missing_is_one_error_naming_it(tmp_path: Path, argv: list[str]) -> None:
    argv = [str(tmp_path / "run") if a == "OUT" else a for a in argv]
    code = "from xtree_gym.cli import main\nrc = main(sys.argv[1:])\nprint('RC', rc)"
    _, proc = _heavy_after(code, *argv, block=("torch", "transformers"))
    assert "RC 1" in proc.stdout
    assert "xtree_gym[train]" in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not (tmp_path / "run").exists()  # nothing half-written
