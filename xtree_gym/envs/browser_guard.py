"""What the agent may do in the browser envs: the action set, where pages may come from, faults.

* **Action set** (:data:`ACTION_NAMES`, :func:`make_action_set`): BrowserGym's default subsets
  (chat, infeasible, element, navigation, tabs) plus ``check``/``uncheck`` and
  ``keyboard_press`` -- the canonicalizer and the paper's Table 9 name them, and BrowserGym
  ships them but leaves them out of its default set -- and minus ``upload_file``, which
  reads a file of this machine into the page. Any other function is an invalid action.
* **Navigation** (:class:`NavigationPolicy`): ``about:blank``, the task's own ``file://`` folder
  (MiniWoB++ serves its pages from the ``miniwob`` wheel) and the http(s) origins on the
  allow-list: the task's own (an OpenURL start page's origin, WebArena's configured ``WA_*``
  sites) plus what the user adds (``allowed_origins``; ``"*"`` = any public web origin).
  Loopback, link-local (``169.254/16``, the cloud metadata address), private and other
  non-public addresses are refused unless their origin is listed by name or ``allow_private``
  is set. Everything else -- ``file:///etc/passwd``, ``view-source:``, ``chrome://`` -- is refused.
  The env checks ``goto`` before running it (an invalid action), aborts the first hop of every
  other request of the task browser's context that leaves the policy (from its creation on,
  before the task opens its first page: links, new tabs, frames, ``fetch``), blocks service
  workers, and sends a page that still ended up outside back to ``about:blank``. What a route
  cannot see -- a redirect's next hop, WebSockets, shared workers' fetches -- the browser's
  filtering proxy (:mod:`xtree_gym.envs.browser_proxy`) judges by the same policy.
* **Faults**: :func:`is_missing_browser` tells Playwright's "Executable doesn't exist" apart
  from a crash, so a missing Chromium is one clear error and a dead one a truncated episode.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit
from urllib.request import url2pathname

ACTION_NAMES: tuple[str, ...] = (
    "noop",
    "send_msg_to_user",
    "report_infeasible",
    "scroll",
    "fill",
    "check",
    "uncheck",
    "select_option",
    "click",
    "dblclick",
    "hover",
    "press",
    "focus",
    "clear",
    "drag_and_drop",
    "keyboard_press",
    "go_back",
    "go_forward",
    "goto",
    "tab_close",
    "tab_focus",
    "new_tab",
)
"""The functions the browser envs run, in BrowserGym's order (``noop`` always first)."""

MAX_ACTION_CHARS = 20_000
"""Longer action strings are refused unparsed: BrowserGym's parser is quadratic in the length
(about 0.5 s at 10,000 characters, minutes at 100,000), and no action needs that much text."""

WEB_SCHEMES = ("http", "https")
BLANK_PAGES = ("about:blank",)


def make_action_set() -> Any:
    """BrowserGym's ``HighLevelActionSet`` of :data:`ACTION_NAMES` (non-strict, multi-action).

    Non-strict is BrowserGym's default: the calls are searched in the whole string, so a
    response like ``"Action: click('12')"`` runs ``click('12')``.
    """
    from browsergym.core.action import functions
    from browsergym.core.action.highlevel import HighLevelActionSet

    custom = [getattr(functions, name) for name in ACTION_NAMES if name != "noop"]
    return HighLevelActionSet(subsets=["custom"], custom_actions=custom, multiaction=True, strict=False)


def _file_path(url: str) -> str | None:
    try:
        parts = urlsplit(url)
        if parts.scheme != "file" or parts.netloc not in ("", "localhost"):
            return None
        return os.path.realpath(url2pathname(unquote(parts.path)))
    except ValueError:  # an embedded NUL byte, a bad port...: not a file of ours
        return None


def origin_of(url: str) -> str | None:
    """``scheme://host[:port]`` of an http(s) URL (default ports dropped, host lower-cased), else None.

    Example:
        >>> origin_of("HTTP://Example.org:80/a?b"), origin_of("https://h:8443/x"), origin_of("file:///x")
        ('http://example.org', 'https://h:8443', None)
    """
    try:
        parts = urlsplit(url)
        scheme, host, port = parts.scheme.lower(), (parts.hostname or ""), parts.port
    except ValueError:
        return None
    if scheme not in WEB_SCHEMES or not host:
        return None
    host = f"[{host}]" if ":" in host else host
    default = {"http": 80, "https": 443}[scheme]
    return f"{scheme}://{host}" + (f":{port}" if port not in (None, default) else "")


def _literal_address(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The address a host written as an IP means to Chromium (``127.1``, ``2130706433``, ``0x7f.1`` too)."""
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        pass
    try:  # the legacy IPv4 spellings browsers still accept
        return ipaddress.IPv4Address(socket.inet_aton(host))
    except OSError:
        return None


def is_public_host(host: str, resolve: bool = True) -> bool:
    """Whether ``host`` is a public internet address (not loopback, link-local, private, reserved...).

    A name is resolved (``resolve``); one that resolves to any non-public address is not public,
    and ``localhost`` (and ``*.localhost``) never is.

    Example:
        >>> [is_public_host(h, resolve=False) for h in ("127.0.0.1", "127.1", "2130706433", "[::1]",
        ...     "169.254.169.254", "10.0.0.7", "192.168.1.1", "0.0.0.0", "localhost", "8.8.8.8")]
        [False, False, False, False, False, False, False, False, False, True]
        >>> [is_public_host(h, resolve=False) for h in ("[::7f00:1]", "[64:ff9b::a9fe:a9fe]", "192.0.0.8")]
        [False, False, False]
    """
    host = host.lower().rstrip(".")
    if host == "localhost" or host.endswith(".localhost"):
        return False
    literal = _literal_address(host)
    addresses = [literal] if literal is not None else []
    if literal is None and resolve:
        try:
            infos = socket.getaddrinfo(host, None)
        except (OSError, UnicodeError):
            return True  # no address: Chromium cannot reach it either
        addresses = [ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos]
    from .browser_address import is_public_address  # one judgment for the route guard and the proxy

    return all(is_public_address(str(a)) for a in addresses)


@dataclass(frozen=True)
class NavigationPolicy:
    """Which URLs the agent's pages may load: the web, a blank page, the task's own files.

    Example:
        >>> policy = NavigationPolicy(file_roots=("/srv/miniwob/html",))
        >>> policy.allows("https://example.org/a"), policy.allows("about:blank")   # no web by default
        (False, True)
        >>> web = NavigationPolicy(origins=("http://127.0.0.1:8000", "*"))
        >>> web.allows("http://127.0.0.1:8000/a"), web.allows("http://127.0.0.1:9000/secret")
        (True, False)
        >>> web.allows("http://169.254.169.254/latest/meta-data"), web.allows("http://8.8.8.8/")
        (False, True)
        >>> policy.allows("file:///srv/miniwob/html/miniwob/click-button.html")
        True
        >>> policy.allows("file:///etc/passwd"), policy.allows("file:///srv/miniwob/html/../../../etc/passwd")
        (False, False)
        >>> policy.allows("view-source:file:///etc/passwd"), policy.allows("chrome://version")
        (False, False)
    """

    file_roots: tuple[str, ...] = ()
    """Folders whose ``file://`` pages (and assets) are the task's own; empty: no local files."""
    origins: tuple[str, ...] = ()
    """http(s) origins the pages may load (:func:`origin_of` form; ``"*"``: any public web origin)."""
    allow_private: bool = False
    """Under ``"*"``, also loopback, link-local and private addresses (listed origins always load)."""

    def allows(self, url: str) -> bool:
        """True for ``about:blank``, files under :attr:`file_roots` and http(s) under :attr:`origins`."""
        if url in BLANK_PAGES:
            return True
        origin = origin_of(url)
        if origin is not None:
            if origin in self.origins:
                return True
            if "*" not in self.origins:
                return False
            return self.allow_private or is_public_host(urlsplit(url).hostname or "")
        path = _file_path(url)
        if path is None:
            return False
        for root in self.file_roots:
            real = os.path.realpath(root)
            if path == real or path.startswith(real.rstrip(os.sep) + os.sep):
                return True
        return False

    @classmethod
    def for_start_url(
        cls, url: str, levels_up: int = 0, *, origins: Iterable[str] = (), allow_private: bool = False
    ) -> NavigationPolicy:
        """The policy of a task whose first page is ``url``: a ``file://`` page's folder
        (``levels_up`` folders higher, for pages that load ``../core/*.js``) or an http(s)
        page's origin is its own; ``origins`` are added (the user's allow-list).

        Example:
            >>> NavigationPolicy.for_start_url("file:///srv/mw/html/miniwob/", levels_up=1).file_roots
            ('/srv/mw/html',)
            >>> p = NavigationPolicy.for_start_url("http://127.0.0.1:8000/x.html")
            >>> p.file_roots, p.origins
            ((), ('http://127.0.0.1:8000',))
        """
        extra = tuple(o if o == "*" else (origin_of(o) or o) for o in origins)
        path = _file_path(url)
        if path is None:
            own = origin_of(url)
            return cls(origins=((own,) if own else ()) + extra, allow_private=allow_private)
        folder = path if url.endswith("/") else os.path.dirname(path)
        for _ in range(levels_up):
            folder = os.path.dirname(folder)
        return cls(file_roots=(folder,), origins=extra, allow_private=allow_private)


def check_guard_options(origins: Any, allow_private: Any, deadline: Any) -> None:
    """One :class:`~xtree_gym.errors.EnvConfigError` for a bad ``allowed_origins`` / ``allow_private`` /
    ``step_deadline_s`` of a browser env.

    Example:
        >>> check_guard_options(["https://example.org", "*"], False, 60.0)
        >>> check_guard_options("https://example.org", False, 60.0)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        xtree_gym.errors.EnvConfigError: allowed_origins must be a list of origins, ... -- fix: ...
    """
    import math

    from ..errors import EnvConfigError

    fix = 'e.g. allowed_origins=["https://example.org", "http://10.0.0.5:8080"] ("*": any public origin)'
    if isinstance(origins, str) or not isinstance(origins, (list, tuple)):
        raise EnvConfigError(f"allowed_origins must be a list of origins, got {origins!r}", fix=fix)
    for o in origins:
        if not isinstance(o, str) or (o != "*" and origin_of(o) is None):
            raise EnvConfigError(f"allowed_origins: {o!r} is not an http(s) origin", fix=fix)
    if not isinstance(allow_private, bool):
        raise EnvConfigError(f"allow_private must be true or false, got {allow_private!r}")
    ok = deadline is None or (
        isinstance(deadline, (int, float))
        and not isinstance(deadline, bool)
        and math.isfinite(deadline)
        and deadline > 0
    )
    if not ok:
        raise EnvConfigError(f"step_deadline_s must be seconds > 0 or None, got {deadline!r}", fix="e.g. 60")


def blocked_url(calls: Iterable[tuple[str, list[Any]]], policy: NavigationPolicy) -> str | None:
    """The first ``goto`` target among BrowserGym's parsed ``(name, args)`` calls that the
    policy refuses, else None.

    Example:
        >>> blocked_url([("click", ["12"]), ("goto", ["file:///etc/passwd"])], NavigationPolicy())
        'file:///etc/passwd'
        >>> blocked_url([("goto", ["http://x.org"])], NavigationPolicy(origins=("http://x.org",))) is None
        True
        >>> blocked_url([("goto", ["file:///x%00"])], NavigationPolicy())   # a NUL byte: refused, no raise
        'file:///x%00'
    """
    for name, args in calls:
        if name != "goto":
            continue
        url = next((a.value for a in args if getattr(a, "name", None) == "url"), None)
        if url is None and args:
            url = args[0]
        if not isinstance(url, str) or not policy.allows(url):
            return str(url)
    return None


def parse_browsergym_calls(action: str) -> list[tuple[str, list[Any]]]:
    """The ``(name, args)`` calls BrowserGym's own non-strict parser finds in ``action``."""
    from browsergym.core.action.parsers import highlevel_action_parser

    try:
        found = highlevel_action_parser.search_string(action)
    except Exception:  # its parser raises on some malformed input: BrowserGym then runs nothing
        return []
    return [(str(name), list(args)) for match in found.as_list() for name, args in match]


def _is_page_navigation(request: Any) -> bool:
    """A top-level navigation (a page of its own), not a frame or asset of an allowed page."""
    if not request.is_navigation_request():
        return False
    try:
        return request.frame.parent_frame is None
    except Exception:  # a new tab's first navigation has no frame yet: it is a page of its own
        return True


def _abort_reason(request: Any, policy: NavigationPolicy) -> str:
    """How a refused request fails. A navigation of a frame whose allowed document has loaded is
    cancelled (``aborted``: Chromium commits no error page, so a page whose script submits a form or
    sets ``location`` to a refused origin stays as it is -- its scripts' context is not destroyed under
    an observation, and no "go back" reruns the script); anything else fails (``blockedbyclient``: an
    error page). A navigation that starts while its document still loads gets the error page too: a
    cancelled one would leave that document without its ``load`` event, and ``goto`` waiting for it."""
    if not request.is_navigation_request():
        return "blockedbyclient"
    try:
        frame = request.frame
        loaded = "load" in frame._impl_obj._load_states  # Playwright's record of the frame's load events
        url = frame.url
    except Exception:  # no frame yet (a new tab's first navigation), or another Playwright
        return "blockedbyclient"
    keep = loaded and url not in ("", *BLANK_PAGES) and policy.allows(url)
    return "aborted" if keep else "blockedbyclient"


def install_route_guard(
    context: Any, policy: NavigationPolicy, blocked: list[str] | None = None, loading: set[Any] | None = None
) -> None:
    """Abort every request of ``context`` (all its pages, popups and frames) the policy refuses;
    refused page navigations are appended to ``blocked`` when given (the step's action error), and the
    frames of the navigations let through are added to ``loading`` (see :func:`fence_unloaded_frames`)."""

    def guard(route: Any, request: Any) -> None:
        if policy.allows(request.url):
            if loading is not None and request.is_navigation_request():
                with contextlib.suppress(Exception):  # no frame yet: judged by its url once it loads
                    loading.add(request.frame)
            route.continue_()
        else:
            if blocked is not None and _is_page_navigation(request):
                blocked.append(request.url)
            route.abort(_abort_reason(request, policy))

    context.route("**/*", guard)


def guard_contexts(
    browser: Any, policy: NavigationPolicy, blocked: list[str] | None = None, loading: set[Any] | None = None
) -> None:
    """Every context ``browser`` makes from now on blocks service workers (their fetches pass no
    route) and gets :func:`install_route_guard` first; a per-context ``proxy`` (which would take the
    context around the browser's filtering proxy) is dropped."""
    make_context = browser.new_context

    def new_context(*args: Any, **kwargs: Any) -> Any:
        kwargs.pop("proxy", None)
        kwargs["service_workers"] = "block"
        context = make_context(*args, **kwargs)
        install_route_guard(context, policy, blocked, loading)
        return context

    browser.new_context = new_context


_FRAME_TARGET_JS = "e => e.src || e.data || ''"
_BLANK_FRAME_JS = "e => { if (e.tagName === 'OBJECT') e.data = 'about:blank'; else e.src = 'about:blank'; }"
LOADABLE_FRAME_SCHEMES = ("http", "https", "data", "blob")
"""Schemes of a frame's ``src`` that Chromium loads (or the route guard answers) in a web page's frame."""


def fence_unloaded_frames(
    context: Any, loading: set[Any], policy: NavigationPolicy | None = None, *, settled: bool = True
) -> list[str]:
    """Send frames that hold no document and wait for no navigation we let through to ``about:blank``
    (close such a tab); returns what each of them was asked to load.

    Chromium refuses some loads of a web page itself, without a request the route guard could see: an
    iframe of ``view-source:``, ``chrome://``, ``devtools://``, ``file://``, a bad ``blob:``, a new tab
    of ``data:``. Such a frame never gets a document, and a script run in it -- BrowserGym's, in every
    frame before each observation -- waits forever (until the step's deadline kills the browser).
    ``loading`` holds the frames whose navigation the route guard let through (a slow allowed page is
    no such frame); it is pruned of the frames that are gone. Before the pages ``settled`` (right
    after an action, when a navigation may not have reached the route guard yet), only frames whose
    ``src`` the ``policy`` refuses, with a scheme no web page's frame loads, are fenced.
    """
    fenced: list[str] = []
    live: set[Any] = set()
    for page in list(context.pages):
        if page.is_closed():
            continue
        main = page.main_frame
        if settled and main.url == "" and main not in loading:
            fenced.append("a new tab that loaded nothing")
            with contextlib.suppress(Exception):
                page.close()
            continue
        for frame in page.frames:
            live.add(frame)
            if frame is main or frame.url or frame in loading or frame.is_detached():
                continue
            with contextlib.suppress(Exception):  # detached meanwhile: nothing left to wait for
                element = frame.frame_element()
                target = str(element.evaluate(_FRAME_TARGET_JS))
                if settled or _never_loads(target, policy):
                    element.evaluate(_BLANK_FRAME_JS)
                    fenced.append(target or "a frame")
    loading.intersection_update(live)
    return fenced


def _never_loads(target: str, policy: NavigationPolicy | None) -> bool:
    """Whether a frame sent to ``target`` can never get a document: a scheme web pages cannot frame,
    and refused by the policy (an allowed ``file://`` frame of a local task page does load).

    Example:
        >>> [_never_loads(u, NavigationPolicy()) for u in ("view-source:http://x/", "chrome://version",
        ...     "file:///etc/hostname", "http://x/", "data:text/html,hi", "about:blank", "")]
        [True, True, True, False, False, False, False]
    """
    scheme = target.split(":", 1)[0].lower() if ":" in target else ""
    if not scheme or scheme in LOADABLE_FRAME_SCHEMES or target in BLANK_PAGES:
        return False
    return policy is None or not policy.allows(target)


def is_missing_browser(exc: BaseException) -> bool:
    """True when Playwright could not find the browser binary (not a crash).

    Example:
        >>> is_missing_browser(RuntimeError("BrowserType.launch: Executable doesn't exist at /x"))
        True
        >>> is_missing_browser(RuntimeError("Target page, context or browser has been closed"))
        False
    """
    text = str(exc)
    return "Executable doesn't exist" in text or "executable doesn't exist" in text.lower()


_NAVIGATION_RACES = (
    "Execution context was destroyed",
    "Frame was detached",
    "Frame has been detached",
    "Element is not attached to the DOM",
    "Cannot find context with specified id",
    "Frame with the given frameId is not found",
)


def is_navigation_race(exc: BaseException) -> bool:
    """True when a Playwright call failed because its page navigated meanwhile (the browser is alive).

    Example:
        >>> is_navigation_race(RuntimeError("Frame.evaluate: Execution context was destroyed, most likely ..."))
        True
        >>> is_navigation_race(RuntimeError("Target page, context or browser has been closed"))
        False
    """
    text = str(exc)
    return any(marker in text for marker in _NAVIGATION_RACES)
