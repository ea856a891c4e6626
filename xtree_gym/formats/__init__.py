"""Readers that turn published trajectory sets into the corpus format, canonicalized.

=============  ==========================================================  =======================
format         what                                                        default domain
=============  ==========================================================  =======================
``agentgym``   AgentGym / AgentTraj-L conversations (``item_id``, ReAct)   from the ``item_id``
``eto``        ETO SFT conversations (``id``, ``reward``)                  ``webshop``
``agentlab``   BrowserGym / AgentLab step records (action + AXTree text)   ``browsergym``
``corpus``     this project's JSONL corpus                                 (``--domain``)
=============  ==========================================================  =======================

Example:
    >>> import json, tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "t.jsonl"
    >>> rec = {"item_id": "sciworld_1", "conversations": [
    ...     {"from": "human", "value": "You are a helpful assistant...", "loss": False},
    ...     {"from": "gpt", "value": "OK", "loss": False},
    ...     {"from": "human", "value": "Your task is to boil water."},
    ...     {"from": "gpt", "value": "Thought: go.\\nAction: open door to kitchen", "loss": True},
    ...     {"from": "human", "value": "Observation: The door is now open."}]}
    >>> _ = p.write_text(json.dumps(rec) + "\\n")
    >>> t = read_trajectories(p, "agentgym")[0]
    >>> t.env, t.goal, t.steps[0].action, t.steps[0].token, t.steps[0].observation
    ('scienceworld', 'Your task is to boil water.', 'open door to kitchen', 'open<door>', 'The door is now open.')
"""

from __future__ import annotations

import os
from collections.abc import Callable

from ..canon import available_domains
from ..canon.corpus import canonicalize_corpus
from ..corpus import Trajectory, read_corpus
from ..errors import CorpusError
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
_DEFAULT_DOMAIN = {"eto": "webshop", "agentlab": "browsergym", "browsergym": "browsergym"}


def available_formats() -> list[str]:
    return sorted(READERS)


def read_trajectories(
    path: str | os.PathLike[str], fmt: str, *, domain: str | None = None, canonicalize: bool = True
) -> list[Trajectory]:
    """Read ``path`` in format ``fmt``; canonicalize with ``domain`` (default: by format/env).

    With no ``domain``, each trajectory is canonicalized by the canonicalizer named like its
    ``env`` when one is registered (AgentGym sets ``env`` from the ``item_id``); trajectories of
    an environment without a canonicalizer keep ``token`` empty.
    """
    reader = READERS.get(fmt.lower())
    if reader is None:
        raise CorpusError(
            f"unknown trajectory format {fmt!r}", fix=f"use one of: {', '.join(available_formats())}"
        )
    trajs = reader(path)
    if not canonicalize:
        return trajs
    dom = domain or _DEFAULT_DOMAIN.get(fmt.lower())
    if dom is not None:
        return canonicalize_corpus(trajs, dom, in_place=True)
    known = set(available_domains())
    for t in trajs:
        if t.env.lower() in known:
            canonicalize_corpus([t], t.env, in_place=True, show_progress=False)
    return trajs


__all__ = ["READERS", "available_formats", "read_agentgym", "read_agentlab", "read_eto", "read_trajectories"]
