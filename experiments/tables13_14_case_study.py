"""Tables 13–14: case-study rows — X-Tree nodes with their occurrences and one grounded occurrence.

Table 13 (ScienceWorld): each node written as its two children (``S8=S2+navigate<kitchen>``), depth,
occurrences in the corpus, the raw actions of its first occurrence, and a reading. Table 14 (WebShop):
each node in primitives, depth, occurrences and the share of them inside successful trajectories
(with the corpus base rate), the most and the least success-bearing nodes. The paper's readings are
hand-written; ours are the fixed token glosses of ``xtree_gym.render.cards`` joined in order, and the
rows are chosen by a fixed rule (below), not by hand.

    python -m experiments.tables13_14_case_study --smoke    # ~3 s
    python -m experiments.tables13_14_case_study --full     # ~10 s: 826 gold episodes, 1,824 WebShop episodes
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from xtree_gym.mining.tree import XTree
from xtree_gym.render.cards import domain_glosses, gloss
from xtree_gym.render.stats import CorpusUsage

from ._results import Report, markdown_table, script_main
from .table6_trees import Config as TreeConfig
from .table6_trees import mine_trees

NAME = "tables13_14_case_study"


@dataclass(frozen=True)
class Config:
    """Corpora and how many rows each table gets."""

    webshop_episodes: int = 1824
    """Scripted-shopper episodes to collect and mine (0: no Table 14)."""
    rows_scienceworld: int = 7
    """Table 13 rows (the paper shows 7)."""
    rows_webshop: int = 9
    """Table 14 rows (the paper shows 9)."""
    min_occurrences: int = 10
    """Table 14 ranks only nodes with at least this many occurrences (a rate over 2 is noise)."""
    max_actions: int = 8
    """Grounded-occurrence cell: at most this many raw actions."""


SMOKE = Config(webshop_episodes=60, rows_scienceworld=4, rows_webshop=4, min_occurrences=3)
FULL = Config()


def pick_by_depth(tree: XTree, usage: CorpusUsage, k: int) -> list[str]:
    """Table 13's rule: the top node of each depth (deepest first), then the top rest.

    "Top" ranks by occurrences × distinct primitive types in the node, so a run of one repeated
    action (``look at`` ×4) does not crowd out the multi-step skills.
    """
    occ = {n.id: usage.nodes[n.id].occurrences for n in tree.nodes}
    ranked = sorted(
        (n for n in tree.nodes if occ[n.id]), key=lambda n: (-occ[n.id] * len(set(n.expansion)), n.id)
    )
    chosen: list[str] = []
    for d in sorted({n.depth for n in ranked}, reverse=True):
        chosen.append(next(n.id for n in ranked if n.depth == d))
    chosen = chosen[:k]
    chosen += [n.id for n in ranked if n.id not in chosen][: k - len(chosen)]
    return sorted(chosen, key=lambda i: (-tree[i].depth, -occ[i], i))


def pick_by_success(usage: CorpusUsage, k: int, min_occ: int) -> list[str]:
    """Table 14's rule: the ``k - k//2`` most and the ``k//2`` least success-bearing frequent nodes."""
    rated = [(u.success, u.occurrences, nid) for nid, u in usage.nodes.items() if u.occurrences >= min_occ]
    rated.sort(key=lambda r: (-(r[0] or 0.0), -r[1], r[2]))
    top, bottom = rated[: k - k // 2], rated[k - k // 2 :][-(k // 2) :] if k // 2 else []
    return [r[2] for r in top + bottom]


def reading(node: Any, glosses: dict[str, str], options: bool) -> str:
    """The node's primitives as glosses, in order; repeats of one gloss collapse to ``… ×k``."""
    out: list[list[Any]] = []
    for tok in node.expansion:
        g = gloss(tok, glosses, options=options)
        if out and out[-1][0] == g:
            out[-1][1] += 1
        else:
            out.append([g, 1])
    return ", then ".join(g if c == 1 else f"{g} ×{c}" for g, c in out)


def grounded(usage: CorpusUsage, node_id: str, max_actions: int) -> str:
    spans = usage.nodes[node_id].spans
    if not spans:
        return "—"
    i, s, e = spans[0]
    acts = [st.action for st in usage.trajectories[i].steps[s:e]]
    return "; ".join(acts[:max_actions]) + ("; …" if len(acts) > max_actions else "")


def rows_13(tree: XTree, usage: CorpusUsage, cfg: Config) -> list[dict[str, Any]]:
    g = domain_glosses("scienceworld")
    return [
        {"node": f"{n.id}={n.children[0]}+{n.children[1]}", "id": n.id, "depth": n.depth, "length": n.length,
         "occurrences": usage.nodes[n.id].occurrences, "grounded": grounded(usage, n.id, cfg.max_actions),
         "reading": reading(n, g, False), "expansion": list(n.expansion)}
        for n in (tree[i] for i in pick_by_depth(tree, usage, cfg.rows_scienceworld))
    ]  # fmt: skip


def rows_14(tree: XTree, usage: CorpusUsage, cfg: Config) -> list[dict[str, Any]]:
    g = domain_glosses("webshop")
    return [
        {"node": " → ".join(n.expansion), "id": n.id, "depth": n.depth, "occurrences": usage.nodes[n.id].occurrences,
         "success": usage.nodes[n.id].success, "reading": reading(n, g, True)}
        for n in (tree[i] for i in pick_by_success(usage, cfg.rows_webshop, cfg.min_occurrences))
    ]  # fmt: skip


def table(results: dict[str, Any]) -> str:
    parts = ["# Tables 13–14: case study\n"]
    t13 = results["scienceworld"]
    parts += [
        f"## Table 13: X-Tree nodes in ScienceWorld (occurrences in the {t13['corpus']} trajectories of "
        f"{t13['source']}; {t13['nodes']} nodes)\n",
        markdown_table(["canonical node", "depth", "occ.", "grounded occurrence", "reading (glosses)"],
                       [[r["node"], r["depth"], r["occurrences"], r["grounded"], r["reading"]] for r in t13["rows"]]),
        "",
    ]  # fmt: skip
    if "webshop" in results:
        t14 = results["webshop"]
        parts += [
            f"## Table 14: X-Tree nodes in WebShop (occurrences in the {t14['corpus']} scripted-shopper "
            f"trajectories; share in successful trajectories, corpus {t14['base_rate']:.2f})\n",
            markdown_table(["canonical node", "depth", "occ.", "success share", "reading (glosses)"],
                           [[r["node"], r["depth"], r["occurrences"], r["success"], r["reading"]] for r in t14["rows"]],
                           digits=2),
            "",
        ]  # fmt: skip
    parts.append(
        "Rows by rule: Table 13 takes the node of each depth (deepest first) with the most occurrences × distinct primitives, Table 14 the most "
        "and the least success-bearing nodes with enough occurrences. Readings are the token glosses, not prose."
    )
    return "\n".join(parts)


def run(cfg: Config, out: Path) -> Report:
    mined = mine_trees(TreeConfig(webshop_episodes=cfg.webshop_episodes))
    results: dict[str, Any] = {}
    for name, (tree, corpus, source) in mined.items():
        usage = CorpusUsage.build(tree, corpus, domain=name)
        rows = rows_13(tree, usage, cfg) if name == "scienceworld" else rows_14(tree, usage, cfg)
        results[name] = {"source": source, "corpus": len(corpus), "nodes": len(tree), "base_rate": usage.base_rate,
                         "rows": rows}  # fmt: skip
    return Report(results, table(results))


main = script_main(NAME, __doc__ or "", SMOKE, FULL, run)

if __name__ == "__main__":
    raise SystemExit(main())
