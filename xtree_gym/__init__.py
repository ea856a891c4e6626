"""xtree_gym: mine reusable, success-bearing skill trees (X-Trees) from agent trajectories.

Core (numpy only): corpus format, canonicalizers, miner, tree, tiling, matching.
Environments (``gym.make("XTree-ScienceWorld-v0")`` ...) register when gymnasium is installed.
"""

from __future__ import annotations

from .canon import CanonicalAction, Canonicalizer, available_domains, canonicalize, get_canonicalizer
from .config import PRESETS, MinerConfig
from .corpus import BadLine, Corpus, Step, Trajectory, corpus_stats, from_hf_dataset, read_corpus, write_corpus
from .envs import register_envs
from .errors import (
    CanonicalizationError,
    ConfigError,
    CorpusError,
    DependencyError,
    EnvConfigError,
    TreeFormatError,
    XTreeError,
)
from .matching import Match, StreamingMatcher, find_matches
from .mining import EncodedCorpus, Merge, mine, reference_mine
from .tree import Node, Segment, XTree

__version__ = "0.1.0"

register_envs()

__all__ = [
    "PRESETS",
    "BadLine",
    "CanonicalAction",
    "CanonicalizationError",
    "Canonicalizer",
    "ConfigError",
    "Corpus",
    "CorpusError",
    "DependencyError",
    "EncodedCorpus",
    "EnvConfigError",
    "Match",
    "Merge",
    "MinerConfig",
    "Node",
    "Segment",
    "Step",
    "StreamingMatcher",
    "Trajectory",
    "TreeFormatError",
    "XTree",
    "XTreeError",
    "available_domains",
    "canonicalize",
    "corpus_stats",
    "find_matches",
    "from_hf_dataset",
    "get_canonicalizer",
    "mine",
    "read_corpus",
    "reference_mine",
    "register_envs",
    "write_corpus",
]
