"""The trajectory corpus: records, JSONL reading/writing with file:line errors, HF datasets bridge.

A corpus file holds one trajectory per line::

    {"id": "...", "env": "scienceworld", "task": "boil", "goal": "Your task is to ...",
     "success": true, "reward": 1.0,
     "steps": [{"action": "open door to kitchen", "observation": "The door is now open.",
                "thought": null, "token": "open<door>", "slots": {"X": "door to kitchen"}}]}

``id``, ``success`` and ``steps`` (each with an ``action``) are required; ``env``, ``task``
and ``goal`` default to ``""``. Keys the format does not know are kept in ``extra`` and
written back unchanged, so a round trip never loses information.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import CorpusError
from .arrow_io import arrow_table, is_parquet, iter_parquet_records, table_records, write_parquet
from .io import (
    JSONProblem,
    atomic_open,
    bounded_lines,
    finite_number,
    input_problem,
    loads_strict,
    open_bytes,
)

_STEP_KEYS = ("action", "observation", "thought", "token", "slots")
_TRAJ_KEYS = ("id", "env", "task", "goal", "success", "reward", "steps")


@dataclass
class Step:
    """One action of a trajectory and what the environment answered."""

    action: str
    """The raw action string exactly as the agent wrote it (no thought)."""
    observation: str = ""
    """The environment's text after the action."""
    thought: str | None = None
    """Optional reasoning text; never part of the canonical token."""
    token: str | None = None
    """Canonical ``verb<role>`` token, filled by a canonicalizer (``xtree canon``)."""
    slots: dict[str, Any] | None = None
    """Values the canonicalizer stripped from the action (ids, object names, typed text)."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Keys of the step record this format does not know; written back as they came."""

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"action": self.action, "observation": self.observation}
        if self.thought is not None:
            d["thought"] = self.thought
        if self.token is not None:
            d["token"] = self.token
        if self.slots is not None:
            d["slots"] = self.slots
        d.update(self.extra)
        return d


@dataclass
class Trajectory:
    """One episode: a goal, its steps, and whether it succeeded."""

    id: str
    """Unique name of the episode within its corpus."""
    steps: list[Step]
    """The actions in order."""
    success: bool
    """Episode-level label the miner's success term reads."""
    env: str = ""
    """Environment name, e.g. ``scienceworld``."""
    task: str = ""
    """Task type (family) name; the miner counts distinct task types per pair."""
    goal: str = ""
    """The instruction text."""
    reward: float | None = None
    """Final reward, when the source has one."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Keys of the record this format does not know; written back as they came."""

    @property
    def tokens(self) -> list[str | None]:
        """The canonical token of each step (``None`` where not canonicalized yet)."""
        return [s.token for s in self.steps]

    @property
    def actions(self) -> list[str]:
        return [s.action for s in self.steps]

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "id": self.id,
            "env": self.env,
            "task": self.task,
            "goal": self.goal,
            "success": self.success,
        }
        if self.reward is not None:
            d["reward"] = self.reward
        d["steps"] = [s.to_dict() for s in self.steps]
        d.update(self.extra)
        return d


@dataclass(frozen=True)
class BadLine:
    """A corpus line that was skipped under ``skip_bad``: where, and why."""

    path: str
    line: int
    problem: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.problem}"


@dataclass
class Corpus:
    """Trajectories read from one or more files, plus the lines skipped (``skip_bad`` only)."""

    trajectories: list[Trajectory]
    skipped: list[BadLine] = field(default_factory=list)
    duplicates: list[BadLine] = field(default_factory=list)
    """Records whose id an earlier record already had, kept under ``keep_duplicates`` only."""

    def __iter__(self) -> Iterator[Trajectory]:
        return iter(self.trajectories)

    def __len__(self) -> int:
        return len(self.trajectories)

    def __getitem__(self, i: int) -> Trajectory:
        return self.trajectories[i]


def _require(cond: bool, problem: str) -> None:
    if not cond:
        raise _RecordProblem(problem)


class _RecordProblem(Exception):
    """Internal: a record-level problem, turned into a CorpusError with file:line by the caller."""


def step_from_dict(obj: Any, index: int = 0) -> Step:
    """Build a :class:`Step` from a JSON object, checking types."""
    where = f"steps[{index}]"
    _require(isinstance(obj, dict), f"{where} is {type(obj).__name__}, expected an object")
    action = obj.get("action")
    _require(isinstance(action, str), f"{where}.action is {action!r}, expected a string")
    obs = obj.get("observation", "")
    _require(obs is None or isinstance(obs, str), f"{where}.observation is not a string")
    thought = obj.get("thought")
    _require(thought is None or isinstance(thought, str), f"{where}.thought is not a string")
    token = obj.get("token")
    _require(token is None or isinstance(token, str), f"{where}.token is {token!r}, expected a string")
    slots = obj.get("slots")
    _require(slots is None or isinstance(slots, dict), f"{where}.slots is not an object")
    extra = {k: v for k, v in obj.items() if k not in _STEP_KEYS}
    return Step(action, obs or "", thought, token, slots, extra)


def trajectory_from_dict(obj: Any) -> Trajectory:
    """Build a :class:`Trajectory` from a JSON object, checking every field's type."""
    _require(isinstance(obj, dict), f"record is {type(obj).__name__}, expected a JSON object")
    for key in ("id", "success", "steps"):
        _require(key in obj, f"missing required key {key!r}")
    tid = obj["id"]
    _require(isinstance(tid, (str, int)) and not isinstance(tid, bool), f"id is {tid!r}, expected a string")
    success = obj["success"]
    _require(isinstance(success, bool), f"success is {success!r}, expected true or false")
    steps = obj["steps"]
    _require(isinstance(steps, list), f"steps is {type(steps).__name__}, expected a list")
    for key in ("env", "task", "goal"):
        val = obj.get(key, "")
        _require(isinstance(val, str), f"{key} is {val!r}, expected a string")
    reward = obj.get("reward")
    _require(reward is None or finite_number(reward), f"reward is {reward!r}, expected a finite number")
    extra = {k: v for k, v in obj.items() if k not in _TRAJ_KEYS}
    return Trajectory(
        id=str(tid),
        steps=[step_from_dict(s, i) for i, s in enumerate(steps)],
        success=success,
        env=obj.get("env", ""),
        task=obj.get("task", ""),
        goal=obj.get("goal", ""),
        reward=None if reward is None else float(reward),
        extra=extra,
    )


def iter_corpus(
    path: str | os.PathLike[str],
    *,
    skip_bad: bool = False,
    skipped: list[BadLine] | None = None,
    lines: list[int] | None = None,
) -> Iterator[Trajectory]:
    """Yield the trajectories of one JSONL(.gz) file; blank lines are allowed.

    A malformed line (bad JSON, NaN, too deep, a lone surrogate, not UTF-8, a mistyped field)
    raises :class:`CorpusError` naming ``file:line``; with ``skip_bad`` it is appended to
    ``skipped`` instead (never dropped without a trace). ``lines`` receives each yielded record's
    line number.
    """
    p = Path(path)
    problem = input_problem(p, "corpus file")
    if problem:
        raise CorpusError(problem, fix="pass a corpus JSONL(.gz) file")
    try:
        if is_parquet(p):
            yield from _iter_records(iter_parquet_records(p), str(p), "row", skip_bad, skipped, lines)
            return
        yield from _iter_lines(p, skip_bad, skipped, lines)
    except (EOFError, OSError) as exc:  # fake or truncated .gz, unreadable file
        raise CorpusError(
            f"cannot read the file ({type(exc).__name__}: {exc})",
            where=str(p),
            fix="pass a UTF-8 JSONL file (or gzip of one)",
        ) from None


def _iter_lines(
    p: Path, skip_bad: bool, skipped: list[BadLine] | None, lines: list[int] | None = None
) -> Iterator[Trajectory]:
    with open_bytes(p) as fh:
        lineno = 0
        try:
            for lineno, raw in enumerate(bounded_lines(fh), start=1):
                if not raw.strip():
                    continue
                yield from _one_line(p, lineno, raw, skip_bad, skipped, lines)
        except JSONProblem as exc:  # a line past MAX_LINE_BYTES: nothing after it can be trusted
            raise CorpusError(
                str(exc),
                where=f"{p}:{lineno + 1}",
                fix="check the file (XTREE_MAX_LINE_BYTES raises the limit)",
            ) from None


def _one_line(
    p: Path, lineno: int, raw: bytes, skip_bad: bool, skipped: list[BadLine] | None, lines: list[int] | None
) -> Iterator[Trajectory]:
    """One non-blank line's trajectory (or, under ``skip_bad``, nothing and a :class:`BadLine`)."""
    try:
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise _RecordProblem(f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
        try:
            obj = loads_strict(line)
        except JSONProblem as exc:
            raise _RecordProblem(str(exc)) from None
        traj = trajectory_from_dict(obj)
        if lines is not None:
            lines.append(lineno)
        yield traj
    except _RecordProblem as exc:
        if skip_bad:
            if skipped is not None:
                skipped.append(BadLine(str(p), lineno, str(exc)))
            return
        raise CorpusError(
            str(exc),
            where=f"{p}:{lineno}",
            fix="repair the line, or pass --skip-bad (skip_bad=True) to skip and count bad lines",
        ) from None


def _iter_records(
    records: Iterable[Any],
    source: str,
    unit: str,
    skip_bad: bool,
    skipped: list[BadLine] | None,
    lines: list[int] | None = None,
) -> Iterator[Trajectory]:
    """Trajectories from already-parsed records (Parquet rows); a bad one names ``source row N``."""
    for n, obj in enumerate(records, start=1):
        try:
            traj = trajectory_from_dict(obj)
            if lines is not None:
                lines.append(n)
            yield traj
        except _RecordProblem as exc:
            if skip_bad:
                if skipped is not None:
                    skipped.append(BadLine(source, n, f"{unit} {n}: {exc}"))
                continue
            raise CorpusError(
                str(exc), where=f"{source} {unit} {n}", fix="repair the row, or pass --skip-bad to skip it"
            ) from None


def read_corpus(
    paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    *,
    skip_bad: bool = False,
    keep_duplicates: bool = False,
) -> Corpus:
    """Read one or more corpus files (``.jsonl``, ``.jsonl.gz`` or ``.parquet``).

    A ``.parquet`` file (see :mod:`xtree_gym.corpus.arrow_io`) is read by the same function.

    Two records with one ``id`` (in one file or across files) are a :class:`CorpusError`: the
    miner would count the episode twice. ``keep_duplicates`` keeps them and lists each repeat in
    ``Corpus.duplicates``.

    Example:
        >>> import tempfile, pathlib
        >>> d = pathlib.Path(tempfile.mkdtemp())
        >>> _ = (d / "c.jsonl").write_text('{"id": "a", "success": true, "steps": [{"action": "look around"}]}\\nnot json\\n')
        >>> c = read_corpus(d / "c.jsonl", skip_bad=True)
        >>> len(c), c.skipped[0].line, c.trajectories[0].steps[0].action
        (1, 2, 'look around')
    """
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    skipped: list[BadLine] = []
    trajs: list[Trajectory] = []
    first: dict[str, str] = {}  # id -> file:line of its first record
    duplicates: list[BadLine] = []
    for path in paths:
        lines: list[int] = []
        start = len(trajs)
        trajs.extend(iter_corpus(path, skip_bad=skip_bad, skipped=skipped, lines=lines))
        check_unique_ids(trajs[start:], lines, path, first, duplicates, keep=keep_duplicates)
    return Corpus(trajs, skipped, duplicates)


def check_unique_ids(
    trajectories: Sequence[Trajectory],
    lines: Sequence[int],
    path: str | os.PathLike[str],
    first: dict[str, str],
    duplicates: list[BadLine],
    *,
    keep: bool = False,
) -> None:
    """Refuse (or, with ``keep``, record in ``duplicates``) a record whose id ``first`` already holds.

    ``first`` maps each id seen so far to its ``file:line``; pass the same dict for every file
    of one corpus. ``lines`` gives each trajectory's line number.

    Example:
        >>> ts = [Trajectory("a", [], True), Trajectory("a", [], False)]
        >>> dups: list[BadLine] = []
        >>> check_unique_ids(ts, [1, 3], "c.jsonl", {}, dups, keep=True)
        >>> [str(d) for d in dups]
        ["c.jsonl:3: id 'a' first at c.jsonl:1"]
    """
    for t, lineno in zip(trajectories, lines):
        here = f"{path}:{lineno}"
        seen = first.get(t.id)
        if seen is None:  # (not "seen == here": the same file passed twice repeats every file:line)
            first[t.id] = here
            continue
        if not keep:
            again = " (the same file given twice?)" if seen == here else ""
            raise CorpusError(
                f"trajectory id {t.id!r} again (first at {seen}{again}); the miner would count the episode twice",
                where=here,
                fix="give every trajectory its own id, or pass --keep-duplicates (keep_duplicates=True) "
                "to keep and count the repeats",
            )
        duplicates.append(BadLine(str(path), lineno, f"id {t.id!r} first at {seen}"))


def write_corpus(path: str | os.PathLike[str], trajectories: Iterable[Trajectory | Mapping[str, Any]]) -> int:
    """Write trajectories as JSONL(.gz), or Parquet for a ``.parquet`` path, atomically; returns how many."""
    if is_parquet(path):
        return write_parquet(path, (t.to_dict() if isinstance(t, Trajectory) else t for t in trajectories))
    n = 0
    with atomic_open(path) as fh:
        for t in trajectories:
            d = t.to_dict() if isinstance(t, Trajectory) else dict(t)
            fh.write(json.dumps(d, ensure_ascii=False, sort_keys=False))
            fh.write("\n")
            n += 1
    return n


def from_hf_dataset(dataset: Iterable[Mapping[str, Any]]) -> Corpus:
    """Turn a Hugging Face ``datasets.Dataset`` (or any iterable of row dicts) into a corpus.

    The rows carry the same columns as the JSONL format. A bad row raises :class:`CorpusError`
    naming its index. A ``datasets.Dataset`` (or a ``pyarrow.Table``) is read column by column
    from its Arrow table, not row dict by row dict.
    """
    table = arrow_table(dataset)
    if table is not None:
        dataset = table_records(table, "dataset")
    trajs = []
    for i, row in enumerate(dataset):
        try:
            trajs.append(trajectory_from_dict(dict(row)))
        except _RecordProblem as exc:
            raise CorpusError(str(exc), where=f"dataset row {i}", fix="fix the dataset column") from None
    return Corpus(trajs)


def corpus_stats(trajectories: Sequence[Trajectory]) -> dict[str, Any]:
    """Counts a user checks before mining: trajectories, success rate, steps, task types, tokens."""
    n = len(trajectories)
    steps = [len(t.steps) for t in trajectories]
    tokens = {s.token for t in trajectories for s in t.steps if s.token is not None}
    canon = sum(1 for t in trajectories for s in t.steps if s.token is not None)
    return {
        "n_trajectories": n,
        "n_successful": sum(t.success for t in trajectories),
        "success_rate": (sum(t.success for t in trajectories) / n) if n else 0.0,
        "n_steps": sum(steps),
        "mean_steps": (sum(steps) / n) if n else 0.0,
        "max_steps": max(steps, default=0),
        "n_task_types": len({t.task for t in trajectories}),
        "envs": sorted({t.env for t in trajectories}),
        "n_canonical_steps": canon,
        "n_primitive_tokens": len(tokens),
    }
