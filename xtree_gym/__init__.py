"""xtree_gym: mine reusable, success-bearing skill trees (X-Trees) from agent trajectories.

Core (numpy only): corpus format, canonicalizers, miner, tree, tiling, matching.
Environments (``gym.make("XTree-ScienceWorld-v0")`` ...) register when gymnasium is installed.

Every public name below is imported on first use (PEP 562), so ``import xtree_gym`` -- and with it
the ``xtree`` command's start-up -- costs no numpy, simulator or trainer import until a name or a
command needs one. ``from xtree_gym import mine`` works as it always did.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._lazy import install_old_paths, lazy_exports
from .envs import register_envs, register_envs_on_import

if TYPE_CHECKING:  # the same names, eagerly, for type checkers and IDEs
    from .canon import CanonicalAction, Canonicalizer, available_domains, canonicalize, get_canonicalizer
    from .canon.corpus import canonicalize_corpus
    from .corpus.encoded import EncodedCorpus
    from .corpus.records import (
        BadLine,
        Corpus,
        Step,
        Trajectory,
        corpus_stats,
        from_hf_dataset,
        read_corpus,
        write_corpus,
    )
    from .errors import (
        CanonicalizationError,
        ConfigError,
        CorpusError,
        DependencyError,
        EnvConfigError,
        TreeFormatError,
        XTreeError,
    )
    from .mining.base import Merge
    from .mining.config import PRESETS, MinerConfig
    from .mining.matching import Match, StreamingMatcher, find_matches
    from .mining.miner import mine
    from .mining.reference import reference_mine
    from .mining.tree import Node, Segment, XTree
    from .reuserl.mdl import (
        MDLConfig,
        SkillDictionary,
        extract_dictionary,
        round_length_rewards,
        segcost_rewards,
    )
    from .rewards.bonus import BONUS_DESIGNS, DepthBonus, WebShopBonus, sequence_bonus
    from .rewards.group import RunningWinRate, group_rewards, lambda_g
    from .rewards.instances import NodeInstance, make_instances, node_instances, random_tree
    from .rewards.node import node_completion_reward


__version__ = "0.1.0"

register_envs_on_import()  # now if gymnasium is loaded, else when it is (xtree mine never loads it)
install_old_paths()  # xtree_gym.tree, xtree_gym.config, ... : the paths before the move

# public name -> module that defines it
_LAZY: dict[str, str] = {
    "CanonicalAction": "xtree_gym.canon",
    "Canonicalizer": "xtree_gym.canon",
    "available_domains": "xtree_gym.canon",
    "canonicalize": "xtree_gym.canon",
    "get_canonicalizer": "xtree_gym.canon",
    "canonicalize_corpus": "xtree_gym.canon.corpus",
    "PRESETS": "xtree_gym.mining.config",
    "MinerConfig": "xtree_gym.mining.config",
    "BadLine": "xtree_gym.corpus",
    "Corpus": "xtree_gym.corpus",
    "Step": "xtree_gym.corpus",
    "Trajectory": "xtree_gym.corpus",
    "corpus_stats": "xtree_gym.corpus",
    "from_hf_dataset": "xtree_gym.corpus",
    "read_corpus": "xtree_gym.corpus",
    "write_corpus": "xtree_gym.corpus",
    "CanonicalizationError": "xtree_gym.errors",
    "ConfigError": "xtree_gym.errors",
    "CorpusError": "xtree_gym.errors",
    "DependencyError": "xtree_gym.errors",
    "EnvConfigError": "xtree_gym.errors",
    "TreeFormatError": "xtree_gym.errors",
    "XTreeError": "xtree_gym.errors",
    "NodeInstance": "xtree_gym.rewards.instances",
    "make_instances": "xtree_gym.rewards.instances",
    "node_instances": "xtree_gym.rewards.instances",
    "random_tree": "xtree_gym.rewards.instances",
    "Match": "xtree_gym.mining.matching",
    "StreamingMatcher": "xtree_gym.mining.matching",
    "find_matches": "xtree_gym.mining.matching",
    "MDLConfig": "xtree_gym.reuserl.mdl",
    "SkillDictionary": "xtree_gym.reuserl.mdl",
    "extract_dictionary": "xtree_gym.reuserl.mdl",
    "round_length_rewards": "xtree_gym.reuserl.mdl",
    "segcost_rewards": "xtree_gym.reuserl.mdl",
    "EncodedCorpus": "xtree_gym.mining",
    "Merge": "xtree_gym.mining",
    "mine": "xtree_gym.mining",
    "reference_mine": "xtree_gym.mining",
    "BONUS_DESIGNS": "xtree_gym.rewards",
    "DepthBonus": "xtree_gym.rewards",
    "RunningWinRate": "xtree_gym.rewards",
    "WebShopBonus": "xtree_gym.rewards",
    "group_rewards": "xtree_gym.rewards",
    "lambda_g": "xtree_gym.rewards",
    "node_completion_reward": "xtree_gym.rewards",
    "sequence_bonus": "xtree_gym.rewards",
    "Node": "xtree_gym.mining.tree",
    "Segment": "xtree_gym.mining.tree",
    "XTree": "xtree_gym.mining.tree",
    "XTreeBonus": "xtree_gym.wrappers.reward",
    "InvalidActionPenalty": "xtree_gym.wrappers.reward",
    "SegCost": "xtree_gym.wrappers.mdl",
    "NodeReplayEnv": "xtree_gym.envs.node_replay",
}


def _missing_extra(exc: ModuleNotFoundError, name: str) -> Exception | None:
    """``from xtree_gym import XTreeBonus`` without gymnasium: one line naming ``xtree_gym[gym]``."""
    from .errors import dependency_error

    return dependency_error(exc, name)


__getattr__, __dir__ = lazy_exports(globals(), _LAZY, _missing_extra)

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
