"""Readers that turn published trajectory sets into the corpus format (tokens are filled by
:func:`xtree_gym.canon.formats.read_trajectories`, which canonicalizes what these read).

=============  ==========================================================  =======================
format         what                                                        default domain
=============  ==========================================================  =======================
``agentgym``   AgentGym / AgentTraj-L conversations (``item_id``, ReAct)   from the ``item_id``
``eto``        ETO SFT conversations (``id``, ``reward``)                  ``webshop``
``agentlab``   BrowserGym / AgentLab step records (action + AXTree text)   ``browsergym``
``corpus``     this project's JSONL corpus                                 (``--domain``)
=============  ==========================================================  =======================
"""

from __future__ import annotations

import os
from collections.abc import Callable

from ...errors import CorpusError
from ..records import Trajectory, read_corpus
from .agentlab import read_agentlab
from .conversations import read_agentgym, read_eto

Reader = Callable[[str | os.PathLike[str]], list[Trajectory]]

READERS: dict[str, Reader] = {  # format name -> reader
    "agentgym": read_agentgym,
    "agenttraj": read_agentgym,
    "eto": read_eto,
    "agentlab": read_agentlab,
    "browsergym": read_agentlab,
    "corpus": lambda p: list(read_corpus(p)),
}
DEFAULT_DOMAIN = {"eto": "webshop", "agentlab": "browsergym", "browsergym": "browsergym"}
"""The canonicalizer a format's trajectories get when no domain is given (others: by their ``env``)."""


def available_formats() -> list[str]:
    return sorted(READERS)


def read_raw(path: str | os.PathLike[str], fmt: str) -> list[Trajectory]:
    """Read ``path`` in format ``fmt`` as it is (no tokens filled); an unknown format is one clear error."""
    reader = READERS.get(fmt.lower())
    if reader is None:
        raise CorpusError(
            f"unknown trajectory format {fmt!r}", fix=f"use one of: {', '.join(available_formats())}"
        )
    return reader(path)


__all__ = [
    "DEFAULT_DOMAIN",
    "READERS",
    "available_formats",
    "read_agentgym",
    "read_agentlab",
    "read_eto",
    "read_raw",
]
