"""``RUN/metrics.jsonl`` (one JSON line per step), TensorBoard when installed, cross-rank sums.

Every trainer writes through :class:`MetricsWriter`. The contract keys of ``xtree train rlvr``
(:data:`RLVR_KEYS`) are on every line; ``eval_success_rate`` appears on evaluation steps.
On resume the file is cut back to the lines of steps already in the checkpoint, so a resumed
run's file equals an uninterrupted one's.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ...corpus.io import atomic_write_text, output_target

METRICS_FILE = "metrics.jsonl"
RLVR_KEYS = (
    "step",
    "reward",
    "win_rate",
    "lambda_g",
    "bonus",
    "loss",
    "kl",
    "entropy",
    "invalid_rate",
    "tokens",
    "seconds",
)
"""Keys on every line of an RLVR run's metrics file (``eval_success_rate`` on eval steps)."""


def _clean(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None  # JSON has no NaN; a missing number is null
    return value


class MetricsWriter:
    """Appends one line per step; mirrors scalars to TensorBoard when ``tensorboard`` imports.

    Example:
        >>> import tempfile
        >>> d = tempfile.mkdtemp()
        >>> w = MetricsWriter(d, tensorboard=False); w.write({"step": 1, "loss": 0.5}); w.write({"step": 2})
        >>> w.truncate(1); [json.loads(x)["step"] for x in open(f"{d}/metrics.jsonl")]
        [1]
    """

    def __init__(self, run_dir: str | Path, *, tensorboard: bool = True, enabled: bool = True) -> None:
        self.path = Path(run_dir) / METRICS_FILE
        self.enabled = enabled
        self._tb: Any = None
        if enabled:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if tensorboard:
                self._tb = _tensorboard_writer(Path(run_dir) / "tb")

    def truncate(self, last_step: int) -> None:
        """Keep only the lines with ``step <= last_step`` (rewritten atomically)."""
        if not self.enabled or not self.path.exists():
            return
        keep = [line for line in read_metrics(self.path) if int(line.get("step", 0)) <= last_step]
        atomic_write_text(self.path, "".join(json.dumps(x) + "\n" for x in keep))

    def write(self, metrics: Mapping[str, Any]) -> None:
        if not self.enabled:
            return
        line = json.dumps({k: _clean(v) for k, v in metrics.items()})
        with open(output_target(self.path), "a", encoding="utf-8") as fh:  # one short line: appended whole
            fh.write(line + "\n")
            fh.flush()
        if self._tb is not None:
            step = int(metrics.get("step", 0))
            for key, value in metrics.items():
                if isinstance(value, (int, float)) and key != "step" and math.isfinite(float(value)):
                    self._tb.add_scalar(key, float(value), step)
            self._tb.flush()

    def close(self) -> None:
        if self._tb is not None:
            self._tb.close()


def _tensorboard_writer(folder: Path) -> Any:
    from ...corpus.outfolder import refuse_planted_link

    refuse_planted_link(folder)  # a link planted as RUN/tb would take the event files elsewhere
    try:
        import tensorboard  # noqa: F401  (SummaryWriter needs the package, not just torch)
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        return None
    return SummaryWriter(str(folder))


def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    """The lines of a metrics file (or of ``RUN/metrics.jsonl`` when given a folder); bad lines skipped."""
    p = Path(path)
    if p.is_dir():
        p = p / METRICS_FILE
    out = []
    for line in p.read_text(encoding="utf-8").splitlines():
        try:
            data = json.loads(line)
        except ValueError:
            continue  # a line cut by a crash: the rest of the file is still good
        if isinstance(data, dict):
            out.append(data)
    return out


def step_line(method: str, metrics: Mapping[str, Any], done: int, total: int, elapsed: float) -> str:
    """The line a trainer prints after each optimizer step: the step, its key numbers, an ETA that moves.

    ``done``/``total`` count the steps of this invocation (a resumed run counts from where it resumed).

    Example:
        >>> step_line("rlvr", {"step": 1, "reward": 0.5, "win_rate": 0.5, "loss": -0.01234}, 1, 2, 12.0)
        'rlvr step 1: reward=0.5 win_rate=0.5 loss=-0.01234 (1/2, 12s so far, ETA 12s)'
    """
    from ...progress import eta_line

    keys = ("reward", "win_rate", "loss", "kl", "epoch")
    shown = " ".join(f"{k}={metrics[k]:.4g}" for k in keys if isinstance(metrics.get(k), (int, float)))
    return f"{method} step {metrics.get('step')}: {shown} ({eta_line(done, total, elapsed)})"


def reduce_sums(values: Mapping[str, float], accelerator: Any = None) -> dict[str, float]:
    """Sum each value over all ranks (identity on one process)."""
    if accelerator is None or accelerator.num_processes == 1:
        return {k: float(v) for k, v in values.items()}
    import torch

    keys = sorted(values)
    t = torch.tensor([float(values[k]) for k in keys], dtype=torch.float64, device=accelerator.device)
    t = accelerator.reduce(t, reduction="sum")
    return dict(zip(keys, (float(x) for x in t.tolist())))


def safe_div(a: float, b: float) -> float:
    """``a / b``, 0 when ``b`` is 0.

    Example:
        >>> safe_div(1, 4), safe_div(1, 0)
        (0.25, 0.0)
    """
    return a / b if b else 0.0
