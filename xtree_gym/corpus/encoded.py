"""A corpus encoded for mining: every trajectory's tokens as ints, back to back (what both miners read)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import ConfigError


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
