"""Table 15's kind: X-Tree as in-context advice on MiniWoB++ with SmolLM2 on CPU — no advice vs the
X-Tree advice hint vs the same hint scrambled.

The tree is mined (MiniWoB preset, Table 8) from a scripted-solver corpus with failures (``noise``) on
the chosen tasks, collected live in headless Chromium; the policy plays the same tasks' evaluation
seeds through the ``browsergym`` harness (``xtree_gym.agents.play.evaluate``). Only the advice block in the
prompt changes: ``advice=Advisor`` (App. C: top nodes for the goal by n-gram overlap, plus where the
recent steps are in one) or a wrapper that shuffles the hint's words across its lines (same words).

    python -m experiments.table15_advice_miniwob --smoke   # CPU, ~2-5 min: tiny-random, 1 task × 1 seed × 2 steps
    python -m experiments.table15_advice_miniwob --full    # CPU, ~30-60 min on 2 cores: SmolLM2, 4 tasks × 5 seeds
        # the paper's Table 15 uses Qwen2.5-7B / Qwen3-8B / 14B on GPUs: --set model=/models/Qwen3-8B
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._results import Report, markdown_table, page, script_main

NAME = "table15_advice_miniwob"
LABELS = {"none": "no advice", "xtree": "X-Tree advice", "scrambled": "scrambled X-Tree advice"}


@dataclass(frozen=True)
class Config:
    """Tasks, corpus, model and evaluation size."""

    tasks: tuple[str, ...] = ("login-user", "click-checkboxes", "choose-list", "enter-text")
    """MiniWoB++ tasks with a scripted solver (the mining corpus) and more than one step (one-step tasks give no nodes)."""
    corpus_episodes: int = 20
    """Scripted episodes per task in the mining corpus."""
    noise: float = 0.3
    """Random-action rate of the scripted solver (the corpus needs failures)."""
    model: str = "smollm2"
    """Policy: ``smollm2`` (packaged GGUF), ``tiny-random`` or an HF folder."""
    seeds: int = 5
    """Evaluation seeds per task (MiniWoB's own seeds 0..k-1)."""
    max_steps: int = 6
    """Turns per episode."""
    max_new_tokens: int = 128
    """Generation budget per turn."""
    scramble_seed: int = 0
    """Seed of the scrambled hint."""


SMOKE = Config(
    tasks=("login-user",), corpus_episodes=8, model="tiny-random", seeds=1, max_steps=2, max_new_tokens=8
)
FULL = Config()


class ScrambledAdvisor:
    """The advisor's hint with its words shuffled across its lines (``scramble_card``'s rule); same words.

    Example:
        >>> class A:
        ...     def hint(self, utterance, history=()): return "a b c\\nd e"
        >>> h = ScrambledAdvisor(A(), seed=1).hint("goal")
        >>> sorted(h.split()) == list("abcde"), [len(x.split()) for x in h.splitlines()]
        (True, [3, 2])
    """

    def __init__(self, advisor: Any, seed: int = 0) -> None:
        self.advisor, self.seed = advisor, seed

    def hint(self, utterance: str, history: Any = ()) -> str:
        text = self.advisor.hint(utterance, history)
        lines = text.splitlines()
        words = text.split()
        random.Random(f"{self.seed}:{utterance}").shuffle(words)
        out, i = [], 0
        for line in lines:
            k = len(line.split())
            out.append(" ".join(words[i : i + k]))
            i += k
        return "\n".join(out)


def run(cfg: Config, out: Path) -> Report:
    from xtree_gym.agents.harness.common import build_advisor
    from xtree_gym.agents.play.evaluate import evaluate
    from xtree_gym.collect.miniwob import CollectConfig, collect_miniwob
    from xtree_gym.corpus import write_corpus
    from xtree_gym.mining import mine

    corpus = collect_miniwob(CollectConfig(tasks=cfg.tasks, episodes=cfg.corpus_episodes, noise=cfg.noise))
    write_corpus(out / "corpus.jsonl", corpus)
    tree = mine(corpus, "miniwob", domain="miniwob", name="miniwob-xtree")
    tree.save(out / "tree.json")
    advisor = build_advisor(tree, corpus, domain="miniwob")
    arms = {"none": None, "xtree": advisor, "scrambled": ScrambledAdvisor(advisor, cfg.scramble_seed)}
    per_arm: dict[str, Any] = {}
    for arm, adv in arms.items():
        per_task = {}
        for task in cfg.tasks:
            res = evaluate(
                "XTree-MiniWoB-v0", model=cfg.model, harness="browsergym", fold="scripted", tasks=cfg.seeds,
                env_args={"task": task}, max_steps=cfg.max_steps, harness_args={"advice": adv} if adv else {},
                sampling={"temperature": 0.0, "max_new_tokens": cfg.max_new_tokens}, seed=0,
                output_dir=out / "eval" / arm / task, progress=False,
            )  # fmt: skip
            per_task[task] = {
                k: res.get(k) for k in ("success_rate", "episodes", "mean_reward", "invalid_rate")
            }
        rates = [v["success_rate"] or 0.0 for v in per_task.values()]
        per_arm[arm] = {"tasks": per_task, "success_rate": sum(rates) / len(rates)}
    results: dict[str, Any] = {"corpus": {"episodes": len(corpus), "successes": sum(t.success for t in corpus)},
               "tree_nodes": len(tree), "arms": per_arm}  # fmt: skip
    header = ["advice", *cfg.tasks, "all"]
    rows = [[LABELS[a], *[100 * (v["tasks"][t]["success_rate"] or 0.0) for t in cfg.tasks], 100 * v["success_rate"]]
            for a, v in per_arm.items()]  # fmt: skip
    return Report(results, page(
        f"# Table 15 (kind): in-context advice on MiniWoB++, {cfg.model} (success %, {cfg.seeds} seed(s) per task)",
        markdown_table(header, rows),
        f"Tree: {len(tree)} nodes mined (MiniWoB preset) from {len(corpus)} scripted episodes with noise "
        f"{cfg.noise} ({results['corpus']['successes']} successes). Greedy decoding, {cfg.max_steps} turns.",
    ))  # fmt: skip


main = script_main(NAME, __doc__ or "", SMOKE, FULL, run)

if __name__ == "__main__":
    raise SystemExit(main())
