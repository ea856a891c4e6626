"""Discrete-action Gymnasium envs: the action's name as verb, a role the env exposes as role.

Any env whose ``action_space`` is ``Discrete(k)`` gets tokens ``verb<role>``: the verb is the
name of the action index (MiniGrid's ``Actions`` enum, Atari's ``get_action_meanings()``, or
names the user gives), the role is what the action acts on, as the env exposes it. Two domains:

* ``discrete``: the role is ``context["role"]`` (any string; ``none`` when absent). The action may be
  a name (``"fire"``) or an index (``"3"``); with ``context["action_names"]`` an index is named.
* ``minigrid``: the role is the object type in the agent's front cell *before* the action (what
  ``pickup``/``toggle``/``forward`` act on): ``empty``, ``wall``, ``key``, ``door``, ``goal``,
  ``ball``, ``box``, ``lava``, ``floor``. Context: ``{"front": {"type", "color", "state"}}`` (what
  :func:`minigrid_front` reads from a live env) or ``{"role": "door"}``. The door state, colour and
  what the agent carries are kept in ``slots``, not in the token: the token names the kind of
  thing, as every other domain's role does.

Tokens: ``toggle<door>``, ``pickup<key>``, ``forward<empty>``, ``left<wall>``. Put them on a live
env's steps with :class:`xtree_gym.wrappers.discrete.DiscreteTokens`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from . import register_canonicalizer
from .base import CanonicalAction, Canonicalizer

if TYPE_CHECKING:
    from ..corpus.records import Trajectory

MINIGRID_ACTIONS = ("left", "right", "forward", "pickup", "drop", "toggle", "done")
"""MiniGrid's ``Actions`` enum, in index order (minigrid 3.x)."""
MINIGRID_STATES = ("open", "closed", "locked")
"""MiniGrid's door states, in the order of its state index."""

_WORD = re.compile(r"[^a-z0-9]+")


def norm_word(text: Any, empty: str = "none") -> str:
    """A name as a token part: lower case, runs of other characters -> ``_``, no ``<>``.

    Example:
        >>> norm_word("Actions.toggle"), norm_word("UP-RIGHT fire"), norm_word("  ")
        ('toggle', 'up_right_fire', 'none')
    """
    s = str(text).strip().lower()
    if "." in s and s.split(".")[0] == "actions":  # str(Enum member) of MiniGrid / Atari enums
        s = s.split(".", 1)[1]
    s = _WORD.sub("_", s).strip("_")
    return s or empty


def action_name(action: Any, names: Sequence[str] | None) -> str:
    """The name of a discrete action: ``names[i]`` for an index ``i``, else the action itself.

    Example:
        >>> action_name("5", MINIGRID_ACTIONS), action_name(2, MINIGRID_ACTIONS), action_name("fire", None)
        ('toggle', 'forward', 'fire')
        >>> action_name("9", MINIGRID_ACTIONS)  # out of range: the index itself, never an error
        'a9'
    """
    s = str(action).strip()
    if s.lstrip("-").isdigit():
        i = int(s)
        if names is not None and 0 <= i < len(names):
            return norm_word(names[i])
        return f"a{i}"
    return norm_word(s)


def _names(context: Mapping[str, Any]) -> Sequence[str] | None:
    names = context.get("action_names")
    if isinstance(names, (list, tuple)) and all(isinstance(n, str) for n in names):
        return names
    return None


class DiscreteCanonicalizer(Canonicalizer):
    """Any discrete action: ``name<role>`` with the role the env exposes in ``context["role"]``.

    Example:
        >>> c = DiscreteCanonicalizer()
        >>> c("fire", {"role": "enemy ship"}).token, c("3", {"action_names": ["a", "b", "c", "jump"]}).token
        ('fire<enemy_ship>', 'jump<none>')
        >>> c("").token
        'noop<none>'
    """

    name = "discrete"

    def canonicalize(self, action: str, context: Mapping[str, Any] | None = None) -> CanonicalAction:
        ctx = context if isinstance(context, Mapping) else {}
        verb = action_name(action, _names(ctx)) if str(action).strip() else "noop"
        raw_role = ctx.get("role")
        role = norm_word(raw_role) if isinstance(raw_role, str) else "none"
        slots: dict[str, Any] = {"action": action}
        if raw_role is not None:
            slots["role"] = raw_role
        return CanonicalAction(verb, role, slots, action)

    def corpus_context(self, trajectory: Trajectory, index: int) -> dict[str, Any]:
        """A stored step keeps its role in ``extra["role"]`` (or ``slots["role"]``)."""
        return _stored_context(trajectory, index)


def _stored_context(trajectory: Trajectory, index: int) -> dict[str, Any]:
    step = trajectory.steps[index]
    ctx: dict[str, Any] = {}
    for src in (step.slots or {}, step.extra):
        for key in ("role", "front"):
            if key in src and key not in ctx:
                ctx[key] = src[key]
    names = trajectory.extra.get("action_names")
    if names is not None:
        ctx["action_names"] = names
    return ctx


class MiniGridCanonicalizer(Canonicalizer):
    """MiniGrid actions -> ``action<front-cell object type>``.

    Example:
        >>> c = MiniGridCanonicalizer()
        >>> c("toggle", {"front": {"type": "door", "color": "yellow", "state": "locked"}}).token
        'toggle<door>'
        >>> c("toggle", {"front": {"type": "door", "state": "locked"}}).slots["state"]
        'locked'
        >>> c("3", {"front": {"type": "key"}}).token, c("forward", {"front": None}).token, c("left").token
        ('pickup<key>', 'forward<empty>', 'left<unknown>')
    """

    name = "minigrid"

    def canonicalize(self, action: str, context: Mapping[str, Any] | None = None) -> CanonicalAction:
        ctx = context if isinstance(context, Mapping) else {}
        verb = action_name(action, _names(ctx) or MINIGRID_ACTIONS) if str(action).strip() else "noop"
        slots: dict[str, Any] = {"action": action}
        if "front" in ctx:
            front = ctx["front"]
            if front is None:
                role = "empty"
            elif isinstance(front, Mapping):
                role = norm_word(front.get("type"), empty="empty")
                slots.update({k: front[k] for k in ("color", "state", "carrying") if k in front})
            else:
                role = norm_word(front, empty="empty")
                slots["front"] = front
        elif isinstance(ctx.get("role"), str):
            role = norm_word(ctx["role"], empty="empty")
            slots["role"] = ctx["role"]
        else:
            role = "unknown"  # no context: the front cell is not known
        return CanonicalAction(verb, role, slots, action)

    def corpus_context(self, trajectory: Trajectory, index: int) -> dict[str, Any]:
        """A stored step keeps its front cell in ``extra["front"]`` (or a role in ``extra["role"]``)."""
        return _stored_context(trajectory, index)


def minigrid_front(env: Any) -> dict[str, Any] | None:
    """The agent's front cell of a live MiniGrid env: ``{"type", "color", "state", "carrying"}``.

    ``None`` for an empty cell (MiniGrid stores no object there). ``carrying`` is the type of what
    the agent holds (``None`` when empty-handed). Returns ``None`` too outside the grid.
    """
    u = getattr(env, "unwrapped", env)
    x, y = (int(v) for v in u.front_pos)
    grid = u.grid
    carrying = getattr(u, "carrying", None)
    held = None if carrying is None else carrying.type
    if not (0 <= x < grid.width and 0 <= y < grid.height):
        return None
    cell = grid.get(x, y)
    if cell is None:
        return None if held is None else {"type": "empty", "carrying": held}
    out: dict[str, Any] = {"type": cell.type, "color": cell.color}
    if cell.type == "door":
        out["state"] = "locked" if cell.is_locked else ("open" if cell.is_open else "closed")
    if held is not None:
        out["carrying"] = held
    return out


register_canonicalizer(DiscreteCanonicalizer(), "gym-discrete")
register_canonicalizer(MiniGridCanonicalizer(), "babyai")
