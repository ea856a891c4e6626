"""Fault injection into the MiniWoB++ env: kill its real Chromium processes, feed it hostile actions.

Usage:  python benchmarks/browser_faults.py [--repeats N]

Each scenario runs on one ``MiniWoBEnv("click-checkboxes")`` and counts as *survived* when no
exception other than the project's own errors reached the caller, a killed browser's step came
back truncated with ``info["fault"]``, the next ``reset`` played a step, and ``close`` returned.
Processes are found as descendants of this process (by PID), never by name.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Callable
from typing import Any

from xtree_gym.envs.browser_axtree import iter_elements
from xtree_gym.envs.browser_launch import own_browsers
from xtree_gym.envs.browsergym import MiniWoBEnv
from xtree_gym.errors import XTreeError


def kill(which: str) -> None:
    browsers = own_browsers()
    pids = browsers["task"] + browsers["chat"] if which == "both" else browsers[which]
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    time.sleep(0.3)


def submit(env: Any) -> str:
    return next(
        f"click({e['bid']!r})"
        for e in iter_elements(env.last_browsergym_obs["axtree_object"])
        if e["role"] == "button"
    )


def mid_episode(which: str) -> Callable[[Any], bool]:
    def run(env: Any) -> bool:
        env.reset(seed=0)
        kill(which)
        *_, truncated, info = env.step(submit(env))
        if which != "chat" and not (truncated and info.get("fault")):
            return False
        env.reset(seed=1)
        _, _, terminated, _, info = env.step(submit(env))
        return bool(terminated) and "fault" not in info

    return run


def between_episodes(env: Any) -> bool:
    env.reset(seed=0)
    kill("both")
    env.reset(seed=1)
    return bool(env.step(submit(env))[2])


def before_close(env: Any) -> bool:
    env.reset(seed=0)
    kill("both")
    env.close()
    env.close()
    return not any(own_browsers().values())


def hostile_actions(env: Any) -> bool:
    env.reset(seed=0)
    bad = [
        "goto('file:///etc/passwd')",
        "fill('18', '" + chr(0xD83D) + "')",
        "click(" + "[" * 5000 + ")",
        "upload_file('18', '/etc/shadow')",
        "",
        "x" * 100_000,  # refused by length: BrowserGym's own parser would take minutes
    ]
    for action in bad:
        text, _, _, _, info = env.step(action)
        if "root:x:0:0" in text or not info["invalid_action"]:
            return False
    return True


SCENARIOS: dict[str, Callable[[Any], bool]] = {
    "kill task browser mid-episode": mid_episode("task"),
    "kill chat browser mid-episode": mid_episode("chat"),
    "kill both browsers mid-episode": mid_episode("both"),
    "kill both between episodes": between_episodes,
    "kill both, then close twice": before_close,
    "hostile actions (file, surrogate, nesting, upload, empty, 100 kB)": hostile_actions,
}


def main(argv: list[str]) -> int:
    repeats = int(argv[argv.index("--repeats") + 1]) if "--repeats" in argv else 2
    total = survived = 0
    for name, scenario in SCENARIOS.items():
        ok = 0
        for _ in range(repeats):
            env = MiniWoBEnv("click-checkboxes")
            try:
                ok += bool(scenario(env))
            except XTreeError as exc:  # the project's own clear error counts as handled only at reset
                print(f"  {name}: {type(exc).__name__}: {exc}")
            except Exception as exc:
                print(f"  {name}: RAW {type(exc).__name__}: {exc}")
            finally:
                env.close()
        total += repeats
        survived += ok
        print(f"{name}: {ok}/{repeats} survived")
    print(f"\n{survived}/{total} injected faults survived")
    return 0 if survived == total else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
