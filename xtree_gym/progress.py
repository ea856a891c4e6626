"""A dependency-free progress bar on stderr (tqdm's look, none of its weight).

Shown only when stderr is a terminal or ``XTREE_PROGRESS=1``; ``XTREE_PROGRESS=0`` hides it.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")


def _enabled(force: bool | None) -> bool:
    if force is not None:
        return force
    env = os.environ.get("XTREE_PROGRESS")
    if env is not None:
        return env not in ("0", "", "false")
    return sys.stderr.isatty()


class Progress:
    """A counter that redraws one stderr line at most 10 times a second.

    Example:
        >>> with Progress(total=3, desc="mine", enabled=False) as bar:
        ...     bar.update(2)
        ...     bar.n
        2
    """

    def __init__(self, total: int | None = None, desc: str = "", enabled: bool | None = None) -> None:
        self.total = total
        self.desc = desc
        self.n = 0
        self.enabled = _enabled(enabled)
        self._start = time.monotonic()
        self._last = 0.0

    def update(self, k: int = 1) -> None:
        self.n += k
        if self.enabled:
            now = time.monotonic()
            if now - self._last >= 0.1 or (self.total is not None and self.n >= self.total):
                self._last = now
                self._draw(now)

    def set_description(self, desc: str) -> None:
        self.desc = desc

    def _draw(self, now: float) -> None:
        elapsed = now - self._start
        rate = self.n / elapsed if elapsed > 0 else 0.0
        if self.total:
            frac = min(1.0, self.n / self.total)
            filled = int(frac * 24)
            bar = "#" * filled + "-" * (24 - filled)
            eta = f" ETA {(self.total - self.n) / rate:.0f}s" if rate > 0 and self.n < self.total else ""
            speed = f"{rate:,.0f}/s" if rate >= 10 else f"{rate:.2f}/s"  # episodes run slower than 1/s
            line = f"\r{self.desc} [{bar}] {self.n}/{self.total} {frac:4.0%} {elapsed:5.1f}s {speed}{eta}"
        else:
            line = f"\r{self.desc} {self.n} {elapsed:5.1f}s {rate:,.0f}/s"
        sys.stderr.write(line)
        sys.stderr.flush()

    def close(self) -> None:
        if self.enabled:
            self._draw(time.monotonic())
            sys.stderr.write("\n")
            sys.stderr.flush()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


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
