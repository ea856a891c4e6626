"""X-Tree mining: ``mine()``, above the miners, and the rules they share.

The rules (§3.1 of the paper, made exact):

* ``f_uv`` counts NON-overlapping adjacent occurrences, scanning each trajectory left to right
  (``a a a`` holds one ``(a, a)``; ``a a a a`` holds two). Pairs never cross trajectories.
* ``succ(uv)`` is the share of those occurrences that lie in successful trajectories.
* ``X(u, v) = f_uv * (l_u + l_v) ** p_len * (succ + eps) ** p_succ`` in float64, in that order.
* A candidate has ``f >= min_freq``, ``l <= max_len``, ``f - 1 > eta * l``, ``succ >= min_succ`` and
  occurs in ``>= min_task_types`` task types.
* The best candidate has the largest ``(X, f, l)``; remaining ties go to the lexicographically
  smallest primitive expansion (tuple of token strings), then the shorter left part, then the
  smaller ``(left, right)`` symbol ids (nodes are numbered after the primitives, in merge order).
* Merging replaces those same non-overlapping occurrences, left to right.

Symbols are ints: primitives ``0..P-1`` in sorted token order (so comparing id tuples compares
token strings), node ``k`` is ``P + k``. :mod:`xtree_gym.mining.fast` produces exactly the
merges of :func:`reference_mine`, much faster; tests hold them equal.

The rooms, each importing only those below it: :mod:`xtree_gym.mining.base` (data types and
scoring rules) <- :mod:`xtree_gym.mining.reference` and :mod:`xtree_gym.mining.fast` (the miners)
<- :mod:`xtree_gym.mining.tree` <- this module. The package, :mod:`xtree_gym.mining`, exports the
miners' names, so ``from xtree_gym.mining import EncodedCorpus, reference_mine, pair_counts`` keeps working.
"""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Sequence
from typing import Any

from ..corpus.columnar import ColumnarCorpus, FastPathUnavailable, from_arrow, load_corpus
from ..corpus.encoded import EncodedCorpus
from ..corpus.records import Corpus, Trajectory, from_hf_dataset
from ..corpus.stream import StreamCorpus, read_encoded
from ..errors import CanonicalizationError, ConfigError, CorpusError
from .config import MinerConfig
from .fast import fast_mine
from .reference import reference_mine
from .tree import XTree

__all__ = ["ENGINES", "canonical_order", "canonical_sort", "load_for_mining", "mine", "trajectory_tokens"]

ENGINES = ("fast", "reference")


def trajectory_tokens(trajectories: Sequence[Trajectory], domain: str | None = None) -> list[list[str]]:
    """The token sequence of each trajectory: its stored ``token`` fields, else a canonicalizer's.

    A step that carries ``token`` is taken as is; a step without one is canonicalized by the
    canonicalizer ``domain`` names (with the trajectory as context). Without ``domain``, a missing
    token is a :class:`CanonicalizationError` naming the trajectory.
    """
    canon = None
    if domain:  # only then: `xtree mine` on tokenized files never pays for the canonicalizers' import
        from ..canon import get_canonicalizer

        canon = get_canonicalizer(domain)
    out: list[list[str]] = []
    for t in trajectories:
        tokens: list[str] = []
        for i, s in enumerate(t.steps):
            if s.token is not None:
                tokens.append(s.token)
            elif canon is not None:
                tokens.append(canon(s.action, canon.corpus_context(t, i)).token)
            else:
                raise CanonicalizationError(
                    f"trajectory {t.id!r} has steps without a 'token' and no canonicalizer was named",
                    fix="pass --domain NAME (e.g. scienceworld), or run `xtree canon` on the corpus first",
                )
        out.append(tokens)
    return out


def mine(
    trajectories: Any,
    config: MinerConfig | str = "scienceworld",
    *,
    domain: str | None = None,
    progress: bool | None = False,
    name: str = "",
    engine: str = "fast",
) -> XTree:
    """Mine an X-Tree from trajectories.

    ``trajectories`` is a sequence of :class:`Trajectory`, a :class:`Corpus`, a corpus file path (or
    list of paths: read the columnar way when every step has a token, see
    :func:`xtree_gym.corpus.columnar.load_corpus`), a :class:`~xtree_gym.corpus.columnar.ColumnarCorpus`, or a
    Hugging Face ``datasets.Dataset`` / ``pyarrow.Table`` with the corpus columns.
    ``config`` is a :class:`MinerConfig` or a preset name. Trajectories are put in a canonical
    order first (by id; content breaks ties between equal ids), so any line order of the same
    corpus gives the same tree (byte-identical file). ``engine`` is ``"fast"`` (default) or ``"reference"``.
    """
    cfg = MinerConfig.preset(config) if isinstance(config, str) else config
    if engine not in ENGINES:
        raise ConfigError(f"unknown engine {engine!r}", fix="use 'fast' or 'reference'")
    ordered, enc = _encoded(trajectories, domain)
    merges = fast_mine(enc, cfg, progress=progress) if engine == "fast" else reference_mine(enc, cfg)
    if isinstance(ordered, StreamCorpus):  # the nodes' examples: those records, read in one pass
        ordered.prefetch([m.first[0] for m in merges])
    return XTree.from_merges(merges, enc, cfg, ordered, name=name)


def _encoded(trajectories: Any, domain: str | None) -> tuple[Any, EncodedCorpus]:
    """(trajectories in canonical order, their encoding), by the columnar path when it applies."""
    if isinstance(trajectories, (str, os.PathLike)) or (
        isinstance(trajectories, list) and trajectories and isinstance(trajectories[0], (str, os.PathLike))
    ):
        trajectories = load_for_mining(trajectories)
    elif not isinstance(trajectories, (Corpus, ColumnarCorpus, StreamCorpus, list, tuple)):
        try:
            trajectories = from_arrow(trajectories)
        except (FastPathUnavailable, ImportError):
            trajectories = (
                from_hf_dataset(trajectories) if hasattr(trajectories, "__iter__") else trajectories
            )
    if isinstance(trajectories, StreamCorpus):
        return trajectories, trajectories.encoded
    if isinstance(trajectories, Corpus):
        trajectories = trajectories.trajectories
    if len(trajectories) == 0:
        raise CorpusError("the corpus is empty: nothing to mine", fix="check the corpus file(s)")
    if isinstance(trajectories, ColumnarCorpus):  # ids unique, every step has a token
        trajectories = trajectories.sort()
        enc = trajectories.encode()
        return trajectories.without_tokens(), enc  # the tokens live on in enc; frees their Arrow copy
    ordered = canonical_sort(trajectories)
    tokens = trajectory_tokens(ordered, domain)
    enc = EncodedCorpus.from_tokens(tokens, [t.success for t in ordered], [t.task for t in ordered])
    return ordered, enc


def load_for_mining(paths: Any, *, skip_bad: bool = False, **read_options: Any) -> Any:
    """Corpus files read the cheapest way that takes them: straight to the encoding
    (:func:`~xtree_gym.corpus.stream.read_encoded`), else columns or the validated objects
    (:func:`~xtree_gym.corpus.columnar.load_corpus`, which names a bad line). Every way gives the same tree.
    """
    try:
        corpus = read_encoded(paths)
        if len(corpus):
            return corpus
    except (FastPathUnavailable, ImportError):
        pass
    return load_corpus(paths, skip_bad=skip_bad, **read_options)


def canonical_sort(trajectories: Sequence[Trajectory]) -> list[Trajectory]:
    """Trajectories sorted by id; only runs of equal ids are ordered by content (:func:`canonical_order`).

    The same order as ``sorted(trajectories, key=canonical_order)``, without serializing every record.

    Example:
        >>> from xtree_gym.corpus import Step
        >>> ts = [Trajectory("b", [], True), Trajectory("a", [Step("y")], True), Trajectory("a", [Step("x")], True)]
        >>> [(t.id, t.steps[0].action if t.steps else "") for t in canonical_sort(ts)]
        [('a', 'x'), ('a', 'y'), ('b', '')]
    """
    ordered = sorted(trajectories, key=_id)
    out: list[Trajectory] = []
    for _, run in itertools.groupby(ordered, key=_id):
        group = list(run)
        out.extend(sorted(group, key=canonical_order) if len(group) > 1 else group)
    return out


def _id(t: Trajectory) -> str:
    return t.id


def canonical_order(t: Trajectory) -> tuple[str, str]:
    """The full sort key (id, then the record's sorted-key JSON); :func:`canonical_sort` uses it for ties only."""
    return (t.id, json.dumps(t.to_dict(), sort_keys=True, ensure_ascii=False))
