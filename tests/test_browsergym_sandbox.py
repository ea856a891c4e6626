"""The browser envs as a hostile agent meets them: local files, odd actions, partial credit, crashes.

Real Chromium throughout (marked ``browser``). One MiniWoB++ env is shared by the module; the
crash tests kill its real Chromium processes (found as descendants of this test process, by
PID) and come last.
"""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from xtree_gym.envs.browser_axtree import iter_elements
from xtree_gym.envs.browser_launch import own_browsers
from xtree_gym.errors import DependencyError, EnvConfigError

pytestmark = pytest.mark.browser

DATA = Path(__file__).resolve().parent / "data"
SECRET = "root:x:0:0"  # the first line of /etc/passwd


def _bid(env: Any, role: str, label: str | None = None) -> str:
    for e in iter_elements(env.last_browsergym_obs["axtree_object"]):
        if e["role"] == role and (label is None or e["label"] == label):
            return str(e["bid"])
    raise AssertionError(f"no {role} {label!r} on the page")


def _checked(text: str, bid: str) -> str | None:
    line = next((ln for ln in text.splitlines() if ln.strip().startswith(f"[{bid}] checkbox")), "")
    m = re.search(r"checked='(\w+)'", line)
    return m.group(1) if m else None


def _own_chromium_browsers() -> list[int]:
    """PIDs of the Chromium browser processes (not renderers) started below this test process."""
    return [pid for pids in own_browsers().values() for pid in pids]


def _kill_browsers() -> int:
    pids = _own_chromium_browsers()
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    deadline = time.time() + 5
    while time.time() < deadline and any(Path(f"/proc/{p}").exists() for p in pids):
        time.sleep(0.05)
    return len(pids)


@pytest.fixture(scope="module")
def checkboxes(browser_chromium: str) -> Any:
    from xtree_gym.envs.browser_launch import BrowserLaunchConfig
    from xtree_gym.envs.browsergym import MiniWoBEnv

    env = MiniWoBEnv("click-checkboxes", launch=BrowserLaunchConfig(executable_path=browser_chromium))
    try:
        yield env
    finally:
        env.close()


def test_local_files_cannot_be_opened(checkboxes: Any) -> None:
    text0, _ = checkboxes.reset(seed=0)
    for url in ("file:///etc/passwd", "view-source:file:///etc/passwd", "chrome://version", "file:///"):
        text, reward, terminated, truncated, info = checkboxes.step(f"goto({url!r})")
        assert info["invalid_action"] and info["xtree"]["invalid"], url
        assert "is blocked" in info["action_error"] and SECRET not in text
        assert text == text0 and (reward, terminated, truncated) == (0.0, False, False)
    # the same inside a longer response, and one call of several: nothing of it runs
    _, _, _, _, info = checkboxes.step("Action: click('18') goto('file:///etc/passwd')")
    assert info["invalid_action"] and "checked='true'" not in checkboxes._text
    # uploading a local file into the page is not in the action set either
    _, _, _, _, info = checkboxes.step("upload_file('18', '/etc/passwd')")
    assert info["invalid_action"] and "upload_file" in info["action_error"]
    # the task's own pages stay reachable
    text, *_, info = checkboxes.step(f"goto({checkboxes.base_url + 'click-button.html'!r})")
    assert not info["invalid_action"] and "Click Button Task" in text


def test_check_and_keyboard_press_run_and_agree_with_the_canonicalizer(checkboxes: Any) -> None:
    checkboxes.reset(seed=0)
    box = _bid(checkboxes, "checkbox")
    text, _, _, _, info = checkboxes.step(f"check({box!r})")
    assert not info["invalid_action"], info["action_error"]
    assert info["xtree"]["verb"] == "check" and f"[{box}] checkbox" in text
    assert _checked(text, box) == "true"
    _, _, _, _, info = checkboxes.step(f"uncheck({box!r})")
    assert not info["invalid_action"] and _checked(checkboxes._text, box) == "false"
    _, _, _, _, info = checkboxes.step("keyboard_press('Tab')")
    assert not info["invalid_action"] and info["xtree"]["token"] == "key<element>"
    assert {"check", "uncheck", "keyboard_press"} <= set(checkboxes.action_set.action_set)
    assert "upload_file" not in checkboxes.action_set.action_set


def test_partial_credit_is_no_win_and_is_paid_once(checkboxes: Any) -> None:
    # submit with nothing ticked: each box right counts +1, wrong -1, over the box count
    for seed in range(20):
        checkboxes.reset(seed=seed)
        if "Select nothing" not in checkboxes.goal:
            break
    submit = _bid(checkboxes, "button", "Submit")
    # the executed call is found inside the response, as BrowserGym finds it
    _, reward, terminated, _, info = checkboxes.step(f"Thought: submit now.\nAction: click({submit!r})")
    assert info["xtree"]["token"] == "click<button>" and info["xtree"]["slots"]["label"] == "Submit"
    assert terminated and 0 < info["raw_reward"] < 1
    assert reward == 0.0 and info["success"] is False
    with pytest.raises(EnvConfigError, match="after the episode ended"):
        checkboxes.step(f"click({submit!r})")


@pytest.mark.slow
def test_full_credit_is_a_win(checkboxes: Any) -> None:
    checkboxes.reset(seed=0)
    goal = checkboxes.goal  # "Select A, B and click Submit."
    wanted = [w.strip() for w in re.sub(r"^Select | and click Submit\.$", "", goal).split(",")]
    for e in iter_elements(checkboxes.last_browsergym_obs["axtree_object"]):
        if e["role"] == "checkbox" and e["label"] in wanted:
            checkboxes.step(f"click({e['bid']!r})")
    _, reward, terminated, _, info = checkboxes.step(
        f"```\nclick({_bid(checkboxes, 'button', 'Submit')!r})\n```"
    )
    assert terminated and info["raw_reward"] == 1.0 and reward == 1.0 and info["success"] is True


def test_links_new_tabs_and_frames_do_not_reach_local_files(browser_chromium: str) -> None:
    from xtree_gym.envs.browser_launch import BrowserLaunchConfig
    from xtree_gym.envs.browsergym import OpenURLEnv

    launch = BrowserLaunchConfig(executable_path=browser_chromium)
    env = OpenURLEnv((DATA / "browser_local.html").as_uri(), launch=launch)
    try:
        text0, _ = env.reset(seed=0)
        assert "XTree fixture local page" in text0 and env.policy.file_roots == (str(DATA),)
        frames = env.browser_env.page.frames[1:]  # the page's own iframe of /etc/passwd
        assert frames and all(f.url.startswith("chrome-error:") for f in frames)
        assert not any(SECRET in f.content() for f in frames) and SECRET not in text0
        targets = {
            "System file": "file:///etc/passwd",
            "System file in a new tab": "file:///etc/passwd",
            "Outside the folder": (DATA.parent.parent / "xtree_gym" / "__init__.py").resolve().as_uri(),
        }
        for label, url in targets.items():
            text, reward, terminated, _, info = env.step(f"click({_bid(env, 'link', label)!r})")
            # refused like a goto: an invalid action, the page (and no new tab) as it was
            assert info["invalid_action"] and info["action_error"].startswith(f"navigation to {url!r}"), label
            assert text.splitlines()[0] == text0.splitlines()[0] and (reward, terminated) == (0.0, False)
            assert SECRET not in text and "System file" in text
            assert [p.url for p in env.browser_env.context.pages] == [(DATA / "browser_local.html").as_uri()]
        text, *_, info = env.step(f"click({_bid(env, 'link', 'Same folder')!r})")
        assert "You followed the link." in text and not info["invalid_action"]
    finally:
        env.close()


def test_browser_crash_truncates_then_reset_relaunches(checkboxes: Any) -> None:
    checkboxes.reset(seed=1)
    submit = _bid(checkboxes, "button", "Submit")
    assert _kill_browsers() >= 1
    text, reward, terminated, truncated, info = checkboxes.step(f"click({submit!r})")
    assert truncated and not terminated and reward == 0.0 and isinstance(text, str)
    assert "closed" in info["fault"].lower()  # Playwright's TargetClosedError, named in info
    with pytest.raises(EnvConfigError, match="after the episode ended"):
        checkboxes.step("noop()")
    # reset relaunches: a fresh episode plays
    text, info = checkboxes.reset(seed=1)
    _, _, terminated, _, info = checkboxes.step(f"click({_bid(checkboxes, 'button', 'Submit')!r})")
    assert terminated and "fault" not in info


@pytest.mark.slow
def test_close_after_a_crash_never_raises(checkboxes: Any) -> None:
    checkboxes.reset(seed=2)
    assert _kill_browsers() >= 1
    checkboxes.close()
    checkboxes.close()
    assert _own_chromium_browsers() == []


@pytest.mark.slow
def test_reset_after_crash_inside_reset_window(checkboxes: Any) -> None:
    # killed between episodes (no step saw it): the next reset still works
    checkboxes.reset(seed=3)
    _kill_browsers()
    text, _ = checkboxes.reset(seed=3)
    assert "Submit" in text


def test_missing_chromium_is_one_clear_error(tmp_path: Path, browser_chromium: str) -> None:
    from xtree_gym.envs.browser_launch import BrowserLaunchConfig
    from xtree_gym.envs.browsergym import MiniWoBEnv

    with pytest.raises(EnvConfigError, match="apt-get install chromium"):
        MiniWoBEnv("click-button", launch=BrowserLaunchConfig(executable_path=str(tmp_path / "chromium")))
    # no binary configured and no Playwright download: Playwright's own error becomes ours
    if list((Path.home() / ".cache" / "ms-playwright").glob("chromium*")):
        pytest.skip("Playwright's own Chromium is installed here")
    env = MiniWoBEnv("click-button", launch=BrowserLaunchConfig(executable_path=None))
    try:
        with pytest.raises(DependencyError, match="apt-get install chromium") as err:
            env.reset(seed=0)
        assert "Traceback" not in str(err.value)
    finally:
        env.close()
