"""``XTree-Countdown-v0``: Countdown-Stepwise (ReuseRL, App. 12), written from its description.

Each episode draws 3 or 4 numbers and a target in [10, 999] that a sequence of exact operations on
all numbers reaches (solvable by construction). One action is one operation ``op(<op>, n1, n2)`` on
two numbers of the current pool (the result replaces them), ``rollback`` (undo the last operation)
or ``reset`` (restore the initial pool). Intermediate steps are verified: operands must be in the
pool, division must be exact, results must not be negative (unless ``allow_negative``). An invalid
action costs a step and changes nothing. The episode ends with

* success: the pool is exactly ``[target]`` -- reward ``+10``, ``terminated``;
* Stuck: an operation or an unparsable action while the pool holds fewer than two numbers --
  reward 0, ``terminated`` (App. 14.2 treats it as unrecoverable);
* Timeout: ``T = 30`` steps without success -- ``truncated``.

``info["xtree"]`` is the projected skill (:mod:`xtree_gym.canon.countdown`) with ``invalid``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from fractions import Fraction
from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np

from ..canon.countdown import SKILLS, CountdownCanonicalizer, parse_action
from ..errors import EnvConfigError

_CANON = CountdownCanonicalizer()


@dataclass(frozen=True)
class CountdownConfig:
    """Settings of Countdown-Stepwise (defaults: the paper's)."""

    min_numbers: int = 3
    """Fewest numbers in a puzzle."""
    max_numbers: int = 4
    """Most numbers in a puzzle."""
    min_value: int = 1
    """Smallest starting number."""
    max_value: int = 100
    """Largest starting number."""
    min_target: int = 10
    """Smallest target."""
    max_target: int = 999
    """Largest target."""
    horizon: int = 30
    """``T``: step budget; reaching it without success is a Timeout (truncated)."""
    success_reward: float = 10.0
    """Terminal reward on success (paper: 10)."""
    invalid_penalty: float = 0.0
    """Reward added for an invalid action (verl-agent's framework uses -0.01 on top of the env)."""
    allow_negative: bool = False
    """Whether a subtraction may produce a negative number."""

    def __post_init__(self) -> None:
        ints = ("min_numbers", "max_numbers", "min_value", "max_value", "min_target", "max_target", "horizon")
        for name in ints:
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise EnvConfigError(f"CountdownConfig.{name} = {v!r}", fix="use a positive int")
        if not 2 <= self.min_numbers <= self.max_numbers <= 8:
            raise EnvConfigError(
                f"numbers per puzzle {self.min_numbers}..{self.max_numbers}", fix="use 2 <= min <= max <= 8"
            )
        if self.min_value > self.max_value or self.min_target > self.max_target:
            raise EnvConfigError("min above max in the value or target range", fix="swap the bounds")


def _apply(op: str, a: Fraction, b: Fraction, allow_negative: bool) -> Fraction | None:
    """The result of ``a op b`` on integers, or None when the step is not allowed."""
    if op == "+":
        return a + b
    if op == "-":
        return a - b if allow_negative or a >= b else None
    if op == "*":
        return a * b
    if b == 0 or a % b != 0:  # division must be exact
        return None
    return a / b


def generate_puzzle(rng: np.random.Generator, config: CountdownConfig) -> tuple[list[int], int, list[str]]:
    """``(numbers, target, solution actions)`` of a solvable puzzle, drawn from ``rng``.

    Example:
        >>> nums, target, sol = generate_puzzle(np.random.default_rng(0), CountdownConfig())
        >>> 3 <= len(nums) <= 4 and 10 <= target <= 999 and len(sol) == len(nums) - 1
        True
    """
    for _ in range(10_000):
        n = int(rng.integers(config.min_numbers, config.max_numbers + 1))
        numbers = [int(x) for x in rng.integers(config.min_value, config.max_value + 1, size=n)]
        pool = [Fraction(x) for x in numbers]
        solution: list[str] = []
        while len(pool) > 1:
            i, j = (int(k) for k in rng.choice(len(pool), size=2, replace=False))
            a, b = pool[i], pool[j]
            ops = [op for op in "+-*/" if _apply(op, a, b, config.allow_negative) is not None]
            op = str(rng.choice(ops)) if ops else "+"
            result = _apply(op, a, b, config.allow_negative)
            if result is None:
                break
            solution.append(f"op({op}, {int(a)}, {int(b)})")
            pool = [x for k, x in enumerate(pool) if k not in (i, j)] + [result]
        if len(pool) == 1 and config.min_target <= pool[0] <= config.max_target:
            return numbers, int(pool[0]), solution
    raise EnvConfigError("could not draw a solvable puzzle in 10000 tries", fix="widen the target range")


class CountdownEnv(gym.Env[str, str]):
    """Countdown-Stepwise as a Gymnasium env with text observations and text actions.

    ``reset(options={"numbers": [...], "target": t})`` plays a given puzzle; otherwise one is drawn
    from the seeded generator. ``info``: ``target``, ``pool``, ``won``, ``end`` (None, "success",
    "stuck", "timeout"), ``invalid_action``, ``solution`` (on reset) and ``xtree``.

    Example:
        >>> env = CountdownEnv()
        >>> obs, info = env.reset(options={"numbers": [80, 2, 28, 1], "target": 54})
        >>> for a in ["op(-, 80, 28)", "op(+, 52, 2)", "op(*, 54, 1)"]:
        ...     obs, r, term, trunc, info = env.step(a)
        ...     print(info["xtree"]["token"], info["pool"], r, term)
        sub<large-small> [2, 1, 52] 0.0 False
        add<near_target-small> [1, 54] 0.0 False
        mul<near_target-small> [54] 10.0 True
    """

    metadata = {"render_modes": ["ansi"]}  # noqa: RUF012 - Gymnasium declares it an instance attribute
    skills = SKILLS
    """The skill alphabet Sigma of the projection (26 tokens), for the MDL code."""

    def __init__(
        self, config: CountdownConfig | None = None, render_mode: str | None = None, **overrides: Any
    ):
        if config is not None and not isinstance(config, CountdownConfig):
            raise EnvConfigError(f"config must be a CountdownConfig, got {type(config).__name__}")
        try:
            self.config = replace(config or CountdownConfig(), **overrides)
        except TypeError as exc:
            raise EnvConfigError(
                str(exc), fix=f"valid settings: {', '.join(asdict(CountdownConfig()))}"
            ) from None
        if render_mode not in (None, "ansi"):
            raise EnvConfigError(f"render_mode {render_mode!r}", fix="use None or 'ansi'")
        self.render_mode = render_mode
        self.horizon = self.config.horizon
        self.solution: list[str] = []
        """The drawn puzzle's solution actions (empty for a given puzzle); the oracle backend plays it."""
        self.observation_space = gym.spaces.Text(max_length=4096)
        self.action_space = gym.spaces.Text(max_length=256)
        self.numbers: list[int] = []
        self.target = 0
        self.pool: list[Fraction] = []
        self._history: list[list[Fraction]] = []  # pools before each applied operation
        self._t = 0
        self._done = False
        self._feedback = ""

    # ------------------------------------------------------------------ gym API
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        options = options or {}
        solution: list[str] = []
        if "numbers" in options or "target" in options:
            numbers, target = options.get("numbers"), options.get("target")
            if not (isinstance(numbers, (list, tuple)) and len(numbers) >= 2 and isinstance(target, int)):
                raise EnvConfigError(
                    f"options numbers={numbers!r} target={target!r}",
                    fix='pass {"numbers": [at least two ints], "target": int}',
                )
            self.numbers, self.target = [int(x) for x in numbers], int(target)
        else:
            self.numbers, self.target, solution = generate_puzzle(self.np_random, self.config)
        self.pool = [Fraction(x) for x in self.numbers]
        self._history, self._t, self._done = [], 0, False
        self._feedback = "New puzzle."
        info = self._info(None)
        info["solution"] = solution
        self.solution = list(solution)
        return self._obs(), info

    def step(self, action: str) -> tuple[str, SupportsFloat, bool, bool, dict[str, Any]]:
        if self._done:
            raise EnvConfigError("step() called after the episode ended", fix="call reset() first")
        self._t += 1
        ca = _CANON(str(action), {"target": self.target, "pool": self._pool_ints()})
        parsed = parse_action(str(action))
        reward, terminated, end, invalid = 0.0, False, None, False
        if (parsed is None or isinstance(parsed, tuple)) and len(self.pool) < 2:
            terminated, end = True, "stuck"
            self._feedback = "Stuck: fewer than two numbers left and no rollback/reset."
        elif parsed is None:
            invalid, self._feedback = True, f"Could not parse {action!r}."
        elif parsed == "rollback":
            invalid = not self._history
            if not invalid:
                self.pool = self._history.pop()
            self._feedback = "Nothing to roll back." if invalid else "Rolled back the last operation."
        elif parsed == "reset":
            self.pool, self._history = [Fraction(x) for x in self.numbers], []
            self._feedback = "Pool reset."
        else:
            invalid = not self._operate(*parsed)
            if self.pool == [Fraction(self.target)]:
                reward, terminated, end = self.config.success_reward, True, "success"
                self._feedback += " Target reached!"
        if invalid:
            reward += self.config.invalid_penalty
        truncated = not terminated and self._t >= self.config.horizon
        if truncated:
            end = "timeout"
        self._done = terminated or truncated
        x = ca.to_info()
        x["invalid"] = invalid
        info = self._info(end)
        info.update(xtree=x, invalid_action=invalid)
        return self._obs(), reward, terminated, truncated, info

    def render(self) -> str | None:
        return self._obs() if self.render_mode == "ansi" else None

    # ------------------------------------------------------------------ rules
    def _operate(self, op: str, a: Fraction, b: Fraction) -> bool:
        """Apply one operation to the pool; False (pool unchanged) when the step is not allowed."""
        rest = list(self.pool)
        for x in (a, b):
            if x not in rest:
                self._feedback = f"{_fmt(x)} is not in the pool {self._pool_ints()}."
                return False
            rest.remove(x)
        result = _apply(op, a, b, self.config.allow_negative)
        if result is None:
            why = "division is not exact" if op == "/" else "the result would be negative"
            self._feedback = f"op({op}, {_fmt(a)}, {_fmt(b)}) is not allowed: {why}."
            return False
        self._history.append(self.pool)
        self.pool = [*rest, result]
        self._feedback = f"{_fmt(a)} {op} {_fmt(b)} = {_fmt(result)}."
        return True

    def _pool_ints(self) -> list[int | float]:
        return [_fmt(x) for x in self.pool]

    def _info(self, end: str | None) -> dict[str, Any]:
        return {
            "target": self.target,
            "numbers": list(self.numbers),
            "pool": self._pool_ints(),
            "won": end == "success",
            "end": end,
            "step": self._t,
        }

    def _obs(self) -> str:
        return (
            f"{self._feedback}\nTarget: {self.target}\nPool: {self._pool_ints()}\n"
            f"Step {self._t}/{self.config.horizon}. Actions: op(<+|-|*|/>, a, b), rollback, reset."
        )


def _fmt(x: Fraction) -> int | float:
    return int(x) if x.denominator == 1 else float(x)
