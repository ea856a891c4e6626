"""Canonicalize whole corpora: fill every step's ``token`` and ``slots``.

The context of each step comes from the domain's :meth:`Canonicalizer.corpus_context`
(WebShop: the trajectory's ``goal_options``; web: the step's ``element`` or the AXTree text of
the observation before it). Steps that already carry a token are re-canonicalized unless
``keep_existing`` is set, so running twice gives the same file.
"""

from __future__ import annotations

import copy
import os
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from ..corpus.io import refuse_overwrite
from ..corpus.records import BadLine, Trajectory, check_unique_ids, iter_corpus, write_corpus
from ..errors import CorpusError
from ..progress import progress
from . import get_canonicalizer


@dataclass
class CanonReport:
    """What a corpus canonicalization did: counts per token, kept tokens, rule errors, skipped lines.

    Example:
        >>> from xtree_gym.corpus import Step, Trajectory
        >>> r = CanonReport()
        >>> _ = canonicalize_corpus([Trajectory("t", [Step("wait1"), Step("wait1")], True)], "scienceworld", report=r)
        >>> r.n_steps, r.token_counts["wait<short>"], r.summary()["n_tokens"]
        (2, 2, 1)
    """

    n_trajectories: int = 0
    n_steps: int = 0
    n_kept: int = 0
    """Steps whose existing token was kept (``keep_existing``)."""
    token_counts: Counter[str] = field(default_factory=Counter)
    """token -> number of steps."""
    n_errors: int = 0
    """Steps where a rule raised and the catch-all stood in (``slots["canon_error"]``)."""
    skipped: list[BadLine] = field(default_factory=list)
    """Corpus lines skipped under ``skip_bad`` (file, line, problem)."""
    duplicates: list[BadLine] = field(default_factory=list)
    """Records whose id repeats an earlier one, kept under ``keep_duplicates``."""

    def summary(self) -> dict[str, object]:
        return {
            "n_trajectories": self.n_trajectories,
            "n_steps": self.n_steps,
            "n_kept": self.n_kept,
            "n_tokens": len(self.token_counts),
            "n_errors": self.n_errors,
            "n_skipped_lines": len(self.skipped),
            "n_duplicate_ids": len(self.duplicates),
            "top_tokens": self.token_counts.most_common(10),
        }


def canonicalize_trajectory(
    trajectory: Trajectory, domain: str, *, keep_existing: bool = False, report: CanonReport | None = None
) -> Trajectory:
    """Fill ``token`` and ``slots`` of every step of ``trajectory`` in place; returns it."""
    canon = get_canonicalizer(domain)
    for i, step in enumerate(trajectory.steps):
        if keep_existing and step.token is not None:
            if report is not None:
                report.n_kept += 1
                report.token_counts[step.token] += 1
            continue
        ca = canon(step.action, canon.corpus_context(trajectory, i))
        step.token = ca.token
        step.slots = dict(ca.slots)
        if report is not None:
            report.token_counts[ca.token] += 1
            report.n_errors += "canon_error" in ca.slots
    if report is not None:
        report.n_trajectories += 1
        report.n_steps += len(trajectory.steps)
    return trajectory


def canonicalize_corpus(
    trajectories: Iterable[Trajectory],
    domain: str,
    *,
    in_place: bool = False,
    keep_existing: bool = False,
    report: CanonReport | None = None,
    show_progress: bool | None = None,
) -> list[Trajectory]:
    """Canonicalize every step of every trajectory with the canonicalizer of ``domain``.

    Returns new trajectory objects (deep copies) unless ``in_place`` is set, in which case the
    given objects are filled and returned. ``keep_existing`` leaves steps that already carry a
    token alone.

    Example:
        >>> from xtree_gym.corpus import Step, Trajectory
        >>> t = Trajectory("t0", [Step("click[b093k5jk25]"), Step("click[blue]")], True,
        ...                extra={"goal_options": {"color": "blue"}})
        >>> [s.token for s in canonicalize_corpus([t], "webshop")[0].steps]
        ['click<item>', 'click<option-color>']
        >>> t.steps[0].token is None   # the input was not touched
        True
    """
    get_canonicalizer(domain)  # fail early on an unknown domain
    items: Sequence[Trajectory] = trajectories if isinstance(trajectories, Sequence) else list(trajectories)
    out: list[Trajectory] = []
    for t in progress(items, desc=f"canon {domain}", enabled=show_progress):
        target = t if in_place else copy.deepcopy(t)
        out.append(canonicalize_trajectory(target, domain, keep_existing=keep_existing, report=report))
    return out


def canonicalize_file(
    path: str | os.PathLike[str],
    domain: str,
    out: str | os.PathLike[str],
    *,
    skip_bad: bool = False,
    keep_existing: bool = False,
    show_progress: bool | None = None,
    keep_duplicates: bool = False,
) -> CanonReport:
    """Read a corpus file, canonicalize it, write it to ``out`` atomically; returns the report.

    A file with no trajectory left to write (empty, or every line skipped under ``skip_bad``) is a
    :class:`CorpusError`, and ``out`` is not written.
    """
    refuse_overwrite(out, [path], error=CorpusError)  # through .., symlinks and hard links
    from ..corpus.formats._records import reading, writing  # formats imports this module: import late

    report = CanonReport()
    lines: list[int] = []
    with reading(path):
        trajs = list(iter_corpus(path, skip_bad=skip_bad, skipped=report.skipped, lines=lines))
    check_unique_ids(trajs, lines, path, {}, report.duplicates, keep=keep_duplicates)
    if not trajs:
        skipped = f" ({len(report.skipped)} malformed line(s) skipped)" if report.skipped else ""
        raise CorpusError(
            f"{str(path)!r} holds no trajectories{skipped}", fix="check the file (one JSON object per line)"
        )
    filled = canonicalize_corpus(
        trajs, domain, in_place=True, keep_existing=keep_existing, report=report, show_progress=show_progress
    )
    with writing(out):
        write_corpus(out, filled)
    return report
