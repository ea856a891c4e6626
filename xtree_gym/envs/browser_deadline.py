"""A deadline for every browser call that works on Playwright's sync API, in-process and in env workers.

Playwright's sync API may only be used from the thread that started it, so a timer thread cannot
cancel a hung call (``cannot switch to a different thread``). The :class:`BrowserWatchdog` never
touches Playwright: when a reset or step runs past its deadline it ``SIGKILL``\\ s the env's own
Chromium processes (found by PID as children of this process, recorded at launch), the pending
Playwright call then fails on the caller's thread with "Target closed", the env ends the episode as
a fault, and the next reset launches fresh browsers. A frozen (``SIGSTOP``\\ ped) browser is killed
the same way.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from .browser_launch import own_browsers

DEFAULT_STEP_DEADLINE_S = 60.0
"""Seconds one browser step (or reset) may take by default before its browsers are killed (None lifts it)."""


def reset_deadline(step_deadline: float | None) -> float | None:
    """A reset's deadline: launching two browsers takes longer than a step (3x, at least the default).

    Example:
        >>> reset_deadline(5.0), reset_deadline(100.0), reset_deadline(None)
        (60.0, 300.0, None)
    """
    return None if step_deadline is None else max(DEFAULT_STEP_DEADLINE_S, 3 * step_deadline)


def browser_pids() -> set[int]:
    """PIDs of every Chromium browser process started below this process (task and chat)."""
    return {pid for pids in own_browsers().values() for pid in pids}


def kill_pids(pids: Iterable[int]) -> int:
    """``SIGKILL`` each live pid of ``pids`` (a stopped process dies too); returns how many were sent."""
    sent = 0
    for pid in pids:
        if not Path(f"/proc/{pid}").exists():
            continue
        try:
            os.kill(pid, signal.SIGKILL)
            sent += 1
        except (ProcessLookupError, PermissionError):
            pass
    return sent


class BrowserWatchdog:
    """Kills :attr:`pids` when a guarded call outlives its deadline; :attr:`fired` says it did.

    Example:
        >>> dog = BrowserWatchdog()
        >>> with dog.guard(5.0, "step"):   # no pids known: nothing to kill, nothing fires
        ...     pass
        >>> dog.fired is None
        True
    """

    def __init__(self) -> None:
        self.pids: set[int] = set()
        self.fired: str | None = None

    @contextmanager
    def guard(
        self, seconds: float | None, what: str, launched: Callable[[], set[int]] | None = None
    ) -> Iterator[None]:
        """Run the block under a ``seconds`` deadline (None: no deadline). ``launched`` names the
        browsers a block that launches them has started so far (a reset's, before :attr:`pids` is set)."""
        self.fired = None
        if seconds is None:
            yield
            return
        done = threading.Event()

        def expire() -> None:
            if done.wait(seconds):
                return
            pids = self.pids | (launched() if launched is not None else set())
            if pids:
                self.fired = f"{what} ran past the {seconds:g}s browser deadline; its browser was killed"
                kill_pids(pids)

        timer = threading.Thread(target=expire, name="xtree-browser-deadline", daemon=True)
        timer.start()
        try:
            yield
        finally:
            done.set()
            timer.join(1.0)
