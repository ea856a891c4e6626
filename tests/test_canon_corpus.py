"""Corpus-level canonicalization and the ``xtree canon`` command."""

from __future__ import annotations

import json

import pytest

from xtree_gym.canon.cli import register_cli
from xtree_gym.canon.corpus import CanonReport, canonicalize_corpus, canonicalize_file
from xtree_gym.corpus import Step, Trajectory, read_corpus, write_corpus
from xtree_gym.errors import CanonicalizationError, ConfigError, CorpusError


def _cli(argv: list[str]) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="xtree")
    sub = parser.add_subparsers(dest="command")
    register_cli(sub, None)
    args = parser.parse_args(argv)
    return args.func(args)


def _web_traj() -> Trajectory:
    return Trajectory(
        "w0",
        [Step("click('235')", "[925] textbox 'from'"), Step("fill('925', '03/01/2023')", "")],
        True,
        env="webarena",
        extra={"initial_observation": "RootWebArea 'x'\n\t[235] link 'CUSTOMERS'"},
    )


def test_context_comes_from_the_observation_before_each_step() -> None:
    out = canonicalize_corpus([_web_traj()], "browsergym")
    assert [s.token for s in out[0].steps] == ["click<link>", "type<text_input>"]
    assert out[0].steps[1].slots["role_source"] == "context"
    # an explicit element in the step's extra wins over the trees
    t = _web_traj()
    t.steps[0].extra["element"] = {"role": "button", "name": "Go"}
    assert canonicalize_corpus([t], "browsergym")[0].steps[0].token == "click<button>"


def test_in_place_and_keep_existing() -> None:
    t = Trajectory("s", [Step("look around", token="custom<x>"), Step("wait1")], True)
    report = CanonReport()
    same = canonicalize_corpus([t], "scienceworld", in_place=True, keep_existing=True, report=report)
    assert same[0] is t
    assert [s.token for s in t.steps] == ["custom<x>", "wait<short>"]
    assert report.n_kept == 1 and report.n_steps == 2 and report.token_counts["wait<short>"] == 1
    canonicalize_corpus([t], "scienceworld", in_place=True)
    assert t.steps[0].token == "observe<room>"


def test_unknown_domain_is_one_clear_error() -> None:
    with pytest.raises(CanonicalizationError, match="unknown domain 'nope'"):
        canonicalize_corpus([], "nope")


def test_file_round_trip_is_deterministic(tmp_path) -> None:
    src = tmp_path / "c.jsonl"
    write_corpus(
        src,
        [
            Trajectory(
                "t",
                [Step("click[b093k5jk25]"), Step("click[blue]")],
                True,
                env="webshop",
                extra={"goal_options": {"color": "blue"}},
            )
        ],
    )
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    canonicalize_file(src, "webshop", a)
    canonicalize_file(a, "webshop", b)
    assert a.read_bytes() == b.read_bytes()
    t = read_corpus(a)[0]
    assert t.tokens == ["click<item>", "click<option-color>"]
    assert t.extra["goal_options"] == {"color": "blue"}
    with pytest.raises(CorpusError, match="is the input file"):
        canonicalize_file(a, "webshop", a)


def test_cli_corpus_and_skip_bad(tmp_path, capsys) -> None:
    src = tmp_path / "c.jsonl"
    src.write_text('{"id": "a", "success": true, "steps": [{"action": "open door to kitchen"}]}\n{bad\n')
    out = tmp_path / "o.jsonl"
    with pytest.raises(CorpusError, match=r"c\.jsonl:2"):
        _cli(["canon", str(src), "--domain", "scienceworld", "-o", str(out)])
    assert _cli(["canon", str(src), "--domain", "scienceworld", "-o", str(out), "--skip-bad"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["n_skipped_lines"] == 1 and summary["n_steps"] == 1
    assert read_corpus(out)[0].steps[0].token == "open<door>"


def test_cli_single_action_and_errors(capsys) -> None:
    assert (
        _cli(
            [
                "canon",
                "--domain",
                "webshop",
                "--action",
                "click[blue]",
                "--context",
                '{"goal_options": {"color": "blue"}}',
            ]
        )
        == 0
    )
    assert json.loads(capsys.readouterr().out)["token"] == "click<option-color>"
    with pytest.raises(ConfigError, match="--context is not valid JSON"):
        _cli(["canon", "--domain", "webshop", "--action", "x", "--context", "{"])
    with pytest.raises(ConfigError, match="needs --domain"):
        _cli(["canon", "--action", "x"])
    with pytest.raises(ConfigError, match="a corpus needs --domain"):
        _cli(["canon", "in.jsonl", "-o", "out.jsonl"])


def test_cli_format_converts_a_published_set(tmp_path, capsys) -> None:
    src = tmp_path / "steps.jsonl"
    recs = [
        {
            "episode": "e1",
            "step": 0,
            "action": "click('235')",
            "obs": {"axtree_txt": "[235] link 'Go'"},
            "reward": 1,
        },
        {"episode": "e1", "step": 1, "action": None, "obs": {"axtree_txt": "done"}},
    ]
    src.write_text("\n".join(json.dumps(r) for r in recs))
    out = tmp_path / "c.jsonl"
    assert _cli(["canon", str(src), "--format", "agentlab", "-o", str(out)]) == 0
    assert json.loads(capsys.readouterr().out)["n_trajectories"] == 1
    t = read_corpus(out)[0]
    assert t.tokens == ["click<link>"] and t.success is True
    empty = tmp_path / "empty.json"
    empty.write_text("[]")
    with pytest.raises(CorpusError, match="holds no trajectories"):
        _cli(["canon", str(empty), "--format", "eto", "-o", str(out)])


def _bad_inputs(tmp_path) -> dict[str, str]:
    """name -> path of a file that no reader can accept."""
    files = {
        "binary.jsonl": b"\xff\xfe\x00 not utf-8",
        "fake.jsonl.gz": b"not gzip at all",
        "cut.jsonl.gz": b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03abc",  # gzip header, truncated stream
        "lines.jsonl": b'{"id": "a", "success": true, "steps": []}\n{not json\n',
    }
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    return {name: str(tmp_path / name) for name in files}


@pytest.mark.parametrize("fmt", ["corpus", "agentgym"])
@pytest.mark.parametrize("name", ["binary.jsonl", "fake.jsonl.gz", "cut.jsonl.gz", "lines.jsonl", "missing"])
def test_xtree_canon_bad_input_is_one_error_line(tmp_path, capsys, fmt, name) -> None:
    from xtree_gym.cli import main

    path = _bad_inputs(tmp_path).get(name, str(tmp_path / "missing.jsonl"))
    out = tmp_path / "out.jsonl"
    rc = main(["canon", path, "--format", fmt, "--domain", "scienceworld", "-o", str(out)])
    err = capsys.readouterr().err
    assert rc == 1 and not out.exists()
    assert err.count("\n") == 1 and err.startswith("xtree canon: error: ") and "Traceback" not in err
    assert path.rsplit("/", 1)[-1] in err  # the message names the file
    if name == "lines.jsonl" and fmt == "corpus":
        assert "lines.jsonl:2" in err  # ... and the line


def test_xtree_canon_unknown_domain_and_unwritable_output(tmp_path, capsys) -> None:
    from xtree_gym.cli import main

    src = tmp_path / "c.jsonl"
    src.write_text('{"id": "a", "success": true, "steps": [{"action": "open door to kitchen"}]}\n')
    assert main(["canon", str(src), "--domain", "sciencewrld", "-o", str(tmp_path / "o.jsonl")]) == 1
    assert "unknown domain 'sciencewrld'" in capsys.readouterr().err
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert main(["canon", str(src), "--domain", "scienceworld", "-o", str(blocker / "o.jsonl")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot write" in err and "file/o.jsonl" in err


def test_a_file_without_trajectories_is_an_error_and_writes_nothing(tmp_path) -> None:
    empty, bad, out = tmp_path / "empty.jsonl", tmp_path / "bad.jsonl", tmp_path / "o.jsonl"
    empty.write_text("\n")
    bad.write_text("{oops\n")
    with pytest.raises(CorpusError, match="holds no trajectories"):
        canonicalize_file(empty, "scienceworld", out)
    with pytest.raises(CorpusError, match=r"no trajectories \(1 malformed line\(s\) skipped\)"):
        canonicalize_file(bad, "scienceworld", out, skip_bad=True)
    assert not out.exists()
