"""ReuseRL, the miner's sibling: an MDL skill dictionary, its segmentation cost and the GRPO shaping.

* :mod:`.mdl` -- :class:`MDLConfig`, :class:`SkillDictionary`, ``extract_dictionary`` (and its reference),
  ``seg`` / ``bdl`` / ``seg_cost``, ``segcost_rewards``, ``round_length_rewards``, :class:`ReuseRLShaper`.
* :mod:`.fast` -- the fast E-step (greedy phrases, vectorised segmentation), tested equal to the reference.
* :mod:`.cli` -- ``xtree mdl``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:  # the same names, eagerly, for type checkers and IDEs
    from .mdl import (
        SMALL_CORPUS,
        BruteForceResult,
        GroupShaping,
        MDLConfig,
        Phrase,
        ReuseRLShaper,
        SkillDictionary,
        bdl,
        brute_force_dictionary,
        dict_cost,
        extract_dictionary,
        extract_dictionary_reference,
        pair_positions_k,
        phrase_cost,
        round_length_rewards,
        seg,
        seg_cost,
        segcost_rewards,
        segment,
        shaped_return,
        skill_alphabet,
        substrings,
    )

_EXPORTS = {  # public name -> module that defines it (imported on first use)
    "BruteForceResult": "xtree_gym.reuserl.mdl",
    "GroupShaping": "xtree_gym.reuserl.mdl",
    "MDLConfig": "xtree_gym.reuserl.mdl",
    "Phrase": "xtree_gym.reuserl.mdl",
    "ReuseRLShaper": "xtree_gym.reuserl.mdl",
    "SMALL_CORPUS": "xtree_gym.reuserl.mdl",
    "SkillDictionary": "xtree_gym.reuserl.mdl",
    "bdl": "xtree_gym.reuserl.mdl",
    "brute_force_dictionary": "xtree_gym.reuserl.mdl",
    "dict_cost": "xtree_gym.reuserl.mdl",
    "extract_dictionary": "xtree_gym.reuserl.mdl",
    "extract_dictionary_reference": "xtree_gym.reuserl.mdl",
    "pair_positions_k": "xtree_gym.reuserl.mdl",
    "phrase_cost": "xtree_gym.reuserl.mdl",
    "round_length_rewards": "xtree_gym.reuserl.mdl",
    "seg": "xtree_gym.reuserl.mdl",
    "seg_cost": "xtree_gym.reuserl.mdl",
    "segcost_rewards": "xtree_gym.reuserl.mdl",
    "segment": "xtree_gym.reuserl.mdl",
    "shaped_return": "xtree_gym.reuserl.mdl",
    "skill_alphabet": "xtree_gym.reuserl.mdl",
    "substrings": "xtree_gym.reuserl.mdl",
}

__getattr__, __dir__ = lazy_exports(globals(), _EXPORTS)

__all__ = [
    "SMALL_CORPUS",
    "BruteForceResult",
    "GroupShaping",
    "MDLConfig",
    "Phrase",
    "ReuseRLShaper",
    "SkillDictionary",
    "bdl",
    "brute_force_dictionary",
    "dict_cost",
    "extract_dictionary",
    "extract_dictionary_reference",
    "pair_positions_k",
    "phrase_cost",
    "round_length_rewards",
    "seg",
    "seg_cost",
    "segcost_rewards",
    "segment",
    "shaped_return",
    "skill_alphabet",
    "substrings",
]
