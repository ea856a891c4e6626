"""Hardening IV, the browser: frames Chromium never loads, forms a page submits to a refused origin,
IPv6 spellings of private IPv4 addresses, and Chromium's own background requests.

* An iframe of ``view-source:``, ``chrome://``, ``devtools://`` or ``file://`` (and a new tab of
  ``data:``) used to hold the step until its deadline, then the browser was killed and the episode
  truncated: such frames never get a document, and BrowserGym runs a script in every frame.
* A page that submits a form to a refused origin while it is being read ended the episode as a browser
  fault ("Execution context was destroyed", a screenshot that never came back).
* ``is_public_address`` took ``::7f00:1``, ``64:ff9b::7f00:1``, ``2002:7f00:1::1`` ... as public.
* ``refused_requests`` filled with Chromium's own update, sign-in and time probes.

Real Chromium and real local http servers (127.0.0.1 only) for the browser parts (marked ``browser``).
"""

from __future__ import annotations

import http.server
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

# -- is_public_address: the IPv4 inside an IPv6 address decides -------------------------------------

NOT_PUBLIC = (
    "::7f00:1",  # IPv4-compatible ::127.0.0.1
    "64:ff9b::7f00:1",  # NAT64 (well-known prefix) of 127.0.0.1
    "64:ff9b::a9fe:a9fe",  # NAT64 of 169.254.169.254 (cloud metadata)
    "64:ff9b:1::808:808",  # NAT64 for local use (RFC 8215): never public
    "2002:7f00:1::1",  # 6to4 of 127.0.0.1
    "2002:a00:1::1",  # 6to4 of 10.0.0.1
    "::ffff:0:7f00:1",  # IPv4-translated (SIIT) 127.0.0.1
    "::ffff:127.0.0.1",  # IPv4-mapped
    "::ffff:10.0.0.1",
    "2001:0:4136:e378:8000:63bf:80ff:fffe",  # Teredo, client 127.0.0.1 (obfuscated)
    "192.0.0.8",  # IPv4 dummy address, in 192.0.0.0/24 (IETF protocol assignments)
    "192.0.0.170",
    "127.0.0.1",
    "::1",
    "::",
)
PUBLIC = ("8.8.8.8", "2001:4860:4860::8888", "2606:4700:4700::1111", "64:ff9b::808:808", "2002:808:808::1")


def test_is_public_address_judges_an_embedded_ipv4_by_the_ipv4_inside() -> None:
    from xtree_gym.envs.browser_proxy import is_public_address

    judged = {a: is_public_address(a) for a in NOT_PUBLIC + PUBLIC}
    assert len(judged) == len(NOT_PUBLIC) + len(PUBLIC) == 20
    assert [a for a in NOT_PUBLIC if judged[a]] == []
    assert [a for a in PUBLIC if not judged[a]] == []


def test_the_route_guard_judges_literal_hosts_the_same_way() -> None:
    from xtree_gym.envs.browser_guard import NavigationPolicy, is_public_host

    hosts = ("[::7f00:1]", "[64:ff9b::7f00:1]", "[2002:7f00:1::1]", "[::ffff:0:7f00:1]", "192.0.0.8")
    assert [is_public_host(h, resolve=False) for h in hosts] == [False] * 5
    star = NavigationPolicy(origins=("*",))
    urls = [f"http://{h}:8000/" for h in hosts]
    assert [star.allows(u) for u in urls] == [False] * 5
    assert star.allows("http://[2001:4860:4860::8888]/")


# -- launch flags: ours and Playwright's --disable-features in one flag ------------------------------


def test_quiet_flags_keep_playwrights_disabled_features() -> None:
    from xtree_gym.envs.browser_launch import BrowserLaunchConfig, _merge_launch_kwargs

    cfg = BrowserLaunchConfig(executable_path=None, no_sandbox=False)
    args = _merge_launch_kwargs(cfg, {"args": ["--disable-features=FromTheTask"]}, ["--proxy-server=x"])[
        "args"
    ]
    features = [a for a in args if a.startswith("--disable-features=")]
    assert len(features) == 1, args  # Chromium reads only the last one
    names = features[0].split("=", 1)[1].split(",")
    assert {"FromTheTask", "NetworkTimeServiceQuerying", "HttpsUpgrades", "LazyFrameLoading"} <= set(names)
    assert "--disable-background-networking" in args and args[-1] == "--proxy-server=x"


# -- real Chromium -----------------------------------------------------------------------------------


class _Site(http.server.BaseHTTPRequestHandler):
    """Pages from ``server.pages`` by path; ``/away`` redirects to ``server.away`` (a refused origin)."""

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        server: Any = self.server
        path = self.path.split("?", 1)[0]
        if path == "/away":
            self.send_response(302)
            self.send_header("Location", server.away)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = server.pages.get(path, "<html><body><h1>Start page</h1></body></html>").encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def _submit_after(ms: int, action: str) -> str:
    return (
        "<html><body><h1>Form page</h1>"
        f'<form id="f" method="GET" action="{action}"><input name="q" value="xtree"></form>'
        f"<script>setTimeout(() => document.getElementById('f').submit(), {ms});</script></body></html>"
    )


@pytest.fixture(scope="module")
def site(secret_servers: Any) -> Iterator[str]:
    """``http://127.0.0.1:P``: the start page, the frame and form pages, ``/away`` -> the secret server."""
    forbidden = secret_servers.secret
    frames = "".join(
        f'<iframe src="{src}"></iframe>'
        for src in ("view-source:http://127.0.0.1:1/", "chrome://version", "devtools://devtools/bundled/x.html",
                    "chrome-extension://abcdefghijklmnopabcdefghijklmnop/x.html", "file:///etc/hostname",
                    "about:version")
    )  # fmt: skip
    pages = {
        "/frames.html": "<html><body><h1>Framed page</h1>" + frames
        + "<iframe src=\"data:text/html,<p>inline frame</p>\"></iframe></body></html>",
        "/tabs.html": "<html><body><h1>Tabs page</h1><script>window.addEventListener('load', () => {"
        "window.open('data:text/html,<p>x</p>'); window.open('chrome://version');"
        "window.open('view-source:http://127.0.0.1:1/'); });</script></body></html>",
        "/bg.html": '<html><body><h1>Background page</h1><img src="/away"></body></html>',
        **{f"/form{ms}.html": _submit_after(ms, f"{forbidden}/steal") for ms in (0, 200, 1000)},
    }  # fmt: skip
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Site)
    server.pages, server.away = pages, f"{forbidden}/bg-probe"  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, name="hardening4-site", daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _env(browser_chromium: str, url: str, **kw: Any) -> Any:
    from xtree_gym.envs.browser_launch import BrowserLaunchConfig
    from xtree_gym.envs.browsergym import OpenURLEnv

    return OpenURLEnv(url, launch=BrowserLaunchConfig(executable_path=browser_chromium), **kw)


def _timed_step(env: Any, action: str) -> tuple[float, tuple[Any, ...]]:
    t0 = time.monotonic()
    out = env.step(action)
    return time.monotonic() - t0, out


@pytest.mark.browser
def test_frames_and_tabs_of_privileged_schemes_are_refused_at_once(browser_chromium: str, site: str) -> None:
    env = _env(browser_chromium, f"{site}/start.html", step_deadline_s=60.0)  # the default deadline
    try:
        env.reset(seed=0)
        for page, heading in (("frames.html", "Framed page"), ("tabs.html", "Tabs page")):
            took, (text, _, terminated, truncated, info) = _timed_step(env, f"goto('{site}/{page}')")
            # before, the step waited out the whole 60 s deadline; now 3-7 s (14.5 s seen under CI's load)
            assert took < 30, (page, took, info.get("fault"))
            assert not (terminated or truncated) and "fault" not in info, (page, info.get("fault"))
            assert heading in text, (page, text[:300])
            if page == "frames.html":
                assert "inline frame" in text  # a data: iframe (which loads) is left alone
        pages = [p.url for p in env.browser_env.context.pages]
        assert pages == [f"{site}/tabs.html"], pages  # the tabs that never loaded were closed
    finally:
        env.close()


@pytest.mark.browser
def test_a_form_submitted_to_a_refused_origin_is_a_refused_navigation(
    browser_chromium: str, site: str, secret_servers: Any
) -> None:
    """Submitted while the page loads (0 ms), while the step reads it (200 ms), after the step (1 s)."""
    before = secret_servers.reached()
    env = _env(browser_chromium, f"{site}/start.html", step_deadline_s=20.0)
    try:
        env.reset(seed=0)
        checked = 0
        for ms in (0, 200, 1000):
            steps = [env.step(f"goto('{site}/form{ms}.html')")]
            for _ in range(2 if ms >= 1000 else 1):
                if steps[-1][3]:  # truncated (a fault): the episode is over
                    break
                time.sleep(0.3)
                steps.append(env.step("noop()"))
            faults = [s[4].get("fault") for s in steps if s[3] or "fault" in s[4]]
            assert faults == [], (ms, faults)
            # reported like any refused navigation: an invalid action naming the URL (the 0 ms page may
            # submit again when it is sent back to, and is reported again)
            errors = [s[4]["action_error"] for s in steps if s[4]["action_error"]]
            assert errors and all(f"'{secret_servers.secret}/steal?q=xtree'" in e for e in errors), (
                ms,
                errors,
            )
            if ms:  # a page that submits after it loaded stays as it is: refused once, no error page
                assert len(errors) == 1 and "Form page" in steps[-1][0], (ms, errors, steps[-1][0][:200])
            assert secret_servers.secret_text not in steps[-1][0]
            checked += 1
        assert checked == 3
    finally:
        env.close()
    assert secret_servers.reached() == before


@pytest.mark.browser
def test_refused_requests_hold_the_pages_requests_not_chromiums_own(
    browser_chromium: str, site: str, secret_servers: Any
) -> None:
    env = _env(browser_chromium, f"{site}/bg.html")
    try:
        text, _ = env.reset(seed=0)
        assert "Background page" in text
        for i in range(3):  # page loads are what Chromium fetches optimization hints for
            text, *_ = env.step(f"goto('{site}/bg.html?{i}')")
            assert "Background page" in text
        time.sleep(3)  # Chromium's own probes (sign-in, update, network time) start within a few seconds
        refused = env.refused_requests
    finally:
        env.close()
    page_own = [r for r in refused if r.startswith(f"{secret_servers.secret}/bg-probe")]
    assert page_own, refused  # the redirect's second hop, refused by the proxy
    assert [r for r in refused if r not in page_own] == [], refused
