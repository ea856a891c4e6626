"""Hardening III, run folders and the newcomer's path: no writer writes through a link onto an input, one
writer per run folder, a run stopped before its first checkpoint restarts, an episode too big for a line
is cut (never written unreadable), every subcommand on a core-only install names its extra, and the
messages point the right way.

Real components throughout: the ``xtree`` CLI in-process, tiny-random weights, real flock locks, a
brand-new core-only venv (numpy only) for the install checks. Mocked only: a filesystem that refuses
``chmod`` (sysfs), which cannot be mounted here.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from importlib.resources import files
from pathlib import Path

import pytest

from xtree_gym.agents.play.testing import ECHO_ENV
from xtree_gym.cli import build_parser, main

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = Path(str(files("xtree_gym") / "data/scienceworld_gold_sample.jsonl.gz"))
CORE_COMMANDS = ROOT / "tests" / "data" / "core_only_commands.tsv"


# -- data loss ----------------------------------------------------------------------------------------
def test_plot_run_never_writes_through_a_link_onto_the_run(run_snapshot, tmp_path: Path, capsys) -> None:
    pytest.importorskip("matplotlib")
    run, out = tmp_path / "run", tmp_path / "plots"
    run.mkdir()
    out.mkdir()
    (run / "metrics.jsonl").write_text('{"step": 1, "reward": 0.5}\n{"step": 2, "reward": 0.75}\n')
    (run / "config.json").write_text('{"shaping": "none"}\n')
    before = run_snapshot(run)
    for name, target in (("learning_curves.png", "metrics.jsonl"), ("lambda_vs_win_rate.png", "config.json")):
        link = out / name
        link.unlink(missing_ok=True)
        other = "lambda_vs_win_rate.png" if name == "learning_curves.png" else "learning_curves.png"
        (out / other).unlink(missing_ok=True)
        os.symlink(run / target, link)
        assert main(["plot-run", str(run), "-o", str(out)]) == 1
        err = capsys.readouterr().err
        assert "is the input file" in err and target in err and "Traceback" not in err
        assert run_snapshot(run) == before  # the metrics are still the metrics
    # without the planted link the same command writes both figures
    for p in out.iterdir():
        p.unlink()
    assert main(["plot-run", str(run), "-o", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["lambda_vs_win_rate.png", "learning_curves.png"]


def test_a_training_run_never_writes_through_a_link_onto_its_rows(
    run_sft, rows_file: Path, tmp_path: Path, capsys
) -> None:
    from xtree_gym.agents.run.lock import RUN_LOCK

    rows = tmp_path / "rows.jsonl"
    rows.write_bytes(rows_file.read_bytes())
    before = rows.read_bytes()
    run = tmp_path / "run"
    assert run_sft(rows, run) == 0
    (run / "metrics.jsonl").unlink()
    os.symlink(rows, run / "metrics.jsonl")  # the resumed run rewrites its metrics: here, the rows
    capsys.readouterr()
    assert main(["train", "sft", "--resume", str(run), "--epochs", "2", "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert "is the input file" in err and "rows.jsonl" in err and "Traceback" not in err, err
    assert rows.read_bytes() == before
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    os.symlink(rows, fresh / RUN_LOCK)  # the lock file itself, planted as a link
    assert run_sft(rows, fresh) == 1
    err = capsys.readouterr().err
    assert "is a link" in err and "Traceback" not in err, err
    assert rows.read_bytes() == before


def test_plot_run_on_a_null_step_is_one_error(tmp_path: Path, capsys) -> None:
    pytest.importorskip("matplotlib")
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.jsonl").write_text('{"step": 1, "reward": 0.5}\n{"step": null, "reward": 0.75}\n')
    assert main(["plot-run", str(run), "-o", str(tmp_path / "plots")]) == 1
    err = capsys.readouterr().err
    assert "step = None is not an integer" in err and "record 2" in err and "Traceback" not in err


def test_one_training_run_per_folder(run_sft, rows_file: Path, tmp_path: Path, capsys) -> None:
    from xtree_gym.agents.run.lock import RUN_LOCK, folder_lock
    from xtree_gym.corpus import read_corpus
    from xtree_gym.mining import mine

    tree = tmp_path / "tree.json"
    mine(read_corpus(SAMPLE).trajectories, "scienceworld", domain="scienceworld").save(tree)
    run = tmp_path / "run"
    with folder_lock(run, name=RUN_LOCK, what="xtree train sft"):  # a first run holds the folder
        (run / "config.json").write_text(json.dumps({"rows": str(rows_file)}))  # ... before its first save
        for argv in (
            ["train", "sft", "--rows", str(rows_file), "-o", str(run), "--no-progress"],
            ["train", "rlvr", "--steps", "1", "-o", str(run)],
            ["train", "offline", "--corpus", str(SAMPLE), "--tree", str(tree), "-o", str(run)],
            ["train", "sft", "--rows", str(rows_file), "--resume", str(run), "--no-progress"],
        ):
            assert main(argv) == 1, argv
            err = capsys.readouterr().err.strip()
            assert len(err.splitlines()) == 1, err
            assert "another xtree train sft" in err and f"pid {os.getpid()} on " in err and "started" in err
        assert sorted(p.name for p in run.iterdir()) == [RUN_LOCK, "config.json"]  # nothing touched meanwhile
    # a lock file left by a dead process (its text only; the kernel dropped its flock) is taken over
    (run / "config.json").unlink()
    (run / RUN_LOCK).write_text("pid 999999999 on elsewhere, started 2020-01-01 00:00:00 UTC\n")
    assert run_sft(rows_file, run) == 0
    assert [json.loads(x)["step"] for x in (run / "metrics.jsonl").read_text().splitlines()] == [1, 2]


def test_a_run_stopped_before_its_first_checkpoint_restarts_on_resume(
    run_sft, rows_file: Path, tmp_path: Path, capsys
) -> None:
    import shutil

    run = tmp_path / "run"
    assert run_sft(rows_file, run, "--lr", "2e-3") == 0
    for ck in run.glob("checkpoint-*"):  # as if killed before the first save
        shutil.rmtree(ck)
    (run / "latest.json").unlink()
    (run / "metrics.jsonl").write_text('{"step": 1, "loss": 9.0}\n')
    capsys.readouterr()
    # neither a dead end ("no checkpoint") nor a circle ("already holds a run, pass --resume")
    assert main(["train", "sft", "--resume", str(run), "--no-progress", "--no-tensorboard"]) == 0
    err = capsys.readouterr().err
    assert "no checkpoint" in err and "from step 0" in err
    assert json.loads((run / "config.json").read_text())["lr"] == 2e-3  # the run's own settings
    assert [json.loads(x)["step"] for x in (run / "metrics.jsonl").read_text().splitlines()] == [1, 2]
    assert sorted(p.name for p in run.glob("checkpoint-*")) == ["checkpoint-000002"]


def test_an_episode_too_big_for_a_line_is_cut_not_written_unreadable(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    from xtree_gym.corpus import io

    monkeypatch.setattr(io, "MAX_LINE_BYTES", 12000)  # the writers and the readers read the one limit
    resp = tmp_path / "resp.json"
    resp.write_text(json.dumps(["<action>" + "x" * 3000 + "</action>", "<action>win</action>"]))
    argv = ["eval", ECHO_ENV, "--harness", "react", "--backend", "scripted",
            "--responses", str(resp), "--tasks", "1", "-o", str(tmp_path / "ev")]  # fmt: skip
    assert main(argv) == 0
    assert "cut so its line fits 12000 bytes" in capsys.readouterr().err
    lines = (tmp_path / "ev" / "episodes.jsonl").read_bytes().splitlines(keepends=True)
    assert len(lines) == 1 and len(lines[0]) <= 12000 and b"[cut by xtree:" in lines[0]
    assert main(argv) == 0  # the re-run reads its own file back (resumed, not "a decompression bomb")
    assert json.loads((tmp_path / "ev" / "results.json").read_text())["resumed"] == 1


def test_mine_preset_names_the_canonicalizer_of_an_untokenized_corpus(tmp_path: Path) -> None:
    out = tmp_path / "tree.json"
    assert main(["mine", str(SAMPLE), "--preset", "scienceworld", "-o", str(out)]) == 0
    assert (
        json.loads(out.read_text())["n_nodes"] > 0
    )  # the README's own line, on the packaged (untokenized) sample


# -- the newcomer's path: a core-only install ---------------------------------------------------------
def _core_commands() -> list[tuple[str, str]]:
    rows = [line.split("\t") for line in CORE_COMMANDS.read_text().splitlines()]
    return [(r[0], r[1]) for r in rows if r and not r[0].startswith("#")]


@pytest.fixture(scope="session")
def core_python(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, str]]:
    """A brand-new venv (no system site-packages) that sees numpy and this checkout only."""
    import numpy

    base = tmp_path_factory.mktemp("core")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(base / "venv")], check=True)
    site = base / "site"
    site.mkdir()
    numpy_home = Path(numpy.__file__).resolve().parent.parent
    for entry in numpy_home.iterdir():
        if entry.name == "numpy" or entry.name.startswith(("numpy-", "numpy.libs")):
            os.symlink(entry, site / entry.name)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env.update(PYTHONPATH=f"{site}{os.pathsep}{ROOT}", XTREE_PROGRESS="0")
    python = str(base / "venv" / "bin" / "python")
    probe = subprocess.run([python, "-c", "import gymnasium"], env=env, capture_output=True, text=True)
    assert probe.returncode != 0, "the core venv sees gymnasium: it is not core-only"
    return python, env


def test_the_command_table_covers_every_subcommand() -> None:
    import argparse

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    want = set()
    for name, p in sub.choices.items():
        inner = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
        want |= {f"{name} {m}" for m in inner[0].choices} if inner else {name}
    have = {" ".join(args.split()[:2]) if args.split()[0] in ("collect", "train") else args.split()[0]
            for _, args in _core_commands()}  # fmt: skip
    assert want == have, (want - have, have - want)
    assert len(want) >= 20


@pytest.mark.slow  # ~30 s; .ci/run runs the same table in its core-only step
def test_every_subcommand_on_a_core_only_install(core_python, tmp_path: Path) -> None:
    python, env = core_python
    (tmp_path / "fake-run").mkdir()
    (tmp_path / "fake-run" / "metrics.jsonl").write_text('{"step": 1, "reward": 0.5}\n')
    tree = tmp_path / "tree.json"
    mined = subprocess.run([python, "-m", "xtree_gym", "mine", str(SAMPLE), "--domain", "scienceworld", "-o",
                            str(tree)], env=env, capture_output=True, text=True, cwd=tmp_path)  # fmt: skip
    assert mined.returncode == 0, mined.stderr
    checked = 0
    for extra, args in _core_commands():
        argv = shlex.split(args.format(sample=SAMPLE, tree=tree, work=tmp_path))
        r = subprocess.run([python, "-m", "xtree_gym", *argv], env=env, capture_output=True, text=True,
                           cwd=tmp_path, timeout=300)  # fmt: skip
        assert "Traceback" not in r.stderr, (args, r.stderr)
        if extra == "core":
            assert r.returncode == 0, (args, r.stderr)
        else:
            lines = r.stderr.strip().splitlines()
            assert r.returncode == 1 and len(lines) == 1, (args, r.stderr)
            assert f"xtree_gym[{extra}]" in lines[0], (args, lines[0])
        checked += 1
    assert checked == len(_core_commands()) >= 20


def test_public_names_on_a_core_only_install_name_their_extra(core_python) -> None:
    python, env = core_python
    names = ["XTreeBonus", "InvalidActionPenalty", "SegCost", "NodeReplayEnv"]
    for name in names:
        r = subprocess.run(
            [python, "-c", f"from xtree_gym import {name}"], env=env, capture_output=True, text=True
        )
        last = r.stderr.strip().splitlines()[-1]
        assert r.returncode == 1 and "xtree_gym[gym]" in last and "DependencyError" in last, (name, r.stderr)
        assert "ModuleNotFoundError" not in r.stderr, r.stderr  # not chained behind a bare import error
    r = subprocess.run([python, "-c", "from xtree_gym import mine, XTree; print('ok')"], env=env,
                       capture_output=True, text=True)  # fmt: skip
    assert r.stdout.strip() == "ok", r.stderr


# -- messages that point the right way ------------------------------------------------------------------
@pytest.mark.parametrize("flag", ["--kl-coef", "--lr", "--clip-eps-high", "--temperature"])
def test_a_non_finite_float_flag_is_blamed_on_the_flag(flag: str, tmp_path: Path, capsys) -> None:
    assert (
        main(["train", "rlvr", "--config", "webshop-cpu-smoke", flag, "nan", "-o", str(tmp_path / "r")]) == 1
    )
    err = capsys.readouterr().err
    assert f"{flag}: {flag[2:].replace('-', '_')} = nan is not a finite number" in err, err
    assert "webshop-cpu-smoke" not in err and len(err.strip().splitlines()) == 1


def test_clip_eps_low_out_of_range_is_refused(tmp_path: Path, capsys) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text("clip_eps_low: 5\nsteps: 1\n")
    assert main(["train", "rlvr", "--config", str(cfg), "-o", str(tmp_path / "r")]) == 1
    err = capsys.readouterr().err
    assert "clip_eps_low = 5" in err and "< 1" in err
    assert not (tmp_path / "r" / "config.json").exists()


def test_eval_refusals_name_eval_fixes_and_missing_files(tmp_path: Path, capsys) -> None:
    resp = tmp_path / "resp.json"
    resp.write_text(json.dumps(["<answer>op(+, 1, 2)</answer>"]))
    out = tmp_path / "ev"
    argv = ["eval", "XTree-Countdown-v0", "--harness", "node", "--backend", "scripted", "--responses", str(resp),
            "--tasks", "2", "-o", str(out)]  # fmt: skip
    assert main(argv) == 0
    capsys.readouterr()
    lines = (out / "episodes.jsonl").read_text().splitlines(keepends=True)
    (out / "episodes.jsonl").write_text(lines[0] + '{"id": 7}\n' + lines[1])  # a damaged line
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "episodes.jsonl" in err and "--skip-bad" not in err and "--keep-duplicates" not in err
    (out / "episodes.jsonl").write_text(lines[0] + lines[0])  # a repeated id
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "--skip-bad" not in err and "--keep-duplicates" not in err and "another -o folder" in err
    # --advice naming no file says so (not "advice needs the corpus")
    assert main([*argv[:-2], "-o", str(tmp_path / "ev2"), "--advice", str(tmp_path / "nosuch.json")]) == 1
    err = capsys.readouterr().err
    assert "nosuch.json' does not exist" in err and "corpus" not in err.split("fix:")[0]


def test_a_broken_model_folder_is_named_and_tokenizer_errors_name_the_flag(
    tmp_path: Path, capsys, monkeypatch
) -> None:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": ')
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert main(["eval", "XTree-Countdown-v0", "--harness", "node", "--model", str(folder), "--tasks", "1",
                 "-o", str(tmp_path / "ev")]) == 1  # fmt: skip
    err = capsys.readouterr().err
    assert "config.json is broken" in err and "HF_HUB_OFFLINE" not in err and "download it first" not in err
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["sft-rows", str(SAMPLE), "--format", "standard", "--domain", "scienceworld", "--tokenizer",
                 str(empty), "-o", str(tmp_path / "rows.jsonl")]) == 1  # fmt: skip
    err = capsys.readouterr().err
    assert "--tokenizer" in err and "--model" not in err


def test_resume_with_another_model_is_refused_before_it_is_loaded(
    run_sft, rows_file: Path, tmp_path: Path, capsys
) -> None:
    run = tmp_path / "run"
    assert run_sft(rows_file, run) == 0
    capsys.readouterr()
    # a model that could not even be loaded: the refusal must come first (it compares, it does not load)
    missing = tmp_path / "no-such-model"
    assert main(["train", "sft", "--resume", str(run), "--model", str(missing), "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert "other settings" in err and "model" in err and "unknown model" not in err


def test_a_finished_sft_run_resumed_says_so(
    run_sft, run_snapshot, rows_file: Path, tmp_path: Path, capsys
) -> None:
    run = tmp_path / "run"
    assert run_sft(rows_file, run) == 0
    err = capsys.readouterr().err
    assert (
        "sft: 2 optimizer steps left of 2" in err and "training should take about" in err
    )  # the cost, up front
    before = run_snapshot(run)
    assert main(["train", "sft", "--resume", str(run), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "already finished at step 2" in out and "None" not in out
    assert run_snapshot(run) == before


def test_rlvr_prints_every_step_and_a_finished_resume_says_so(tmp_path: Path, capsys) -> None:
    pytest.importorskip("bm25s", reason="the webshop extra is not installed")
    from xtree_gym.envs.webshop_data import write_demo_data

    shop = write_demo_data(tmp_path / "shop")
    run = tmp_path / "run"
    args = ["--config", "webshop-cpu-smoke", "--env-kwargs", f"data_dir={shop}", "--shaping", "none"]
    assert main(["train", "rlvr", *args, "--no-tensorboard", "-o", str(run)]) == 0
    err = capsys.readouterr().err
    assert (
        "rlvr: 2 steps x 1 task(s) x 2 rollouts, each <= 5 turns of <= 12 new tokens" in err
    )  # progress: false
    steps = [line for line in err.splitlines() if line.startswith("rlvr step ")]
    assert [line.split(":")[0] for line in steps] == ["rlvr step 1", "rlvr step 2"], err
    assert "1/2" in steps[0] and "ETA" in steps[0] and "2/2" in steps[1]
    assert main(["train", "rlvr", "--resume", str(run)]) == 0
    out = capsys.readouterr().out
    assert "already finished at step 2" in out and "reward=None" not in out


def test_a_failed_write_names_the_output_not_its_temp(tmp_path: Path, monkeypatch) -> None:
    """sysfs refuses chmod on the temp file; the error must name the output the user chose."""
    from xtree_gym.corpus import io

    def refuse(path: str, mode: int) -> None:
        raise PermissionError(1, "Operation not permitted", path)

    monkeypatch.setattr(io.os, "chmod", refuse)
    target = tmp_path / "tree.json"
    with pytest.raises(PermissionError) as exc:
        io.atomic_write_text(target, "{}")
    assert exc.value.filename == str(target)
    assert list(tmp_path.iterdir()) == []  # no temp left behind
