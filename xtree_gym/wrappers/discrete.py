"""Put ``info["xtree"]`` tokens on any discrete-action Gymnasium env, so the X-Tree tools work on it.

Follow one action: ``env.step(3)`` -> the role read *before* the step (what the action acts on,
e.g. MiniGrid's front cell) -> the action's name (``pickup``) -> the ``discrete``/``minigrid``
canonicalizer -> ``info["xtree"] = {"token": "pickup<key>", ...}``. Stack :class:`XTreeBonus`
on top for the Eq. 3 bonus, or record the tokens as a corpus for the miner.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, SupportsFloat

import gymnasium as gym

from ..canon import get_canonicalizer
from ..canon.discrete import minigrid_front, norm_word
from ..errors import EnvConfigError

if TYPE_CHECKING:
    import os

    from ..mining.tree import XTree

RoleFn = Callable[[gym.Env], Any]
"""``role_fn(env) -> str | dict | None``: what the next action acts on, read from the live env."""


def is_minigrid(env: gym.Env) -> bool:
    """Whether ``env`` is a MiniGrid env (it has a grid and a front cell)."""
    from inspect import getattr_static

    u = env.unwrapped
    # getattr_static: front_pos is a property that fails before the first reset
    return all(_has_static(u, name, getattr_static) for name in ("front_pos", "gen_obs", "place_agent"))


def _has_static(obj: Any, name: str, getattr_static: Any) -> bool:
    try:
        getattr_static(obj, name)
    except AttributeError:
        return False
    return True


def discrete_action_names(env: gym.Env) -> list[str]:
    """The names of a ``Discrete`` env's actions, from what the env exposes.

    MiniGrid's ``actions`` enum, Atari's ``get_action_meanings()``, else ``a0 … a{k-1}``.

    Example:
        >>> import gymnasium as gym
        >>> discrete_action_names(gym.make("CartPole-v1"))
        ['a0', 'a1']
    """
    space = env.action_space
    if not isinstance(space, gym.spaces.Discrete):
        raise EnvConfigError(
            f"action space {space!r} is not Discrete",
            fix="wrap an env whose action_space is gym.spaces.Discrete (or pass action_names for it)",
        )
    u = env.unwrapped
    k, start = int(space.n), int(space.start)
    enum = getattr(u, "actions", None)
    if enum is not None and hasattr(enum, "__members__"):
        by_value = {int(m.value): m.name for m in enum}
        return [norm_word(by_value.get(i, f"a{i}")) for i in range(start, start + k)]
    meanings = getattr(u, "get_action_meanings", None)
    if callable(meanings):
        return [norm_word(m) for m in meanings()]
    return [f"a{i}" for i in range(start, start + k)]


class DiscreteTokens(gym.Wrapper):
    """Report each discrete action as a ``verb<role>`` token in ``info["xtree"]``.

    ``action_names`` (default: :func:`discrete_action_names`) names action index ``i``;
    ``role_fn(env)`` says what the action acts on, read before the step (default: MiniGrid's
    front cell for a MiniGrid env, else ``info["role"]`` of the previous step when the env sets
    it, else ``none``). ``domain`` is the canonicalizer (default ``minigrid`` for MiniGrid,
    ``discrete`` otherwise). ``info["xtree"]`` holds ``token``, ``verb``, ``role``, ``slots``
    (``action_index`` added) and ``raw`` (the action's name).

    Example:
        >>> import gymnasium as gym, minigrid  # noqa: F401  (registers the MiniGrid envs)
        >>> env = DiscreteTokens(gym.make("MiniGrid-DoorKey-5x5-v0"))
        >>> _ = env.reset(seed=1)
        >>> [env.step(a)[4]["xtree"]["token"] for a in (1, 2, 0)]  # the key was in front before turning
        ['right<key>', 'forward<wall>', 'left<wall>']
    """

    def __init__(
        self,
        env: gym.Env,
        *,
        action_names: Sequence[str] | None = None,
        role_fn: RoleFn | None = None,
        domain: str | None = None,
    ) -> None:
        super().__init__(env)
        mg = is_minigrid(env)
        self.action_names = list(action_names) if action_names is not None else discrete_action_names(env)
        self._role_fn = role_fn if role_fn is not None else (minigrid_front if mg else None)
        self.domain = domain or ("minigrid" if mg else "discrete")
        self._canon = get_canonicalizer(self.domain)
        self._last_role: Any = None

    def _context(self) -> dict[str, Any]:
        role = self._role_fn(self.env) if self._role_fn is not None else self._last_role
        if self.domain == "minigrid" and self._role_fn is minigrid_front:
            return {"front": role}
        return {"role": role} if isinstance(role, str) else ({"front": role} if role is not None else {})

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(seed=seed, options=options)
        self._last_role = info.get("role")
        return obs, info

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        try:
            index = int(action)
            name = self.action_names[index - int(getattr(self.action_space, "start", 0))]
        except (TypeError, ValueError, IndexError):
            raise EnvConfigError(
                f"action {action!r} is not one of the {len(self.action_names)} discrete actions",
                fix=f"pass an integer index in the action space ({self.action_space})",
            ) from None
        ctx = self._context()
        obs, reward, terminated, truncated, info = self.env.step(action)
        ca = self._canon(name, ctx)
        x = ca.to_info()
        x["slots"]["action_index"] = index
        info["xtree"] = x
        self._last_role = info.get("role")
        return obs, reward, terminated, truncated, info


def xtree_discrete(
    env: gym.Env,
    tree: XTree | str | os.PathLike[str] | None = None,
    *,
    action_names: Sequence[str] | None = None,
    role_fn: RoleFn | None = None,
    domain: str | None = None,
    **bonus: Any,
) -> gym.Env:
    """Tokens on any discrete env, plus :class:`XTreeBonus` when a ``tree`` is given.

    ``bonus`` goes to :class:`~xtree_gym.wrappers.reward.XTreeBonus` (``weight``, ``w_ref``, ...).

    Example:
        >>> import gymnasium as gym, minigrid  # noqa: F401
        >>> from xtree_gym import MinerConfig, Step, Trajectory, mine
        >>> seq = ["left<wall>", "forward<empty>"] * 3
        >>> trajs = [Trajectory(str(i), [Step(t, token=t) for t in seq], True) for i in range(6)]
        >>> tree = mine(trajs, MinerConfig(min_freq=3, cap=1))
        >>> env = xtree_discrete(gym.make("MiniGrid-Empty-5x5-v0"), tree)
        >>> _ = env.reset(seed=0)
        >>> [env.step(a)[4]["xtree"]["token"] for a in (0, 0)], tree.nodes[0].expansion
        (['left<empty>', 'left<wall>'], ('left<wall>', 'forward<empty>'))
    """
    wrapped: gym.Env = DiscreteTokens(env, action_names=action_names, role_fn=role_fn, domain=domain)
    if tree is None:
        if bonus:
            raise EnvConfigError(f"bonus options {sorted(bonus)} given without a tree", fix="pass tree=")
        return wrapped
    from .reward import XTreeBonus

    return XTreeBonus(wrapped, tree, **bonus)


def step_record(info: Mapping[str, Any]) -> dict[str, Any]:
    """The corpus step of one wrapped step: ``{"action", "token", "slots"}`` from ``info["xtree"]``.

    Example:
        >>> step_record({"xtree": {"token": "pickup<key>", "raw": "pickup", "slots": {"action_index": 3}}})
        {'action': 'pickup', 'token': 'pickup<key>', 'slots': {'action_index': 3}}
    """
    x = info["xtree"]
    return {"action": x["raw"], "token": x["token"], "slots": dict(x.get("slots", {}))}
