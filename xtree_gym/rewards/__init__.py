"""Rewards from the tree: b_v designs, Eq. 3 group rewards and the designs beside it, Eq. 2, node instances.

* :mod:`.constants` -- Table 7's values (α, γ, λ0, w_ref, the invalid-action penalty).
* :mod:`.bonus` -- node bonus designs b_v and the nesting rule (:class:`EpisodeBonus`, ``sequence_bonus``).
* :mod:`.group` -- Eq. 3: ``lambda_g``, ``group_rewards``, :class:`RunningWinRate`.
* :mod:`.modes` -- bonus designs beside Eq. 3 (normalized, gated, annealed; contrastive and potential, issue 34).
* :mod:`.contrastive` -- node values by what their completion separates, potential-based shaping (issue 34).
* :mod:`.node` -- Eq. 2: the offline node-instance reward and its ablations.
* :mod:`.instances` -- node instances from a gold corpus and the ablation controls (random span, random tree).
* :mod:`.adapters` -- the same rewards as trainer reward functions (TRL-style, verl-agent).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:  # the same names, eagerly, for type checkers and IDEs
    from .adapters import XTreeRewardFunction, completion_actions, grouped_rewards, verl_agent_rewards
    from .bonus import (
        BONUS_DESIGNS,
        MATCHING,
        BonusContext,
        BonusDesign,
        BonusResult,
        DepthBonus,
        EpisodeBonus,
        NodeLike,
        WebShopBonus,
        default_nesting,
        goal_steps,
        resolve_bonus,
        sequence_bonus,
    )
    from .constants import ALPHA, GAMMA, INVALID_PENALTY, LAMBDA0, W_REF
    from .contrastive import NodeValueBonus, contrastive_values, corpus_values
    from .group import RunningWinRate, group_rewards, lambda_g
    from .instances import NodeInstance, make_instances, node_instances, random_tree
    from .modes import BONUS_MODES, max_episode_bonus, shaped_group_rewards
    from .node import NODE_REWARDS, matched_steps, node_completion_reward, node_reward, normalize_action

_EXPORTS = {  # public name -> module that defines it (imported on first use)
    "XTreeRewardFunction": "xtree_gym.rewards.adapters",
    "completion_actions": "xtree_gym.rewards.adapters",
    "grouped_rewards": "xtree_gym.rewards.adapters",
    "verl_agent_rewards": "xtree_gym.rewards.adapters",
    "BONUS_DESIGNS": "xtree_gym.rewards.bonus",
    "BonusContext": "xtree_gym.rewards.bonus",
    "BonusDesign": "xtree_gym.rewards.bonus",
    "BonusResult": "xtree_gym.rewards.bonus",
    "DepthBonus": "xtree_gym.rewards.bonus",
    "EpisodeBonus": "xtree_gym.rewards.bonus",
    "MATCHING": "xtree_gym.rewards.bonus",
    "NodeLike": "xtree_gym.rewards.bonus",
    "WebShopBonus": "xtree_gym.rewards.bonus",
    "default_nesting": "xtree_gym.rewards.bonus",
    "goal_steps": "xtree_gym.rewards.bonus",
    "resolve_bonus": "xtree_gym.rewards.bonus",
    "sequence_bonus": "xtree_gym.rewards.bonus",
    "ALPHA": "xtree_gym.rewards.constants",
    "GAMMA": "xtree_gym.rewards.constants",
    "INVALID_PENALTY": "xtree_gym.rewards.constants",
    "LAMBDA0": "xtree_gym.rewards.constants",
    "W_REF": "xtree_gym.rewards.constants",
    "NodeValueBonus": "xtree_gym.rewards.contrastive",
    "contrastive_values": "xtree_gym.rewards.contrastive",
    "corpus_values": "xtree_gym.rewards.contrastive",
    "RunningWinRate": "xtree_gym.rewards.group",
    "group_rewards": "xtree_gym.rewards.group",
    "lambda_g": "xtree_gym.rewards.group",
    "NodeInstance": "xtree_gym.rewards.instances",
    "make_instances": "xtree_gym.rewards.instances",
    "node_instances": "xtree_gym.rewards.instances",
    "random_tree": "xtree_gym.rewards.instances",
    "BONUS_MODES": "xtree_gym.rewards.modes",
    "max_episode_bonus": "xtree_gym.rewards.modes",
    "shaped_group_rewards": "xtree_gym.rewards.modes",
    "NODE_REWARDS": "xtree_gym.rewards.node",
    "matched_steps": "xtree_gym.rewards.node",
    "node_completion_reward": "xtree_gym.rewards.node",
    "node_reward": "xtree_gym.rewards.node",
    "normalize_action": "xtree_gym.rewards.node",
}

__getattr__, __dir__ = lazy_exports(globals(), _EXPORTS)

__all__ = [
    "ALPHA",
    "BONUS_DESIGNS",
    "BONUS_MODES",
    "GAMMA",
    "INVALID_PENALTY",
    "LAMBDA0",
    "MATCHING",
    "NODE_REWARDS",
    "W_REF",
    "BonusContext",
    "BonusDesign",
    "BonusResult",
    "DepthBonus",
    "EpisodeBonus",
    "NodeInstance",
    "NodeLike",
    "NodeValueBonus",
    "RunningWinRate",
    "WebShopBonus",
    "XTreeRewardFunction",
    "completion_actions",
    "contrastive_values",
    "corpus_values",
    "default_nesting",
    "goal_steps",
    "group_rewards",
    "grouped_rewards",
    "lambda_g",
    "make_instances",
    "matched_steps",
    "max_episode_bonus",
    "node_completion_reward",
    "node_instances",
    "node_reward",
    "normalize_action",
    "random_tree",
    "resolve_bonus",
    "sequence_bonus",
    "shaped_group_rewards",
    "verl_agent_rewards",
]
