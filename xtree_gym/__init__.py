"""xtree_gym: mine reusable, success-bearing skill trees (X-Trees) from agent trajectories.

Core (numpy only): corpus format, canonicalizers, miner, tree, tiling, matching.
Environments (``gym.make("XTree-ScienceWorld-v0")`` ...) register when gymnasium is installed.
"""

from __future__ import annotations

from .canon import CanonicalAction, Canonicalizer, available_domains, canonicalize, get_canonicalizer
from .canon.corpus import canonicalize_corpus
from .config import PRESETS, MinerConfig
from .corpus import (
    BadLine,
    Corpus,
    Step,
    Trajectory,
    corpus_stats,
    from_hf_dataset,
    read_corpus,
    write_corpus,
)
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
from .instances import NodeInstance, make_instances, node_instances, random_tree
from .matching import Match, StreamingMatcher, find_matches
from .mdl import MDLConfig, SkillDictionary, extract_dictionary, round_length_rewards, segcost_rewards
from .mining import EncodedCorpus, Merge, mine, reference_mine
from .rewards import (
    BONUS_DESIGNS,
    DepthBonus,
    RunningWinRate,
    WebShopBonus,
    group_rewards,
    lambda_g,
    node_completion_reward,
    sequence_bonus,
)
from .tree import Node, Segment, XTree

__version__ = "0.1.0"

register_envs()

# Names that need gymnasium are imported on first use, so the core still needs numpy only.
_LAZY = {
    "XTreeBonus": "xtree_gym.wrappers.reward",
    "InvalidActionPenalty": "xtree_gym.wrappers.reward",
    "SegCost": "xtree_gym.wrappers.mdl",
    "NodeReplayEnv": "xtree_gym.envs.node_replay",
}


def __getattr__(name: str) -> object:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'xtree_gym' has no attribute {name!r}")


__all__ = [
    "BONUS_DESIGNS",
    "PRESETS",
    "BadLine",
    "CanonicalAction",
    "CanonicalizationError",
    "Canonicalizer",
    "ConfigError",
    "Corpus",
    "CorpusError",
    "DependencyError",
    "DepthBonus",
    "EncodedCorpus",
    "EnvConfigError",
    "InvalidActionPenalty",
    "MDLConfig",
    "Match",
    "Merge",
    "MinerConfig",
    "Node",
    "NodeInstance",
    "NodeReplayEnv",
    "RunningWinRate",
    "SegCost",
    "Segment",
    "SkillDictionary",
    "Step",
    "StreamingMatcher",
    "Trajectory",
    "TreeFormatError",
    "WebShopBonus",
    "XTree",
    "XTreeBonus",
    "XTreeError",
    "available_domains",
    "canonicalize",
    "canonicalize_corpus",
    "corpus_stats",
    "extract_dictionary",
    "find_matches",
    "from_hf_dataset",
    "get_canonicalizer",
    "group_rewards",
    "lambda_g",
    "make_instances",
    "mine",
    "node_completion_reward",
    "node_instances",
    "random_tree",
    "read_corpus",
    "reference_mine",
    "register_envs",
    "round_length_rewards",
    "segcost_rewards",
    "sequence_bonus",
    "write_corpus",
]
