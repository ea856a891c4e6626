"""The corpus: trajectory records and their JSONL(.gz) / Parquet files, the columnar fast path, `xtree convert`.

The first room of the flow (corpus -> canon -> mining -> rewards -> envs/wrappers -> agents): it
imports nothing else of the package but :mod:`xtree_gym.errors` and :mod:`xtree_gym.progress`.

* :mod:`.records` -- ``Step``, ``Trajectory``, ``Corpus``; ``read_corpus`` / ``write_corpus`` / ``iter_corpus``.
* :mod:`.io` -- atomic writes, strict JSON lines, bounded decoding, ``read_records`` / ``write_records``.
* :mod:`.arrow_io`, :mod:`.columnar` -- Parquet I/O and file -> Arrow -> :class:`EncodedCorpus` in bulk.
* :mod:`.encoded` -- :class:`EncodedCorpus`, a corpus as int arrays (what the miners read).
* :mod:`.formats` -- readers of published trajectory sets (AgentGym, ETO, AgentLab).
* :mod:`.cli` -- ``xtree convert``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:  # the same names, eagerly, for type checkers and IDEs
    from .columnar import ColumnarCorpus, load_corpus
    from .encoded import EncodedCorpus
    from .records import (
        BadLine,
        Corpus,
        Step,
        Trajectory,
        check_unique_ids,
        corpus_stats,
        from_hf_dataset,
        iter_corpus,
        read_corpus,
        step_from_dict,
        trajectory_from_dict,
        write_corpus,
    )

_EXPORTS = {  # public name -> module that defines it (imported on first use)
    "ColumnarCorpus": "xtree_gym.corpus.columnar",
    "load_corpus": "xtree_gym.corpus.columnar",
    "EncodedCorpus": "xtree_gym.corpus.encoded",
    "BadLine": "xtree_gym.corpus.records",
    "Corpus": "xtree_gym.corpus.records",
    "Step": "xtree_gym.corpus.records",
    "Trajectory": "xtree_gym.corpus.records",
    "check_unique_ids": "xtree_gym.corpus.records",
    "corpus_stats": "xtree_gym.corpus.records",
    "from_hf_dataset": "xtree_gym.corpus.records",
    "iter_corpus": "xtree_gym.corpus.records",
    "read_corpus": "xtree_gym.corpus.records",
    "step_from_dict": "xtree_gym.corpus.records",
    "trajectory_from_dict": "xtree_gym.corpus.records",
    "write_corpus": "xtree_gym.corpus.records",
}

__getattr__, __dir__ = lazy_exports(globals(), _EXPORTS)

__all__ = [
    "BadLine",
    "ColumnarCorpus",
    "Corpus",
    "EncodedCorpus",
    "Step",
    "Trajectory",
    "check_unique_ids",
    "corpus_stats",
    "from_hf_dataset",
    "iter_corpus",
    "load_corpus",
    "read_corpus",
    "step_from_dict",
    "trajectory_from_dict",
    "write_corpus",
]
