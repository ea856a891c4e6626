"""Countdown-Stepwise: the 26 target-relative skills of ReuseRL (App. 13.3).

An action is ``op(<op>, n1, n2)`` (``<op>`` one of ``+ - * /`` or ``add sub mul div``; the infix
``n1 <op> n2`` is accepted too), ``rollback`` or ``reset``. Each operand gets a role relative to
the target ``T``: ``near_target`` when ``|n - T| <= 0.10 |T|``, ``small`` when below that band,
``large`` above it. The two roles are sorted alphabetically (the operation is treated as unordered),
giving ``4 x 6 = 24`` operation skills, plus Rollback and Reset.

Tokens: ``sub<large-small>`` (paper label ``OP_Sub-large-small``), ``rollback<pool>``,
``reset<pool>``. Context: ``{"target": int, "pool": [int, ...]}`` (only ``target`` is needed; a
numeric string such as ``"24"`` is read as its number, and a missing or non-numeric target gives
the role ``unknown``, e.g. ``sub<unknown>``, with the given value kept in ``slots["target"]``).
The ±10 % band is computed exactly (rationals), so ``59.4`` is near a target of ``54``.
A string that parses as none of these gets ``invalid<action>`` -- outside the 26-skill alphabet.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from . import register_canonicalizer
from .base import CanonicalAction, Canonicalizer

if TYPE_CHECKING:
    from ..corpus.records import Trajectory

OPS = {"+": "add", "-": "sub", "*": "mul", "/": "div"}  # symbol -> verb
_WORDS = {"add": "+", "sub": "-", "mul": "*", "div": "/", "x": "*", "×": "*", "÷": "/", "−": "-"}
ROLES = ("large", "near_target", "small")
ROLE_PAIRS = tuple(f"{a}-{b}" for i, a in enumerate(ROLES) for b in ROLES[i:])  # 6 sorted pairs
SKILLS = (*(f"{v}<{p}>" for v in OPS.values() for p in ROLE_PAIRS), "rollback<pool>", "reset<pool>")
"""The 26 skill tokens, in a fixed order."""

_NUM = r"(-?\d+(?:\.\d+)?)"
_OP = r"([-+*/x×÷−]|add|sub|mul|div)"
_CALL = re.compile(rf"^\s*op\s*\(\s*{_OP}\s*,\s*{_NUM}\s*,\s*{_NUM}\s*\)\s*;?\s*$", re.I)
_INFIX = re.compile(rf"^\s*{_NUM}\s*{_OP}\s*{_NUM}\s*(?:=\s*{_NUM}\s*)?;?\s*$", re.I)


def parse_action(action: str) -> tuple[str, Fraction, Fraction] | str | None:
    """``(op symbol, n1, n2)``, ``"rollback"``, ``"reset"`` or None when unparsable.

    Example:
        >>> parse_action("op(-, 80, 28)"), parse_action(" Rollback "), parse_action("80 x 2")
        (('-', Fraction(80, 1), Fraction(28, 1)), 'rollback', ('*', Fraction(80, 1), Fraction(2, 1)))
        >>> parse_action("hello") is None
        True
    """
    text = action.strip()
    low = text.lower().rstrip(";").strip()
    if low in ("rollback", "rollback()", "undo"):
        return "rollback"
    if low in ("reset", "reset()"):
        return "reset"
    m = _CALL.match(text)
    if m:
        op, a, b = m.group(1), m.group(2), m.group(3)
    else:
        m = _INFIX.match(text)
        if not m:
            return None
        a, op, b = m.group(1), m.group(2), m.group(3)
    op = _WORDS.get(op.lower(), op)
    return op, Fraction(a), Fraction(b)


def role(n: float | Fraction, target: float | Fraction) -> str:
    """The target-relative role of operand ``n`` (App. 13.3), in exact rational arithmetic.

    Example:
        >>> [role(Fraction(n), 54) for n in ("80", "2", "52", "59.4", "59.5")]
        ['large', 'small', 'near_target', 'near_target', 'large']
    """
    x, t = Fraction(n), Fraction(target)
    band = abs(t) / 10
    if abs(x - t) <= band:
        return "near_target"
    if x < t - band:
        return "small"
    return "large"


class CountdownCanonicalizer(Canonicalizer):
    """Countdown-Stepwise actions -> the 26 target-relative skills.

    Example:
        >>> c = CountdownCanonicalizer()
        >>> [c(a, {"target": 54}).token for a in ["op(-, 80, 28)", "op(+, 52, 2)", "op(*, 54, 1)"]]
        ['sub<large-small>', 'add<near_target-small>', 'mul<near_target-small>']
        >>> c("op(+, 10, 1)", {"target": 54}).token == c("op(+, 1, 10)", {"target": 54}).token
        True
        >>> c("reset").token, c("nonsense").token
        ('reset<pool>', 'invalid<action>')
    """

    name = "countdown"
    glosses: Mapping[str, str] = {
        **{f"{v}<{p}>": f"OP_{v.capitalize()}-{p}" for v in OPS.values() for p in ROLE_PAIRS},  # paper labels
        "rollback<pool>": "Rollback",
        "reset<pool>": "Reset",
    }

    def canonicalize(self, action: str, context: Mapping[str, Any] | None = None) -> CanonicalAction:
        parsed = parse_action(action)
        if parsed is None:
            return CanonicalAction("invalid", "action", {"text": action}, action)
        if isinstance(parsed, str):
            return CanonicalAction(parsed, "pool", {}, action)
        op, a, b = parsed
        raw_target = (context or {}).get("target")
        slots: dict[str, Any] = {"op": op, "n1": _num(a), "n2": _num(b)}
        if raw_target is not None:
            slots["target"] = raw_target
        target = _as_target(raw_target)
        if target is None:  # no usable target: the roles cannot be computed
            return CanonicalAction(OPS[op], "unknown", slots, action)
        pair = "-".join(sorted((role(a, target), role(b, target))))
        return CanonicalAction(OPS[op], pair, slots, action)

    def corpus_context(self, trajectory: Trajectory, index: int) -> dict[str, Any]:
        """The target is stored as ``extra["target"]`` of the trajectory (or of the step)."""
        step = trajectory.steps[index]
        target = step.extra.get("target", trajectory.extra.get("target"))
        return {"target": target, "pool": step.extra.get("pool", trajectory.extra.get("pool"))}


def _as_target(value: Any) -> Fraction | None:
    """The target as an exact number: ints, finite floats and numeric strings (``"24"`` from JSON).

    Example:
        >>> _as_target("24"), _as_target(24.5), _as_target("n/a"), _as_target(float("nan")), _as_target(True)
        (Fraction(24, 1), Fraction(49, 2), None, None, None)
    """
    if isinstance(value, bool) or not isinstance(value, int | float | str | Fraction):
        return None
    try:
        return Fraction(value.strip() if isinstance(value, str) else value)
    except (ValueError, OverflowError, ZeroDivisionError):  # text, nan / inf, "1/0"
        return None


def _num(x: Fraction) -> int | float:
    return int(x) if x.denominator == 1 else float(x)


register_canonicalizer(CountdownCanonicalizer(), "countdown-stepwise")
