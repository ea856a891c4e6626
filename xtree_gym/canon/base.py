"""The canonicalizer interface: a raw action plus a little context -> ``verb<role>`` token.

Every domain module subclasses :class:`Canonicalizer` and registers an instance by name
(see ``xtree_gym/canon/__init__.py``). Contract, for every domain:

* deterministic: the same action and context give the same result;
* complete: any string gets a token (the catch-all), nothing raises, nothing is dropped;
* lossless: every stripped value is kept in ``slots`` and ``raw`` is kept verbatim.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..corpus.records import Trajectory


@dataclass(frozen=True, eq=True)
class CanonicalAction:
    """A canonicalized action: the typed token plus everything stripped to get it."""

    verb: str
    """What the action does (``click``, ``type``, ``open``, ...)."""
    role: str
    """The class of what it acts on (``button``, ``container``, ``option-color``, ...)."""
    slots: dict[str, Any] = field(default_factory=dict, hash=False)
    """Stripped values: element id, typed text, object name, instance number, surface form."""
    raw: str = ""
    """The action exactly as given."""

    @property
    def token(self) -> str:
        """``f"{verb}<{role}>"`` -- the symbol the miner sees."""
        return f"{self.verb}<{self.role}>"

    def to_info(self) -> dict[str, Any]:
        """The dict environments put in ``info["xtree"]`` for the action just taken."""
        return {
            "token": self.token,
            "verb": self.verb,
            "role": self.role,
            "slots": dict(self.slots),
            "raw": self.raw,
        }


def catch_all(action: str) -> CanonicalAction:
    """The rule of last resort: first word as verb, the rest as role.

    Example:
        >>> catch_all("  Sing loudly now ").token
        'sing<loudly now>'
        >>> catch_all("").token
        'noop<empty>'
    """
    words = action.split()
    if not words:
        return CanonicalAction("noop", "empty", {"rest": ""}, action)
    verb = words[0].lower()
    rest = " ".join(words[1:])
    return CanonicalAction(verb, rest.lower() if rest else "none", {"rest": rest}, action)


# ``verb<role>`` or ``verb<role>(args)``: an action already written as a token, as in the
# authors' released WebShop and MiniWoB++ trees (``click<option-color>(black)``).
_TOKEN_FORM = re.compile(r"^\s*([a-z_][\w-]*)<([^<>()]*)>\s*(?:\((.*)\))?\s*$", re.DOTALL)


def parse_token_form(action: str) -> CanonicalAction | None:
    """Read an action already written in token form; ``None`` for anything else.

    The arguments in parentheses (if any) are kept in ``slots["args"]``.

    Example:
        >>> parse_token_form("click<option-color>(black)").to_info()["slots"]
        {'args': 'black', 'surface': 'token'}
        >>> parse_token_form("click[black]") is None
        True
    """
    m = _TOKEN_FORM.match(action)
    if m is None:
        return None
    slots: dict[str, Any] = {}
    if m.group(3) is not None:
        slots["args"] = m.group(3)
    slots["surface"] = "token"
    return CanonicalAction(m.group(1), m.group(2), slots, action)


class Canonicalizer:
    """Base class of the per-domain canonicalizers.

    Subclasses set :attr:`name` and implement :meth:`canonicalize`; :meth:`corpus_context`
    says how a stored trajectory provides the context for step ``index``.
    """

    name: str = "generic"
    glosses: Mapping[str, str] = {}
    """Optional fixed phrase per token (``click<buy>`` -> "buy the item"), used by skill cards."""

    def canonicalize(self, action: str, context: Mapping[str, Any] | None = None) -> CanonicalAction:
        return catch_all(action)

    def __call__(self, action: str, context: Mapping[str, Any] | None = None) -> CanonicalAction:
        try:
            return self.canonicalize(action, context)
        except Exception as exc:
            ca = catch_all(action)
            return CanonicalAction(ca.verb, ca.role, {**ca.slots, "canon_error": repr(exc)}, action)

    def corpus_context(self, trajectory: Trajectory, index: int) -> dict[str, Any]:
        """Context for step ``index`` of a stored trajectory (default: none needed)."""
        return {}
