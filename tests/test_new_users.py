"""Issue 16, "New users": what a first run meets -- fast failures, flags that exist, progress, a demo
that shows the same thing every time, a README that works as written, a report that reads right."""

from __future__ import annotations

import io
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from xtree_gym.cli import main

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).parent / "data" / "render"


def _run_bounded(argv: list[str], env: dict[str, str], timeout: float) -> tuple[int | None, str]:
    """Run ``argv`` in its own process group; on timeout kill the whole group and return (None, output)."""
    proc = subprocess.Popen(
        argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )
    try:
        out, _ = proc.communicate(timeout=timeout)
        return proc.returncode, out
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        return None, out


def _without_scienceworld(tmp_path: Path) -> dict[str, str]:
    """An environment in which `scienceworld` cannot be imported, in this process's children and theirs."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import sys\nsys.modules['scienceworld'] = None\n")
    return {**os.environ, "PYTHONPATH": f"{site}{os.pathsep}{ROOT}", "XTREE_PROGRESS": "0"}


@pytest.mark.parametrize(
    "argv",
    [
        ["demo"],
        ["demo", "--collect", "--workers", "2"],
        ["collect", "scienceworld", "--workers", "2", "-o", "x.jsonl"],
    ],
)
def test_a_missing_scienceworld_extra_is_one_fast_error(tmp_path: Path, argv: list[str]) -> None:
    env = _without_scienceworld(tmp_path)
    t0 = time.monotonic()
    rc, out = _run_bounded([sys.executable, "-m", "xtree_gym", *argv], env, timeout=60)
    assert rc == 1, f"did not end within 60 s (rc {rc}): {out[-500:]}"
    assert time.monotonic() - t0 < 30
    lines = [ln for ln in out.splitlines() if ln.strip()]
    assert len(lines) == 1 and "pip install 'xtree_gym[scienceworld]'" in lines[0], out
    assert "Traceback" not in out


_POOL = textwrap.dedent(
    """
    from xtree_gym.collect.scienceworld import collect_gold
    from xtree_gym.errors import XTreeError
    try:
        list(collect_gold([("boil", 0), ("melt", 0)], workers=2, step_timeout=-1, show_progress=False))
    except XTreeError as exc:
        print("ERROR", exc)
    """
)


def test_a_worker_that_cannot_start_ends_the_run_with_one_error() -> None:
    pytest.importorskip("scienceworld")
    from xtree_gym.envs.sciworld_jvm import java_available

    if not java_available():
        pytest.skip("no java")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    rc, out = _run_bounded([sys.executable, "-c", _POOL], env, timeout=90)
    assert rc == 0, f"the pool kept respawning failed workers (rc {rc}): {out[-500:]}"
    assert out.strip().startswith(
        "ERROR a simulator worker could not start: step_timeout and load_timeout must be"
    )


def test_collect_webshop_names_the_cli_flag(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.delenv("XTREE_WEBSHOP_DATA", raising=False)
    assert main(["collect", "webshop", "-o", str(tmp_path / "ws.jsonl")]) == 1
    err = capsys.readouterr().err
    assert "--data-dir DIR" in err and "data_dir=" not in err and err.count("\n") == 1
    assert main(["collect", "webshop", "--data-dir", str(tmp_path), "-o", str(tmp_path / "ws.jsonl")]) == 1
    err = capsys.readouterr().err
    assert "point --data-dir" in err and "data_dir" not in err.replace("--data-dir", "")


def test_readme_says_make_a_venv_and_where_webshop_data_comes_from() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "python3 -m venv .venv && . .venv/bin/activate" in readme
    assert "reference/webshop/README.md" in readme and "--data-dir DIR" in readme
    assert "items_shuffle_1000.json" in readme and "XTREE_WEBSHOP_DATA" in readme


def test_makefile_installs_visibly_and_keeps_its_two_commands() -> None:
    text = (ROOT / "Makefile").read_text()
    targets = {m.group(1): m.group(2) for m in re.finditer(r"^(\w+):\n((?:\t.*\n)+)", text, re.M)}
    for target, runs in (("demo", "-m xtree_gym demo"), ("test", '-m pytest -q -m "not slow"')):
        recipe = targets[target]
        pip = [ln for ln in recipe.splitlines() if "install" in ln and "$(PIP)" in ln]
        assert pip and all(" -q" not in ln and "--quiet" not in ln for ln in pip), recipe
        assert runs in recipe
    assert "PIP_FLAGS := --progress-bar on" in text


# -- progress: long work is never silent --------------------------------------------------------------
def test_progress_in_a_log_says_something_before_the_first_item(capsys) -> None:
    from xtree_gym.progress import Progress

    with Progress(total=3, desc="gold", log_after=0.2, log_every=60) as bar:
        time.sleep(1.6)  # the first item is slow (a simulator starting): the ticker still reports
        bar.update()
    err = capsys.readouterr().err  # captured stderr is not a terminal: log mode
    assert err.splitlines()[0].startswith("gold: 0/3 (0%) after ") and "\r" not in err
    assert err.splitlines()[-1].startswith("gold: 1/3 (33%)")


def test_progress_bar_shows_at_once_and_short_work_in_a_log_stays_quiet(capsys) -> None:
    from xtree_gym.progress import Progress, progress

    bar = Progress(total=5, desc="mine", enabled=True)
    assert "mine [" in capsys.readouterr().err and bar.n == 0  # drawn before any update
    bar.close()
    assert list(progress(range(3), desc="quick")) == [0, 1, 2]
    capsys.readouterr()
    assert capsys.readouterr().err == ""


# -- canon explains its summary ------------------------------------------------------------------
def test_canon_summary_explains_n_kept(tmp_path: Path, capsys) -> None:
    src = tmp_path / "c.jsonl"
    rec = {"id": "a", "success": True, "steps": [{"action": "open door to kitchen", "token": "open<door>"},
                                                  {"action": "go to kitchen"}]}  # fmt: skip
    src.write_text(json.dumps(rec) + "\n")
    out = tmp_path / "o.jsonl"
    assert main(["canon", str(src), "--domain", "scienceworld", "--keep-existing", "-o", str(out)]) == 0
    cap = capsys.readouterr()
    assert json.loads(cap.out)["n_kept"] == 1
    assert "n_kept = 1 steps kept the token they already had (--keep-existing)" in cap.err
    assert "canonicalized 1 of 2 steps" in cap.err


# -- the report reads right ----------------------------------------------------------------------
def _text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def test_report_summary_has_no_empty_name_no_alias_twice_and_one_base_rate(tmp_path: Path) -> None:
    corpus = tmp_path / "c.jsonl"
    lines = []
    for i in range(8):
        steps = [{"action": a, "token": a} for a in ("a", "b", "c", "a", "b")]
        lines.append(json.dumps({"id": f"e{i}", "task": f"t{i % 2}", "success": i % 4 != 0, "steps": steps}))
    corpus.write_text("\n".join(lines) + "\n")
    tree = tmp_path / "t.json"
    assert main(["mine", str(corpus), "--min-freq", "2", "--min-task-types", "1", "--min-succ", "0",
                 "-o", str(tree)]) == 0  # fmt: skip
    out = tmp_path / "r.html"
    assert main(["report", str(tree), "--corpus", str(corpus), "-o", str(out)]) == 0
    text = _text(out.read_text())
    assert "name = ," not in text and "name = " not in text  # mined without --name
    config = text.split(" config ", 1)[1].split(" report corpus ", 1)[0]
    assert config.count("cap = ") == 1 and "max_skills" not in config and "min_frequency" not in config
    # the tree's corpus and the report corpus are the same file: one base rate, stated the same way
    assert (
        text.count("base rate 75.0% (6 of 8 succeeded)") == 2
        and "not the corpus the tree was mined from" not in text
    )
    other = tmp_path / "other.jsonl"
    other.write_text("\n".join(lines[:4]) + "\n")
    assert main(["report", str(tree), "--corpus", str(other), "-o", str(out)]) == 0
    text = _text(out.read_text())
    assert (
        "base rate 75.0% (3 of 4 succeeded) -- not the corpus the tree was mined from (base rate 75.0% (6 of 8 succeeded))"
        in text
    )


# -- the demo: the same output every run, and the online half ---------------------------------------
@pytest.mark.jvm
def test_demo_output_is_the_same_every_run_and_shows_live_bonuses(sciworld_env) -> None:
    from xtree_gym.demo import run_demo, sample_corpus
    from xtree_gym.mining import mine
    from xtree_gym.rewards import sequence_bonus

    runs = []
    for _ in range(2):
        buf = io.StringIO()
        result = run_demo(
            tasks=["find-animal", "chemistry-mix"], env=sciworld_env, stream=buf, show_task="boil"
        )
        runs.append((buf.getvalue(), result))
    (text, result), (again, _) = runs
    assert text == again
    tree = result["tree"]
    assert tree.to_json() == mine(sample_corpus(), "scienceworld", name="scienceworld-demo").to_json()
    assert "live: find-animal variation 3, 6 actions replayed through XTreeBonus" in text
    assert re.search(
        r"step +\d+ .* completes S\d+ \(d\d\)(, S\d+ \(d\d\))*; bonus \+\d\.\d{3}, episode", text
    )
    # what XTreeBonus paid live equals what the episode's tokens earn offline
    sample = {(t.task, t.extra["variation"]): t for t in result["trajectories"]}
    for live, (task, var) in zip(result["live"], [("find-animal", 3), ("chemistry-mix", 2)]):
        offline = sequence_bonus(tree, [s.token for s in sample[(task, var)].steps])
        assert live["score"] == 100 and live["invalid"] == 0
        assert live["episode_bonus"] == pytest.approx(offline.total) and set(live["matched"]) == set(
            offline.matched
        )
        assert f"episode bonus {offline.total:.3f}" in text


@pytest.mark.jvm
def test_readme_snippet_actions_are_valid_at_seed_0(sciworld_jvm) -> None:
    import gymnasium as gym

    import xtree_gym
    from xtree_gym import XTreeBonus
    from xtree_gym.demo import sample_corpus
    from xtree_gym.mining import mine

    gym.register_envs(xtree_gym)  # as the snippet does: the test then passes alone, not only after others
    readme = (ROOT / "README.md").read_text()
    snippet = readme.split("```python", 1)[1].split("```", 1)[0]
    make = re.search(r'gym\.make\("XTree-ScienceWorld-v0", fold="(\w+)", step_limit=(\d+)\)', snippet)
    seed = re.search(r"env\.reset\(seed=(\d+)\)", snippet)
    actions = re.findall(r'env\.step\("([^"]+)"\)', snippet)
    assert make and seed and actions
    env = gym.make(
        "XTree-ScienceWorld-v0", fold=make.group(1), step_limit=int(make.group(2)), jvm=sciworld_jvm
    )
    env = XTreeBonus(env, mine(sample_corpus(), "scienceworld"), bonus="depth", weight="record")
    try:
        env.reset(seed=int(seed.group(1)))
        infos = [env.step(a)[4]["xtree"] for a in actions]
    finally:
        env.close()
    assert [x["invalid"] for x in infos] == [False] * len(actions)
    assert (
        infos[0]["token"] == "open<door>" and infos[-1]["completed"]
    )  # the snippet's last step completes a node


def test_collect_webshop_on_a_split_without_goals_is_an_error_not_a_hang(tmp_path: Path) -> None:
    pytest.importorskip("rapidfuzz", reason="the WebShop env needs the webshop extra")
    from xtree_gym.envs.webshop_data import write_demo_data

    write_demo_data(tmp_path)  # three products: no goal falls in the train split
    argv = [
        sys.executable,
        "-m",
        "xtree_gym",
        "collect",
        "webshop",
        "--data-dir",
        str(tmp_path),
        "--episodes",
        "1",
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "XTREE_PROGRESS": "0"}
    rc, out = _run_bounded([*argv, "-o", str(tmp_path / "ws.jsonl")], env, timeout=60)
    assert rc == 1 and "holds no goals" in out and "--split all" in out, out
    rc, out = _run_bounded([*argv, "--split", "all", "-o", str(tmp_path / "ws.jsonl")], env, timeout=60)
    assert rc == 0 and "wrote 1 episodes" in out, out


def test_readme_snippet_mines_and_tiles_what_its_comments_say() -> None:
    """The README's Python snippet, up to the env, runs as written and prints what its comments show."""
    readme = (ROOT / "README.md").read_text()
    snippet = readme.split("```python", 1)[1].split("```", 1)[0]
    head = snippet.split("env = gym.make", 1)[0]
    tile_line = next(line for line in head.splitlines() if line.startswith("tree.tile("))
    expected = tile_line.split("#", 1)[1].strip()
    ns: dict[str, object] = {}
    exec(compile(head.replace(tile_line, ""), "README.md", "exec"), ns)
    shown = eval(tile_line.split("#", 1)[0], ns)
    assert repr(shown) == expected
    assert len(ns["tree"]) == 80  # the "80 nodes" the comment states  # type: ignore[arg-type]
