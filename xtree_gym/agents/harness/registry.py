"""Which harness an env domain trains and evaluates with by default (``--harness`` overrides it).

One entry per registered env domain (:data:`xtree_gym.envs.ENV_SPECS`); a domain with none is one
:class:`~xtree_gym.errors.ConfigError` naming ``--harness`` instead of a silent fallback (the old
``browsergym`` default made every Countdown turn invalid and every advantage 0).
"""

from __future__ import annotations

from ...errors import ConfigError
from .base import harness_names

DEFAULT_HARNESS: dict[str, str] = {
    "scienceworld": "rlvmr",
    "webshop": "verl-agent",
    "miniwob": "browsergym",
    "webarena": "browsergym",
    "openurl": "browsergym",
    "countdown": "countdown",
    "twcooking": "textgame",
    "alfworld": "textgame",
    "nodereplay": "replay",
}
"""Env domain (``env_domain(env_id)``) -> harness name."""


def harness_for_domain(domain: str) -> str:
    """The default harness of ``domain``; one clear error when it has none.

    Example:
        >>> harness_for_domain("webshop")
        'verl-agent'
        >>> harness_for_domain("mygame")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        xtree_gym.errors.ConfigError: env domain 'mygame' has no default harness -- fix: pass --harness NAME ...
    """
    name = DEFAULT_HARNESS.get(domain.lower())
    if name is None:
        raise ConfigError(
            f"env domain {domain!r} has no default harness",
            fix=f"pass --harness NAME (one of: {', '.join(harness_names())})",
        )
    return name
