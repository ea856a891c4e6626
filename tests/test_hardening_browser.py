"""Hardening II, the browser: an allow-list of origins (loopback and metadata addresses refused), a
deadline on every step that works in-process (no Playwright call from a timer thread), a frozen
browser ends the episode as a fault and the next reset relaunches, a ``file://`` iframe cannot hang a
step, ``goto('file:///x%00')`` is an invalid action. Real Chromium and a real local http server.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.browser

SECRET = "xtree-local-secret-4711"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory, serve_folder: Any) -> Iterator[str]:
    """The agent's start site: a page, and a page holding an iframe of a local file."""
    d = tmp_path_factory.mktemp("site")
    (d / "start.html").write_text("<html><body><h1>Start page</h1><button>Go</button></body></html>")
    (d / "framed.html").write_text(
        '<html><body><h1>Framed</h1><iframe src="file:///etc/hostname"></iframe></body></html>'
    )
    with serve_folder(d) as url:
        yield url


@pytest.fixture(scope="module")
def secret_service(tmp_path_factory: pytest.TempPathFactory, serve_folder: Any) -> Iterator[str]:
    """Another loopback service of this machine, which the agent must not read."""
    d = tmp_path_factory.mktemp("secret")
    (d / "secret.html").write_text(f"<html><body><p>{SECRET}</p></body></html>")
    with serve_folder(d) as url:
        yield url


def _env(browser_chromium: str, url: str, **kw: Any) -> Any:
    from xtree_gym.envs.browser_launch import BrowserLaunchConfig
    from xtree_gym.envs.browsergym import OpenURLEnv

    return OpenURLEnv(url, launch=BrowserLaunchConfig(executable_path=browser_chromium), **kw)


def test_loopback_and_metadata_origins_are_refused_unless_listed(
    browser_chromium: str, site: str, secret_service: str
) -> None:
    env = _env(browser_chromium, f"{site}/start.html", allowed_origins=["*"])
    try:
        env.reset(seed=0)
        for url in (f"{secret_service}/secret.html", "http://169.254.169.254/latest/meta-data/",
                    "http://[::1]:1/", "http://2130706433/"):  # fmt: skip
            text, _, terminated, truncated, info = env.step(f"goto({url!r})")
            assert info["invalid_action"] and "blocked" in info["action_error"], url
            assert SECRET not in text and not (terminated or truncated)
        # a link the page itself follows is stopped by the route guard as well
        page = env.browser_env.page
        page.evaluate(f"() => {{ location.href = {secret_service + '/secret.html'!r}; }}")
        text, *_, info = env.step("noop()")
        assert SECRET not in text
    finally:
        env.close()
    # listed by name, the same service opens (the allow-list option)
    env = _env(browser_chromium, f"{site}/start.html", allowed_origins=[secret_service])
    try:
        env.reset(seed=0)
        text, *_, info = env.step(f"goto({secret_service + '/secret.html'!r})")
        assert SECRET in text and not info["invalid_action"]
    finally:
        env.close()


def test_miniwob_pages_only_by_default(browser_chromium: str, secret_service: str) -> None:
    pytest.importorskip("browsergym.miniwob")
    from xtree_gym.envs.browser_launch import BrowserLaunchConfig
    from xtree_gym.envs.browsergym import MiniWoBEnv

    env = MiniWoBEnv("click-button", launch=BrowserLaunchConfig(executable_path=browser_chromium))
    try:
        env.reset(seed=0)
        assert env.policy.origins == () and env.policy.file_roots
        for url in (f"{secret_service}/secret.html", "https://example.org/", "file:///x%00"):
            text, *_, info = env.step(f"goto({url!r})")
            assert info["invalid_action"] and "blocked" in info["action_error"] and SECRET not in text, url
    finally:
        env.close()


def _browser_pids() -> list[int]:
    from xtree_gym.envs.browser_deadline import browser_pids

    return sorted(browser_pids())


def test_a_frozen_browser_is_a_fault_in_process_and_the_next_reset_relaunches(
    browser_chromium: str, site: str
) -> None:
    env = _env(browser_chromium, f"{site}/start.html", step_deadline_s=5.0)
    try:
        env.reset(seed=0)
        pids = _browser_pids()
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        t0 = time.monotonic()
        text, _, terminated, truncated, info = env.step("noop()")
        took = time.monotonic() - t0
        assert truncated and not terminated and "deadline" in info["fault"], info
        assert took < 30, took
        env.unwrapped.step_deadline_s = 120.0  # a loaded 2-core machine can take > 5 s for a healthy step
        text, _ = env.reset(seed=0)  # relaunched
        assert "Start page" in text and set(_browser_pids()).isdisjoint(pids)
        _, _, _, truncated, info = env.step("noop()")
        assert not truncated and "fault" not in info
    finally:
        env.close()


def test_a_file_iframe_cannot_hang_a_step(browser_chromium: str, site: str) -> None:
    hostname = Path("/etc/hostname").read_text().strip() if Path("/etc/hostname").is_file() else ""
    env = _env(browser_chromium, f"{site}/start.html", step_deadline_s=10.0)
    try:
        env.reset(seed=0)
        t0 = time.monotonic()
        text, _, _, truncated, info = env.step(f"goto({site + '/framed.html'!r})")
        assert time.monotonic() - t0 < 40  # it hung forever before
        assert not hostname or hostname not in text
        if truncated:  # ended as a fault at the deadline: the next reset relaunches
            assert "deadline" in info["fault"]
            env.reset(seed=0)
        text, *_ = env.step("noop()")
        assert "Start" in text or "Framed" in text
    finally:
        env.close()


def test_the_step_timeout_of_an_in_process_rollout_works_with_a_browser(
    browser_chromium: str, site: str
) -> None:
    """``--step-timeout`` with in-process workers used to call Playwright from a timer thread."""
    from xtree_gym.agents.harness import get_harness
    from xtree_gym.agents.play.rollout import rollout
    from xtree_gym.agents.types import TaskSpec
    from xtree_gym.envs.browser_launch import BrowserLaunchConfig  # noqa: F401 (the env builds its own)

    h = get_harness("browsergym")
    from xtree_gym.agents.model.generation import make_generator

    gen = make_generator("scripted", responses=[h.format_response("noop()")], cycle=True)
    eps = rollout(
        "XTree-OpenURL-v0", [TaskSpec(task="open", seed=0)], gen, h, n=1, max_steps=2,
        env_kwargs={"url": f"{site}/start.html"}, step_timeout=60.0, episode_timeout=120.0,
    )  # fmt: skip
    (ep,) = eps
    assert ep.fault is None, ep.fault
    assert len(ep.turns) == 2 and all("fault" not in t.info for t in ep.turns)
