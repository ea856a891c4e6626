"""The miner: X-Score merges over a corpus's tokens, the tree they build, tiling and matching.

* :mod:`.config` -- :class:`MinerConfig` and its presets.
* :mod:`.base` -- the shared scoring rules (``x_score``, ``is_candidate``) and :class:`Merge`.
* :mod:`.reference` -- the slow, obviously-correct miner; :mod:`.fast` -- the fast one, tested equal.
* :mod:`.miner` -- ``mine()`` above both: corpus files or trajectories in, an :class:`XTree` out.
* :mod:`.tree` -- :class:`XTree`, :class:`Node`, :class:`Segment`, the tree file and tiling.
* :mod:`.matching` -- Aho-Corasick ``find_matches`` and the :class:`StreamingMatcher` the bonus feeds.
* :mod:`.cli` -- ``xtree mine``, ``show``, ``tile``, ``stats``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:  # the same names, eagerly, for type checkers and IDEs
    from ..corpus.encoded import EncodedCorpus
    from .base import Merge, is_candidate, x_score
    from .config import PRESETS, MinerConfig
    from .fast import fast_mine
    from .matching import Match, StreamingMatcher, find_matches
    from .miner import ENGINES, canonical_order, canonical_sort, mine, trajectory_tokens
    from .reference import (
        corpus_pair_stats,
        merge_everywhere,
        merge_pair,
        merged_starts,
        pair_counts,
        pair_positions,
        positions_by_pair,
        reference_mine,
    )
    from .tree import Node, Segment, XTree

_EXPORTS = {  # public name -> module that defines it (imported on first use)
    "EncodedCorpus": "xtree_gym.corpus.encoded",
    "Merge": "xtree_gym.mining.base",
    "is_candidate": "xtree_gym.mining.base",
    "x_score": "xtree_gym.mining.base",
    "MinerConfig": "xtree_gym.mining.config",
    "PRESETS": "xtree_gym.mining.config",
    "fast_mine": "xtree_gym.mining.fast",
    "Match": "xtree_gym.mining.matching",
    "StreamingMatcher": "xtree_gym.mining.matching",
    "find_matches": "xtree_gym.mining.matching",
    "ENGINES": "xtree_gym.mining.miner",
    "canonical_order": "xtree_gym.mining.miner",
    "canonical_sort": "xtree_gym.mining.miner",
    "mine": "xtree_gym.mining.miner",
    "trajectory_tokens": "xtree_gym.mining.miner",
    "corpus_pair_stats": "xtree_gym.mining.reference",
    "merge_everywhere": "xtree_gym.mining.reference",
    "merge_pair": "xtree_gym.mining.reference",
    "merged_starts": "xtree_gym.mining.reference",
    "pair_counts": "xtree_gym.mining.reference",
    "pair_positions": "xtree_gym.mining.reference",
    "positions_by_pair": "xtree_gym.mining.reference",
    "reference_mine": "xtree_gym.mining.reference",
    "Node": "xtree_gym.mining.tree",
    "Segment": "xtree_gym.mining.tree",
    "XTree": "xtree_gym.mining.tree",
}

__getattr__, __dir__ = lazy_exports(globals(), _EXPORTS)

__all__ = [
    "ENGINES",
    "PRESETS",
    "EncodedCorpus",
    "Match",
    "Merge",
    "MinerConfig",
    "Node",
    "Segment",
    "StreamingMatcher",
    "XTree",
    "canonical_order",
    "canonical_sort",
    "corpus_pair_stats",
    "fast_mine",
    "find_matches",
    "is_candidate",
    "merge_everywhere",
    "merge_pair",
    "merged_starts",
    "mine",
    "pair_counts",
    "pair_positions",
    "positions_by_pair",
    "reference_mine",
    "trajectory_tokens",
    "x_score",
]
