"""Hardening II, training side: run folders are never destroyed, NaN is never a hyperparameter,
wrong-typed config fields and corrupt weights are one error, a non-finite step stops before it saves.

Real components throughout: the ``xtree`` CLI in-process, tiny-random weights, real safetensors files.
"""

from __future__ import annotations

import json
import os
from importlib.resources import files
from pathlib import Path

import pytest

from xtree_gym.cli import main

SAMPLE = Path(str(files("xtree_gym") / "data/scienceworld_gold_sample.jsonl.gz"))


# -- 1. run folders ---------------------------------------------------------------------------------
def test_a_new_run_never_replaces_a_finished_one(
    run_sft, run_snapshot, rows_file: Path, tmp_path: Path, capsys
) -> None:
    run = tmp_path / "run"
    assert run_sft(rows_file, run) == 0
    before = run_snapshot(run)
    assert run_sft(rows_file, run, "--lr", "2e-3") == 1
    err = capsys.readouterr().err
    assert "already holds a run" in err and "--resume" in err and "--overwrite" in err
    assert run_snapshot(run) == before  # nothing cut, nothing rotated away
    # the same refusal for rlvr and offline, before any model is loaded
    assert main(["train", "rlvr", "-o", str(run), "--steps", "1"]) == 1
    assert main(["train", "offline", "--corpus", str(SAMPLE), "-o", str(run)]) == 1
    assert run_snapshot(run) == before
    # a folder of someone else's files is refused too, and --overwrite will not delete it
    other = tmp_path / "notes"
    other.mkdir()
    (other / "todo.txt").write_text("mine")
    assert run_sft(rows_file, other) == 1
    assert run_sft(rows_file, other, "--overwrite") == 1
    assert (other / "todo.txt").read_text() == "mine"
    # --overwrite starts again explicitly; --overwrite with --resume contradicts
    assert run_sft(rows_file, run, "--overwrite", "--lr", "2e-3") == 0
    cfg = json.loads((run / "config.json").read_text())
    assert cfg["lr"] == 2e-3
    assert run_sft(rows_file, run, "--overwrite", "--resume", str(run)) == 1


def test_library_trainers_refuse_a_run_folder_too(rows_file: Path, tmp_path: Path) -> None:
    from xtree_gym.agents.sft_offline.sft import SFTConfig, train_sft
    from xtree_gym.errors import ConfigError

    (tmp_path / "metrics.jsonl").write_text('{"step": 6}\n')
    cfg = SFTConfig(rows=str(rows_file), output_dir=str(tmp_path), progress=False, tensorboard=False)
    with pytest.raises(ConfigError, match="already holds a run"):
        train_sft(cfg)
    assert (tmp_path / "metrics.jsonl").read_text() == '{"step": 6}\n'


def test_rotation_by_step_number_and_latest_names_an_existing_checkpoint(tmp_path: Path) -> None:
    from xtree_gym.agents.model.loading import tiny_random
    from xtree_gym.agents.run.checkpoint import LATEST_FILE, find_checkpoint, save_checkpoint

    model, _ = tiny_random(0)
    for step in (999_998, 999_999):
        save_checkpoint(tmp_path, step, model=model, keep=0)
    # a killed writer's temp folder (dead pid) and a folder that is not ours
    (tmp_path / ".checkpoint-000007.999999999.abc_12").mkdir()
    (tmp_path / ".checkpoint-keep").mkdir()
    final = save_checkpoint(tmp_path, 1_000_000, model=model, keep=2)
    names = sorted(p.name for p in tmp_path.iterdir())
    # by name, checkpoint-1000000 sorts first and was deleted right after being written
    assert names == [".checkpoint-keep", "checkpoint-1000000", "checkpoint-999999", LATEST_FILE]
    latest = json.loads((tmp_path / LATEST_FILE).read_text())["checkpoint"]
    assert latest == final.name and (tmp_path / latest).is_dir()
    assert find_checkpoint(tmp_path) == final


def test_resume_checks_config_model_and_weights(
    run_sft, run_snapshot, rows_file: Path, tmp_path: Path, capsys
) -> None:
    run = tmp_path / "run"
    assert run_sft(rows_file, run, "--keep-checkpoints", "0") == 0
    capsys.readouterr()
    ck = sorted(run.glob("checkpoint-*"))[-1]
    # other settings than the run was trained with: refused, nothing written
    before = run_snapshot(run)
    cfg = tmp_path / "other.yaml"
    cfg.write_text(f"rows: {rows_file}\nlr: 0.5\nepochs: 2\nbatch_size: 2\n")
    assert main(["train", "sft", "--config", str(cfg), "--resume", str(run), "-o", str(run)]) == 1
    err = capsys.readouterr().err
    assert "other settings" in err and "lr" in err
    assert run_snapshot(run) == before
    # more epochs (how long) may change
    assert main(["train", "sft", "--resume", str(run), "--epochs", "2", "--no-progress"]) == 0
    capsys.readouterr()
    # a truncated checkpoint file: one error naming it, not a traceback
    ck2 = sorted(run.glob("checkpoint-*"))[-1]
    weights = ck2 / "model" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])
    assert main(["train", "sft", "--resume", str(ck2), "-o", str(tmp_path / "r2"), "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert "model.safetensors" in err and "Traceback" not in err
    assert ck.exists()


def test_resume_into_a_model_of_another_shape_is_one_error(tmp_path: Path) -> None:
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from xtree_gym.agents.model.loading import tiny_random
    from xtree_gym.agents.run.checkpoint import load_model_weights, save_checkpoint
    from xtree_gym.errors import ConfigError

    model, _ = tiny_random(0)
    ck = save_checkpoint(tmp_path, 1, model=model)
    wider = Qwen2ForCausalLM(Qwen2Config(**{**model.config.to_dict(), "intermediate_size": 96}))
    with pytest.raises(ConfigError, match="do not fit the model"):
        load_model_weights(wider, ck)


def test_corrupt_model_folder_is_one_error(run_sft, tmp_path: Path, capsys, rows_file: Path) -> None:
    from xtree_gym.agents.model.loading import tiny_random

    model, tok = tiny_random(0)
    folder = tmp_path / "m"
    model.save_pretrained(str(folder))
    tok.save_pretrained(str(folder))
    w = folder / "model.safetensors"
    w.write_bytes(w.read_bytes()[: w.stat().st_size // 2])
    assert run_sft(rows_file, tmp_path / "run", "--model", str(folder)) == 1
    err = capsys.readouterr().err
    assert "cannot load the model weights" in err and "Traceback" not in err


# -- 2. NaN and infinity -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "flags",
    [
        ["--temperature", "nan"], ["--lr", "inf"], ["--invalid-penalty", "nan"], ["--kl-coef", "nan"],
        ["--max-grad-norm", "nan"], ["--top-p", "nan"], ["--step-timeout", "nan"], ["--lambda0=-inf"],
        ["--max-new-tokens", "100000000"], ["--env-kwargs", "x=NaN"], ["--seed", "-1"], ["--top-p", "1.5"],
    ],
)  # fmt: skip
def test_non_finite_or_out_of_range_flags_are_refused(flags: list[str], tmp_path: Path, capsys) -> None:
    out = tmp_path / "run"
    assert main(["train", "rlvr", *flags, "-o", str(out)]) == 1
    err = capsys.readouterr().err
    name = flags[0].split("=")[0].lstrip("-").replace("-", "_")
    assert f"{name} " in err and "Traceback" not in err, err
    assert not out.exists()


@pytest.mark.parametrize(
    "yaml_text, field",
    [
        ("n: '2'", "n"), ("env_kwargs: foo", "env_kwargs"), ("output_dir: 7", "output_dir"), ("seed: -3", "seed"),
        ("steps: 2.5", "steps"), ("progress: 'no'", "progress"), ("lr: .nan", "lr"), ("lr: .inf", "lr"),
        ("max_new_tokens: 100000000", "max_new_tokens"), ("temperature: null", "temperature"),
        ("episode_timeout: 0", "episode_timeout"), ("tree: [1, 2]", "tree"),
    ],
)  # fmt: skip
def test_wrong_typed_yaml_fields_are_one_error(
    yaml_text: str, field: str, tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # no -o: the file's output_dir is the one read
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml_text + "\n")
    assert main(["train", "rlvr", "--config", str(cfg)]) == 1
    err = capsys.readouterr().err
    assert f"{field} = " in err and str(cfg) in err and "Traceback" not in err, err


def test_sft_config_checks_types_in_the_library_too() -> None:
    from xtree_gym.agents.sft_offline.sft import SFTConfig
    from xtree_gym.errors import ConfigError

    with pytest.raises(ConfigError, match="lr = nan"):
        SFTConfig(rows="r.jsonl", lr=float("nan")).check()
    with pytest.raises(ConfigError, match=r"epochs = 2\.5"):
        SFTConfig(rows="r.jsonl", epochs=2.5).check()  # type: ignore[arg-type]


def test_a_non_finite_step_stops_before_it_is_saved(run_sft, rows_file: Path, tmp_path: Path, capsys) -> None:
    """lr 1e30: step 1 is finite and saved; its weights overflow step 2's forward, which must stop the run."""
    run = tmp_path / "run"
    code = run_sft(
        rows_file, run, "--lr", "1e30", "--save-every", "1", "--keep-checkpoints", "0", "--epochs", "2"
    )
    err = capsys.readouterr().err
    assert code == 1 and "step 2:" in err and "not" not in err.split("step 2:")[0][-3:], err
    assert [p.name for p in sorted(run.glob("checkpoint-*"))] == ["checkpoint-000001"]
    assert json.loads((run / "latest.json").read_text())["checkpoint"] == "checkpoint-000001"
    lines = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert [x["step"] for x in lines] == [1]
    assert os.path.getsize(run / "checkpoint-000001" / "model" / "model.safetensors") > 0
