"""Experiment trackers through Accelerate's tracker classes (``--report-to``); metrics.jsonl stays the record.

``report_to`` names ``none``, ``tensorboard``, ``wandb``, ``trackio``, ``mlflow``, ``all`` (every
one of those four that is installed) or a comma list. Each tracker is Accelerate's own
(:data:`accelerate.tracking.LOGGER_TYPE_TO_CLASS`), started on the main process only; every step's
numeric metrics go to each of them, with the step as the x axis. A tracker whose package is not
installed is one :class:`~xtree_gym.errors.DependencyError` naming the package. TensorBoard writes
to ``RUN/tb`` (where the trainer always wrote it); wandb and trackio use the project ``xtree-rlvr``
and the run folder's name; MLflow the experiment ``xtree-rlvr`` under ``RUN/mlruns``.

The trackers are built the way ``Accelerator.init_trackers`` builds its ``log_with`` list (same
classes, same ``start`` / ``store_init_configuration`` / ``log`` / ``finish`` calls), but here rather
than through ``Accelerator(log_with=...)``: the trainer also runs on an Accelerator its caller made
(tests, launch scripts), and ``log_with`` can only be set when one is constructed.
"""

from __future__ import annotations

import importlib.util
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ...errors import ConfigError, DependencyError

TRACKERS = ("tensorboard", "wandb", "trackio", "mlflow")
"""Trackers ``--report-to`` can name (``all`` = every installed one)."""
PROJECT = "xtree-rlvr"


def parse_report_to(value: str) -> list[str]:
    """The tracker names of a ``--report-to`` value (``all`` is expanded later, by what is installed).

    Example:
        >>> parse_report_to("none"), parse_report_to("tensorboard,wandb"), parse_report_to("all")
        ([], ['tensorboard', 'wandb'], ['all'])
    """
    names = [n.strip().lower() for n in str(value).split(",") if n.strip()]
    if names in ([], ["none"]):
        return []
    bad = [n for n in names if n not in (*TRACKERS, "all")]
    if bad or ("all" in names and len(names) > 1):
        raise ConfigError(
            f"report_to = {value!r}", fix=f"use none, all, or a comma list of: {', '.join(TRACKERS)}"
        )
    return names


def installed(name: str) -> bool:
    """Whether the tracker's package imports (``tensorboard`` is the package, not torch's writer)."""
    return importlib.util.find_spec(name) is not None


def resolve_trackers(report_to: str | None, tensorboard: bool) -> list[str]:
    """The trackers to start: ``None`` means TensorBoard when installed and ``tensorboard`` is on.

    Example:
        >>> resolve_trackers("none", True), resolve_trackers(None, False)
        ([], [])
    """
    if report_to is None:
        return ["tensorboard"] if tensorboard and installed("tensorboard") else []
    names = parse_report_to(report_to)
    if names == ["all"]:
        return [n for n in TRACKERS if installed(n)]
    for name in names:
        if not installed(name):
            raise DependencyError(
                f"--report-to {name} needs the package {name!r}, which is not installed",
                fix=f"pip install {name}   (or pass --report-to none)",
            )
    return names


class Trackers:
    """The started trackers of one run; :meth:`log` sends a metrics line to each.

    Example:
        >>> t = Trackers([], "runs/x"); t.log({"step": 1, "loss": 0.5}); t.close(); t.names
        []
    """

    def __init__(
        self, names: list[str], run_dir: str | Path, *, config: Mapping[str, Any] | None = None
    ) -> None:
        self.names = list(names)
        self.trackers: list[Any] = []
        if not self.names:
            return
        from accelerate.tracking import LOGGER_TYPE_TO_CLASS

        from ...corpus.outfolder import refuse_planted_link

        run = Path(run_dir)
        for sub in ("tb", "mlruns"):  # the trackers' folders in the run: never through a planted link
            refuse_planted_link(run / sub)
        for name in self.names:
            cls = LOGGER_TYPE_TO_CLASS[name]
            if name == "tensorboard":
                tracker = cls("tb", str(run))
            elif name == "mlflow":
                tracker = cls(PROJECT, logging_dir=str(run / "mlruns"), run_name=run.name)
            else:
                tracker = cls(PROJECT, name=run.name)
            tracker.start()
            if config is not None and name != "tensorboard":  # TensorBoard's hparams table wants flat scalars
                tracker.store_init_configuration(_flat(config))
            self.trackers.append(tracker)

    def log(self, metrics: Mapping[str, Any]) -> None:
        """Every finite number of ``metrics`` (but ``step``), at ``metrics["step"]``."""
        if not self.trackers:
            return
        step = int(metrics.get("step", 0))
        values = {
            k: float(v)
            for k, v in metrics.items()
            if k != "step" and isinstance(v, (int, float)) and math.isfinite(float(v))
        }
        for tracker in self.trackers:
            tracker.log(values, step=step)
            writer = getattr(tracker, "writer", None)
            if writer is not None:  # TensorBoard: flush each step so a crash loses nothing
                writer.flush()

    def close(self) -> None:
        for tracker in self.trackers:
            tracker.finish()
        self.trackers = []


def _flat(config: Mapping[str, Any]) -> dict[str, Any]:
    """Scalars as they are, anything else as its string (what trackers' config tables take)."""
    return {
        k: v if isinstance(v, (bool, int, float, str)) or v is None else str(v) for k, v in config.items()
    }
