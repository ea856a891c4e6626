"""The one type-and-range check of every config dataclass field (and of ``xtree eval``'s numeric flags).

:func:`check_fields` reads each field's annotation and refuses, with one :class:`ConfigError` naming
the field, its value and the fix: a value of the wrong type (YAML ``n: "2"``, ``steps: 2.5``,
``progress: "no"``, ``env_kwargs: foo``, ``output_dir: 7``), a float that is NaN or infinite
(``--lr inf``, YAML ``.nan``; also inside ``env_kwargs``), a negative seed, a non-positive timeout
and a ``max_new_tokens`` beyond :data:`MAX_NEW_TOKENS`. The per-class range checks
(``check_config``, ``SFTConfig.check``) run after it and may assume the types hold.

Example:
    >>> from dataclasses import dataclass
    >>> @dataclass
    ... class C:
    ...     n: int = 1
    ...     lr: float = 0.1
    >>> check_fields(C(n=2, lr=1))          # an int where a float is meant is fine
    >>> check_fields(C(n="2"))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    xtree_gym.errors.ConfigError: <config>: n = '2' is a str, not an integer -- fix: ...
    >>> check_fields(C(lr=float("nan")))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    xtree_gym.errors.ConfigError: <config>: lr = nan is not a finite number -- fix: ...
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import types
import typing
from collections.abc import Mapping
from typing import Any

from ...errors import ConfigError

MAX_NEW_TOKENS = 131_072
"""Largest ``max_new_tokens`` accepted (128k: beyond any context window the supported models have)."""

_KIND_NAMES = {
    int: "an integer",
    float: "a number",
    bool: "true or false",
    str: "a string",
    dict: "a mapping",
}


def _kinds(hint: Any) -> tuple[set[Any], bool]:
    """(accepted base kinds, None allowed) of an annotation."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        kinds: set[Any] = set()
        optional = False
        for arg in typing.get_args(hint):
            if arg is type(None):
                optional = True
            else:
                kinds |= _kinds(arg)[0]
        return kinds, optional
    if origin is not None:
        return {origin}, False
    return {hint}, False


def _type_ok(value: Any, kinds: set[Any]) -> bool:
    if Any in kinds or typing.Any in kinds:
        return True
    for kind in kinds:
        if kind is bool and isinstance(value, bool):
            return True
        if kind is int and isinstance(value, int) and not isinstance(value, bool):
            return True
        if kind is float and isinstance(value, (int, float)) and not isinstance(value, bool):
            return True
        if kind in (str, dict, list, tuple) and isinstance(value, kind):
            return True
        if kind in (list, tuple) and isinstance(value, (list, tuple)):
            return True
    return False


def _nonfinite(value: Any) -> Any:
    """The first non-finite float inside ``value`` (nested dicts/lists), else None."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, float) and not math.isfinite(v):
            return v
        if isinstance(v, Mapping):
            stack.extend(v.values())
        elif isinstance(v, (list, tuple)):
            stack.extend(v)
    return None


def check_fields(cfg: Any, where: str = "<config>") -> None:
    """Refuse a field of the wrong type, a non-finite float, a negative seed or an out-of-range bound."""
    hints = typing.get_type_hints(type(cfg))
    for f in dataclasses.fields(cfg):
        value = getattr(cfg, f.name)
        kinds, optional = _kinds(hints[f.name])
        if value is None:
            if optional:
                continue
            raise ConfigError(f"{f.name} = null is not allowed", where=where, fix=f"give {f.name} a value")
        if not _type_ok(value, kinds):
            want = " or ".join(_KIND_NAMES.get(k, getattr(k, "__name__", str(k))) for k in kinds)
            raise ConfigError(
                f"{f.name} = {value!r} is a {type(value).__name__}, not {want}",
                where=where,
                fix=f"write {f.name} as {want} (no quotes around numbers; true/false for switches)",
            )
        bad = _nonfinite(value)
        if bad is not None:
            raise ConfigError(
                f"{f.name} = {value!r} is not a finite number"
                if bad is value
                else f"{f.name} holds {bad!r}, not a finite number",
                where=where,
                fix=f"give {f.name} a finite value (NaN and infinity are never accepted)",
            )
        _check_bounds(f.name, value, where)


def _check_bounds(name: str, value: Any, where: str) -> None:
    if name.endswith("seed") and isinstance(value, int) and value < 0:
        raise ConfigError(f"{name} = {value!r} must be >= 0", where=where, fix="use a seed of 0 or more")
    if name.endswith("timeout") and isinstance(value, (int, float)) and value <= 0:
        raise ConfigError(
            f"{name} = {value!r} must be > 0", where=where, fix="give seconds > 0, or leave it unset for none"
        )
    if name == "max_new_tokens" and isinstance(value, int) and not 1 <= value <= MAX_NEW_TOKENS:
        raise ConfigError(
            f"max_new_tokens = {value!r} is out of range", where=where, fix=f"use 1 .. {MAX_NEW_TOKENS}"
        )


# -- argparse types for commands whose flags are not a config dataclass (xtree eval) -----------------
def finite_float(text: str) -> float:
    """argparse ``type=``: a finite float (``nan``/``inf`` refused with argparse's usual message).

    Example:
        >>> finite_float("0.5")
        0.5
        >>> finite_float("nan")
        Traceback (most recent call last):
        argparse.ArgumentTypeError: 'nan' is not a finite number
    """
    try:
        x = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(x):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return x


def non_negative_float(text: str) -> float:
    """argparse ``type=``: a finite float >= 0 (``--temperature``: 0 = greedy)."""
    x = finite_float(text)
    if x < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be >= 0")
    return x


def positive_float(text: str) -> float:
    """argparse ``type=``: a finite float > 0 (seconds of a timeout)."""
    x = finite_float(text)
    if x <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be > 0")
    return x


def timeout_seconds(text: str) -> float | None:
    """argparse ``type=``: seconds of a deadline, finite and >= 0; ``0`` lifts it (None).

    Example:
        >>> timeout_seconds("30"), timeout_seconds("0")
        (30.0, None)
    """
    x = finite_float(text)
    if x < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be >= 0 (0 = no limit)")
    return x or None


def unit_float(text: str) -> float:
    """argparse ``type=``: a finite float in (0, 1] (``--top-p``)."""
    x = finite_float(text)
    if not 0 < x <= 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be in (0, 1]")
    return x


def bounded_tokens(text: str) -> int:
    """argparse ``type=``: an integer in 1 .. :data:`MAX_NEW_TOKENS` (``--max-new-tokens``)."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if not 1 <= n <= MAX_NEW_TOKENS:
        raise argparse.ArgumentTypeError(f"{text!r} is not in 1 .. {MAX_NEW_TOKENS}")
    return n
