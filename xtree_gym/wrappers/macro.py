"""The node-level test-time protocol (X-Tree App. D): one turn, several env actions.

A node-trained policy writes one turn per node: a ``<planning>`` block and one ``<action>`` per
primitive. :class:`MacroAction` runs such a turn on any text env:

* the actions execute in order, one ``env.step`` each, and no observation returns until the last;
* an action the env rejects gets its error message (the env's own observation for that step) and
  the remaining actions still execute; the returned observation is the one after the last action,
  preceded (``show_errors``) by one line per earlier rejected action, so the policy sees the failure
  at its next turn;
* a budget of ``budget`` env actions per episode (30 in the paper): once it is spent the turn is
  truncated and the actions left over are recorded as skipped;
* ``info["macro"]`` carries one record per action (action, observation, reward, token, invalid)
  and ``joined``, the turn's joined action string the next prompt shows (the same node-level
  history the SFT rows of :mod:`xtree_gym.agents.sft_offline.rows` are built with).

Follow one turn: response text --``parser``--> ``[a1, a2, a3]`` --> ``env.step(a1)``,
``env.step(a2)``, ``env.step(a3)`` --> observation after ``a3``, summed reward, ``info["macro"]``.

Wrap reward shapers *inside* it (``MacroAction(XTreeBonus(env))``) so they still see one env
action per step.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, SupportsFloat

import gymnasium as gym

from ..errors import EnvConfigError
from .reward import is_invalid

BUDGET = 30
"""Env actions per episode under the node-level protocol (App. D: "the same budget of 30")."""

JOIN = "; "
"""How a turn's actions are joined into the one history entry the next prompt carries."""

NO_ACTION = "The response contained no action; nothing was executed."
"""The observation of a turn that parsed to zero actions (it still spends one unit of budget)."""


Parser = Callable[[str], Any]
"""``text -> list[str]``, or ``-> ParsedAction`` (its ``actions``, else its one ``action``)."""


def as_actions(action: Any, parser: Parser | None = None) -> list[str]:
    """The env actions of one turn: a list as given, a string through ``parser`` (else as one action).

    ``parser`` may return a list of strings or a :class:`~xtree_gym.agents.types.ParsedAction`
    (its ``actions`` tuple, else its single ``action``; ``None`` means no action).

    Example:
        >>> as_actions(["open door", "go to hallway"])
        ['open door', 'go to hallway']
        >>> as_actions("look around")
        ['look around']
        >>> as_actions("a | b", parser=lambda s: [x.strip() for x in s.split("|")])
        ['a', 'b']
    """
    if isinstance(action, str):
        if parser is None:
            return [action] if action.strip() else []
        action = parser(action)
    if action is None:
        return []
    if hasattr(action, "actions") and hasattr(action, "action"):  # a ParsedAction
        if action.actions:
            return [str(a) for a in action.actions]
        return [] if action.action is None else [str(action.action)]
    if isinstance(action, Sequence):
        return [str(a) for a in action]
    raise EnvConfigError(
        f"a macro action must be a string or a list of strings, got {type(action).__name__}",
        fix="pass ['action 1', 'action 2'] or a response text with a parser",
    )


def join_actions(actions: Sequence[str], sep: str = JOIN) -> str:
    """The turn's joined action string, as the next prompt's history shows it.

    Example:
        >>> join_actions(["open door to hallway", "go to hallway"])
        'open door to hallway; go to hallway'
    """
    return sep.join(actions)


class MacroAction(gym.Wrapper[Any, Any, Any, Any]):
    """Execute every action of one turn in order, within a per-episode budget of env actions.

    ``step(actions)`` takes a list of action strings, or a response text when ``parser`` is given
    (e.g. the ``node`` harness's ``parse``). It returns the observation after the last executed
    action, the sum of the step rewards, whether the env ended (or the budget ran out: truncated),
    and the last step's ``info`` plus ``info["macro"]`` (see the module docstring). ``invalid_fn``
    tells a rejected action (default: the env's own ``invalid_action`` flag).

    Example:
        >>> from xtree_gym.envs.countdown import CountdownEnv
        >>> env = MacroAction(CountdownEnv(), budget=30)
        >>> _ = env.reset(options={"numbers": [80, 2, 28, 1], "target": 54})
        >>> obs, r, term, trunc, info = env.step(["op(-, 80, 28)", "op(+, 52, 2)", "op(*, 54, 1)"])
        >>> r, term, info["macro"]["executed"], info["macro"]["budget_left"]
        (10.0, True, 3, 27)
    """

    def __init__(
        self,
        env: gym.Env[Any, Any],
        *,
        budget: int = BUDGET,
        parser: Parser | None = None,
        invalid_fn: Callable[[Mapping[str, Any]], bool] = is_invalid,
        sep: str = JOIN,
        show_errors: bool = True,
    ) -> None:
        super().__init__(env)
        if not isinstance(budget, int) or budget < 1:
            raise EnvConfigError(
                f"budget={budget!r}", fix="use a positive number of env actions (30 in the paper)"
            )
        self.budget = budget
        self.parser = parser
        self.invalid_fn = invalid_fn
        self.sep = sep
        self.show_errors = show_errors
        self.used = 0
        """Env actions spent in this episode (an empty turn counts one)."""
        self._obs: Any = None

    @property
    def budget_left(self) -> int:
        return self.budget - self.used

    def spend(self, n: int = 1) -> None:
        """Count ``n`` turns that reached no env against the budget (an empty or unparseable response).

        The protocol charges such a turn one unit, so a silent policy still ends; a caller that
        answers those turns itself (the rollout, which never steps an env with junk) reports them here.

        Example:
            >>> from xtree_gym.envs.countdown import CountdownEnv
            >>> env = MacroAction(CountdownEnv(), budget=3)
            >>> _ = env.reset(options={"numbers": [1, 2], "target": 3})
            >>> env.spend(2); env.budget_left
            1
        """
        if n < 0 or self.used + n > self.budget:
            raise EnvConfigError(
                f"spend({n}) with {self.budget_left} of {self.budget} env actions left",
                fix="charge only turns of this episode, at most the budget left",
            )
        self.used += n

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(seed=seed, options=options)
        self.used = 0
        self._obs = obs
        info = dict(info)
        info["macro"] = {"budget": self.budget, "budget_left": self.budget}
        return obs, info

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        if self.used >= self.budget:
            raise EnvConfigError("step() after the action budget was spent", fix="call reset()")
        actions = as_actions(action, self.parser)
        if not actions:
            return self._empty_turn()
        records: list[dict[str, Any]] = []
        total, term, trunc = 0.0, False, False
        info: dict[str, Any] = {}
        obs = self._obs
        for i, a in enumerate(actions):
            if term or trunc or self.used >= self.budget:
                records.extend(_skipped(actions[i:]))
                trunc = trunc or (not term and self.used >= self.budget)
                break
            obs, r, term, trunc, info = self.env.step(a)
            self.used += 1
            total += float(r)
            records.append(_record(a, obs, r, info, self.invalid_fn(info)))
        else:
            trunc = trunc or (not term and self.used >= self.budget)
        self._obs = obs
        if self.show_errors and isinstance(obs, str):
            obs = with_errors(obs, records)
        return obs, total, bool(term), bool(trunc), self._macro_info(info, records)

    def _macro_info(self, info: Mapping[str, Any], records: list[dict[str, Any]]) -> dict[str, Any]:
        done = [r for r in records if not r["skipped"]]
        out = dict(info)
        n_invalid = sum(r["invalid"] for r in done)
        out["invalid_action"] = n_invalid > 0  # the turn counts invalid when any of its actions was refused
        out["macro"] = {
            "actions": records,
            "executed": len(done),
            "skipped": len(records) - len(done),
            "invalid": n_invalid,
            "tokens": [r["token"] for r in done],
            "joined": join_actions([r["action"] for r in done], self.sep),
            "budget": self.budget,
            "budget_left": self.budget_left,
        }
        return out

    def _empty_turn(self) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        """A turn with no action: no env step, one unit of budget (so a silent policy still ends)."""
        self.spend(1)
        info: dict[str, Any] = {"invalid_action": True}
        info["macro"] = {
            "actions": [],
            "executed": 0,
            "skipped": 0,
            "invalid": 1,
            "tokens": [],
            "joined": "",
            "budget": self.budget,
            "budget_left": self.budget_left,
        }
        return NO_ACTION, 0.0, False, self.used >= self.budget, info


def with_errors(obs: str, records: Sequence[Mapping[str, Any]]) -> str:
    """``obs`` preceded by one line per rejected action before the last executed one.

    Each line carries the first line of the env's answer (the error message; the full answer stays
    in the record). The last action's own error, if any, is ``obs`` itself, so it is not repeated.

    Example:
        >>> recs = [{"action": "go to moon", "observation": "No known action matches that input.",
        ...          "invalid": True, "skipped": False},
        ...         {"action": "look around", "observation": "A kitchen.", "invalid": False, "skipped": False}]
        >>> print(with_errors("A kitchen.", recs))
        Action 'go to moon' failed: No known action matches that input.
        A kitchen.
    """
    done = [r for r in records if not r["skipped"]]
    lines = [
        f"Action {r['action']!r} failed: {_first_line(str(r['observation']))}"
        for r in done[:-1]
        if r["invalid"]
    ]
    return "\n".join([*lines, obs])


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def _record(
    action: str, obs: Any, reward: SupportsFloat, info: Mapping[str, Any], invalid: bool
) -> dict[str, Any]:
    x = info.get("xtree")
    token = x.get("token") if isinstance(x, Mapping) else None
    return {
        "action": action,
        "observation": obs if isinstance(obs, str) else str(obs),
        "reward": float(reward),
        "token": token,
        "invalid": bool(invalid),
        "skipped": False,
    }


def _skipped(actions: Sequence[str]) -> list[dict[str, Any]]:
    return [
        {"action": a, "observation": "", "reward": 0.0, "token": None, "invalid": False, "skipped": True}
        for a in actions
    ]
