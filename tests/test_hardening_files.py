"""Hardening II, files: special files as outputs are written to, never renamed over; a symlink output is
followed; a write error names the output; the same corpus twice is a duplicate; a decompression bomb is
refused after a bounded read. Real files, devices, FIFOs, sockets and processes.
"""

from __future__ import annotations

import gzip
import json
import os
import socket
import stat
import subprocess
import sys
import threading
from importlib.resources import files
from pathlib import Path

import pytest

import xtree_gym
from xtree_gym.cli import main
from xtree_gym.corpus.io import atomic_write_bytes, atomic_write_text

SAMPLE = str(files("xtree_gym") / "data/scienceworld_gold_sample.jsonl.gz")
ROOT = Path(xtree_gym.__file__).resolve().parents[1]  # the checkout under test


def test_a_character_device_output_stays_a_device(tmp_path: Path) -> None:
    dev = tmp_path / "null"
    try:
        os.mknod(dev, stat.S_IFCHR | 0o666, os.makedev(1, 3))  # a /dev/null of our own
    except (PermissionError, OSError):
        pytest.skip("cannot make a device node here (not root)")
    assert main(["mine", SAMPLE, "--domain", "scienceworld", "-o", str(dev)]) == 0
    atomic_write_bytes(dev, b"x")
    assert stat.S_ISCHR(os.stat(dev).st_mode)
    assert [p.name for p in tmp_path.iterdir()] == ["null"]  # no temp left beside it


def test_a_fifo_output_is_written_through(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    assert main(["mine", SAMPLE, "--domain", "scienceworld", "-o", str(fifo)]) == 0
    reader.join(30)
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert json.loads(got[0])["nodes"]


def test_a_socket_output_is_refused(tmp_path: Path, capsys) -> None:
    path = tmp_path / "sock"
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(path))
        assert main(["mine", SAMPLE, "--domain", "scienceworld", "-o", str(path)]) == 1
        assert "is a socket" in capsys.readouterr().err
        assert stat.S_ISSOCK(os.stat(path).st_mode)


def test_a_symlink_output_is_followed(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    link = tmp_path / "tree.json"
    link.symlink_to(tmp_path / "real" / "tree.json")
    assert main(["mine", SAMPLE, "--domain", "scienceworld", "-o", str(link)]) == 0
    assert link.is_symlink() and json.loads((tmp_path / "real" / "tree.json").read_text())["nodes"]
    atomic_write_text(link, "{}")
    assert link.is_symlink() and (tmp_path / "real" / "tree.json").read_text() == "{}"


def test_a_write_error_names_the_output_file(tmp_path: Path) -> None:
    out = tmp_path / "tree.json"
    code = (
        "import resource, signal, sys\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (200, 200))\n"
        "from xtree_gym.cli import main\n"
        f"sys.exit(main(['mine', {SAMPLE!r}, '--domain', 'scienceworld', '-o', {str(out)!r}]))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 1, proc.stderr
    assert str(out) in proc.stderr and "File too large" in proc.stderr and "Traceback" not in proc.stderr
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_the_same_corpus_twice_is_a_duplicate(tmp_path: Path, capsys) -> None:
    for argv in (
        ["stats", SAMPLE, SAMPLE],
        ["mine", SAMPLE, SAMPLE, "--domain", "scienceworld", "-o", str(tmp_path / "t.json")],
    ):
        assert main(argv) == 1
        err = capsys.readouterr().err
        assert "again" in err and "given twice" in err
    assert main(["stats", SAMPLE, SAMPLE, "--keep-duplicates"]) == 0


def test_a_decompression_bomb_is_refused_after_a_bounded_read(tmp_path: Path) -> None:
    bomb = tmp_path / "bomb.jsonl.gz"
    with gzip.open(bomb, "wb", compresslevel=9) as fh:
        block = b"\0" * (1 << 20)
        for _ in range(1024):  # 1 GiB of NUL bytes, no newline: ~1 MB on disk
            fh.write(block)
    code = (
        "import re, sys\n"
        "from xtree_gym.cli import main\n"
        f"rc = main(['stats', {str(bomb)!r}])\n"
        # VmHWM, not ru_maxrss: Linux keeps ru_maxrss across execve, so it would count the parent's RSS
        "print(re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()).group(1))\n"
        "sys.exit(rc)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 1 and "longer than" in proc.stderr, proc.stderr
    peak_kib = int(proc.stdout.split()[-1])
    assert peak_kib < 1024 * 1024, f"peak RSS {peak_kib / 1024:.0f} MiB for a 1 GiB line"
