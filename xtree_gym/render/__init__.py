"""The tree as text and as a picture: skill cards, retrieval, in-context advice, HTML report, PNG figures.

Nothing here imports matplotlib until :func:`xtree_gym.render.figures.write_figures` runs.
"""

from __future__ import annotations

from .advice import Advice, Advisor, utterance_overlap
from .cards import Card, empty_card, family_cards, generic_card, gloss, scramble_card, webshop_cards
from .gaps import CorpusGaps, find_gaps
from .report import build_report
from .retrieval import FamilyIndex, SkillBank, build_skill_bank, webshop_keys
from .stats import CorpusUsage

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
