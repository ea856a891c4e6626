"""Arms of GRPO runs on the project's trainer (``xtree_gym.agents.grpo.trainer.GRPOTrainer``), and their table.

An *arm* is a name plus the :class:`~xtree_gym.agents.grpo.config.GRPOConfig` fields it changes (the reward
shaping, the tree file, the OPSD bank, n...). :func:`run_arms` trains every (arm, seed) from the same
base config, each in its own run folder under ``<out>/runs/``, and keeps every step's metrics line;
:func:`arm_rows` reduces them to one row per arm (mean ± std over seeds).

"Success" here is the training win rate of the last ``window`` steps (the rollouts the trainer
played); when the base config sets ``eval_every``, the held-out ``eval_success_rate`` is kept too.

A table script subclasses :class:`ArmsConfig` (base config, seeds, window) with its own fields, and its
``run`` hands its arms and what is particular to its table to :func:`arms_report`, which trains them
(:func:`experiments._runner.run_grid`) and lays out the shared results and table.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from ._results import Report, fmt, markdown_table, new_figure, page
from ._runner import run_grid

KEEP = ("step", "reward", "win_rate", "lambda_g", "bonus", "loss", "pg_loss", "opsd", "kl", "tokens",
        "episodes", "seconds", "eval_success_rate")  # fmt: skip
"""Metrics-line keys kept per step in results.json."""

SCIENCEWORLD_SMOKE: dict[str, Any] = {
    "env": "XTree-ScienceWorld-v0", "model": "tiny-random", "harness": "rlvmr", "max_steps": 2, "steps": 2,
    "tasks_per_step": 1, "n": 2, "oracle_mix": 0.5, "lr": 1e-3, "max_new_tokens": 12, "kl_coef": 0.01,
}  # fmt: skip
"""CPU smoke: tiny-random, 2 steps of 1 task × 2 rollouts × 2 turns; half of each group is the oracle."""

SCIENCEWORLD_FULL: dict[str, Any] = {
    "env": "XTree-ScienceWorld-v0", "model": "Qwen2.5-1.5B-Instruct", "harness": "rlvmr", "task_split": "train",
    "max_steps": 30, "steps": 100, "tasks_per_step": 8, "n": 8, "lr": 1e-6, "max_new_tokens": 256,
    "kl_coef": 0.01, "invalid_penalty": 0.1, "lambda0": 0.75, "w_ref": 0.4, "bonus": "depth",
    "micro_batch_tokens": 16384, "dtype": "bfloat16", "eval_every": 10, "eval_fold": "G1", "eval_tasks": 64,
}  # fmt: skip
"""The paper's ScienceWorld RLVR (Table 7): a 1.5B policy on 8 GPUs (``model`` = your local HF folder)."""

WEBSHOP_SMOKE: dict[str, Any] = {
    "env": "XTree-WebShop-v0", "model": "tiny-random", "harness": "verl-agent", "task_split": "train",
    "max_steps": 5, "steps": 2, "tasks_per_step": 1, "n": 2, "oracle_mix": 0.5, "lr": 1e-3, "max_new_tokens": 12,
    "kl_coef": 0.01,
}  # fmt: skip
"""CPU smoke on the 1000-product catalogue: 2 steps of 1 goal × 2 rollouts × up to 5 turns."""

WEBSHOP_FULL: dict[str, Any] = {
    "env": "XTree-WebShop-v0", "model": "Qwen2.5-1.5B-Instruct", "harness": "verl-agent", "task_split": "train",
    "max_steps": 15, "steps": 100, "tasks_per_step": 16, "n": 8, "lr": 1e-6, "max_new_tokens": 256,
    "kl_coef": 0.01, "w_ref": 0.85, "bonus": "webshop", "micro_batch_tokens": 16384, "dtype": "bfloat16",
    "eval_every": 10, "eval_tasks": 100,
}  # fmt: skip
"""The paper's WebShop RLVR (Table 7) at 1.5B on 8 GPUs."""


C = TypeVar("C", bound="ArmsConfig")


@dataclass(frozen=True)
class ArmsConfig:
    """What every arms × seeds table sets: the base trainer config, the seeds, the success window."""

    base: dict[str, Any] = field(default_factory=lambda: dict(SCIENCEWORLD_FULL))
    """GRPOConfig fields shared by every arm."""
    seeds: tuple[int, ...] = (0, 1, 2)
    """Training seeds per arm."""
    window: int = 10
    """Steps averaged for the final training success."""

    @classmethod
    def smoke(cls: type[C], base: Mapping[str, Any] = SCIENCEWORLD_SMOKE, **fields: Any) -> C:
        """The CPU smoke: one training step of ``base`` per arm, seed 0, window 1; ``fields`` set the rest."""
        return cls(**{"base": {**base, "steps": 1}, "seeds": (0,), "window": 1, **fields})

    def size(self) -> str:
        """``MODEL (k seed(s), s steps)`` for a table's title.

        Example:
            >>> ArmsConfig.smoke().size()
            'tiny-random (1 seed(s), 1 steps)'
        """
        return f"{self.base['model']} ({len(self.seeds)} seed(s), {self.base['steps']} steps)"


def with_webshop_data(base: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``env_kwargs.data_dir`` set to the found catalogue (WebShop bases only)."""
    from ._corpora import webshop_data_dir

    out = dict(base)
    if "WebShop" in str(out.get("env", "")):
        data = webshop_data_dir()
        out["env_kwargs"] = {**dict(out.get("env_kwargs", {})), **({"data_dir": str(data)} if data else {})}
    return out


def run_one(base: Mapping[str, Any], arm: Mapping[str, Any], seed: int, run_dir: Path) -> dict[str, Any]:
    """Train one (arm, seed); returns its metrics lines (the :data:`KEEP` keys) and wall seconds.

    A config with a ``corpus`` field is offline node RL (``OfflineTrainer`` on node instances).
    """
    from xtree_gym.agents.grpo.config import GRPOConfig
    from xtree_gym.agents.grpo.trainer import GRPOTrainer

    fields = {**with_webshop_data(base), **arm, "seed": seed, "output_dir": str(run_dir)}
    fields.setdefault("progress", False)
    fields.setdefault("tensorboard", False)
    t0 = time.perf_counter()
    if "corpus" in fields:
        from xtree_gym.agents.sft_offline.offline import OfflineConfig
        from xtree_gym.agents.sft_offline.offline_trainer import OfflineTrainer

        trainer: Any = OfflineTrainer(OfflineConfig(**fields))
    else:
        trainer = GRPOTrainer(GRPOConfig(**fields))
    lines = trainer.train()
    return {
        "seed": seed,
        "steps": [{k: m[k] for k in KEEP if k in m} for m in lines],
        "wall_seconds": round(time.perf_counter() - t0, 2),
        "trainer": trainer,
    }


def run_arms(
    base: Mapping[str, Any], arms: Mapping[str, Mapping[str, Any]], seeds: Sequence[int], out: Path
) -> dict[str, list[dict[str, Any]]]:
    """Every (arm, seed) run, in order; the trainer objects are dropped (weights stay in the run folders)."""

    def one(arm: Mapping[str, Any], seed: int, run_dir: Path) -> dict[str, Any]:
        r = run_one(base, arm, seed, run_dir)
        r.pop("trainer")
        return r

    return run_grid(arms, seeds, one, out, desc="rlvr arms")


def arms_report(
    cfg: ArmsConfig,
    arms: Mapping[str, Mapping[str, Any]],
    out: Path,
    head: Mapping[str, Any],
    *,
    labels: Mapping[str, str],
    title: str,
    header: Sequence[str],
    note: str,
    above: Sequence[str] = (),
    ref: str = "outcome",
    digits: int = 1,
    before: Callable[[str], list[Any]] = lambda a: [],
    after: Callable[[str, dict[str, Any], dict[str, dict[str, float]]], list[Any]] = lambda a, r, s: [],
    stats: Mapping[str, Callable[[list[dict[str, Any]]], float]] | None = None,
    tail: Mapping[str, Any] | None = None,
    base: Mapping[str, Any] | None = None,
    curve_labels: Mapping[str, str] | None = None,
) -> Report:
    """Train every (arm, seed) of ``arms`` (from ``base``, default ``cfg.base``) and lay out the report.

    ``results.json``: ``head``, ``rows`` (:func:`arm_row` per arm), each of ``stats`` (a number per
    arm from its runs), ``runs``, ``tail``. ``table.md`` (:func:`~._results.page`): ``title``, the
    ``above`` blocks, one row per arm — its label, ``before(arm)``, train success, Δ vs ``ref``,
    held-out success, ``after(arm, row, stats)`` — and ``note``. Figure ``curves.png``: :func:`curves_figure` (legend: ``curve_labels``, default ``labels``).
    """
    runs = run_arms(cfg.base if base is None else base, arms, cfg.seeds, out)
    rows = {a: arm_row(runs[a], cfg.window) for a in arms}
    per = {k: {a: f(runs[a]) for a in arms} for k, f in (stats or {}).items()}
    body = [[labels[a], *before(a), pm(r["train_success"]), delta(r, rows[ref]) if a != ref else "—",
             pm(r["eval_success"]), *after(a, r, per)] for a, r in rows.items()]  # fmt: skip
    results = {**head, "rows": rows, **per, "runs": runs, **(tail or {})}
    md = page(title, *above, markdown_table(header, body, digits=digits), note)
    return Report(
        results, md, {"curves": curves_figure(runs, labels if curve_labels is None else curve_labels)}
    )


def _ms(xs: list[float]) -> dict[str, float | None]:
    xs = [x for x in xs if x == x]  # drop NaN (no evaluation that step)
    if not xs:
        return {"mean": None, "std": None}
    return {"mean": statistics.fmean(xs), "std": statistics.stdev(xs) if len(xs) > 1 else 0.0}


def arm_row(runs: list[dict[str, Any]], window: int) -> dict[str, Any]:
    """One arm's summary over seeds: last-``window`` training success, reward, λ_g, bonus, held-out success.

    Example:
        >>> r = [{"steps": [{"win_rate": 0.0, "reward": 0.0, "lambda_g": 0.75, "bonus": 1.0},
        ...                 {"win_rate": 0.5, "reward": 0.5, "lambda_g": 0.5, "bonus": 0.0}]}]
        >>> row = arm_row(r, 1)
        >>> row["train_success"]["mean"], row["lambda_g"]["mean"], row["bonus"]["mean"]
        (0.5, 0.625, 0.5)
    """

    def last(run: dict[str, Any], key: str) -> float:
        vals = [s[key] for s in run["steps"][-window:] if key in s]
        return statistics.fmean(vals) if vals else float("nan")

    def every(run: dict[str, Any], key: str) -> float:
        vals = [s[key] for s in run["steps"] if key in s]
        return statistics.fmean(vals) if vals else float("nan")

    evals = [[s["eval_success_rate"] for s in r["steps"] if "eval_success_rate" in s] for r in runs]
    return {
        "seeds": len(runs),
        "train_success": _ms([last(r, "win_rate") for r in runs]),
        "reward": _ms([last(r, "reward") for r in runs]),
        "lambda_g": _ms([every(r, "lambda_g") for r in runs]),
        "bonus": _ms([every(r, "bonus") for r in runs]),
        "eval_success": _ms([e[-1] for e in evals if e]),
        "tokens": sum(s.get("tokens", 0) for r in runs for s in r["steps"]),
        "episodes": sum(s.get("episodes", 0) for r in runs for s in r["steps"]),
    }


def pm(s: Mapping[str, Any], scale: float = 100.0) -> str:
    """``mean ± std`` in percent (``—`` when missing).

    Example:
        >>> pm({"mean": 0.5, "std": 0.1}), pm({"mean": None, "std": None})
        ('50.0 ± 10.0', '—')
    """
    if s.get("mean") is None:
        return "—"
    return f"{fmt(s['mean'] * scale)} ± {fmt((s['std'] or 0.0) * scale)}"


def delta(row: Mapping[str, Any], ref: Mapping[str, Any], key: str = "train_success") -> str:
    """The arm's gain over the reference arm in points, signed (``—`` when either is missing).

    Example:
        >>> delta({"s": {"mean": 0.4}}, {"s": {"mean": 0.5}}, "s")
        '-10.0'
    """
    a, b = row[key].get("mean"), ref[key].get("mean")
    return "—" if a is None or b is None else f"{(a - b) * 100:+.1f}"


def curves_figure(
    runs: Mapping[str, list[dict[str, Any]]], labels: Mapping[str, str], key: str = "win_rate"
) -> Any:
    """``key`` per step, mean over seeds, one line per arm; λ_g below."""
    fig, axes = new_figure(5.0, 5.0, nrows=2)
    for name, rs in runs.items():
        n = min(len(r["steps"]) for r in rs)
        xs = [rs[0]["steps"][i]["step"] for i in range(n)]
        for ax, k in ((axes[0][0], key), (axes[1][0], "lambda_g")):
            ax.plot(xs, [statistics.fmean(r["steps"][i].get(k, 0.0) for r in rs) for i in range(n)], marker="o",
                    label=labels.get(name, name))  # fmt: skip
    axes[0][0].set_ylabel(key.replace("_", " "))
    axes[1][0].set_ylabel("λ_g")
    axes[1][0].set_xlabel("training step")
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    return fig
