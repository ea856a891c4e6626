"""How BrowserGym's browsers are launched: which Chromium binary, which flags, how fast.

BrowserGym starts two Chromium processes per episode, both through the global Playwright
object (``browsergym.core._get_global_playwright()``): the task browser in
``BrowserEnv.reset`` and the chat window in ``Chat.__init__``. Neither accepts a binary path
for both, so :func:`patched_chromium_launch` wraps ``pw.chromium.launch`` on that one
Playwright instance for the duration of a ``reset`` and merges our settings into every
launch made inside it. Nothing is patched at import time, and the wrapper is removed on exit.

Playwright's own browser download does not work on machines without internet access; the
distribution's Chromium does. :func:`find_chromium` picks it: ``$XTREE_CHROMIUM`` first,
then ``/usr/bin/chromium`` and the other usual names on ``PATH``.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..errors import ConfigError, EnvConfigError

CHROMIUM_ENV_VAR = "XTREE_CHROMIUM"
"""Environment variable naming the Chromium binary to use (overrides the search)."""

_CANDIDATES = ("/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome", "google-chrome-stable")

QUIET_FEATURES_OFF: tuple[str, ...] = (
    "NetworkTimeServiceQuerying",  # the network-time probe (clients2.google.com/time)
    "OptimizationHints",  # page-load hints and models (optimizationguide-pa.googleapis.com)
    "OptimizationHintsFetching",
    "OptimizationGuideModelDownloading",
    "OptimizationTargetPrediction",
)
"""Chromium features that phone home although ``--disable-background-networking`` is given (Chromium 156)."""

QUIET_ARGS: tuple[str, ...] = (
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
    "--disable-domain-reliability",
    "--disable-features=" + ",".join(QUIET_FEATURES_OFF),
    # on-demand component checks (update.googleapis.com) and the start-up ListAccounts of the sign-in
    # service (accounts.google.com) go on regardless: their servers are pointed at an address never dialled
    "--component-updater=url-source=http://0.0.0.0:0",
    "--gaia-url=http://0.0.0.0:0",
)
"""Flags that stop Chromium from phoning home (updates, sync, sign-in, network time, QUIC probes), so that
the filtering proxy's ``refused_requests`` lists what the pages asked for, not the browser's own traffic."""

PLAYWRIGHT_DISABLED_FEATURES: tuple[str, ...] = (
    "ImprovedCookieControls", "LazyFrameLoading", "GlobalMediaControls", "DestroyProfileOnBrowserClose",
    "MediaRouter", "DialMediaRouteProvider", "AcceptCHFrame", "AutoExpandDetailsElement",
    "CertificateTransparencyComponentUpdater", "AvoidUnnecessaryBeforeUnloadCheckSync", "Translate",
    "HttpsUpgrades", "PaintHolding",
)  # fmt: skip
"""Playwright's own ``--disable-features`` (1.5x), kept when we pass ours: Chromium reads only the last
``--disable-features`` flag, and Playwright puts its own before the caller's."""


def playwright_disabled_features() -> tuple[str, ...]:
    """:data:`PLAYWRIGHT_DISABLED_FEATURES` plus any the installed Playwright driver adds.

    Example:
        >>> "HttpsUpgrades" in playwright_disabled_features()
        True
    """
    import re

    names = list(PLAYWRIGHT_DISABLED_FEATURES)
    try:
        import playwright

        js = Path(playwright.__file__).parent / "driver/package/lib/server/chromium/chromiumSwitches.js"
        for value in re.findall(r"--disable-features=([\w,]+)", js.read_text(encoding="utf-8")):
            names += value.split(",")
    except (ImportError, OSError, UnicodeDecodeError):  # no driver file: the pinned copy
        pass
    return tuple(dict.fromkeys(n for n in names if n))


def _merge_disabled_features(args: list[str]) -> list[str]:
    """``args`` with every ``--disable-features`` flag (and Playwright's own list) merged into one, last.

    Example:
        >>> out = _merge_disabled_features(["--a", "--disable-features=X", "--disable-features=Y,X"])
        >>> out[0], out[-1].startswith("--disable-features="), out[-1].endswith(",X,Y")
        ('--a', True, True)
    """
    prefix = "--disable-features="
    given = [n for a in args if a.startswith(prefix) for n in a[len(prefix) :].split(",") if n]
    if not given:
        return args
    merged = dict.fromkeys([*playwright_disabled_features(), *given])
    return [a for a in args if not a.startswith(prefix)] + [prefix + ",".join(merged)]


def find_chromium() -> str | None:
    """The Chromium binary to launch, or None to let Playwright use its own download.

    Example:
        >>> path = find_chromium()
        >>> path is None or os.path.isabs(path)
        True
    """
    env = os.environ.get(CHROMIUM_ENV_VAR)
    if env:
        return env
    for name in _CANDIDATES:
        found = name if os.path.isabs(name) and os.access(name, os.X_OK) else shutil.which(name)
        if found:
            return os.path.abspath(found)
    return None


@dataclass(frozen=True)
class BrowserLaunchConfig:
    """Launch settings shared by every XTree browser env.

    Example:
        >>> cfg = BrowserLaunchConfig(executable_path="/usr/bin/chromium")
        >>> cfg.slow_mo_ms, cfg.pre_observation_delay_s
        (0, 0.0)
        >>> ("--no-sandbox" in cfg.launch_args()) == (os.geteuid() == 0)   # only as root
        True
        >>> BrowserLaunchConfig.browsergym_defaults().slow_mo_ms is None
        True
    """

    executable_path: str | None = field(default_factory=find_chromium)
    """Chromium binary; None lets Playwright use its own download (``playwright install``)."""
    headless: bool = True
    """Run without a window (the only mode that works on a server)."""
    no_sandbox: bool = field(default_factory=lambda: hasattr(os, "geteuid") and os.geteuid() == 0)
    """Pass ``--no-sandbox``; by default only when running as root, where Chromium refuses to start
    its sandbox at all ("Running as root without --no-sandbox is not supported"). As any other user
    the sandbox stays on. As root, run the env in an unprivileged container or user if the pages it
    opens are not trusted: the navigation allow-list, not the sandbox, then keeps the agent in."""
    extra_args: tuple[str, ...] = QUIET_ARGS
    """Further command-line flags for both browsers."""
    slow_mo_ms: int | None = 0
    """Playwright's delay after every browser operation; None keeps the task's (100 ms MiniWoB, 1000 ms WebArena)."""
    pre_observation_delay_s: float = 0.0
    """Sleep before each observation is read (BrowserGym's default is 0.5 s)."""
    timeout_ms: int | None = None
    """Playwright's default timeout for one operation; None keeps the task's (5 s MiniWoB, 10 s WebArena)."""

    def __post_init__(self) -> None:
        if self.slow_mo_ms is not None and self.slow_mo_ms < 0:
            raise ConfigError(f"slow_mo_ms must be >= 0, got {self.slow_mo_ms!r}", fix="use 0 (fast) or None")
        if self.pre_observation_delay_s < 0:
            raise ConfigError(
                f"pre_observation_delay_s must be >= 0, got {self.pre_observation_delay_s!r}", fix="use 0.0"
            )
        if self.timeout_ms is not None and self.timeout_ms <= 0:
            raise ConfigError(f"timeout_ms must be > 0, got {self.timeout_ms!r}", fix="use None or e.g. 5000")

    @classmethod
    def browsergym_defaults(cls, **overrides: Any) -> BrowserLaunchConfig:
        """BrowserGym's own pacing (task ``slow_mo``, 0.5 s pre-observation sleep): slower, for comparison."""
        return replace(cls(slow_mo_ms=None, pre_observation_delay_s=0.5), **overrides)

    def launch_args(self) -> list[str]:
        """Command-line flags added to every launch."""
        args = ["--no-sandbox"] if self.no_sandbox else []
        return args + list(self.extra_args)

    def check_executable(self) -> None:
        """Raise one clear error when the configured binary is not there."""
        path = self.executable_path
        if path is not None and not (os.path.isfile(path) and os.access(path, os.X_OK)):
            raise EnvConfigError(
                f"Chromium binary {path!r} does not exist or is not executable",
                fix=f"apt-get install chromium, or set {CHROMIUM_ENV_VAR}=/path/to/chromium",
            )


_PROXY_FLAGS = frozenset(
    {"--no-proxy-server", "--proxy-pac-url", "--proxy-auto-detect", "--force-webrtc-ip-handling-policy"}
)
"""Flags that would take requests around the forced proxy; dropped whenever forced flags are given."""


def _merge_launch_kwargs(
    config: BrowserLaunchConfig, kwargs: dict[str, Any], forced: Sequence[str] = ()
) -> dict[str, Any]:
    """Our settings merged into the keyword arguments of one ``chromium.launch`` call.

    ``forced`` flags come last and replace any flag of the same name (and Playwright's ``proxy``
    option): the proxy flags of the allow-list cannot be overridden by the caller.

    Example:
        >>> cfg = BrowserLaunchConfig(executable_path=None, no_sandbox=False, extra_args=())
        >>> _merge_launch_kwargs(cfg, {"args": ["--proxy-server=x", "--a"], "proxy": {"server": "y"}},
        ...                      ["--proxy-server=http://127.0.0.1:1"])["args"]
        ['--a', '--proxy-server=http://127.0.0.1:1']
    """
    merged = dict(kwargs)
    if config.executable_path is not None:
        merged["executable_path"] = config.executable_path
    merged["headless"] = config.headless
    args = list(merged.get("args") or [])
    args = _merge_disabled_features(args + [a for a in config.launch_args() if a not in args])
    if forced:
        merged.pop("proxy", None)
        names = {f.split("=", 1)[0] for f in forced} | _PROXY_FLAGS
        args = [a for a in args if a.split("=", 1)[0] not in names] + list(forced)
    merged["args"] = args
    return merged


@contextmanager
def patched_chromium_launch(
    config: BrowserLaunchConfig,
    playwright: Any = None,
    on_first_browser: Callable[[Any], None] | None = None,
    forced_args: Sequence[str] = (),
) -> Iterator[None]:
    """Within the block, every ``chromium.launch`` of BrowserGym's Playwright uses ``config``.

    ``playwright`` defaults to BrowserGym's global instance (started on first use). The patch
    is an attribute on that one ``BrowserType`` object, removed on exit, so nesting is harmless
    and no other Playwright instance is affected. ``on_first_browser`` is called with the first
    browser launched in the block (``BrowserEnv.reset`` launches the task's browser before the
    chat's), before the task opens any page in it. ``forced_args`` (the allow-list's proxy flags)
    are added to every launch and win over any other flag of the same name.
    """
    if playwright is None:
        from browsergym.core import _get_global_playwright

        playwright = _get_global_playwright()
    browser_type = playwright.chromium
    original: Callable[..., Any] = type(browser_type).launch.__get__(browser_type)
    had_patch = "launch" in vars(browser_type)
    previous = vars(browser_type).get("launch")

    launched: list[Any] = []

    def launch(**kwargs: Any) -> Any:
        browser = original(**_merge_launch_kwargs(config, kwargs, forced_args))
        if not launched and on_first_browser is not None:
            on_first_browser(browser)
        launched.append(browser)
        return browser

    browser_type.launch = launch
    try:
        yield
    finally:
        if had_patch:
            browser_type.launch = previous
        else:
            del browser_type.launch


def _parent_pid(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:  # the comm field may hold spaces: split after its ")"
        return int(f.read().rsplit(")", 1)[1].split()[1])


def own_browsers() -> dict[str, list[int]]:
    """This process's Chromium *browser* processes (not renderers), found in ``/proc`` (Linux).

    ``{"task": [...], "chat": [...]}``: BrowserGym's chat window is the browser launched with a
    window size. Only descendants of this process are listed, so a fault test that kills them can
    never touch another user's browser.
    """
    me = os.getpid()
    out: dict[str, list[int]] = {"task": [], "chat": []}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        pid = int(entry)
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            if b"chromium" not in cmd[0] or any(a.startswith(b"--type=") for a in cmd):
                continue
            parent = pid
            while parent > 1 and parent != me:
                parent = _parent_pid(parent)
        except (OSError, IndexError, ValueError):
            continue
        if parent == me:
            out["chat" if any(a.startswith(b"--window-size") for a in cmd) else "task"].append(pid)
    return out
