"""Hardening III, the browser: no request of any kind leaves for an origin outside the allow-list.

Real Chromium against real loopback servers (``tests/fixtures/browser_hostile.py``): the agent's
allowed origin serves one hostile page per vector -- redirects (301/302/307/308) reached by
navigation, iframe, fetch, XHR, ``<img>``, meta refresh, JS location, EventSource and popups;
the same straight to the forbidden origin; WebSocket; WebRTC (STUN/TURN over UDP); dedicated, shared
and service workers; prefetch/preload -- and the forbidden services (a secret http server, a
WebSocket server, a UDP port) count every connection or datagram they accept. Each vector must leave
the counts at zero and the secret out of every observation. One env serves the whole module. On the
code before the filtering proxy, 18 of the 20 vectors reached a forbidden server.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

pytestmark = pytest.mark.browser

PAGES = (
    "dedicated_worker", "eventsource_direct", "eventsource_redirect", "fetch_redirect", "fetch_redirect_307_post",
    "iframe_redirect", "img_direct", "img_redirect", "js_location_redirect", "meta_refresh_direct",
    "meta_refresh_redirect", "popup_direct", "popup_redirect", "prefetch", "service_worker", "shared_worker",
    "webrtc", "websocket", "xhr_redirect",
)  # fmt: skip
"""The hostile pages of ``tests/fixtures/browser_hostile.py`` (``test_every_hostile_page_is_tried`` keeps the two equal)."""
HOPS = ("goto_redirect",)  # the agent's own goto of a same-origin URL that redirects away
PROXY_CATCHES = (
    "dedicated_worker", "eventsource_redirect", "fetch_redirect", "fetch_redirect_307_post", "goto_redirect",
    "iframe_redirect", "img_redirect", "shared_worker", "websocket", "xhr_redirect",
)  # fmt: skip
"""Vectors that the route guard cannot see and only the proxy stops: it must have refused them."""


def test_every_hostile_page_is_tried(hostile_vectors: tuple[str, ...]) -> None:
    assert hostile_vectors == PAGES and len(PAGES) == 19


@pytest.fixture(scope="module")
def hostile_env(browser_chromium: str, hostile_site: str) -> Iterator[Any]:
    from xtree_gym.envs.browser_launch import BrowserLaunchConfig
    from xtree_gym.envs.browsergym import OpenURLEnv

    env = OpenURLEnv(
        f"{hostile_site}/start.html",
        launch=BrowserLaunchConfig(executable_path=browser_chromium),
        step_deadline_s=120.0,
    )
    try:
        yield env
    finally:
        env.close()


def _with_origins(env: Any, origins: tuple[str, ...]) -> Any:
    """The shared env under ``allowed_origins=origins`` (a reset, which relaunches, only on a change)."""
    if env.browser_env is None or env.allowed_origins != origins:
        env.allowed_origins = origins
        env.reset(seed=0)
    for page in list(env.browser_env.context.pages)[1:]:  # popups of the previous vector
        page.close()
    env.browser_env._active_page_check()  # BrowserGym's own: the first tab, if the active one was closed
    return env


def _attempt(env: Any, site: str, vector: str, finishing: tuple[str, ...], refused: bool = True) -> str:
    """Open the vector's page and observe until it says FINISHED (or after a moment): all text observed.

    The page itself opens the hostile pages (``location.href``: the route guard sees it as a link); the
    agent's own ``goto`` is the ``goto_redirect`` vector. Fewer steps keep the suite quick.
    """
    seen = []
    if vector == "goto_redirect":
        text, *_, info = env.step(f"goto({site + '/r302'!r})")
        seen += [text, str(info.get("action_error", ""))]
        assert info["invalid_action"] == refused and ("blocked" in info["action_error"]) == refused, info
    else:
        env.browser_env.page.evaluate(f"() => {{ location.href = {site + '/v/' + vector + '.html'!r}; }}")
    if vector not in finishing:  # loads, refreshes and popups start with the page: give them a moment
        time.sleep(1.0)
    deadline = time.monotonic() + 15.0
    while True:
        text, *_ = env.step("noop()")
        seen.append(text)
        if vector not in finishing or "FINISHED" in text or time.monotonic() > deadline:
            break
        time.sleep(0.25)
    if vector in finishing:
        assert "FINISHED" in text, f"{vector}: the page never finished its attempt:\n{text}"
    return "\n".join(seen)


@pytest.mark.parametrize("vector", HOPS + PAGES)
def test_no_hop_reaches_a_forbidden_origin(hostile_env: Any, hostile_site: str, secret_servers: Any,
                                           vector: str) -> None:  # fmt: skip
    env = _with_origins(hostile_env, ())
    before, refused = secret_servers.reached(), len(env.refused_requests)
    text = _attempt(env, hostile_site, vector, secret_servers.finishing)
    time.sleep(0.3)  # a request still on its way would be counted now
    leaked = secret_servers.reached() - before
    assert leaked == 0, (
        f"{vector}: {leaked} connection(s) reached a forbidden server: {secret_servers.seen()}"
    )
    assert secret_servers.secret_text not in text, vector
    if vector in PROXY_CATCHES:  # the attempt was made, and stopped by the proxy
        forbidden = (secret_servers.secret, secret_servers.websocket.replace("ws://", "CONNECT "))
        caught = [r for r in env.refused_requests[refused:] if r.startswith(forbidden)]
        assert caught, (vector, env.refused_requests[refused:])


@pytest.mark.parametrize("vector", ["websocket", "fetch_redirect", "img_direct", "service_worker"])
def test_star_still_keeps_loopback_out(hostile_env: Any, hostile_site: str, secret_servers: Any,
                                       vector: str) -> None:  # fmt: skip
    """``"*"`` is any *public* origin: the other loopback services stay out of reach."""
    env = _with_origins(hostile_env, ("*",))
    before = secret_servers.reached()
    text = _attempt(env, hostile_site, vector, secret_servers.finishing)
    time.sleep(0.3)
    assert secret_servers.reached() - before == 0, (vector, secret_servers.seen())
    assert secret_servers.secret_text not in text, vector


def test_a_listed_origin_is_reached_through_every_hop(hostile_env: Any, hostile_site: str,
                                                      secret_servers: Any) -> None:  # fmt: skip
    """The proxy is a filter, not a wall: list the secret service and the WebSocket one, and the same
    pages get through (so the zero counts above are the allow-list's doing)."""
    ws_origin = secret_servers.websocket.replace("ws://", "http://")
    env = _with_origins(hostile_env, (secret_servers.secret, ws_origin))
    for vector in ("fetch_redirect", "websocket", "goto_redirect"):
        before = secret_servers.reached()
        text = _attempt(env, hostile_site, vector, secret_servers.finishing, refused=False)
        assert secret_servers.secret_text in text and secret_servers.reached() > before, vector
