"""What the allow-list's filtering proxy costs a page load: Chromium through it vs straight.

One Chromium per setting, launched in this run on the same machine, loading the local form fixture
(tests/data/browser_form.html on 127.0.0.1) ``--loads`` times each, interleaved so load on the machine
hits both alike. "direct" is the bare browser; "proxy" the same browser launched with
:meth:`~xtree_gym.envs.browser_proxy.FilteringProxy.launch_args` (every request through the proxy,
which resolves, checks and forwards it). Prints the medians and their ratio.

Usage::

    python benchmarks/bench_browser_proxy.py [--loads 30]
"""

from __future__ import annotations

import argparse
import functools
import http.server
import os
import statistics
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from xtree_gym.envs.browser_guard import NavigationPolicy  # noqa: E402
from xtree_gym.envs.browser_launch import BrowserLaunchConfig  # noqa: E402
from xtree_gym.envs.browser_proxy import FilteringProxy  # noqa: E402


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--loads", type=int, default=30, help="page loads per setting (default 30)")
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    handler = functools.partial(_Quiet, directory=str(ROOT / "tests" / "data"))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/browser_form.html"
    proxy = FilteringProxy(NavigationPolicy.for_start_url(url))
    cfg = BrowserLaunchConfig()
    times: dict[str, list[float]] = {"direct": [], "proxy": []}
    with sync_playwright() as pw:
        pages = {}
        for name, extra in (("direct", []), ("proxy", proxy.launch_args())):
            browser = pw.chromium.launch(
                executable_path=cfg.executable_path, headless=True, args=cfg.launch_args() + extra
            )
            pages[name] = browser.new_context().new_page()
            pages[name].goto(url)  # warm-up
        for _ in range(args.loads):
            for name, page in pages.items():
                t0 = time.perf_counter()
                page.goto(url + f"?t={time.perf_counter_ns()}", wait_until="load")
                times[name].append(time.perf_counter() - t0)
    proxy.close()
    server.shutdown()
    med = {k: statistics.median(v) * 1000 for k, v in times.items()}
    load = os.getloadavg()[0]
    print(
        f"page load median over {args.loads}: direct {med['direct']:.1f} ms, proxy {med['proxy']:.1f} ms, "
        f"ratio {med['proxy'] / med['direct']:.2f} (load average {load:.1f})"
    )


if __name__ == "__main__":
    main()
