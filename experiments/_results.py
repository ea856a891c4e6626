"""What every experiment script shares: the ``--smoke | --full`` command line and the results folder.

Each script writes ``results/<name>/`` (``results/<name>_smoke/`` for ``--smoke``) with

- ``results.json``: every number the table and figures show, the config the run used, and the
  machine (CPUs, load average, wall seconds), so a table can be rebuilt without rerunning;
- ``table.md``: a markdown table laid out like the paper's (one header row, one row per setting);
- ``*.png``: the figures (matplotlib, Agg backend, no timestamp in the file).

Scripts call :func:`experiment_main` with their two config instances and a ``run(cfg, out_dir)``
function that returns a :class:`Report` (what is particular to the table); this module is the one tail
that adds the provenance, writes the folder and prints the table. The arms × seeds loop the training
tables share is :func:`experiments._runner.run_grid`.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from xtree_gym.corpus.io import atomic_write_text
from xtree_gym.errors import ConfigError, XTreeError

RESULTS_ROOT = Path("results")
"""Where results folders go, relative to the working directory (the repository root)."""


def fmt(x: Any, digits: int = 1) -> str:
    """One table cell: floats rounded, ``None`` as an em dash, the rest as ``str``.

    Example:
        >>> fmt(73.849), fmt(None), fmt(12), fmt(0.5, 3)
        ('73.8', '—', '12', '0.500')
    """
    if x is None:
        return "—"
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, float):
        return "nan" if math.isnan(x) else f"{x:.{digits}f}"
    return str(x)


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[Any]], digits: int = 1) -> str:
    """A GitHub markdown table; cells go through :func:`fmt`, ``|`` inside a cell is escaped.

    Example:
        >>> print(markdown_table(["# Traj", "nodes"], [[50, 9], [100, 11.0]]))
        | # Traj | nodes |
        |---|---|
        | 50 | 9 |
        | 100 | 11.0 |
    """

    def cell(x: Any) -> str:
        return fmt(x, digits).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(x) for x in row) + " |" for row in rows]
    return "\n".join(lines)


def page(title: str, *blocks: str) -> str:
    """``table.md``'s layout: the title line, then each block (a table, a note), a blank line between.

    Example:
        >>> page("# Table 9", "| a |\\n|---|", "Note.")
        '# Table 9\\n\\n| a |\\n|---|\\n\\nNote.'
    """
    return "\n\n".join([title, *blocks])


def save_png(fig: Any, path: Path) -> None:
    """Write a matplotlib figure atomically, byte-stable (the toolkit's one PNG writer)."""
    from xtree_gym.render.figures import save_png as write_png

    write_png(fig, path, dpi=120)


def new_figure(w: float, h: float, ncols: int = 1, nrows: int = 1) -> tuple[Any, Any]:
    """A matplotlib ``(figure, axes)`` on the Agg backend (no display needed)."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure

    fig = Figure(figsize=(w, h))
    axes = fig.subplots(nrows, ncols, squeeze=False)
    return fig, axes


def machine() -> dict[str, Any]:
    """CPUs and load average now: the context a timing needs."""
    return {"cpus": os.cpu_count(), "loadavg": [round(x, 2) for x in os.getloadavg()]}


@dataclasses.dataclass(frozen=True)
class Report:
    """What a script's ``run`` returns: the results (without provenance), the table, the figures."""

    results: dict[str, Any]
    """Every number the table and figures show; the tail appends ``config`` and ``machine``."""
    table: str
    """``table.md``'s text."""
    figures: dict[str, Any] = dataclasses.field(default_factory=dict)
    """File stem -> matplotlib figure, written as ``<stem>.png``."""


def write_results(
    out_dir: Path, results: dict[str, Any], table: str, figures: dict[str, Any] | None = None
) -> list[Path]:
    """Write ``results.json``, ``table.md`` and each ``<name>.png``; returns the paths written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = [out_dir / "results.json", out_dir / "table.md"]
    atomic_write_text(
        written[0], json.dumps(results, indent=1, sort_keys=False, default=_json_default) + "\n"
    )
    atomic_write_text(written[1], table.rstrip("\n") + "\n")
    for name, fig in (figures or {}).items():
        path = out_dir / (name if name.endswith(".png") else f"{name}.png")
        save_png(fig, path)
        written.append(path)
    return written


def _json_default(x: Any) -> Any:
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return dataclasses.asdict(x)
    if isinstance(x, (set, frozenset, tuple)):
        return list(x)
    if isinstance(x, Path):
        return str(x)
    if hasattr(x, "item"):  # numpy / torch scalars
        return x.item()
    raise TypeError(f"not JSON-serializable: {type(x).__name__}")


def default_out(name: str, smoke: bool) -> Path:
    """``results/<name>`` or, for a smoke run, ``results/<name>_smoke`` (never over the committed full run).

    Example:
        >>> str(default_out("table5_mining_size", True))
        'results/table5_mining_size_smoke'
    """
    return RESULTS_ROOT / (f"{name}_smoke" if smoke else name)


def experiment_main(
    name: str,
    doc: str,
    smoke: Any,
    full: Any,
    run: Callable[[Any, Path], Report],
    argv: Sequence[str] | None = None,
) -> int:
    """The command line every script shares: ``--smoke | --full [--out DIR]``; prints ``table.md``.

    ``run(cfg, out_dir)`` does the work and returns its :class:`Report`; the tail appends the
    provenance (config, machine, wall seconds) to its results and writes ``results.json``,
    ``table.md``, the figures and ``provenance.json``. Errors of xtree_gym's typed kinds print as
    one line (exit 2).
    """
    p = argparse.ArgumentParser(prog=f"python -m experiments.{name}", description=doc.strip().split("\n")[0])
    size = p.add_mutually_exclusive_group(required=True)
    size.add_argument(
        "--smoke", action="store_true", help="CPU size, seconds to minutes (what the tests run)"
    )
    size.add_argument("--full", action="store_true", help="the documented size (docs/experiments_tables.md)")
    p.add_argument("--out", default=None, help=f"output folder (default results/{name}[_smoke])")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config field (VALUE read as JSON, else a string); base.FIELD sets a "
                   "trainer field, e.g. --set base.model=/models/Qwen2.5-1.5B-Instruct")  # fmt: skip
    a = p.parse_args(argv)
    out = Path(a.out) if a.out else default_out(name, a.smoke)
    t0 = time.perf_counter()
    try:
        cfg = apply_overrides(smoke if a.smoke else full, a.set)
        report = run(cfg, out)
        write_results(out, {**report.results, **provenance(cfg, t0)}, report.table, report.figures)
        write_provenance(out, f"experiments.{name}", cfg, list(argv) if argv is not None else None)
    except XTreeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print((out / "table.md").read_text(encoding="utf-8"))
    print(f"wrote {out}/ in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    return 0


def script_main(
    name: str, doc: str, smoke: Any, full: Any, run: Callable[[Any, Path], Report]
) -> Callable[..., int]:
    """A script's ``main(argv=None)``: :func:`experiment_main` bound to its name, doc, sizes and run."""

    def main(argv: Sequence[str] | None = None) -> int:
        return experiment_main(name, doc, smoke, full, run, argv)

    return main


def apply_overrides(cfg: Any, items: Sequence[str]) -> Any:
    """``cfg`` with each ``KEY=VALUE`` applied; ``base.FIELD=VALUE`` edits the ``base`` dict field.

    Example:
        >>> @dataclasses.dataclass(frozen=True)
        ... class C:
        ...     steps: int = 1
        ...     base: dict = dataclasses.field(default_factory=dict)
        >>> apply_overrides(C(), ["steps=3", "base.model=/m", "base.n=4"])
        C(steps=3, base={'model': '/m', 'n': 4})
    """
    fields = {f.name for f in dataclasses.fields(cfg)}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep:
            raise ConfigError(f"--set {item!r} has no '='", fix="write --set KEY=VALUE")
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            value = raw
        top, _, sub = key.partition(".")
        if top not in fields or (sub and not isinstance(getattr(cfg, top), dict)):
            raise ConfigError(f"--set {key!r}: no such config field", fix=f"use one of {sorted(fields)}")
        if isinstance(value, list) and isinstance(getattr(cfg, top), tuple):
            value = tuple(value)
        cfg = dataclasses.replace(cfg, **{top: {**getattr(cfg, top), sub: value} if sub else value})
    return cfg


def provenance(cfg: Any, t0: float) -> dict[str, Any]:
    """The ``config`` and ``machine`` entries of a results dict (``t0`` from ``time.perf_counter()``)."""
    return {
        "config": dataclasses.asdict(cfg)
        if dataclasses.is_dataclass(cfg) and not isinstance(cfg, type)
        else cfg,
        "machine": {**machine(), "wall_seconds": round(time.perf_counter() - t0, 2)},
    }


def code_commit() -> dict[str, Any]:
    """The git commit of the code in the working directory and whether tracked code differs from it.

    ``dirty`` ignores ``results/`` (a re-run rewrites it). ``None`` values when git is unavailable.
    """
    import subprocess

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", *args], capture_output=True, text=True, timeout=30, check=True)
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout.strip()

    head = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)results")
    return {"commit": head, "dirty": None if status is None else bool(status)}


def write_provenance(
    out_dir: Path,
    module: str,
    config: Any,
    argv: Sequence[str] | None = None,
    code: dict[str, Any] | None = None,
) -> Path:
    """``out_dir/provenance.json``: the commit, the command and the config that produced the folder.

    ``code`` is :func:`code_commit` taken when the work started (default: now).
    """
    cfg = (
        dataclasses.asdict(config)
        if dataclasses.is_dataclass(config) and not isinstance(config, type)
        else config
    )
    rec = {
        **(code or code_commit()),
        "command": " ".join(["python -m", module, *(sys.argv[1:] if argv is None else argv)]),
        "config": cfg,
        "written_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": machine(),
    }
    path = out_dir / "provenance.json"
    atomic_write_text(path, json.dumps(rec, indent=1, default=_json_default) + "\n")
    return path
