"""``XTree-ScienceWorld-v0``: the real ScienceWorld simulator as a Gymnasium text environment.

One action string in, one observation string out (5-tuple). The default step path is the simulator's
raw step plus three small queries (score, completion, move count) -- it does not list valid actions,
which costs 35-150 ms a step; ask for them with ``valid_actions=True`` or :meth:`ScienceWorldEnv.valid_actions`.

After every step ``info["xtree"]`` holds the canonical action (``canonicalize("scienceworld", ...)``).
``terminated`` is task completion or a negative score; ``truncated`` is the step limit or a simulator
fault (the JVM died or a call hung: the env restarts the JVM, says why in ``info["fault"]``, and the
next ``reset`` works). ``info["won"]`` is ``score == 100`` -- a positive score at a timeout is no win.

An action the simulator cannot parse (it answers ``"No known action matches that input."``, or
``"Unknown action. ..."`` to a bad answer to a disambiguation prompt) is flagged by the env itself:
``info["invalid_action"]`` and ``info["xtree"]["invalid"]`` are true, the convention of every
XTree-* env, so reward wrappers need no ScienceWorld text matching.

A GRPO group must hold n copies of *one* task variation: :class:`ScienceWorldGroup` samples the task
once per group reset and resets every member with it.
"""

from __future__ import annotations

import contextlib
import string
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from ..canon import get_canonicalizer
from ..corpus.records import Step, Trajectory
from ..errors import EnvConfigError, missing_dependency
from . import sciworld_folds as folds
from .sciworld_jvm import DEFAULT_JAVA_OPTIONS, SciWorldJVM, shared_jvm

try:
    import gymnasium as gym
    from gymnasium import spaces
except ImportError as _exc:  # pragma: no cover - gymnasium is in the [scienceworld] extra
    raise missing_dependency("gymnasium", "scienceworld", "XTree-ScienceWorld-v0") from _exc

_TEXT = spaces.Text(max_length=1 << 16, charset=string.printable)

INVALID_REPLIES: tuple[str, ...] = ("No known action matches that input.", "Unknown action.")
"""How the simulator starts its answer to an action it cannot run (checked against the jar in tests)."""


STATE_TIMEOUT_S = 10.0
"""Least time a turn's simulator-state read or write may take before the watchdog kills the JVM."""


def _sendable(action: str) -> bool:
    """Whether ``action`` can go to the JVM: UTF-8 encodable (no lone surrogate such as ``\\ud83d``).

    Example:
        >>> _sendable("open door"), _sendable("open " + chr(0xD83D) + " door")
        (True, False)
    """
    try:
        action.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def is_invalid_reply(observation: str) -> bool:
    """Whether ``observation`` is the simulator refusing the action (what ``info["invalid_action"]`` says).

    Example:
        >>> is_invalid_reply("No known action matches that input."), is_invalid_reply("The door is now open.")
        (True, False)
    """
    return observation.startswith(INVALID_REPLIES)


def _py4j_error() -> type[Exception]:
    from py4j.protocol import Py4JError

    return Py4JError


def _resolve_jvm(jvm: SciWorldJVM | str | None, java_options: Sequence[str]) -> tuple[SciWorldJVM, bool]:
    """(the JVM to use, whether this env owns it)."""
    if isinstance(jvm, SciWorldJVM):
        return jvm, False
    if jvm is None or jvm == "own":
        return SciWorldJVM(java_options=java_options, start=False), True
    if jvm == "shared":
        return shared_jvm(java_options), False
    raise EnvConfigError(f"jvm={jvm!r} is not understood", fix="pass 'own', 'shared' or a SciWorldJVM")


class ScienceWorldEnv(gym.Env[str, str]):
    """ScienceWorld as a Gymnasium env that reports canonical tokens in ``info["xtree"]``.

    Example:
        >>> import gymnasium as gym, xtree_gym.envs
        >>> _ = xtree_gym.envs.register_envs()
        >>> env = gym.make("XTree-ScienceWorld-v0", task="boil", fold="G0", step_limit=30)  # doctest: +SKIP
        >>> obs, info = env.reset(seed=0)  # doctest: +SKIP
        >>> obs, reward, terminated, truncated, info = env.step("open door to kitchen")  # doctest: +SKIP
        >>> info["xtree"]["token"], info["score"], info["won"]  # doctest: +SKIP
        ('open<door>', 0, False)
        >>> ScienceWorldEnv(task="no-such-task", lazy=True)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        xtree_gym.errors.EnvConfigError: unknown ScienceWorld task 'no-such-task' -- fix: use a name or id of: ...
    """

    metadata = {"render_modes": ["ansi"]}  # noqa: RUF012 - Gymnasium declares it an instance variable

    def __init__(
        self,
        task: str | None = None,
        variation: int | None = None,
        split: str = "train",
        fold: str | None = None,
        step_limit: int | None = 30,
        *,
        tasks: Sequence[str] | None = None,
        simplifications: str = "",
        valid_actions: bool = False,
        step_timeout: float = 20.0,
        load_timeout: float = 300.0,
        jvm: SciWorldJVM | str | None = None,
        java_options: Sequence[str] = DEFAULT_JAVA_OPTIONS,
        render_mode: str | None = None,
        lazy: bool = False,
    ) -> None:
        # Check every argument before any JVM starts (one clear error, no half-built simulator).
        self.task = folds.resolve_task(task) if task is not None else None
        if split not in folds.SPLITS:
            raise EnvConfigError(
                f"split={split!r} is not a ScienceWorld split", fix=f"use one of {folds.SPLITS}"
            )
        self.fold = folds.get_fold(fold).name if fold is not None else None
        self.split = split
        self.tasks = tuple(folds.resolve_task(t) for t in tasks) if tasks is not None else None
        if self.task is not None and variation is not None:
            n = folds.TASKS[self.task][1]
            if not 0 <= int(variation) < n:
                raise EnvConfigError(
                    f"variation={variation!r} is out of range for {self.task!r}", fix=f"use 0..{n - 1}"
                )
        elif self.task is not None:
            folds.candidate_variations(self.task, fold=self.fold, split=split)  # raises if not in the fold
        self.variation = None if variation is None else int(variation)
        if step_limit is not None and step_limit < 1:
            raise EnvConfigError(f"step_limit={step_limit!r} must be >= 1 (or None for no limit)")
        if step_timeout <= 0 or load_timeout <= 0:
            raise EnvConfigError("step_timeout and load_timeout must be positive seconds")
        if render_mode not in (None, "ansi"):
            raise EnvConfigError(f"render_mode={render_mode!r} is not supported", fix="use 'ansi' or None")
        self.step_limit = step_limit
        self.simplifications = simplifications
        self.return_valid_actions = valid_actions
        self.step_timeout = float(step_timeout)
        self.load_timeout = float(load_timeout)
        self.render_mode = render_mode
        self.observation_space = _TEXT
        self.action_space = _TEXT
        self._canon = get_canonicalizer("scienceworld")
        self._java_options = tuple(java_options)
        self._jvm_arg = jvm
        self.jvm: SciWorldJVM | None = None
        self._owns_jvm = False
        self._iface: Any = None
        self._gen = -1
        self._watchdog: Any = None
        self._sim: tuple[int, tuple[int, int]] | None = None
        """(JVM generation, the simulator's process-wide state as this env's last turn left it)."""
        self._turn_depth = 0
        self._traj: Trajectory | None = None
        self._last_obs = ""
        self._score = 0
        self._steps = 0
        self._done = False
        self.current_task: str | None = None
        self.current_variation: int | None = None
        self.goal = ""
        if not lazy:
            self._ensure_jvm()

    # -- simulator plumbing --------------------------------------------------------------------------
    def _ensure_jvm(self) -> SciWorldJVM:
        if self.jvm is None:
            self.jvm, self._owns_jvm = _resolve_jvm(self._jvm_arg, self._java_options)
            self._watchdog = self.jvm.watchdog()
        if not self.jvm.alive:
            self.jvm.start()
        return self.jvm

    def _interface(self) -> Any:
        jvm = self._ensure_jvm()
        if self._iface is None or self._gen != jvm.generation:
            self._iface = jvm.new_interface()
            self._gen = jvm.generation
        return self._iface

    @contextlib.contextmanager
    def _turn(self) -> Iterator[SciWorldJVM]:
        """This env's turn in its JVM: the JVM's call lock, with the simulator's process-wide state (one
        random generator and one object-id counter for every env in the JVM) set to this env's own for
        the turn and saved after it -- so an episode plays as it would alone in its JVM, whatever the
        other envs there do meanwhile (interleaved steps, another env's load)."""
        jvm = self._ensure_jvm()
        with jvm.call_lock:
            outer = self._turn_depth == 0
            if outer and self._sim is not None and self._sim[0] == jvm.generation:
                self._guarded(jvm.set_sim_state, self._sim[1])
            self._turn_depth += 1
            try:
                yield jvm
            finally:
                self._turn_depth -= 1
                if outer:
                    self._sim = None
                    if jvm.alive and not self._watchdog.fired:  # else the episode is lost anyway (and
                        with contextlib.suppress(
                            Exception
                        ):  # arming again would hide why, see _fault_reason)
                            self._sim = (jvm.generation, self._guarded(jvm.sim_state))

    def _guarded(self, fn: Any, *args: Any) -> Any:
        """``fn(*args)`` (a state read or write: a few µs of work) under the watchdog, so a hung JVM is
        killed, not waited on forever; at least :data:`STATE_TIMEOUT_S`, so a tight step budget still
        falls on the step itself."""
        self._watchdog.arm(max(self.step_timeout, STATE_TIMEOUT_S))
        try:
            return fn(*args)
        finally:
            self._watchdog.disarm()

    def _call(self, timeout: float, fn: Any, *args: Any) -> Any:
        """``fn(*args)`` in the simulator on this env's turn, killed past ``timeout`` seconds."""
        assert self._watchdog is not None
        with self._turn():  # armed only once our turn comes: waiting is not hanging
            self._watchdog.arm(timeout)
            try:
                return fn(*args)
            finally:
                self._watchdog.disarm()

    def _fault_reason(self, exc: Exception, what: str, timeout: float) -> str:
        """Why a simulator call failed; restarts the JVM when it is gone. The episode is lost either way."""
        assert self.jvm is not None
        from py4j.protocol import Py4JJavaError

        if self._watchdog.fired:
            reason = f"simulator {what} hung past the {timeout:g}s timeout; the JVM was killed and restarted"
        elif self._gen != self.jvm.generation:
            reason = f"simulator was restarted (by another env sharing the JVM) before this {what}"
        elif isinstance(exc, Py4JJavaError) and self.jvm.alive:
            reason = f"simulator raised during {what}: {str(exc).strip().splitlines()[-1][:300]}"
        else:
            proc = self.jvm._proc
            with contextlib.suppress(Exception):  # a dropped connection: let the dying process exit
                proc.wait(timeout=2)
            reason = f"simulator process died during {what} (exit code {self.jvm.exit_code}); the JVM was restarted"
        if not self.jvm.alive or self._watchdog.fired:
            self.jvm.restart()
        self._iface = None
        return reason

    # -- Gymnasium API ------------------------------------------------------------------------------
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """Load a task variation: ``options["task"]``/``["variation"]``, else the constructor's, else sampled.

        ``options["gold_path"] = True`` also generates the gold action sequence (:meth:`gold_actions`).
        """
        super().reset(seed=seed)
        opts = dict(options or {})
        task = opts.get("task", self.task)
        task = folds.resolve_task(task) if task is not None else None
        variation = opts.get("variation", self.variation if task == self.task else None)
        if task is None and variation is not None:
            raise EnvConfigError(
                f"variation={variation!r} was given without a task",
                fix='pass options={"task": ..., "variation": ...} or build the env with task=',
            )
        if variation is None:
            task, variation = folds.sample_task_variation(
                self.np_random, fold=self.fold, split=self.split, task=task, tasks=self.tasks
            )
        assert task is not None
        n_variations = folds.TASKS[task][1]
        if not 0 <= int(variation) < n_variations:
            raise EnvConfigError(
                f"variation={variation!r} is out of range for {task!r}", fix=f"use 0..{n_variations - 1}"
            )
        gold = bool(opts.get("gold_path", False))
        err = _py4j_error()
        for attempt in (0, 1):
            iface = self._interface()
            try:
                with self._turn():  # the load and its first reads, as one turn in the JVM
                    self._call(
                        self.load_timeout, iface.load, task, int(variation), self.simplifications, gold
                    )
                    obs = self._call(self.step_timeout, iface.freeActionLook)
                    goal = self._call(self.step_timeout, iface.getTaskDescription)
                break
            except err as exc:
                reason = self._fault_reason(exc, "load", self.load_timeout)
                if attempt == 1:
                    raise EnvConfigError(f"could not load {task!r} variation {variation}: {reason}") from exc
        self.current_task, self.current_variation, self.goal = task, int(variation), str(goal)
        # freeActionLook ends in a newline that the stepped "look around" (and train-gold.jsonl) lacks.
        self._last_obs, self._score, self._steps, self._done = str(obs).rstrip("\n"), 0, 0, False
        self._traj = Trajectory(
            id=f"scienceworld/{task}/{int(variation)}",
            steps=[],
            success=False,
            env="scienceworld",
            task=task,
            goal=self.goal,
            extra={"variation": int(variation), "initial_observation": self._last_obs},
        )
        info = self._base_info()
        info["goal"] = self.goal
        if self.return_valid_actions:
            info["valid_actions"] = self.valid_actions()
        return self._last_obs, info

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Run one action; reward is the score change (points, -100..100)."""
        if self._traj is None:
            raise EnvConfigError("step() called before reset()", fix="call env.reset() first")
        if self._iface is None:  # a fault dropped the handle; the restarted JVM holds no episode
            raise EnvConfigError(
                "step() after a simulator fault ended the episode", fix="call env.reset() to load a new one"
            )
        if self._done:  # the simulator would go on and could score again: the episode is over
            raise EnvConfigError("step() called after the episode ended", fix="call env.reset() first")
        action = str(action)
        traj = self._traj
        traj.steps.append(Step(action=action))
        index = len(traj.steps) - 1
        canonical = self._canon(action, self._canon.corpus_context(traj, index))
        if not _sendable(action):  # py4j cannot encode it: refuse it here, as the simulator would
            return self._refused_unsendable(canonical)
        assert self.jvm is not None
        err = _py4j_error()
        try:
            if self._gen != self.jvm.generation:
                raise err("simulator handle is from a previous JVM")
            with self._turn():  # one call at a time per JVM, on this env's own simulator state
                self._watchdog.arm(self.step_timeout)
                try:
                    iface = self._iface
                    obs = str(iface.step(action))
                    score = round(100 * float(iface.getScore()))
                    completed = bool(iface.getCompleted())
                    moves = int(iface.getNumMoves())
                finally:
                    self._watchdog.disarm()
        except err as exc:
            reason = self._fault_reason(exc, "step", self.step_timeout)
            traj.steps[-1].observation = ""
            self._steps += 1
            self._done = True
            info = self._base_info()
            info.update(fault=reason, xtree={**canonical.to_info(), "invalid": False}, invalid_action=False)
            return "", 0.0, False, True, info
        reward = float(score - self._score)
        self._score = score
        self._steps += 1
        traj.steps[-1].observation = obs
        self._last_obs = obs
        terminated = completed or score < 0
        truncated = not terminated and self.step_limit is not None and self._steps >= self.step_limit
        self._done = terminated or truncated
        invalid = is_invalid_reply(obs)
        info = self._base_info()
        info["moves"] = moves
        info["invalid_action"] = invalid
        info["xtree"] = {**canonical.to_info(), "invalid": invalid}
        if self.return_valid_actions:
            info["valid_actions"] = self.valid_actions()
        return obs, reward, terminated, truncated, info

    def _refused_unsendable(self, canonical: Any) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """An action py4j cannot send (a lone surrogate): invalid, the episode goes on."""
        obs = INVALID_REPLIES[0]
        assert self._traj is not None
        self._traj.steps[-1].observation = obs
        self._steps += 1
        truncated = self.step_limit is not None and self._steps >= self.step_limit
        self._done = truncated
        info = self._base_info()
        info.update(invalid_action=True, xtree={**canonical.to_info(), "invalid": True})
        info["action_error"] = "the action is not valid UTF-8 text (a lone surrogate); it was not sent"
        return obs, 0.0, False, truncated, info

    def _base_info(self) -> dict[str, Any]:
        return {
            "task": self.current_task,
            "goal": self.goal,  # the task description, on every step (an LLM loop needs it)
            "task_id": folds.TASKS[self.current_task][0] if self.current_task else None,
            "variation": self.current_variation,
            "score": self._score,
            "won": self._score >= 100,
            "moves": self._steps,
            "steps": self._steps,
        }

    # -- extras ----------------------------------------------------------------------------------
    def valid_actions(self) -> list[str]:
        """Every valid action string in the current state (costs 35-150 ms)."""
        return [
            str(a) for a in self._call(self.step_timeout, self._interface().getValidActionObjectCombinations)
        ]

    def action_templates(self) -> list[str]:
        """The simulator's action command templates (``"open OBJ"``, ``"go to LOC"``...), as RLVMR lists them."""
        return [str(a) for a in self._call(self.step_timeout, self._interface().getPossibleActions)]

    def objects_in_view(self) -> list[str]:
        """The objects the agent can refer to in its current location (``getPossibleObjects``)."""
        return [str(a) for a in self._call(self.step_timeout, self._interface().getPossibleObjects)]

    def gold_actions(self) -> list[str]:
        """The simulator's gold action sequence for the loaded variation (needs ``reset(options={"gold_path": True})``)."""
        seq = [str(a) for a in self._call(self.step_timeout, self._interface().getGoldActionSequence)]
        if seq and seq[0].startswith("ERROR"):
            raise EnvConfigError(seq[0], fix='reset with options={"gold_path": True}')
        return seq

    @property
    def trajectory(self) -> Trajectory | None:
        """The episode so far as a corpus :class:`~xtree_gym.corpus.Trajectory` (raw actions, observations)."""
        return self._traj

    def render(self) -> str | None:  # type: ignore[override]
        return self._last_obs if self.render_mode == "ansi" else None

    def close(self) -> None:
        if self._watchdog is not None:
            self._watchdog.close()
            self._watchdog = None
        if self.jvm is not None and self._owns_jvm:
            self.jvm.close()
        self.jvm = None
        self._iface = None
        super().close()


class ScienceWorldGroup:
    """n environments that always run the *same* task variation (one GRPO group).

    The (task, variation) is drawn once per :meth:`reset` from the group's own generator, then every
    member is reset with it -- no member samples on its own, so a group never mixes tasks.

    Example:
        >>> ScienceWorldGroup(0)
        Traceback (most recent call last):
        ...
        xtree_gym.errors.EnvConfigError: a group needs n >= 1 environments, got 0
        >>> group = ScienceWorldGroup(4, fold="G1", seed=0)  # doctest: +SKIP
        >>> observations, infos = group.reset()  # doctest: +SKIP
        >>> len({(i["task"], i["variation"]) for i in infos})  # doctest: +SKIP
        1
    """

    def __init__(
        self,
        n: int,
        *,
        fold: str | None = None,
        split: str = "train",
        task: str | None = None,
        tasks: Sequence[str] | None = None,
        seed: int | None = None,
        jvm: SciWorldJVM | str | None = "shared",
        **env_kwargs: Any,
    ) -> None:
        if n < 1:
            raise EnvConfigError(f"a group needs n >= 1 environments, got {n}")
        self.fold = folds.get_fold(fold).name if fold is not None else None
        self.split = split
        self.fixed_task = folds.resolve_task(task) if task is not None else None
        self.tasks = tasks
        self._rng = np.random.default_rng(seed)
        self.envs = [ScienceWorldEnv(split=split, fold=fold, jvm=jvm, **env_kwargs) for _ in range(n)]
        self.task: str | None = None
        self.variation: int | None = None

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[list[str], list[dict[str, Any]]]:
        """Draw one (task, variation) (or take ``options``') and reset every member with it."""
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        opts = dict(options or {})
        if "task" in opts and "variation" in opts:
            task, variation = folds.resolve_task(opts["task"]), int(opts["variation"])
        else:
            task, variation = folds.sample_task_variation(
                self._rng,
                fold=self.fold,
                split=self.split,
                task=opts.get("task", self.fixed_task),
                tasks=self.tasks,
            )
        self.task, self.variation = task, variation
        results = [env.reset(options={**opts, "task": task, "variation": variation}) for env in self.envs]
        return [r[0] for r in results], [r[1] for r in results]

    def step(
        self, actions: Sequence[str | None]
    ) -> tuple[list[str], list[float], list[bool], list[bool], list[dict[str, Any]]]:
        """Step member i with ``actions[i]``; ``None`` leaves a finished member untouched (its result is empty)."""
        if len(actions) != len(self.envs):
            raise EnvConfigError(f"expected {len(self.envs)} actions, got {len(actions)}")
        out: tuple[list[Any], ...] = ([], [], [], [], [])
        for env, action in zip(self.envs, actions):
            result: tuple[Any, ...] = ("", 0.0, False, False, {"skipped": True})
            if action is not None:
                result = env.step(action)
            for column, value in zip(out, result):
                column.append(value)
        return out  # type: ignore[return-value]

    def __len__(self) -> int:
        return len(self.envs)

    def close(self) -> None:
        for env in self.envs:
            env.close()


def make_group(n: int, **kwargs: Any) -> ScienceWorldGroup:
    """Build a :class:`ScienceWorldGroup` of ``n`` envs on one task variation (kwargs as for the group)."""
    return ScienceWorldGroup(n, **kwargs)
