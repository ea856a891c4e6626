"""Published trajectory sets read and canonicalized: the readers of :mod:`xtree_gym.corpus.formats`, then
:func:`canonicalize_corpus` with the format's (or each trajectory's) domain.

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

from ..corpus.formats import (
    DEFAULT_DOMAIN,
    READERS,
    available_formats,
    read_agentgym,
    read_agentlab,
    read_eto,
    read_raw,
)
from ..corpus.records import Trajectory
from . import available_domains
from .corpus import canonicalize_corpus


def read_trajectories(
    path: str | os.PathLike[str], fmt: str, *, domain: str | None = None, canonicalize: bool = True
) -> list[Trajectory]:
    """Read ``path`` in format ``fmt``; canonicalize with ``domain`` (default: by format/env).

    With no ``domain``, each trajectory is canonicalized by the canonicalizer named like its
    ``env`` when one is registered (AgentGym sets ``env`` from the ``item_id``); trajectories of
    an environment without a canonicalizer keep ``token`` empty.
    """
    trajs = read_raw(path, fmt)
    if not canonicalize:
        return trajs
    dom = domain or DEFAULT_DOMAIN.get(fmt.lower())
    if dom is not None:
        return canonicalize_corpus(trajs, dom, in_place=True)
    known = set(available_domains())
    for t in trajs:
        if t.env.lower() in known:
            canonicalize_corpus([t], t.env, in_place=True, show_progress=False)
    return trajs


__all__ = ["READERS", "available_formats", "read_agentgym", "read_agentlab", "read_eto", "read_trajectories"]
