"""What the agent may do in the browser envs: the action set, where pages may come from, faults.

* **Action set** (:data:`ACTION_NAMES`, :func:`make_action_set`): BrowserGym's default subsets
  (chat, infeasible, element, navigation, tabs) plus ``check``/``uncheck`` and
  ``keyboard_press`` -- the canonicalizer and the paper's Table 9 name them, and BrowserGym
  ships them but leaves them out of its default set -- and minus ``upload_file``, which
  reads a file of this machine into the page. Any other function is an invalid action.
* **Navigation** (:class:`NavigationPolicy`): ``http``/``https`` pages, ``about:blank`` and the
  task's own ``file://`` folder (MiniWoB++ serves its pages from the ``miniwob`` wheel);
  everything else -- ``file:///etc/passwd``, ``view-source:``, ``chrome://`` -- is refused.
  The env checks ``goto`` before running it (an invalid action), aborts every other request
  of the task browser's context that leaves the policy (from its creation on, before the task
  opens its first page: links, redirects, new tabs, frames, ``fetch``), and sends a page that
  still ended up outside back to ``about:blank``.
* **Faults**: :func:`is_missing_browser` tells Playwright's "Executable doesn't exist" apart
  from a crash, so a missing Chromium is one clear error and a dead one a truncated episode.
"""

from __future__ import annotations

import os
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
    parts = urlsplit(url)
    if parts.scheme != "file" or parts.netloc not in ("", "localhost"):
        return None
    return os.path.realpath(url2pathname(unquote(parts.path)))


@dataclass(frozen=True)
class NavigationPolicy:
    """Which URLs the agent's pages may load: the web, a blank page, the task's own files.

    Example:
        >>> policy = NavigationPolicy(file_roots=("/srv/miniwob/html",))
        >>> policy.allows("https://example.org/a"), policy.allows("about:blank")
        (True, True)
        >>> policy.allows("file:///srv/miniwob/html/miniwob/click-button.html")
        True
        >>> policy.allows("file:///etc/passwd"), policy.allows("file:///srv/miniwob/html/../../../etc/passwd")
        (False, False)
        >>> policy.allows("view-source:file:///etc/passwd"), policy.allows("chrome://version")
        (False, False)
    """

    file_roots: tuple[str, ...] = ()
    """Folders whose ``file://`` pages (and assets) are the task's own; empty: no local files."""

    def allows(self, url: str) -> bool:
        """True for http(s), ``about:blank`` and files under one of :attr:`file_roots`."""
        scheme = urlsplit(url).scheme.lower()
        if scheme in WEB_SCHEMES or url in BLANK_PAGES:
            return True
        path = _file_path(url)
        if path is None:
            return False
        for root in self.file_roots:
            real = os.path.realpath(root)
            if path == real or path.startswith(real.rstrip(os.sep) + os.sep):
                return True
        return False

    @classmethod
    def for_start_url(cls, url: str, levels_up: int = 0) -> NavigationPolicy:
        """The policy of a task whose first page is ``url``: a ``file://`` page's folder
        (``levels_up`` folders higher, for pages that load ``../core/*.js``) is its own.

        Example:
            >>> NavigationPolicy.for_start_url("file:///srv/mw/html/miniwob/", levels_up=1).file_roots
            ('/srv/mw/html',)
            >>> NavigationPolicy.for_start_url("http://127.0.0.1:8000/x.html").file_roots
            ()
        """
        path = _file_path(url)
        if path is None:
            return cls()
        folder = path if url.endswith("/") else os.path.dirname(path)
        for _ in range(levels_up):
            folder = os.path.dirname(folder)
        return cls(file_roots=(folder,))


def blocked_url(calls: Iterable[tuple[str, list[Any]]], policy: NavigationPolicy) -> str | None:
    """The first ``goto`` target among BrowserGym's parsed ``(name, args)`` calls that the
    policy refuses, else None.

    Example:
        >>> blocked_url([("click", ["12"]), ("goto", ["file:///etc/passwd"])], NavigationPolicy())
        'file:///etc/passwd'
        >>> blocked_url([("goto", ["http://x.org"])], NavigationPolicy()) is None
        True
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


def install_route_guard(context: Any, policy: NavigationPolicy, blocked: list[str] | None = None) -> None:
    """Abort every request of ``context`` (all its pages, popups and frames) the policy refuses;
    refused page navigations are appended to ``blocked`` when given (the step's action error)."""

    def guard(route: Any, request: Any) -> None:
        if policy.allows(request.url):
            route.continue_()
        else:
            if blocked is not None and _is_page_navigation(request):
                blocked.append(request.url)
            route.abort("blockedbyclient")

    context.route("**/*", guard)


def guard_contexts(browser: Any, policy: NavigationPolicy, blocked: list[str] | None = None) -> None:
    """Every context ``browser`` makes from now on gets :func:`install_route_guard` first."""
    make_context = browser.new_context

    def new_context(*args: Any, **kwargs: Any) -> Any:
        context = make_context(*args, **kwargs)
        install_route_guard(context, policy, blocked)
        return context

    browser.new_context = new_context


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
