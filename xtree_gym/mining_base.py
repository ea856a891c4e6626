"""The miners' shared floor: the data types (:class:`EncodedCorpus`, :class:`Merge`) and the scoring rules.

Everything that mines (:mod:`xtree_gym.mining_reference`, :mod:`xtree_gym.mining_fast`) or builds
a tree from merges (:mod:`xtree_gym.tree`) imports these from here; this module imports no other
part of the miner, so the rooms above it only look down. The rules themselves are documented in
:mod:`xtree_gym.mining`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .config import MinerConfig
from .errors import ConfigError

# ----------------------------------------------------------------------------- scoring rules


def x_score(f: int, length: int, succ: float, config: MinerConfig) -> float:
    """Eq. 1: ``f * length**p_len * (succ + eps)**p_succ`` in float64, in that order.

    Example:
        >>> x_score(10, 3, 0.5, MinerConfig(eps=0.0))
        15.0
    """
    return float(f) * float(length) ** config.p_len * (succ + config.eps) ** config.p_succ


def is_candidate(f: int, length: int, succ: float, n_task_types: int, config: MinerConfig) -> bool:
    """The candidate rule: frequency, length cap, compression, success floor, task-type spread.

    Example:
        >>> cfg = MinerConfig(eta=0.5, min_freq=2)
        >>> is_candidate(3, 2, 1.0, 1, cfg), is_candidate(2, 2, 1.0, 1, cfg)  # 2 > 1.0; 1 > 1.0 fails
        (True, False)
    """
    return (
        f >= config.min_freq
        and length <= config.max_len
        and f - 1 > config.eta * length
        and succ >= config.min_succ
        and n_task_types >= config.min_task_types
    )


# ----------------------------------------------------------------------------- data types


@dataclass(frozen=True)
class Merge:
    """One merge of the miner: ``left + right -> symbol`` with its statistics at merge time."""

    left: int
    right: int
    symbol: int
    count: int
    """f_uv when merged."""
    success_count: int
    """How many of those occurrences lie in successful trajectories."""
    task_types: tuple[int, ...]
    """Sorted task-type ids the occurrences lie in."""
    score: float
    """The X-Score when merged."""
    first: tuple[int, int]
    """(trajectory index, primitive start index) of the leftmost occurrence, for the node's example."""


@dataclass
class EncodedCorpus:
    """Token sequences as ints, ready for either miner.

    ``flat`` holds every trajectory's primitive ids back to back; trajectory ``i`` is
    ``flat[offsets[i]:offsets[i + 1]]``.
    """

    flat: np.ndarray  # (n_tokens,) int32
    offsets: np.ndarray  # (n_trajectories + 1,) int64
    success: np.ndarray  # (n_trajectories,) bool
    task: np.ndarray  # (n_trajectories,) int32 task-type id
    vocab: list[str]  # primitive id -> token string, sorted
    task_names: list[str]  # task-type id -> name, sorted

    @property
    def n_trajectories(self) -> int:
        return len(self.offsets) - 1

    def sequences(self) -> list[list[int]]:
        return [self.flat[a:b].tolist() for a, b in zip(self.offsets[:-1], self.offsets[1:])]

    @classmethod
    def from_tokens(
        cls, sequences: Sequence[Sequence[str]], success: Sequence[bool], tasks: Sequence[str] | None = None
    ) -> EncodedCorpus:
        """Encode string token sequences (one success flag and task type per sequence).

        Example:
            >>> enc = EncodedCorpus.from_tokens([["b", "a"], ["a"]], [True, False])
            >>> enc.vocab, enc.flat.tolist(), enc.offsets.tolist()
            (['a', 'b'], [1, 0, 0], [0, 2, 3])
        """
        if len(success) != len(sequences) or (tasks is not None and len(tasks) != len(sequences)):
            raise ConfigError("sequences, success and tasks must have the same length")
        tasks = tasks if tasks is not None else [""] * len(sequences)
        vocab = sorted({t for seq in sequences for t in seq})
        index = {t: i for i, t in enumerate(vocab)}
        task_names = sorted(set(tasks))
        task_index = {t: i for i, t in enumerate(task_names)}
        lengths = np.fromiter((len(s) for s in sequences), dtype=np.int64, count=len(sequences))
        offsets = np.zeros(len(sequences) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        flat = np.fromiter(
            (index[t] for seq in sequences for t in seq), dtype=np.int32, count=int(offsets[-1])
        )
        return cls(
            flat=flat,
            offsets=offsets,
            success=np.asarray(success, dtype=bool),
            task=np.fromiter((task_index[t] for t in tasks), dtype=np.int32, count=len(tasks)),
            vocab=vocab,
            task_names=task_names,
        )
