"""The tree as text and as a picture: skill cards, retrieval, in-context advice, HTML report, PNG figures.

Nothing here imports matplotlib until :func:`xtree_gym.render.figures.write_figures` runs, and each
name below is imported on first use (so ``xtree report --help`` starts without numpy).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from .advice import Advice, Advisor, utterance_overlap
    from .cards import Card, empty_card, family_cards, generic_card, gloss, scramble_card, webshop_cards
    from .gaps import CorpusGaps, find_gaps
    from .report import build_report
    from .retrieval import FamilyIndex, SkillBank, build_skill_bank, webshop_keys
    from .stats import CorpusUsage

_EXPORTS = {
    "Advice": "xtree_gym.render.advice",
    "Advisor": "xtree_gym.render.advice",
    "utterance_overlap": "xtree_gym.render.advice",
    "Card": "xtree_gym.render.cards",
    "empty_card": "xtree_gym.render.cards",
    "family_cards": "xtree_gym.render.cards",
    "generic_card": "xtree_gym.render.cards",
    "gloss": "xtree_gym.render.cards",
    "scramble_card": "xtree_gym.render.cards",
    "webshop_cards": "xtree_gym.render.cards",
    "CorpusGaps": "xtree_gym.render.gaps",
    "find_gaps": "xtree_gym.render.gaps",
    "build_report": "xtree_gym.render.report",
    "FamilyIndex": "xtree_gym.render.retrieval",
    "SkillBank": "xtree_gym.render.retrieval",
    "build_skill_bank": "xtree_gym.render.retrieval",
    "webshop_keys": "xtree_gym.render.retrieval",
    "CorpusUsage": "xtree_gym.render.stats",
}
__getattr__, __dir__ = lazy_exports(globals(), _EXPORTS)

__all__ = [
    "Advice",
    "Advisor",
    "Card",
    "CorpusGaps",
    "CorpusUsage",
    "FamilyIndex",
    "SkillBank",
    "build_report",
    "build_skill_bank",
    "empty_card",
    "family_cards",
    "find_gaps",
    "generic_card",
    "gloss",
    "scramble_card",
    "utterance_overlap",
    "webshop_cards",
    "webshop_keys",
]
