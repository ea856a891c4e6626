"""The shared runner: arms × seeds → ``<out>/runs/<arm>-s<seed>/``, with resume from a log of finished runs.

:func:`run_grid` runs every (arm, seed) in a fixed order through one per-run callable and keeps what
each returns; :class:`RunLog` is the append-only ``runs.jsonl`` (one ``{"config": ..., "run": ...}``
line per finished run) that a resumed run reads back, keeping the runs made with the same config.
The folder's tail (``results.json``, ``table.md``, figures, ``provenance.json``) is
:func:`experiments._results.experiment_main`'s; a table script returns its :class:`~._results.Report`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

A = TypeVar("A")
Record = dict[str, Any]


class RunLog:
    """``runs.jsonl``: every finished run as one whole line ``{"config": config, "run": run, **tags}``.

    ``key(line)`` names a run (e.g. its arm and seed); ``same(line_config)`` says whether a logged run
    was made with a config a resumed run may keep (default: equal to ``config``).

    Example:
        >>> import tempfile
        >>> path = Path(tempfile.mkdtemp()) / "runs.jsonl"
        >>> log = RunLog(path, {"lr": 1}, key=lambda line: line["run"]["seed"])
        >>> with log.writer(resume=False) as write:
        ...     write({"seed": 0, "win": 0.5})
        >>> log.done()
        {0: {'seed': 0, 'win': 0.5}}
        >>> RunLog(path, {"lr": 2}, key=lambda line: line["run"]["seed"]).done()  # another config: redo
        {}
    """

    def __init__(
        self,
        path: Path,
        config: Record,
        key: Callable[[Record], Hashable],
        same: Callable[[Any], bool] | None = None,
    ) -> None:
        self.path, self.config, self.key = path, config, key
        self.same = same if same is not None else (lambda c: c == json.loads(json.dumps(config)))

    def done(self) -> dict[Hashable, Record]:
        """The logged runs made with a matching config, by key (the last line wins)."""
        if not self.path.exists():
            return {}
        lines = [json.loads(x) for x in self.path.read_text(encoding="utf-8").splitlines() if x.strip()]
        return {self.key(line): line["run"] for line in lines if self.same(line.get("config"))}

    @contextmanager
    def writer(self, resume: bool, **tags: Any) -> Iterator[Callable[..., None]]:
        """``write(run, **tags)`` appends one line, flushed (``resume=False`` starts the file anew)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a" if resume else "w", encoding="utf-8") as fh:  # each line whole

            def write(run: Record, **more: Any) -> None:
                fh.write(json.dumps({"config": self.config, "run": run, **tags, **more}) + "\n")
                fh.flush()

            yield write


def run_grid(
    arms: Mapping[str, A],
    seeds: Sequence[int],
    one: Callable[[A, int, Path], Record],
    out: Path,
    *,
    desc: str = "arms",
    log: RunLog | None = None,
    resume: bool = False,
) -> dict[str, list[Record]]:
    """Every (arm, seed), arm-major: ``one(arm, seed, out / "runs" / f"{name}-s{seed}")``, kept by arm name.

    With ``log``, each finished run is appended to it (tagged with its arm name); with ``resume`` too,
    the runs already logged with the same config are kept and not run again.

    Example:
        >>> import tempfile
        >>> out = Path(tempfile.mkdtemp())
        >>> calls = []
        >>> def one(arm, seed, run_dir):
        ...     calls.append(run_dir.name)
        ...     return {"seed": seed, "x": arm * seed}
        >>> log = RunLog(out / "runs.jsonl", {"c": 1}, key=lambda line: (line["arm"], line["run"]["seed"]))
        >>> run_grid({"a": 1, "b": 2}, [0, 1], one, out, log=log, desc="")["b"]
        [{'seed': 0, 'x': 0}, {'seed': 1, 'x': 2}]
        >>> calls.clear(); _ = run_grid({"a": 1, "b": 2, "c": 3}, [0, 1], one, out, log=log, resume=True, desc="")
        >>> calls  # only the new arm ran
        ['c-s0', 'c-s1']
    """
    from xtree_gym.progress import Progress

    done = log.done() if log is not None and resume else {}
    runs: dict[str, list[Record]] = {name: [] for name in arms}
    todo = [(name, s) for name in arms for s in seeds if (name, s) not in done]
    with (
        Progress(total=len(todo), desc=desc, enabled=None if desc else False) as bar,
        _writer(log, resume) as write,
    ):
        for name, arm in arms.items():
            for s in seeds:
                if (name, s) in done:
                    runs[name].append(done[(name, s)])
                    continue
                runs[name].append(one(arm, s, out / "runs" / f"{name}-s{s}"))
                write(runs[name][-1], arm=name)
                bar.update()
    return runs


@contextmanager
def _writer(log: RunLog | None, resume: bool) -> Iterator[Callable[..., None]]:
    if log is None:
        yield lambda run, **tags: None
        return
    with log.writer(resume) as write:
        yield write
