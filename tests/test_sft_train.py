"""``xtree train sft`` with tiny-random: the target-token loss drops on a fixed row set; resume; warm start."""

from __future__ import annotations

import json
from importlib.resources import files
from pathlib import Path

import pytest

from xtree_gym.agents.sft_offline.rows import build_rows, read_rows, write_rows
from xtree_gym.agents.sft_offline.sft import SFTConfig, train_sft, warm_start_rows
from xtree_gym.errors import ConfigError

SAMPLE = Path(str(files("xtree_gym") / "data/scienceworld_gold_sample.jsonl.gz"))


@pytest.fixture(scope="module")
def rows_file(tmp_path_factory):
    """8 node rows: the first 4 of 2 ScienceWorld gold episodes (no ids: the trainer tokenizes them)."""
    from xtree_gym.corpus import read_corpus
    from xtree_gym.mining import mine

    trajs = read_corpus(SAMPLE).trajectories
    tree = mine(trajs, "scienceworld", domain="scienceworld")
    rows = [r for t in trajs[:2] for r in build_rows([t], "node", tree=tree, domain="scienceworld")[:4]]
    path = tmp_path_factory.mktemp("sft") / "rows.jsonl"
    write_rows(path, rows)
    return path


def _cfg(rows_file, out, **kw):
    base = {"rows": str(rows_file), "model": "tiny-random", "output_dir": str(out), "lr": 3e-3, "batch_size": 4,
            "micro_batch_tokens": 8192, "progress": False, "tensorboard": False}  # fmt: skip
    return SFTConfig(**{**base, **kw})


def test_tiny_random_sft_lowers_the_target_loss(rows_file, tmp_path):
    out = train_sft(_cfg(rows_file, tmp_path / "run", epochs=3))
    assert out["final_loss"] < out["initial_loss"] - 0.5  # random init: ~ln(vocab); a real drop, not noise
    lines = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    n_rows = len(read_rows(rows_file))
    per_epoch = -(-n_rows // 4)
    assert [x["step"] for x in lines] == list(range(1, 3 * per_epoch + 1))
    assert lines[-1]["loss"] < lines[0]["loss"]
    assert all(x["target_tokens"] < x["tokens"] for x in lines)  # prompts are read, not trained on
    ckpts = sorted(p.name for p in (tmp_path / "run").glob("checkpoint-*"))
    assert ckpts[-1] == f"checkpoint-{3 * per_epoch:06d}" and len(ckpts) == 2  # epoch ends, newest 2 kept


def test_resume_equals_the_uninterrupted_run(rows_file, tmp_path):
    import torch

    from xtree_gym.agents.model.loading import load_model
    from xtree_gym.agents.run.checkpoint import find_checkpoint, load_model_weights

    train_sft(_cfg(rows_file, tmp_path / "full", epochs=2))
    train_sft(_cfg(rows_file, tmp_path / "half", epochs=1))
    train_sft(_cfg(rows_file, tmp_path / "half", epochs=2, resume=str(tmp_path / "half")))
    a, _ = load_model("tiny-random")
    b, _ = load_model("tiny-random", seed=1)
    load_model_weights(a, find_checkpoint(tmp_path / "full"))
    load_model_weights(b, find_checkpoint(tmp_path / "half"))
    for pa, pb in zip(a.parameters(), b.parameters()):
        assert torch.allclose(pa, pb, atol=1e-6)
    full = (tmp_path / "full" / "metrics.jsonl").read_text().splitlines()
    half = (tmp_path / "half" / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(x)["loss"] for x in full] == pytest.approx([json.loads(x)["loss"] for x in half])


def test_warm_start_and_cli(rows_file, tmp_path, capsys):
    from xtree_gym.cli import main

    rows = read_rows(rows_file)
    kept = warm_start_rows(rows, 2, seed=0)
    assert len({r.trajectory_id for r in kept}) == 2 and kept == warm_start_rows(rows, 2, seed=0)
    with pytest.raises(ConfigError, match="warm_start"):
        warm_start_rows(rows, 99)
    argv = ["train", "sft", "--rows", str(rows_file), "--model", "tiny-random", "-o", str(tmp_path / "cli"),
            "--epochs", "1", "--warm-start", "2", "--no-progress", "--no-tensorboard"]  # fmt: skip
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out.splitlines()[0])
    assert out["step"] == 1 and out["rows"] == len(kept)
    assert main(["train", "sft", "--rows", str(tmp_path / "nope.jsonl"), "-o", str(tmp_path / "x")]) == 1
    assert "does not exist" in capsys.readouterr().err


def test_rows_tokenized_for_another_model_are_one_error_not_an_index_error(rows_file, tmp_path):
    """Rows whose ids pass the model's vocabulary (built with --tokenizer for a bigger model) and rows
    whose ids fit but come from another tokenizer are refused before any training, naming the fix."""
    from dataclasses import replace

    from xtree_gym.agents.model.loading import load_tokenizer
    from xtree_gym.agents.sft_offline.rows import tokenize_row

    tok = load_tokenizer("tiny-random")
    rows = [tokenize_row(r, tok) for r in read_rows(rows_file)]
    too_big = [replace(r, input_ids=[i + 10_000 for i in r.input_ids or []]) for r in rows]
    shifted = [replace(r, input_ids=[(i + 1) % 100 for i in r.input_ids or []]) for r in rows]
    for bad, words in ((too_big, "vocabulary has"), (shifted, "another tokenizer")):
        path = tmp_path / f"rows-{words.split()[0]}.jsonl"
        write_rows(path, bad)
        with pytest.raises(ConfigError, match=words) as exc:
            train_sft(_cfg(path, tmp_path / "run"))
        assert "--tokenizer" in str(exc.value)
        assert not (tmp_path / "run" / "metrics.jsonl").exists()
    good = tmp_path / "rows-good.jsonl"
    write_rows(good, rows)  # the model's own tokenizer's ids train
    assert train_sft(_cfg(good, tmp_path / "ok", epochs=1))["step"] >= 1


def test_sft_shows_progress_per_micro_batch_and_names_each_phase(rows_file, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("XTREE_PROGRESS", "1")  # the redrawn bar, as on a terminal
    train_sft(_cfg(rows_file, tmp_path / "run", epochs=1, progress=True, micro_batch_tokens=512))
    err = capsys.readouterr().err
    for phase in (
        "reading rows",
        "loading model",
        "tokenizing",
        "loss before training",
        "loss after training",
    ):
        assert phase in err
    assert "sft rows" in err and "step 1/" in err
    n_rows = len(read_rows(rows_file))
    assert f"{n_rows}/{n_rows}" in err  # the bar counted rows, micro-batch by micro-batch
