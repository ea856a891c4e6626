"""``xtree train rlvr`` end to end: tiny-random, 2 steps, real WebShop / ScienceWorld envs, each shaping.

Each case runs the CPU smoke recipe through the CLI (in-process, so the tiny model is built once),
then checks: the weights moved, the metrics file has the contract keys on every line, the shaping
reached the reward, and resuming from the step-1 checkpoint gives the uninterrupted step-2 weights.
Half of each group is played by the oracle (``oracle_mix``) so a random model sees reward variance.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("accelerate")
pytest.importorskip("transformers")
torch = pytest.importorskip("torch")
from safetensors.torch import load_file  # noqa: E402

from xtree_gym import MinerConfig, Step, Trajectory, mine  # noqa: E402
from xtree_gym.agents.run.metrics import RLVR_KEYS, read_metrics  # noqa: E402
from xtree_gym.cli import main  # noqa: E402
from xtree_gym.corpus import write_corpus  # noqa: E402

WEBSHOP_TOKENS = ["search<query>", "click<item>", "click<option-size>", "click<buy>"]
SCIWORLD_TOKENS = ["look<around>", "open<door>", "go<location>", "focus<substance>"]


@pytest.fixture(scope="module")
def demo_shop(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("bm25s", reason="the webshop extra is not installed")
    from xtree_gym.envs.webshop_data import write_demo_data

    return write_demo_data(tmp_path_factory.mktemp("shop"))


def _tree(folder: Path, tokens: list[str], env: str) -> Path:
    """A tree mined from 6 successful and 2 failed copies of one chain (corpus beside it)."""
    trajs = [
        Trajectory(str(i), [Step(t, token=t) for t in tokens], i < 6, env=env, task=env) for i in range(8)
    ]
    path = folder / "tree.json"
    mine(trajs, MinerConfig(min_freq=3, eta=0.5, cap=5)).save(path)
    write_corpus(folder / "tree_corpus.jsonl", trajs)
    return path


def _weights(ckpt: Path) -> dict[str, Any]:
    return load_file(str(ckpt / "model" / "model.safetensors"))


def _run_and_resume(tmp_path: Path, args: list[str]) -> tuple[list[dict], list[dict]]:
    run, resumed = tmp_path / "run", tmp_path / "resumed"
    assert main(["train", "rlvr", *args, "-o", str(run), "--keep-checkpoints", "0", "--no-tensorboard"]) == 0
    lines = read_metrics(run)
    assert [m["step"] for m in lines] == [1, 2]
    for m in lines:
        assert set(RLVR_KEYS) <= set(m), set(RLVR_KEYS) - set(m)
        assert m["tokens"] > 0 and m["seconds"] > 0
    # the reward reached the loss and the weights moved, at each step
    w1, w2 = _weights(run / "checkpoint-000001"), _weights(run / "checkpoint-000002")
    from xtree_gym.agents.model.loading import load_model

    init = dict(load_model("tiny-random", seed=0)[0].state_dict())
    assert any(not torch.equal(init[k], w1[k]) for k in w1)
    assert any(not torch.equal(w1[k], w2[k]) for k in w1)
    # resume from the step-1 checkpoint into a fresh folder: the same step 2
    assert main(["train", "rlvr", "--resume", str(run / "checkpoint-000001"), "-o", str(resumed)]) == 0
    w2r = _weights(resumed / "checkpoint-000002")
    for k in w2:
        assert torch.equal(w2[k], w2r[k]), k
    again = read_metrics(resumed)
    assert [m["step"] for m in again] == [2]
    for key in ("reward", "win_rate", "lambda_g", "bonus", "loss", "kl", "tokens"):
        assert again[0][key] == pytest.approx(lines[1][key], rel=1e-6, abs=1e-9), key
    return lines, again


@pytest.mark.parametrize("shaping", ["none", "xtree", "segcost"])
def test_webshop_two_steps_each_shaping(tmp_path: Path, demo_shop: Path, shaping: str) -> None:
    args = ["--config", "webshop-cpu-smoke", "--env-kwargs", f"data_dir={demo_shop}", "--shaping", shaping]
    if shaping == "xtree":
        args += ["--tree", str(_tree(tmp_path, WEBSHOP_TOKENS, "webshop"))]
    lines, _ = _run_and_resume(tmp_path, args)
    if shaping == "none":  # resume in place: the run folder's step-2 line and checkpoint are redone
        inplace = tmp_path / "inplace"
        shutil.copytree(tmp_path / "run", inplace)
        shutil.rmtree(inplace / "checkpoint-000002")  # latest.json now names a missing checkpoint
        assert main(["train", "rlvr", "--resume", str(inplace)]) == 0
        redone = read_metrics(inplace)
        assert [m["step"] for m in redone] == [1, 2] and redone[1]["loss"] == pytest.approx(lines[1]["loss"])
        w2 = _weights(tmp_path / "run" / "checkpoint-000002")
        assert all(torch.equal(v, w2[k]) for k, v in _weights(inplace / "checkpoint-000002").items())
    for m in lines:
        assert m["win_rate"] == 0.5  # the oracle member buys, the random one does not
        if shaping == "none":
            assert m["bonus"] == 0.0 and m["lambda_g"] == 0.0
        if shaping == "xtree":
            # w_g = 0.5 < w_ref 0.85: λ_g = 0.75 (1 - 0.5/0.85); the buyer matched the mined chain
            assert m["lambda_g"] == pytest.approx(0.75 * (1 - 0.5 / 0.85))
            assert m["bonus"] > 0
        if shaping == "segcost":
            assert m["bonus"] > 0 and m["lambda_g"] == 10.0  # the success paid λ · seg/T
    if shaping == "xtree":
        # the shaped reward is what the advantages saw: outcome − penalty + λ_g · bonus (means)
        m = lines[0]
        assert m["reward"] > 0.5 - 0.1 * m["invalid_rate"] * m["turns"] / m["episodes"]


def test_webshop_opsd_and_remining(tmp_path: Path, demo_shop: Path) -> None:
    tree = _tree(tmp_path, WEBSHOP_TOKENS, "webshop")
    args = ["--config", "webshop-cpu-smoke", "--env-kwargs", f"data_dir={demo_shop}", "--tree", str(tree)]
    args += ["--tree-corpus", str(tmp_path / "tree_corpus.jsonl"), "--opsd", "xtree", "--opsd-c", "0.5"]
    args += ["--remine-every", "1", "--miner", "webshop", "--eval-every", "2", "--eval-tasks", "1"]
    args += ["-o", str(tmp_path / "run"), "--no-tensorboard"]
    assert main(["train", "rlvr", *args]) == 0
    lines = read_metrics(tmp_path / "run")
    assert all(m["opsd"] != 0.0 for m in lines)  # the card changed the teacher's logprobs
    for m in lines:
        assert {"nodes", "nodes_came", "nodes_went", "nodes_stayed"} <= set(m)
        assert m["nodes_stayed"] + m["nodes_went"] >= 0
    assert lines[0]["nodes_went"] + lines[0]["nodes_stayed"] == 3  # the starting tree had 3 nodes
    assert "eval_success_rate" not in lines[0] and 0.0 <= lines[1]["eval_success_rate"] <= 1.0
    results = json.loads((tmp_path / "run" / "eval-000002" / "results.json").read_text())
    assert results["episodes"] == 1 and results["success_rate"] == lines[1]["eval_success_rate"]
    ckpt = tmp_path / "run" / "checkpoint-000002"
    assert (ckpt / "tree.json").is_file() and (ckpt / "buffer.jsonl").is_file()
    assert len((ckpt / "buffer.jsonl").read_text().splitlines()) == 4  # 2 steps x 1 task x 2 rollouts


@pytest.mark.parametrize("labelled", [True, False])
def test_webshop_auto_bonus_mode_follows_the_tree_corpus(
    tmp_path: Path, demo_shop: Path, capsys: pytest.CaptureFixture[str], labelled: bool
) -> None:
    """``--bonus-mode auto`` (the default) is ``contrastive_gated`` given a corpus of successes and failures,
    ``eq3`` without one; the run's config.json says which, and the rewards follow it: the gated rule pays no
    bonus in a group with a win (λ 0), Eq. 3 pays λ_g = 0.75 (1 − 0.5/0.85)."""
    trajs = [  # the chain completes in the 6 successes only: its nodes separate them from the 2 failures
        Trajectory(str(i), [Step(t, token=t) for t in (WEBSHOP_TOKENS if i < 6 else WEBSHOP_TOKENS[:1])],
                   i < 6, env="webshop", task="webshop") for i in range(8)
    ]  # fmt: skip
    mine(trajs, MinerConfig(min_freq=3, eta=0.5, cap=5)).save(tmp_path / "tree.json")
    write_corpus(tmp_path / "tree_corpus.jsonl", trajs)
    args = ["--config", "webshop-cpu-smoke", "--env-kwargs", f"data_dir={demo_shop}", "--tree",
            str(tmp_path / "tree.json"), "--steps", "1", "-o", str(tmp_path / "run"), "--no-tensorboard"]  # fmt: skip
    if labelled:
        args += ["--tree-corpus", str(tmp_path / "tree_corpus.jsonl")]
    assert main(["train", "rlvr", *args]) == 0
    want = "contrastive_gated" if labelled else "eq3"
    assert json.loads((tmp_path / "run" / "config.json").read_text())["bonus_mode"] == want
    assert f"bonus mode auto: {want}" in capsys.readouterr().err
    (m,) = read_metrics(tmp_path / "run")
    assert m["win_rate"] == 0.5 and m["bonus"] > 0  # the buyer completed the chain; its nodes are worth > 0
    assert m["lambda_g"] == (0.0 if labelled else pytest.approx(0.75 * (1 - 0.5 / 0.85)))


@pytest.mark.slow
@pytest.mark.parametrize("shaping", ["none", "xtree", "segcost"])
def test_scienceworld_two_steps_each_shaping(tmp_path: Path, shaping: str) -> None:
    pytest.importorskip("scienceworld")
    os.environ.setdefault("JAVA_TOOL_OPTIONS", "-Xmx1g")
    args = ["--config", "scienceworld-cpu-smoke", "--shaping", shaping]
    if shaping == "xtree":
        args += ["--tree", str(_tree(tmp_path, SCIWORLD_TOKENS, "scienceworld"))]
    lines, _ = _run_and_resume(tmp_path, args)
    for m in lines:
        if shaping == "xtree":
            assert m["lambda_g"] == pytest.approx(0.75)  # 2-step episodes never win: λ_g = λ0
        assert m["win_rate"] == 0.0


@pytest.mark.slow
@pytest.mark.parametrize("teacher", ["base", "ema"])
def test_opsd_teachers_and_banks(tmp_path: Path, demo_shop: Path, teacher: str) -> None:
    bank = tmp_path / "bank.txt"
    bank.write_text("Search first, open the item, pick every option the goal names, then buy.\n")
    args = ["--config", "webshop-cpu-smoke", "--env-kwargs", f"data_dir={demo_shop}", "--opsd", str(bank)]
    args += ["--opsd-teacher", teacher, "--opsd-c", "0.5", "--keep-checkpoints", "0", "--no-tensorboard"]
    assert main(["train", "rlvr", *args, "-o", str(tmp_path / "run")]) == 0
    lines = read_metrics(tmp_path / "run")
    assert all(m["opsd"] != 0.0 for m in lines)
    if teacher == "ema":
        assert (tmp_path / "run" / "checkpoint-000002" / "extra.safetensors").is_file()


def test_bad_config_is_one_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "c.yaml"
    bad.write_text("steps: 2\nstepz: 3\n")
    assert main(["train", "rlvr", "--config", str(bad), "-o", str(tmp_path / "r")]) == 1
    err = capsys.readouterr().err
    assert "unknown field(s) ['stepz']" in err and str(bad) in err and "Traceback" not in err
    assert main(["train", "rlvr", "--shaping", "xtree", "-o", str(tmp_path / "r")]) == 1
    assert "needs a tree" in capsys.readouterr().err
    assert main(["train", "rlvr", "--resume", str(tmp_path / "nothing")]) == 1
    assert "no checkpoint to resume from" in capsys.readouterr().err


def test_print_config_merges_file_and_flags(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"steps": 7, "n": 4, "env_kwargs": {"a": 1}}))
    assert (
        main(["train", "rlvr", "--config", str(cfg), "--n", "3", "--tasks-per-step", "5", "--print-config"])
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert (out["steps"], out["n"], out["tasks_per_step"], out["env_kwargs"]) == (7, 3, 5, {"a": 1})


def test_the_webshop_smoke_recipe_shows_the_xtree_signal_as_shipped(tmp_path: Path, demo_shop: Path) -> None:
    """A newcomer's first run (the recipe as shipped) pays the X-Tree bonus: the packaged demo tree."""
    args = [
        "--config",
        "webshop-cpu-smoke",
        "--env-kwargs",
        f"data_dir={demo_shop}",
        "-o",
        str(tmp_path / "r"),
    ]
    assert main(["train", "rlvr", *args, "--steps", "1", "--no-tensorboard"]) == 0
    (line,) = read_metrics(tmp_path / "r")
    assert line["bonus"] > 0 and line["lambda_g"] > 0
    assert json.loads((tmp_path / "r" / "config.json").read_text())["shaping"] == "xtree"


def test_webshop_self_mined_run_ends_with_its_own_tree(tmp_path: Path, demo_shop: Path) -> None:
    """``--remine-every 1`` with no ``--tree``: step 1 is outcome only, then a tree mined from the run's own
    episodes and valued on them pays the bonus of step 2; the twin outcome-only run (same seed) differs only there.
    """
    recipe = (Path(__file__).parents[1] / "xtree_gym/agents/recipes/webshop-cpu-smoke.yaml").read_text()
    (tmp_path / "no-tree.yaml").write_text(recipe.replace("tree: packaged:webshop_demo_tree.json\n", ""))
    base = [
        "--config",
        str(tmp_path / "no-tree.yaml"),
        "--env-kwargs",
        f"data_dir={demo_shop}",
        "--no-tensorboard",
        "--tasks-per-step",
        "2",  # 2 groups of 2: two oracle buys a step, so a pair is seen twice
    ]
    mined, plain = tmp_path / "mined", tmp_path / "plain"
    # contrastive_normalized pays in a group with a win (auto's contrastive_gated would not: λ 0 there)
    args = [
        "--remine-every",
        "1",
        "--miner",
        "webshop:min_freq=2,eta=0",
        "--bonus-mode",
        "contrastive_normalized",
    ]
    args += ["-o", str(mined)]  # a pair seen twice merges: step 1's window
    assert main(["train", "rlvr", *base, *args]) == 0
    assert main(["train", "rlvr", *base, "--shaping", "none", "-o", str(plain)]) == 0
    cfg = json.loads((mined / "config.json").read_text())
    assert cfg["tree"] is None and cfg["remine_every"] == 1 and cfg["shaping"] == "xtree"
    m, p = read_metrics(mined), read_metrics(plain)
    assert [x["step"] for x in m] == [1, 2] and [x["step"] for x in p] == [1, 2]
    for line, held in zip(m, (4, 8)):  # a re-mine after every step, from every episode so far
        assert line["buffer_successes"] + line["buffer_failures"] == held and line["nodes"] > 0
        assert line["bonus_mode"] == "contrastive_normalized" and line["buffer_successes"] >= 1
    ckpt = mined / "checkpoint-000002"
    buffer = [json.loads(x) for x in (ckpt / "buffer.jsonl").read_text().splitlines()]
    tree = json.loads((ckpt / "tree.json").read_text())
    assert tree["corpus"]["n_trajectories"] == len(buffer) == 8  # mined from its own episodes
    assert (
        tree["corpus"]["n_successful"] == sum(bool(t["success"]) for t in buffer) == m[1]["buffer_successes"]
    )
    # step 1: no tree yet, outcome only, the same update as the outcome-only twin
    assert m[0]["bonus"] == 0.0 and m[0]["reward"] == p[0]["reward"] and m[0]["loss"] == p[0]["loss"]
    w1m, w1p = _weights(mined / "checkpoint-000001"), _weights(plain / "checkpoint-000001")
    assert len(w1m) > 0 and all(torch.equal(w1m[k], w1p[k]) for k in w1m)
    # step 2: the self-mined tree's bonus reached the rewards, the advantages and the weights
    assert m[1]["bonus"] > 0 and m[1]["lambda_g"] > 0 and m[1]["reward"] > p[1]["reward"]
    w2m, w2p = _weights(ckpt), _weights(plain / "checkpoint-000002")
    assert any(not torch.equal(w2m[k], w2p[k]) for k in w2m)
    assert any(not torch.equal(w2m[k], w1m[k]) for k in w2m)
    # resumed from step 1: the checkpoint's tree.json carries the mode and values it was paid with
    assert (
        main(["train", "rlvr", "--resume", str(mined / "checkpoint-000001"), "-o", str(tmp_path / "again")])
        == 0
    )
    w2r = _weights(tmp_path / "again" / "checkpoint-000002")
    assert all(torch.equal(w2m[k], w2r[k]) for k in w2m)
    assert read_metrics(tmp_path / "again")[0]["bonus"] == pytest.approx(m[1]["bonus"])
