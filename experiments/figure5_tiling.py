"""Figure 5: one ScienceWorld trajectory tiled by the X-Tree, drawn (steps as rows, nodes as boxes by depth).

The paper tiles a use-thermometer episode (18 steps → 6 tokens: 4 nodes, 2 primitives). We mine the
tree from the ScienceWorld gold corpus with the paper's preset and tile the episode of the chosen task
type whose tiling has the most distinct nodes among those of ``min_len``–``max_len`` steps. The figure
is ``xtree_gym.render.figures.tiling_figure``; the table lists each token of the tiling (one row of the
node-per-row SFT format).

    python -m experiments.figure5_tiling --smoke    # ~3 s (packaged sample)
    python -m experiments.figure5_tiling --full     # ~5 s (826 gold episodes)
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from xtree_gym.mining import mine
from xtree_gym.render.figures import tiling_figure
from xtree_gym.render.stats import CorpusUsage

from ._corpora import scienceworld_corpus
from ._results import Report, markdown_table, script_main

NAME = "figure5_tiling"


@dataclass(frozen=True)
class Config:
    """Which episode to draw."""

    task: str = "use-thermometer"
    """Task type of the episode (the paper's Figure 5 is a thermometer task); any type if none match."""
    min_len: int = 12
    """Shortest episode considered (steps)."""
    max_len: int = 30
    """Longest episode considered (steps)."""


SMOKE = Config()
FULL = Config()


def choose(tree: Any, usage: CorpusUsage, cfg: Config) -> int:
    """Index of the episode to draw: the task's successful episodes in the length window, most distinct nodes."""

    def pool(task: str | None) -> list[int]:
        return [i for i, t in enumerate(usage.trajectories)
                if t.success and cfg.min_len <= len(t.steps) <= cfg.max_len and (task is None or t.task == task)]  # fmt: skip

    cands = pool(cfg.task) or pool(None) or list(range(len(usage.trajectories)))

    def key(i: int) -> tuple[int, int, str]:
        segs = tree.tile(usage.tokens[i])
        return (-len({s.symbol for s in segs if s.is_node}), len(segs), usage.trajectories[i].id)

    return min(cands, key=key)


def run(cfg: Config, out: Path) -> Report:
    corpus, source = scienceworld_corpus()
    tree = mine(corpus, "scienceworld", domain="scienceworld", name="scienceworld")
    usage = CorpusUsage.build(tree, corpus, domain="scienceworld")
    i = choose(tree, usage, cfg)
    traj, toks = usage.trajectories[i], usage.tokens[i]
    segs = tree.tile(toks)
    rows: list[dict[str, Any]] = [
        {"token": s.symbol, "is_node": s.is_node, "depth": tree[s.symbol].depth if s.is_node else 0,
         "steps": [s.start, s.end - 1], "actions": [st.action for st in traj.steps[s.start : s.end]],
         "corpus_occurrences": usage.nodes[s.symbol].occurrences if s.is_node else None}
        for s in segs
    ]  # fmt: skip
    results = {
        "trajectory": traj.id, "task": traj.task, "goal": traj.goal, "steps": len(toks), "tokens": len(segs),
        "nodes": sum(s.is_node for s in segs), "primitives": sum(not s.is_node for s in segs),
        "source": source, "tree_nodes": len(tree), "rows": rows,
    }  # fmt: skip
    md = "\n".join([
        f"# Figure 5: {traj.id} tiled by the ScienceWorld X-Tree ({len(tree)} nodes, mined from {source})\n",
        f"Task ({traj.task}): {traj.goal}\n",
        f"{len(toks)} steps → {len(segs)} tokens ({results['nodes']} X-Tree nodes, {results['primitives']} "
        f"primitives that stay unmerged): {len(segs)} rows instead of {len(toks)} under the node-per-row format.\n",
        markdown_table(["token", "depth", "steps", "corpus occ.", "actions"],
                       [[r["token"], r["depth"], f"{r['steps'][0]}–{r['steps'][1]}", r["corpus_occurrences"],
                         "; ".join(r["actions"])] for r in rows]),
    ])  # fmt: skip
    return Report(results, md, {"figure5": tiling_figure(tree, usage, i)})


main = script_main(NAME, __doc__ or "", SMOKE, FULL, run)

if __name__ == "__main__":
    raise SystemExit(main())
