"""Table 3: ScienceWorld RLVR at group size n ∈ {2, 4, 8, 16}, outcome only vs + X-Tree bonus.

The paper's claim: the bonus helps most at small n, where whole groups often fail and the outcome
reward gives no gradient (Eq. 3's λ_g is largest there). Every (n, arm) trains from the same weights
with the same ``tasks_per_step``; only n and the shaping change.

    python -m experiments.table3_n_scaling --smoke   # CPU, ~2-5 min: tiny-random, n ∈ {2, 4}, 1 step each
    python -m experiments.table3_n_scaling --full --set base.model=/models/Qwen2.5-1.5B-Instruct
        # GPUs: 8 runs of Table 7's 1.5B recipe (8×80 GB GPUs each; n = 16 doubles the rollout time of n = 8)
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ._banks import mined_tree
from ._corpora import scienceworld_corpus
from ._results import Report, markdown_table, new_figure, page, script_main
from ._rlvr import ArmsConfig, arm_row, delta, pm, run_arms

NAME = "table3_n_scaling"


@dataclass(frozen=True)
class Config(ArmsConfig):
    """Base trainer config (``n`` is set per row), seeds per (n, arm), success window, group sizes."""

    group_sizes: tuple[int, ...] = (2, 4, 8, 16)
    """GRPO group sizes n."""


SMOKE = Config.smoke(group_sizes=(2, 4))
FULL = Config()


def run(cfg: Config, out: Path) -> Report:
    corpus, source = scienceworld_corpus()
    tree, tree_path = mined_tree(corpus, "scienceworld", out / "tree.json")
    arms = {}
    for n in cfg.group_sizes:
        arms[f"outcome-n{n}"] = {"n": n, "shaping": "none"}
        arms[f"xtree-n{n}"] = {"n": n, "shaping": "xtree", "tree": tree_path}
    runs = run_arms(cfg.base, arms, cfg.seeds, out)
    rows = {a: arm_row(runs[a], cfg.window) for a in arms}
    table_rows = []
    for n in cfg.group_sizes:
        o, x = rows[f"outcome-n{n}"], rows[f"xtree-n{n}"]
        table_rows.append([n, pm(o["train_success"]), pm(x["train_success"]), delta(x, o), pm(o["eval_success"]),
                           pm(x["eval_success"]), x["lambda_g"]["mean"]])  # fmt: skip
    results = {
        "tree": {"nodes": len(tree), "source": source},
        "rows": rows,
        "runs": runs,
    }
    md = page(
        f"# Table 3: n-scaling on ScienceWorld, {cfg.size()}",
        markdown_table(["n", "outcome train (%)", "+X-Tree train (%)", "Δ", "outcome held-out (%)",
                        "+X-Tree held-out (%)", "λ_g (+X-Tree)"], table_rows, digits=2),
        f"Tree: {len(tree)} nodes from {source}. Train success: last {cfg.window} step(s), mean ± std over seeds.",
    )  # fmt: skip
    fig, axes = new_figure(4.2, 3.0)
    ax = axes[0][0]
    for arm, label in (("outcome", "outcome only"), ("xtree", "+ X-Tree")):
        ax.plot(cfg.group_sizes, [rows[f"{arm}-n{n}"]["train_success"]["mean"] for n in cfg.group_sizes],
                marker="o", label=label)  # fmt: skip
    ax.set_xscale("log", base=2)
    ax.set_xlabel("group size n")
    ax.set_ylabel("train success")
    ax.legend(fontsize=8)
    return Report(results, md, {"n_scaling": fig})


main = script_main(NAME, __doc__ or "", SMOKE, FULL, run)

if __name__ == "__main__":
    raise SystemExit(main())
