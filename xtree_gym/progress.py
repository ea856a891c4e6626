"""A dependency-free progress display on stderr (tqdm's look, none of its weight).

Three modes, chosen once per bar:

* ``bar`` -- one redrawn line (``\\r``), when stderr is a terminal or ``XTREE_PROGRESS=1``;
* ``log`` -- when stderr is a file or pipe (CI logs, ``2> log``): a plain line after the first
  ``log_after`` seconds and then every ``log_every`` seconds, so a long run is never silent and a
  short one prints nothing;
* off -- ``XTREE_PROGRESS=0`` or ``enabled=False``.

A bar shows itself at once (``0/N``) and a background ticker keeps the elapsed time moving while the
first item is still on its way (a simulator starting, a model loading), so long work shows progress
from its first second.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")

LOG_AFTER = 5.0
"""Seconds before the first plain line in log mode."""
LOG_EVERY = 30.0
"""Seconds between plain lines in log mode."""


def _mode(force: bool | None) -> str | None:
    if force is not None:
        return "bar" if force else None
    env = os.environ.get("XTREE_PROGRESS")
    if env is not None:
        return "bar" if env not in ("0", "", "false") else None
    return "bar" if sys.stderr.isatty() else "log"


def _enabled(force: bool | None) -> bool:
    return _mode(force) is not None


class Progress:
    """A counter shown on stderr: a redrawn bar on a terminal, a plain line now and then in a log.

    Example:
        >>> with Progress(total=3, desc="mine", enabled=False) as bar:
        ...     bar.update(2)
        ...     bar.n
        2
    """

    def __init__(
        self,
        total: int | None = None,
        desc: str = "",
        enabled: bool | None = None,
        *,
        log_after: float = LOG_AFTER,
        log_every: float = LOG_EVERY,
    ) -> None:
        self.total = total
        self.desc = desc
        self.n = 0
        self.postfix = ""
        self.mode = _mode(enabled)
        self.enabled = self.mode is not None
        self._start = time.monotonic()
        self._last = 0.0
        self._next_log = self._start + log_after
        self._log_every = log_every
        self._logged = False
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None
        if self.enabled:
            if self.mode == "bar":
                self._draw(self._start)
            self._ticker = threading.Thread(target=self._tick, name="xtree-progress", daemon=True)
            self._ticker.start()

    def _tick(self) -> None:
        while not self._stop.wait(1.0):
            self._maybe_draw(time.monotonic(), force=self.mode == "bar")

    def update(self, k: int = 1) -> None:
        self.n += k
        if self.enabled:
            now = time.monotonic()
            done = self.total is not None and self.n >= self.total
            self._maybe_draw(now, force=self.mode == "bar" and (now - self._last >= 0.1 or done))

    def set_description(self, desc: str) -> None:
        self.desc = desc

    def set_postfix(self, text: str) -> None:
        """Text shown after the count, for work that moves inside an item (turns, tokens of an episode).

        Example:
            >>> bar = Progress(total=2, desc="eval", enabled=False)
            >>> bar.set_postfix("3 turns, 41.0 tok/s")
            >>> bar._text(bar._start + 10).endswith("| 3 turns, 41.0 tok/s")
            True
        """
        self.postfix = text
        if self.enabled:
            now = time.monotonic()
            self._maybe_draw(now, force=self.mode == "bar" and now - self._last >= 0.1)

    def elapsed(self) -> float:
        """Seconds since the bar started."""
        return time.monotonic() - self._start

    def _maybe_draw(self, now: float, force: bool) -> None:
        if self.mode == "log":
            if now >= self._next_log:
                self._next_log = now + self._log_every
                self._draw(now)
        elif force:
            self._draw(now)

    def _text(self, now: float) -> str:
        text = self._count_text(now)
        return f"{text} | {self.postfix}" if self.postfix else text

    def _count_text(self, now: float) -> str:
        elapsed = now - self._start
        rate = self.n / elapsed if elapsed > 0 else 0.0
        if self.total:
            frac = min(1.0, self.n / self.total)
            if self.mode == "log":
                eta = (
                    f", ETA {format_seconds((self.total - self.n) / rate)}"
                    if rate > 0 and self.n < self.total
                    else ""
                )
                return f"{self.desc}: {self.n}/{self.total} ({frac:.0%}) after {elapsed:.0f}s{eta}"
            filled = int(frac * 24)
            bar = "#" * filled + "-" * (24 - filled)
            eta = f" ETA {(self.total - self.n) / rate:.0f}s" if rate > 0 and self.n < self.total else ""
            speed = f"{rate:,.0f}/s" if rate >= 10 else f"{rate:.2f}/s"  # episodes run slower than 1/s
            return f"{self.desc} [{bar}] {self.n}/{self.total} {frac:4.0%} {elapsed:5.1f}s {speed}{eta}"
        if self.mode == "log":
            return f"{self.desc}: {self.n} after {elapsed:.0f}s"
        return f"{self.desc} {self.n} {elapsed:5.1f}s {rate:,.0f}/s"

    def _draw(self, now: float) -> None:
        with self._lock:
            self._last = now
            if self.mode == "log":
                self._logged = True
                sys.stderr.write(self._text(now) + "\n")
            else:
                sys.stderr.write("\r" + self._text(now))
            sys.stderr.flush()

    def write(self, line: str) -> None:
        """Print ``line`` on stderr above the bar (whatever the mode: a step line is shown even with the bar off).

        Example:
            >>> import contextlib, io
            >>> err = io.StringIO()
            >>> with contextlib.redirect_stderr(err):
            ...     Progress(total=2, enabled=False).write("step 1/2")
            >>> err.getvalue()
            'step 1/2\\n'
        """
        with self._lock:
            if self.mode == "bar":
                sys.stderr.write("\r\033[K" + line + "\n" + self._text(time.monotonic()))
            else:
                sys.stderr.write(line + "\n")
            sys.stderr.flush()

    def close(self) -> None:
        if self._ticker is not None:
            self._stop.set()
            self._ticker.join()
            self._ticker = None
            if self.mode == "bar":
                self._draw(time.monotonic())
                sys.stderr.write("\n")
                sys.stderr.flush()
            elif self._logged:  # a log that said "3/10" also says how it ended
                self._draw(time.monotonic())

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def format_seconds(seconds: float) -> str:
    """``42s``, ``3m05s``, ``2h14m``: a duration as people read it.

    Example:
        >>> format_seconds(42.4), format_seconds(185), format_seconds(8040)
        ('42s', '3m05s', '2h14m')
    """
    s = round(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def eta_line(done: int, total: int, elapsed: float) -> str:
    """``3/10, 12s so far, ETA 28s``: how far a run of ``total`` units is, its ETA from the speed so far.

    Example:
        >>> eta_line(1, 4, 30.0), eta_line(4, 4, 100.0)
        ('1/4, 30s so far, ETA 1m30s', '4/4, 1m40s so far, done')
    """
    if done >= total:
        return f"{done}/{total}, {format_seconds(elapsed)} so far, done"
    if done <= 0 or elapsed <= 0:
        return f"{done}/{total}, {format_seconds(elapsed)} so far"
    return f"{done}/{total}, {format_seconds(elapsed)} so far, ETA {format_seconds(elapsed / done * (total - done))}"


def progress(
    iterable: Iterable[T], total: int | None = None, desc: str = "", enabled: bool | None = None
) -> Iterator[T]:
    """Iterate ``iterable`` while drawing a progress bar.

    Example:
        >>> list(progress([1, 2, 3], desc="x", enabled=False))
        [1, 2, 3]
    """
    if total is None and hasattr(iterable, "__len__"):
        total = len(iterable)  # type: ignore[arg-type]
    bar = Progress(total, desc, enabled)
    try:
        for item in iterable:
            yield item
            bar.update()
    finally:
        bar.close()
