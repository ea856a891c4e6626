"""A tiny text env, faulty variants of it and a minimal harness: for rollout tests, docs and benchmarks.

Nothing here is mocked: :class:`EchoEnv` is a real (if trivial) Gymnasium env. Its variants fail on
purpose -- :class:`HangingEnv` blocks forever at a chosen step, :class:`CrashingEnv` raises or kills
its process -- so tests can show a rollout truncates those episodes instead of hanging or dying.
Build them by entry point (``"xtree_gym.agents.play.testing:EchoEnv"``), which env worker processes can
import without a registry.
"""

from __future__ import annotations

import os
import re
import time
from typing import Any, ClassVar

import gymnasium as gym

from ..harness.base import Harness, HarnessState, Message
from ..types import ParsedAction

ECHO_ENV = "xtree_gym.agents.play.testing:EchoEnv"
HANGING_ENV = "xtree_gym.agents.play.testing:HangingEnv"
CRASHING_ENV = "xtree_gym.agents.play.testing:CrashingEnv"
ODD_ENV = "xtree_gym.agents.play.testing:OddEnv"
STUCK_CLOSE_ENV = "xtree_gym.agents.play.testing:StuckCloseEnv"
_WORDS = ("apple", "river", "stone", "cloud", "ember", "maple", "tulip", "cedar")


class EchoEnv(gym.Env[str, str]):
    """Say the magic word: ``win`` ends the episode with reward 1; any other text is echoed back.

    The reset text holds a word drawn from the seed, so same-seed copies start identically.
    An empty action is refused (``info["invalid_action"]``), like a real env's unknown command.

    Example:
        >>> env = EchoEnv()
        >>> obs, info = env.reset(seed=3)
        >>> obs == EchoEnv().reset(seed=3)[0], info["goal"]
        (True, "Say 'win'.")
        >>> env.step("hello")[0], env.step("win")[1:3], env.step("x")[4]["xtree"]["token"]
        ('You said: hello', (1.0, True), 'say<word>')
    """

    metadata = {"render_modes": []}  # noqa: RUF012 - Gymnasium declares it an instance variable
    valid_calls = 0
    """How often :meth:`valid_actions` ran in this process (the rollout must ask only when a harness lists them)."""

    open_now = 0
    """Envs built and not closed yet in this process, and the most there ever were (``open_peak``)."""
    open_peak = 0

    def __init__(self, max_steps: int | None = None) -> None:
        EchoEnv.open_now += 1
        EchoEnv.open_peak = max(EchoEnv.open_peak, EchoEnv.open_now)
        self.max_steps = max_steps
        self.observation_space = gym.spaces.Text(1000)
        self.action_space = gym.spaces.Text(1000)
        self._steps = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict]:
        super().reset(seed=seed)
        self._steps = 0
        word = _WORDS[int(self.np_random.integers(len(_WORDS)))]
        return f"A room with a sign that reads '{word}'.", {"goal": "Say 'win'.", "word": word}

    def close(self) -> None:
        EchoEnv.open_now -= 1
        super().close()

    def valid_actions(self) -> list[str]:
        """The admissible actions (counted in :attr:`valid_calls`)."""
        EchoEnv.valid_calls += 1
        return ["win", "wait"]

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        self._steps += 1
        action = str(action).strip()
        won = action == "win"
        invalid = action == ""
        token = "say<magic>" if won else "say<word>"
        info = {
            "won": won,
            "invalid_action": invalid,
            "xtree": {"token": token, "verb": "say", "slots": {"X": action}, "invalid": invalid},
        }
        truncated = not won and self.max_steps is not None and self._steps >= self.max_steps
        return f"You said: {action}", float(won), won, truncated, info


class HangingEnv(EchoEnv):
    """An :class:`EchoEnv` whose ``hang_at``-th step (1-based) never returns."""

    def __init__(self, hang_at: int = 1, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.hang_at = hang_at

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if self._steps + 1 >= self.hang_at:
            time.sleep(3600)
        return super().step(action)


class CrashingEnv(EchoEnv):
    """An :class:`EchoEnv` that fails at its ``crash_at``-th step: ``mode="raise"`` or ``"exit"`` (the process dies)."""

    def __init__(self, crash_at: int = 1, mode: str = "raise", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.crash_at = crash_at
        self.mode = mode

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if self._steps + 1 >= self.crash_at:
            if self.mode == "exit":
                os._exit(3)
            raise RuntimeError("the simulator fell over")
        return super().step(action)


class OddEnv(EchoEnv):
    """An :class:`EchoEnv` that answers what a careless env does: a NaN reward (``nan_reward``) and/or
    an observation holding a lone surrogate (``surrogate``), which UTF-8 cannot encode."""

    def __init__(self, nan_reward: bool = False, surrogate: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.nan_reward, self.surrogate = nan_reward, surrogate

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict]:
        obs, info = super().reset(seed=seed, options=options)
        return (obs + " \ud83d" if self.surrogate else obs), info

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        obs, reward, term, trunc, info = super().step(action)
        if self.surrogate:
            obs += " \udc80"
        return obs, float("nan") if self.nan_reward else reward, term, trunc, info


class SlowResetEnv(EchoEnv):
    """An :class:`EchoEnv` whose reset takes ``delay`` seconds (a simulator that boots slowly)."""

    def __init__(self, delay: float = 1.0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.delay = delay

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict]:
        time.sleep(self.delay)
        return super().reset(seed=seed, options=options)


class StuckCloseEnv(EchoEnv):
    """An :class:`EchoEnv` whose ``close()`` never returns (a simulator that will not shut down)."""

    def close(self) -> None:
        time.sleep(3600)


_ACTION = re.compile(r"<action>(.*?)</action>", re.DOTALL)


class EchoHarness(Harness):
    """The smallest protocol: task and observation in, ``<action>…</action>`` out (for the echo envs).

    Example:
        >>> h = EchoHarness()
        >>> h.parse(h.format_response("win")).action, h.parse("no tags").error
        ('win', 'no <action>...</action> block')
    """

    name: ClassVar[str] = "echo"
    step_limit: ClassVar[int] = 6

    def render(self, state: HarnessState) -> list[Message]:
        text = f"Task: {state.goal}\nObservation: {state.observation}\nAnswer with <action>...</action>."
        return [{"role": "user", "content": text}]

    def parse(self, text: str) -> ParsedAction:
        m = _ACTION.search(text)
        if m is None:
            return ParsedAction(None, error="no <action>...</action> block")
        return ParsedAction(m.group(1).strip(), actions=(m.group(1).strip(),))

    def format_response(self, action: str, thought: str = "") -> str:
        return f"<action>{action}</action>"
