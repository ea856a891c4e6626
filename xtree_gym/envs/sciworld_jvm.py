"""The ScienceWorld simulator process: a JVM reached through py4j, with a bounded heap and a watchdog.

The ``scienceworld`` package's own ``ScienceWorldEnv`` starts its JVM with the default heap (3-4 GB
here) and lists every valid action on each step (~90 % of its step time). :class:`SciWorldJVM` starts the
same jar with ``-Xmx1g`` and hands out raw ``PythonInterface`` objects, one per environment; several
environments may share one JVM (each interface holds its own task state). The simulator is not
thread-safe: two ``load`` calls that overlap in one JVM build crossed worlds (an episode gets another
variation's objects, and a gold path that does not fit it), so every call into one JVM holds its
:attr:`SciWorldJVM.call_lock` -- envs on one JVM take turns, envs on separate JVMs run at once.
Taking turns is not enough: the simulator keeps two things process-wide, its one random generator
(``scala.util.Random``: wandering animals, bees, plant genetics) and its object-id counter, and every
``load`` reseeds both. :meth:`SciWorldJVM.sim_state` / :meth:`SciWorldJVM.set_sim_state` read and set
them, so each env can play its turns on its own state and an episode runs as it would alone in a JVM.
When the process dies or a call hangs, :meth:`SciWorldJVM.restart` starts a fresh one and bumps
:attr:`SciWorldJVM.generation`, so every environment using the old process knows its episode is gone.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import EnvConfigError, missing_dependency

DEFAULT_JAVA_OPTIONS: tuple[str, ...] = ("-Xmx1g", "-XX:+UseSerialGC")
"""Heap cap so several simulators fit in memory; the serial GC keeps a JVM to one GC thread on 2 cores."""


OPEN_JAVA_UTIL = "--add-opens=java.base/java.util=ALL-UNNAMED"
"""Always passed to the JVM: lets :meth:`SciWorldJVM.sim_state` read ``java.util.Random``'s private seed."""

_SCRAMBLE = 0x5DEECE66D
"""``java.util.Random.setSeed(s)`` stores ``s ^ _SCRAMBLE``; setting ``state ^ _SCRAMBLE`` restores ``state``."""


def java_available() -> bool:
    """Whether a ``java`` executable is on PATH (ScienceWorld needs Java 11+)."""
    return shutil.which("java") is not None


class _Watchdog:
    """Calls ``on_expire`` when an armed deadline passes (one daemon thread, re-armed per call)."""

    def __init__(self, on_expire: Callable[[], None]) -> None:
        self._on_expire = on_expire
        self._cond = threading.Condition()
        self._deadline: float | None = None
        self._closed = False
        self.fired = False
        self._thread = threading.Thread(target=self._run, name="sciworld-watchdog", daemon=True)
        self._thread.start()

    def arm(self, seconds: float) -> None:
        with self._cond:
            self.fired = False
            self._deadline = time.monotonic() + seconds
            self._cond.notify()

    def disarm(self) -> None:
        with self._cond:
            self._deadline = None

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify()

    def _run(self) -> None:
        with self._cond:
            while not self._closed:
                if self._deadline is None:
                    self._cond.wait()
                    continue
                remaining = self._deadline - time.monotonic()
                if remaining > 0:
                    self._cond.wait(remaining)
                    continue
                self._deadline = None
                self.fired = True
                self._cond.release()
                try:
                    self._on_expire()
                finally:
                    self._cond.acquire()


class SciWorldJVM:
    """One ScienceWorld simulator process; environments get interfaces from it.

    Example:
        >>> jvm = SciWorldJVM(java_options=["-Xmx1g"], start=False)
        >>> jvm.alive, jvm.generation
        (False, 0)
        >>> jvm.start(); iface = jvm.new_interface()  # doctest: +SKIP
    """

    def __init__(
        self,
        *,
        java_options: Sequence[str] = DEFAULT_JAVA_OPTIONS,
        jar_path: str | None = None,
        start: bool = True,
    ) -> None:
        self.java_options = tuple(java_options)
        self.jar_path = jar_path
        self.generation = 0
        """Incremented at every (re)start: an interface of an older generation is dead."""
        self._gateway: Any = None
        self._proc: Any = None
        self._lock = threading.Lock()
        self._sim_handles: tuple[int, Any] = (-1, None)  # (generation, reflection handles) for sim_state
        self.call_lock = threading.RLock()
        """Held for every simulator call into this JVM (:class:`~xtree_gym.envs.scienceworld.ScienceWorldEnv`
        takes it): overlapping loads in one JVM cross their worlds, so calls take turns."""
        if start:
            self.start()

    # -- lifecycle ---------------------------------------------------------------------------------
    def start(self) -> None:
        """Launch the JVM (no-op when it is already running)."""
        with self._lock:
            if self.alive:
                return
            self._shutdown_gateway()
            self._launch()
            self.generation += 1

    def _launch(self) -> None:
        try:
            from py4j.java_gateway import GatewayParameters, JavaGateway, launch_gateway
            from scienceworld.constants import BASEPATH, JAR_PATH
        except ImportError as exc:
            raise missing_dependency("scienceworld", "scienceworld", "XTree-ScienceWorld-v0") from exc
        if not java_available():
            raise EnvConfigError(
                "ScienceWorld needs `java` on PATH, and none was found",
                fix="install a Java 11+ runtime (e.g. `apt-get install openjdk-17-jre-headless`)",
            )
        jar = self.jar_path or JAR_PATH
        if not os.path.isfile(jar):
            raise EnvConfigError(f"ScienceWorld jar {jar!r} does not exist", fix="reinstall scienceworld")
        # py4j logs a traceback for every call on a dead JVM; the env reports those faults itself.
        logging.getLogger("py4j.java_gateway").setLevel(logging.CRITICAL)
        port, proc = launch_gateway(
            classpath=jar,
            die_on_exit=True,
            cwd=BASEPATH,
            return_proc=True,
            javaopts=[*self.java_options, OPEN_JAVA_UTIL],
        )
        self._proc = proc
        self._gateway = JavaGateway(
            gateway_parameters=GatewayParameters(auto_field=True, port=port), java_process=proc
        )

    def restart(self) -> None:
        """Kill the process if it still runs and start a fresh one (bumps :attr:`generation`)."""
        self.kill()
        self.start()

    def kill(self) -> None:
        """SIGKILL the JVM (used on a hung call, and by tests to inject a crash)."""
        proc = self._proc
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGKILL)
            with contextlib.suppress(Exception):  # a zombie we cannot reap is still dead
                proc.wait(timeout=10)

    def close(self) -> None:
        """Stop the JVM and release its gateway."""
        with self._lock:
            self._shutdown_gateway()
            self.kill()
            self._proc = None

    def _shutdown_gateway(self) -> None:
        gw, self._gateway = self._gateway, None
        if gw is None:
            return
        with contextlib.suppress(Exception):  # the process may already be gone; nothing left to release
            if self.alive:
                gw.shutdown()
            else:
                gw.close()

    def __enter__(self) -> SciWorldJVM:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- state -----------------------------------------------------------------------------------
    @property
    def alive(self) -> bool:
        """Whether the JVM process is running."""
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        """Process id of the JVM (``None`` before start)."""
        return None if self._proc is None else int(self._proc.pid)

    @property
    def exit_code(self) -> int | None:
        """The JVM's exit status once it has died (negative: killed by that signal)."""
        return None if self._proc is None else self._proc.poll()

    def rss_bytes(self) -> int | None:
        """Resident memory of the JVM process (Linux ``/proc``), or ``None`` when unknown."""
        if not self.alive:
            return None
        try:
            with open(f"/proc/{self.pid}/status", encoding="ascii") as fh:
                for line in fh:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1]) * 1024
        except OSError:
            return None
        return None

    def new_interface(self) -> Any:
        """A fresh simulator handle (``scienceworld.runtime.pythonapi.PythonInterface``) in this JVM."""
        if not self.alive:
            self.start()
        with self.call_lock:
            return self._gateway.jvm.scienceworld.runtime.pythonapi.PythonInterface()

    def _handles(self) -> Any:
        """(scala's Random object, its java.util.Random, the ``seed`` field, the id counter), per generation."""
        if self._sim_handles[0] != self.generation:
            jvm = self._gateway.jvm
            forname = jvm.java.lang.Class.forName
            module = forname("scala.util.Random$").getField("MODULE$").get(None)
            field = forname("java.util.Random").getDeclaredField("seed")
            field.setAccessible(True)  # needs OPEN_JAVA_UTIL on Java 9+
            self._sim_handles = (self.generation, (module, module.self(), field, jvm.util.UniqueIdentifier))
        return self._sim_handles[1]

    def sim_state(self) -> tuple[int, int]:
        """The simulator's process-wide state: (its random generator's 48-bit seed, its last object id).

        Every env in this JVM shares it; call it (and :meth:`set_sim_state`) holding :attr:`call_lock`.
        """
        with self.call_lock:
            _, rng, field, ids = self._handles()
            return int(field.get(rng)), int(ids.count())

    def set_sim_state(self, state: tuple[int, int]) -> None:
        """Set what :meth:`sim_state` read: the generator continues exactly where it was then."""
        with self.call_lock:
            module, _, _, ids = self._handles()
            module.setSeed(int(state[0]) ^ _SCRAMBLE)
            getattr(ids, "count_$eq")(int(state[1]))

    def watchdog(self) -> _Watchdog:
        """A watchdog that kills this JVM when an armed deadline passes (one per environment)."""
        return _Watchdog(self.kill)


_SHARED: dict[tuple[str, ...], SciWorldJVM] = {}  # java options -> the process-wide shared JVM
_SHARED_LOCK = threading.Lock()


def shared_jvm(java_options: Sequence[str] = DEFAULT_JAVA_OPTIONS) -> SciWorldJVM:
    """The process-wide JVM for ``java_options``, started on first use (what ``jvm="shared"`` uses)."""
    key = tuple(java_options)
    with _SHARED_LOCK:
        jvm = _SHARED.get(key)
        if jvm is None:
            jvm = _SHARED[key] = SciWorldJVM(java_options=key)
        elif not jvm.alive:
            jvm.start()
        return jvm
