"""Where a rollout's envs live: in this process, or one subprocess per env copy, behind one handle.

An :class:`EnvHolder` owns one env and answers two calls with JSON-safe dicts: ``reset`` and
``step``. A step is one turn, run through :class:`~xtree_gym.wrappers.macro.MacroAction` (the
node-level protocol of App. D; a one-action turn is its plain case), so the wrapper runs wherever
the env does -- in a worker too. After each call the holder also reads what the next turn needs
-- the harness's ``env_view``, the valid actions (only when the harness lists them) and the
oracle's next action (only for the oracle backend) -- so a turn costs one round trip to a worker.

Handles:

* :class:`LocalHandle` (``workers=0``): calls the holder directly; with a timeout the call runs in
  a daemon thread that is abandoned if it overruns (Python cannot kill a thread: the env is
  dropped, never reused);
* :class:`ProcessHandle` (``workers>0``): the holder runs in a spawned subprocess with a pipe of
  its own; messages are JSON (no pickle on the wire); an overrun kills the process.

Either way an env crash, an exception or an overrun is an :class:`EnvFault`, and the handle is
dead afterwards. The rollout turns that into a truncated episode with ``fault`` set.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import math
import multiprocessing as mp
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from ...errors import ConfigError, EnvConfigError, XTreeError
from ...wrappers.macro import BUDGET, MacroAction


class EnvFault(Exception):
    """An env call crashed, raised or overran its timeout; the message says which."""


class EnvBuildError(Exception):
    """The env could not be built from its id and arguments: a user error, raised, not a fault."""


def jsonable(value: Any, depth: int = 0) -> Any:
    """``value`` with every part JSON-safe: numpy scalars unwrapped, tuples as lists, others as str.

    Example:
        >>> import numpy as np
        >>> jsonable({"a": np.int64(3), "b": (1, 2.5), "c": {1: object}, "d": float("nan")})
        {'a': 3, 'b': [1, 2.5], 'c': {'1': "<class 'object'>"}, 'd': None}
    """
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if hasattr(value, "item") and getattr(value, "ndim", 1) == 0:  # numpy / torch scalar
        return jsonable(value.item(), depth)
    if depth > 12:
        return str(value)
    if isinstance(value, Mapping):
        return {str(k): jsonable(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v, depth + 1) for v in value]
    if hasattr(value, "tolist"):
        return jsonable(value.tolist(), depth + 1)
    return str(value)


def make_env(env_id: str, kwargs: Mapping[str, Any]) -> Any:
    """Build ``env_id``: a registered Gymnasium id (XTree-* ids are registered here), or ``module:Callable``.

    The ``module:Callable`` form reaches envs that a subprocess would not find in its registry.
    """
    import gymnasium as gym

    from ...envs import register_envs

    register_envs()
    if env_id in gym.registry:
        return gym.make(env_id, **dict(kwargs))
    if ":" in env_id:
        module, _, attr = env_id.partition(":")
        try:
            factory = getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError) as exc:
            raise ConfigError(f"cannot import env entry point {env_id!r}: {exc}") from exc
        return factory(**dict(kwargs))
    known = ", ".join(sorted(k for k in gym.registry if k.startswith("XTree-")))
    raise ConfigError(f"unknown env id {env_id!r}", fix=f"use one of {known}, or 'module:Class'")


class EnvHolder:
    """One env plus the per-turn reads of the harness (``env_view``, valid actions, oracle)."""

    def __init__(self, env_id: str, kwargs: Mapping[str, Any], harness: Any, oracle: bool) -> None:
        self.env_id = env_id
        self.kwargs = dict(kwargs)
        self.harness = harness
        self.oracle = oracle
        self.env: Any = None
        self.macro: MacroAction | None = None
        """The env inside the node-level protocol's wrapper; every turn steps through it."""

    def _extras(self) -> dict[str, Any]:
        view, valid = self.harness.look(self.env)
        out: dict[str, Any] = {"view": jsonable(view)}
        out["valid"] = None if valid is None else [str(a) for a in valid]
        if self.oracle:
            from ..model.oracle import oracle_action

            action = oracle_action(self.env)
            out["oracle"] = None if action is None else str(action)
        return out

    def reset(self, seed: int, options: Mapping[str, Any], budget: int = BUDGET) -> dict[str, Any]:
        """Reset the env for an episode of at most ``budget`` env actions (the rollout's step cap)."""
        if self.env is None:
            try:
                self.env = make_env(self.env_id, self.kwargs)
            except XTreeError as exc:
                raise EnvBuildError(str(exc)) from exc
        opts = dict(options)
        if self.oracle:
            from ..model.oracle import oracle_reset_options

            opts = {**oracle_reset_options(self.env), **opts}
        self.macro = MacroAction(self.env, budget=int(budget))
        obs, info = self.macro.reset(seed=int(seed), options=opts)
        info.pop("macro", None)
        from ..harness.base import goal_of

        return {"obs": str(obs), "info": jsonable(info), "goal": goal_of(info, self.env), **self._extras()}

    def step(self, actions: Sequence[str], budget: int | None = None) -> dict[str, Any]:
        """One turn through :class:`~xtree_gym.wrappers.macro.MacroAction` (App. D's protocol).

        ``budget`` is what the rollout has left of the episode's cap; turns it answered without the
        env (unparseable responses) are charged to the wrapper first, so both count the same.
        """
        if self.macro is None:
            raise RuntimeError("env step before reset")
        if budget is not None:
            self.macro.spend(self.macro.budget_left - int(budget))
        obs, reward, terminated, truncated, info = self.macro.step(list(actions))
        out: dict[str, Any] = {
            "obs": str(obs),
            "reward": float(reward),
            "terminated": bool(terminated),
            "truncated": bool(truncated),
            "info": jsonable(info),
        }
        if not (terminated or truncated):  # at the end (or the budget's) nothing more to read
            out.update(self._extras())
        return out

    def close(self) -> None:
        if self.env is not None:
            self.env.close()
            self.env = None
            self.macro = None

    def handle(self, msg: Mapping[str, Any]) -> dict[str, Any]:
        """Answer one message (``{"cmd": "reset"|"step"|"close", ...}``) of the pipe protocol."""
        cmd = msg.get("cmd")
        if cmd == "reset":
            return self.reset(msg["seed"], msg.get("options") or {}, int(msg.get("budget", BUDGET)))
        if cmd == "step":
            budget = msg.get("budget")
            return self.step(msg["actions"], None if budget is None else int(budget))
        if cmd == "close":
            self.close()
            return {}
        raise ValueError(f"unknown command {cmd!r}")


def _describe(exc: BaseException) -> str:
    return f"env raised {type(exc).__name__}: {str(exc).strip()[:400]}"


def _answer(box: Mapping[str, Any], handle: Any) -> dict[str, Any]:
    """The reply of a holder call; a build error is raised as the user's, a failure as a fault."""
    if "ok" in box:
        return dict(box["ok"])
    handle.alive = False
    kill = getattr(handle, "kill", None)
    if callable(kill):  # a worker or a server session holding a broken env: drop it
        kill()
    if "build_error" in box:
        raise EnvConfigError(box["build_error"])
    raise EnvFault(box["error"])


THREAD_BOUND_ENVS = (
    "XTree-MiniWoB-v0",
    "XTree-WebArena-v0",
    "XTree-OpenURL-v0",
    "xtree_gym.envs.browsergym:",
)
"""Envs whose calls must stay on the thread that built them (Playwright's sync API): in-process, their
deadline is the env's own (``step_deadline_s``, a watchdog that kills the browser), never a thread here."""

CLOSE_TIMEOUT_S = 30.0
"""Seconds an in-process env's ``close()`` may take before it is abandoned (it runs on a daemon thread)."""


def thread_bound(env_id: str) -> bool:
    """Whether ``env_id``'s env must be called on one thread (a browser env).

    Example:
        >>> thread_bound("XTree-MiniWoB-v0"), thread_bound("XTree-Countdown-v0")
        (True, False)
    """
    return any(env_id == t or (t.endswith(":") and env_id.startswith(t)) for t in THREAD_BOUND_ENVS)


class LocalHandle:
    """An :class:`EnvHolder` in this process (``workers=0``).

    With a timeout, the call starts on a daemon thread when it is *sent*, so the resets (and steps) of
    several envs run at once instead of one after another; a call past its timeout drops the env.
    A thread-bound env (:func:`thread_bound`) is called on the caller's thread at ``receive``, and its
    own deadline applies.
    """

    def __init__(self, holder: EnvHolder) -> None:
        self.holder = holder
        self.alive = True
        self.same_thread = thread_bound(holder.env_id)
        self._pending: tuple[dict[str, Any], float | None] | None = None
        self._running: tuple[threading.Thread, dict[str, Any], float] | None = None

    def _call(self, msg: dict[str, Any], box: dict[str, Any]) -> None:
        try:
            box["ok"] = self.holder.handle(msg)
        except EnvBuildError as exc:
            box["build_error"] = str(exc)
        except BaseException as exc:  # the env's own failure, reported as a fault
            box["error"] = _describe(exc)

    def send(self, msg: dict[str, Any], timeout: float | None) -> None:
        self._pending = (msg, timeout)
        if timeout is not None and not self.same_thread:
            box: dict[str, Any] = {}
            thread = threading.Thread(target=self._call, args=(msg, box), name="xtree-env-call", daemon=True)
            thread.start()
            self._running = (thread, box, time.monotonic())

    def receive(self) -> dict[str, Any]:
        assert self._pending is not None
        msg, timeout = self._pending
        self._pending = None
        if self._running is None:
            box: dict[str, Any] = {}
            self._call(msg, box)
            return _answer(box, self)
        thread, box, started = self._running
        self._running = None
        assert timeout is not None
        thread.join(max(0.0, timeout - (time.monotonic() - started)))
        if thread.is_alive():
            self.alive = False
            raise EnvFault(f"env {msg.get('cmd')} hung past the {timeout:g}s timeout; the env was dropped")
        return _answer(box, self)

    def close(self, timeout: float | None = None) -> None:
        """Close the env; a ``close()`` that does not return within ``timeout`` (default
        :data:`CLOSE_TIMEOUT_S`) is abandoned on its daemon thread, with a warning."""
        timeout = CLOSE_TIMEOUT_S if timeout is None else timeout
        if not self.alive:
            return
        self.alive = False

        def run() -> None:
            with contextlib.suppress(Exception):  # closing a broken env must not end the run
                self.holder.close()

        if self.same_thread:
            run()
            return
        thread = threading.Thread(target=run, name="xtree-env-close", daemon=True)
        thread.start()
        thread.join(timeout)
        if thread.is_alive():
            print(f"warning: {self.holder.env_id}: close() did not return in {timeout:g}s; abandoned",
                  file=sys.stderr)  # fmt: skip


def _worker_main(conn: Any, env_id: str, kwargs: dict[str, Any], harness: Any, oracle: bool) -> None:
    """The subprocess loop: JSON message in, JSON answer out, until ``close`` or the pipe ends."""
    holder = EnvHolder(env_id, kwargs, harness, oracle)
    while True:
        try:
            msg = json.loads(conn.recv_bytes())
        except (EOFError, OSError):
            break
        try:
            answer: dict[str, Any] = {"ok": holder.handle(msg)}
        except EnvBuildError as exc:
            answer = {"build_error": str(exc)}
        except BaseException as exc:
            answer = {"error": _describe(exc)}
        conn.send_bytes(json.dumps(answer).encode())
        if msg.get("cmd") == "close":
            break
    holder.close()


class ProcessHandle:
    """An :class:`EnvHolder` in a spawned subprocess, one pipe per env (``workers>0``)."""

    def __init__(self, env_id: str, kwargs: dict[str, Any], harness: Any, oracle: bool, start: str) -> None:
        ctx: Any = mp.get_context(start)
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(
            target=_worker_main, args=(child, env_id, kwargs, harness, oracle), daemon=True, name="xtree-env"
        )
        self.proc.start()
        child.close()
        self.alive = True
        self._sent: tuple[str, float | None, float] | None = None

    def send(self, msg: dict[str, Any], timeout: float | None) -> None:
        try:
            self.conn.send_bytes(json.dumps(msg).encode())
        except (OSError, ValueError) as exc:
            self.kill()
            raise EnvFault(f"env worker is gone (exit code {self.proc.exitcode})") from exc
        self._sent = (str(msg.get("cmd")), timeout, time.monotonic())

    def receive(self) -> dict[str, Any]:
        assert self._sent is not None
        cmd, timeout, sent_at = self._sent
        self._sent = None
        left = None if timeout is None else max(0.0, timeout - (time.monotonic() - sent_at))
        try:
            ready = self.conn.poll(left)
            if not ready:
                self.kill()
                raise EnvFault(f"env {cmd} hung past the {timeout:g}s timeout; the worker was killed")
            answer = json.loads(self.conn.recv_bytes())
        except (EOFError, OSError) as exc:
            self.proc.join(5)
            self.kill()
            raise EnvFault(f"env worker died during {cmd} (exit code {self.proc.exitcode})") from exc
        return _answer(answer, self)

    def kill(self) -> None:
        self.alive = False
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join(5)
        self.conn.close()

    def close(self) -> None:
        if not self.alive:
            return
        try:
            self.send({"cmd": "close"}, 10.0)
            self.receive()
        except EnvFault:
            pass
        self.proc.join(10)
        self.kill()
