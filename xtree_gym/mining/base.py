"""The miners' shared floor: :class:`Merge` and the scoring rules.

Everything that mines (:mod:`xtree_gym.mining.reference`, :mod:`xtree_gym.mining.fast`) or builds
a tree from merges (:mod:`xtree_gym.mining.tree`) imports these from here; this module imports no other
part of the miner, so the rooms above it only look down. The miners' input,
:class:`~xtree_gym.corpus.encoded.EncodedCorpus`, lives with the corpus (the columnar reader builds it).
The rules themselves are documented in :mod:`xtree_gym.mining.miner`.
"""

from __future__ import annotations

from dataclasses import dataclass

from .config import MinerConfig

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
