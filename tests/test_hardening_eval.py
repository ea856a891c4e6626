"""Hardening II, ``xtree eval`` and the files it writes: the resume key holds every setting that can change
an episode, two evals cannot share a folder, a NaN reward or a lone surrogate from the env cannot break
the JSON written, bad ``--responses`` files and flags are one error. Real envs (Countdown, the echo envs
of ``xtree_gym.agents.play.testing``), the real CLI in-process.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from xtree_gym.agents.harness import get_harness
from xtree_gym.cli import main

ODD_ENV = "xtree_gym.agents.play.testing:OddEnv"


def _strict(text: str) -> object:
    def refuse(name: str) -> float:
        raise ValueError(f"non-standard JSON constant {name}")

    return json.loads(text, parse_constant=refuse)


def _countdown(tmp_path: Path, out: Path, *extra: str, responses: list[str] | None = None) -> int:
    path = tmp_path / "responses.json"
    if responses is not None or not path.exists():
        path.write_text(json.dumps(responses or ["<answer>op(+, 1, 2)</answer>"]))
    argv = ["eval", "XTree-Countdown-v0", "--harness", "node", "--backend", "scripted",
            "--responses", str(path), "--tasks", "2", "-o", str(out), *extra]  # fmt: skip
    return main(argv)


def test_the_resume_key_holds_every_setting_that_changes_an_episode(tmp_path: Path, capsys) -> None:
    out = tmp_path / "ev"
    assert _countdown(tmp_path, out) == 0
    assert _countdown(tmp_path, out) == 0  # same settings: resumed, not replayed
    assert json.loads((out / "results.json").read_text())["resumed"] == 2
    capsys.readouterr()
    episodes = (out / "episodes.jsonl").read_bytes()
    refusals = {
        "--responses": lambda: _countdown(tmp_path, out, responses=["<answer>op(*, 1, 2)</answer>"]),
        "--env-arg": lambda: _countdown(tmp_path, out, "--env-arg", "max_steps=3"),
        "--step-timeout": lambda: _countdown(tmp_path, out, "--step-timeout", "30"),
        "--harness-arg": lambda: _countdown(tmp_path, out, "--harness-arg", "history_length=1"),
    }
    for flag, run in refusals.items():
        assert run() == 1, flag
        err = capsys.readouterr().err
        assert "other settings" in err and flag in err.split("fix:")[1], (flag, err)
        assert (out / "episodes.jsonl").read_bytes() == episodes  # nothing replayed, nothing added


def test_the_same_template_path_with_new_content_is_another_run(tmp_path: Path, capsys) -> None:
    out = tmp_path / "ev"
    template = tmp_path / "wording.json"
    template.write_text(json.dumps({"system": "You play Countdown."}))
    assert _countdown(tmp_path, out, "--template", str(template)) == 0
    template.write_text(json.dumps({"system": "You play Countdown. Think twice."}))
    capsys.readouterr()
    assert _countdown(tmp_path, out, "--template", str(template)) == 1
    assert "--template" in capsys.readouterr().err


def test_two_evals_cannot_write_one_folder(tmp_path: Path, capsys) -> None:
    from xtree_gym.agents.run.lock import folder_lock

    out = tmp_path / "ev"
    with folder_lock(out):  # another evaluation holds the folder (a second open file: flock conflicts)
        assert _countdown(tmp_path, out) == 1
        assert "another xtree eval" in capsys.readouterr().err
        assert not (out / "episodes.jsonl").exists()
    assert _countdown(tmp_path, out) == 0  # released: the folder is usable again


def _odd_eval(tmp_path: Path, out: Path, **env: bool) -> int:
    path = tmp_path / "odd.json"
    path.write_text(json.dumps([get_harness("react").format_response(a) for a in ("wait", "win")]))
    argv = ["eval", ODD_ENV, "--harness", "react", "--backend", "scripted", "--responses", str(path),
            "--tasks", "2", "-o", str(out)]  # fmt: skip
    for key, value in env.items():
        argv += ["--env-arg", f"{key}={json.dumps(value)}"]
    return main(argv)


def test_a_nan_reward_is_a_fault_and_results_stay_standard_json(tmp_path: Path) -> None:
    out = tmp_path / "nan"
    assert _odd_eval(tmp_path, out, nan_reward=True) == 0
    result = _strict((out / "results.json").read_text())
    assert isinstance(result, dict) and result["episodes"] == 2
    rows = [_strict(x) for x in (out / "episodes.jsonl").read_text().splitlines()]
    assert all("non-finite reward" in str(r) for r in rows)  # type: ignore[operator]
    assert _odd_eval(tmp_path, out, nan_reward=True) == 0  # the folder still resumes


def test_a_lone_surrogate_in_an_observation_is_repaired(tmp_path: Path) -> None:
    out = tmp_path / "sur"
    assert _odd_eval(tmp_path, out, surrogate=True) == 0
    text = (out / "episodes.jsonl").read_text(encoding="utf-8")
    assert "\ufffd" in text or "\\ufffd" in text


@pytest.mark.parametrize(
    "content",
    [b"", b"not json", b'{"a": 1}', b"[]", b"[1, 2]", b'["ok", NaN]', b"\xff\xfe", b"[" * 5000],
)
def test_malformed_responses_files_are_one_error(content: bytes, tmp_path: Path, capsys) -> None:
    path = tmp_path / "r.json"
    path.write_bytes(content)
    argv = ["eval", "XTree-Countdown-v0", "--harness", "node", "--backend", "scripted",
            "--responses", str(path), "-o", str(tmp_path / "ev")]  # fmt: skip
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "responses" in err and "Traceback" not in err, err


@pytest.mark.parametrize(
    "flags",
    [["--device", "tpu", "--model", "tiny-random", "--backend", "hf"], ["--step-timeout", "nan"],
     ["--episode-timeout", "-1"], ["--temperature", "inf"], ["--top-p", "0"], ["--max-new-tokens", "100000000"]],
)  # fmt: skip
def test_bad_eval_flags_are_one_error(flags: list[str], tmp_path: Path, capsys) -> None:
    argv = ["eval", "XTree-Countdown-v0", "--harness", "node", *flags, "-o", str(tmp_path / "ev")]
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own usage error (exit 2) for a bad flag value
        code = int(exc.code or 0)
    assert code in (1, 2)
    err = capsys.readouterr().err
    assert flags[0] in err or "device" in err, err
    assert "Traceback" not in err


def test_a_corrupt_run_json_is_one_error(tmp_path: Path, capsys) -> None:
    out = tmp_path / "ev"
    assert _countdown(tmp_path, out) == 0
    (out / "run.json").write_text('{"env": "XTree-Countdown-v0", ')
    capsys.readouterr()
    assert _countdown(tmp_path, out) == 1
    err = capsys.readouterr().err
    assert "run.json" in err and "Traceback" not in err


def test_an_env_whose_close_never_returns_cannot_hang_an_evaluation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    import time

    from xtree_gym.agents.play import envproc

    monkeypatch.setattr(envproc, "CLOSE_TIMEOUT_S", 2.0)
    path = tmp_path / "r.json"
    path.write_text(json.dumps([get_harness("react").format_response("win")]))
    argv = ["eval", "xtree_gym.agents.play.testing:StuckCloseEnv", "--harness", "react", "--backend", "scripted",
            "--responses", str(path), "--tasks", "2", "-o", str(tmp_path / "ev")]  # fmt: skip
    t0 = time.monotonic()
    assert main(argv) == 0
    assert time.monotonic() - t0 < 60
    assert "did not return" in capsys.readouterr().err
    assert json.loads((tmp_path / "ev" / "results.json").read_text())["success_rate"] == 1.0


def test_resets_with_timeouts_run_at_once_not_one_after_another(tmp_path: Path) -> None:
    """4 envs whose reset takes 1 s each, in-process with a step timeout: about 1 s, not 4."""
    import time

    from xtree_gym.agents.model.generation import make_generator
    from xtree_gym.agents.play.rollout import rollout
    from xtree_gym.agents.types import TaskSpec

    h = get_harness("react")
    gen = make_generator("scripted", responses=[h.format_response("win")], cycle=True)
    tasks = [TaskSpec(task="slow", seed=i) for i in range(4)]
    t0 = time.monotonic()
    eps = rollout("xtree_gym.agents.play.testing:SlowResetEnv", tasks, gen, h, n=1, step_timeout=30.0)
    took = time.monotonic() - t0
    assert [e.success for e in eps] == [True] * 4
    assert took < 3.0, took
