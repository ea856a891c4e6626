"""``xtree demo`` on the real simulator (a few task types, on the session's shared JVM)."""

from __future__ import annotations

import io

import pytest

from xtree_gym.corpus import read_corpus
from xtree_gym.demo import run_demo, tiling_rows
from xtree_gym.errors import EnvConfigError
from xtree_gym.mining.tree import XTree

pytestmark = pytest.mark.jvm

TASKS = ["boil", "melt", "find-animal", "find-plant", "chemistry-mix", "power-component"]


def test_demo_collects_mines_and_tiles(sciworld_env, tmp_path) -> None:
    buf = io.StringIO()
    result = run_demo(
        tasks=TASKS,
        per_task=1,
        env=sciworld_env,
        out=str(tmp_path),
        stream=buf,
        show_task="boil",
        collect=True,
    )
    text = buf.getvalue()
    trajectories, tree, episode = result["trajectories"], result["tree"], result["episode"]
    assert [t.task for t in trajectories] == TASKS and all(t.success for t in trajectories)
    assert f"tree: {len(tree)} nodes" in text
    assert episode.task == "boil" and f"episode {episode.id}" in text
    rows = tiling_rows(tree, episode)
    # One row per step, in order, each with the raw action and token of that step.
    assert [r[0] for r in rows] == list(range(len(episode.steps)))
    assert [(r[2], r[3]) for r in rows] == [(s.token, s.action) for s in episode.steps]
    # Bands open and close in pairs, and a band's tokens are its node's expansion.
    opened: list[tuple[str, int]] = []
    for i, band, _token, _action in rows:
        if band.startswith("["):
            opened.append((band[1:].split()[0], i))
        elif band == "]":
            node_id, start = opened.pop()
            assert tuple(r[2] for r in rows[start : i + 1]) == tree[node_id].expansion
    assert not opened
    assert len(read_corpus(tmp_path / "corpus.jsonl")) == len(TASKS)
    assert len(XTree.load(tmp_path / "tree.json")) == len(tree)


def test_demo_refuses_an_unknown_show_task_before_starting_anything() -> None:
    buf = io.StringIO()
    with pytest.raises(EnvConfigError, match="unknown ScienceWorld task 'boyl'"):
        run_demo(tasks=["boil"], show_task="boyl", stream=buf)
    assert buf.getvalue() == ""
    with pytest.raises(EnvConfigError, match="unknown ScienceWorld task 'boyl'"):
        run_demo(tasks=["boyl"], stream=buf)  # the live tasks too
    assert buf.getvalue() == ""
