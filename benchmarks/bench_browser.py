"""Browser start and step times of the XTree BrowserGym envs: fast default vs BrowserGym's pacing.

Measured in one run, on the same machine and pages:

* ``launch``: one bare ``chromium.launch`` + close of the configured Chromium (Playwright);
* ``reset``: an env reset (task browser + chat browser + page + first observation);
* ``step``: one step on the local form fixture (tests/data/browser_form.html served on
  127.0.0.1), alternating ``fill`` and ``click``;
* ``mw_reset`` / ``mw_step``: a MiniWoB++ ``click-checkboxes`` reset, and one checkbox click
  (the episode does not end until Submit, so steps repeat);
* ``mw_episode``: a full scripted MiniWoB++ ``click-button`` episode (reset + one step).

"fast" is ``BrowserLaunchConfig()`` (slow_mo 0, no pre-observation sleep); "browsergym" is
``BrowserLaunchConfig.browsergym_defaults()`` (the task's slow_mo, 0.5 s sleep).

Usage::

    python benchmarks/bench_browser.py [--steps 10] [--resets 3] [--json out.json]
"""

from __future__ import annotations

import argparse
import functools
import http.server
import json
import os
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from xtree_gym.envs.browser_axtree import iter_elements  # noqa: E402
from xtree_gym.envs.browser_launch import BrowserLaunchConfig  # noqa: E402


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


def serve_fixtures() -> tuple[http.server.ThreadingHTTPServer, str]:
    handler = functools.partial(_Quiet, directory=str(ROOT / "tests" / "data"))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/"


def timed(fn: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def bench_launch(cfg: BrowserLaunchConfig) -> float:
    from browsergym.core import _get_global_playwright

    from xtree_gym.envs.browser_launch import patched_chromium_launch

    pw = _get_global_playwright()
    with patched_chromium_launch(cfg, pw):
        return timed(lambda: pw.chromium.launch(headless=True).close())


def _form_actions(env: Any) -> list[str]:
    els = {(e["role"], e["label"]): e["bid"] for e in iter_elements(env.last_browsergym_obs["axtree_object"])}
    return [f"fill({els['textbox', 'First name']!r}, 'x')", f"click({els['checkbox', 'Accept terms']!r})"]


def _checkbox_click(env: Any) -> str:
    box = next(e for e in iter_elements(env.last_browsergym_obs["axtree_object"]) if e["role"] == "checkbox")
    return f"click({box['bid']!r})"


def run_all(configs: dict[str, BrowserLaunchConfig], url: str, reps: int, steps: int) -> dict[str, dict]:
    """Every measure, the settings interleaved rep by rep so that load drift hits both alike."""
    from xtree_gym.collect.miniwob import CollectConfig, run_episode
    from xtree_gym.envs.browsergym import MiniWoBEnv, OpenURLEnv

    keys = ("launch", "reset", "step", "mw_episode", "mw_reset", "mw_step")
    res: dict[str, dict[str, list[float]]] = {n: {k: [] for k in keys} for n in configs}
    forms = {n: OpenURLEnv(url, goal="bench", launch=c) for n, c in configs.items()}
    episodes = {n: MiniWoBEnv(task="click-button", launch=c) for n, c in configs.items()}
    boxes = {n: MiniWoBEnv(task="click-checkboxes", launch=c) for n, c in configs.items()}
    try:
        for rep in range(reps):
            for name, cfg in configs.items():
                res[name]["launch"].append(bench_launch(cfg))
                res[name]["reset"].append(timed(lambda f=forms[name]: f.reset(seed=0)))
                res[name]["mw_reset"].append(timed(lambda b=boxes[name], r=rep: b.reset(seed=r)))
                t0 = time.perf_counter()
                traj = run_episode(episodes[name], "click-button", rep, CollectConfig(episodes=1))
                res[name]["mw_episode"].append(time.perf_counter() - t0)
                assert traj.success, traj
        actions = {name: _form_actions(env) for name, env in forms.items()}
        clicks = {name: _checkbox_click(env) for name, env in boxes.items()}
        for i in range(steps):
            for name in configs:
                res[name]["step"].append(timed(lambda e=forms[name], a=actions[name][i % 2]: e.step(a)))
                res[name]["mw_step"].append(timed(lambda e=boxes[name], a=clicks[name]: e.step(a)))
    finally:
        for env in [*forms.values(), *episodes.values(), *boxes.values()]:
            env.close()
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--steps", type=int, default=10, help="form steps per setting (default 10)")
    ap.add_argument(
        "--resets", type=int, default=3, help="launches, resets and episodes per setting (default 3)"
    )
    ap.add_argument("--json", default=None, help="also write the raw timings here")
    args = ap.parse_args(argv)
    import xtree_gym.canon  # noqa: F401 - registers the canonicalizers the envs use

    fast = BrowserLaunchConfig()
    slow = BrowserLaunchConfig.browsergym_defaults()
    print(f"chromium: {fast.executable_path}  args: {' '.join(fast.launch_args())}")
    print(f"load average before: {' '.join(f'{x:.1f}' for x in os.getloadavg())}  cpus: {os.cpu_count()}")
    server, base = serve_fixtures()
    try:
        results = run_all(
            {"fast": fast, "browsergym": slow}, base + "browser_form.html", args.resets, args.steps
        )
    finally:
        server.shutdown()
    print(f"{'measure':<10} {'fast median s':>14} {'browsergym median s':>20} {'ratio':>7}")
    for key in ("launch", "reset", "step", "mw_reset", "mw_step", "mw_episode"):
        f, s = statistics.median(results["fast"][key]), statistics.median(results["browsergym"][key])
        print(f"{key:<10} {f:>14.3f} {s:>20.3f} {s / f:>6.1f}x")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
