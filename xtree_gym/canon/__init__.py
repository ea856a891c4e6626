"""Canonicalizers by domain name, behind one function: ``canonicalize(domain, action, context)``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import CanonicalizationError
from .base import CanonicalAction, Canonicalizer, catch_all, parse_token_form

_REGISTRY: dict[str, Canonicalizer] = {}  # domain name -> canonicalizer


def register_canonicalizer(canon: Canonicalizer, *aliases: str) -> Canonicalizer:
    """Make ``canon`` available under its ``name`` (and any aliases)."""
    for name in (canon.name, *aliases):
        _REGISTRY[name.lower()] = canon
    return canon


def get_canonicalizer(domain: str) -> Canonicalizer:
    """The canonicalizer registered under ``domain`` (case-insensitive)."""
    try:
        return _REGISTRY[domain.lower()]
    except KeyError:
        raise CanonicalizationError(
            f"unknown domain {domain!r}",
            fix=f"use one of: {', '.join(available_domains())}",
        ) from None


def available_domains() -> list[str]:
    return sorted(_REGISTRY)


def canonicalize(domain: str, action: str, context: Mapping[str, Any] | None = None) -> CanonicalAction:
    """Canonicalize one raw action of ``domain``.

    Example:
        >>> canonicalize("generic", "jump over the fence").token
        'jump<over the fence>'
    """
    return get_canonicalizer(domain)(action, context)


register_canonicalizer(Canonicalizer())

# Domain modules register themselves on import. A module absent from this build is skipped.
_DOMAIN_MODULES = (
    "scienceworld",
    "webshop",
    "browsergym",
    "miniwob",
    "countdown",
    "twcooking",
    "alfworld",
    "discrete",
)


def _load_domains() -> None:
    import importlib

    for mod in _DOMAIN_MODULES:
        full = f"{__name__}.{mod}"
        try:
            importlib.import_module(full)
        except ModuleNotFoundError as exc:
            if exc.name != full:
                raise


_load_domains()

__all__ = [
    "CanonicalAction",
    "Canonicalizer",
    "available_domains",
    "canonicalize",
    "catch_all",
    "get_canonicalizer",
    "parse_token_form",
    "register_canonicalizer",
]
