"""Envs on ``xtree serve`` servers (``--env-servers URL[,URL...]``): a handle like a local worker's.

:class:`RemoteHandle` has :class:`~xtree_gym.agents.play.envproc.ProcessHandle`'s interface
(``send`` / ``receive`` / ``kill`` / ``close`` / ``alive``) and speaks the same JSON messages, over
one WebSocket per session to a server's ``/xtree/ws`` (:mod:`~xtree_gym.adapters.env_server`), so the
rest of the rollout (harness, generator, matcher, rewards) is unchanged and one turn is one round trip.

:class:`EnvServers` picks a server per session: the least loaded (fewest sessions this run holds
there), among those up. A server whose connection drops or is refused is marked down; the episodes
in flight on it end as :class:`~xtree_gym.agents.play.envproc.EnvFault` (truncated, ``fault`` set,
as a dead local worker's), and it is used again once its ``/health`` answers (probed at most once a
second). A reset is the start of an episode, so a reset that meets a dead server is sent to another.
With a token (``XTREE_SERVE_TOKEN``) every connection carries ``Authorization: Bearer TOKEN``.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from ...errors import ConfigError
from .envproc import EnvFault, _answer

SESSION_PATH = "/xtree/ws"
"""The route of a remote rollout's sessions on ``xtree serve`` (:mod:`xtree_gym.adapters.env_server`)."""
HEALTH_PATH = "/health"
TOKEN_ENV = "XTREE_SERVE_TOKEN"
UNAUTHORIZED_HINT = f"unauthorized (set {TOKEN_ENV} to the content of the server's --token-file)"
"""Environment variable holding the servers' token (the content of ``xtree serve --token-file``)."""
PROBE_EVERY_S = 1.0
WAIT_FOR_SERVER_S = 60.0
"""How long a session waits for some server to come back when every one is down, before its episode faults."""
MAX_ANSWER_BYTES = 64 << 20


def parse_servers(text: str | Sequence[str] | None) -> list[str]:
    """``"URL[,URL...]"`` as a list of ``http://host:port`` bases; one clear error for a bad one.

    Example:
        >>> parse_servers("127.0.0.1:8001, http://h:8002/")
        ['http://127.0.0.1:8001', 'http://h:8002']
    """
    items = text.split(",") if isinstance(text, str) else list(text or [])
    urls = []
    for raw in (str(i).strip() for i in items):
        if not raw:
            continue
        url = raw if "://" in raw else f"http://{raw}"
        scheme = url.split("://", 1)[0].lower()
        if scheme not in ("http", "https", "ws", "wss"):
            raise ConfigError(
                f"--env-servers: {raw!r} is not an http(s) URL", fix="e.g. http://127.0.0.1:8000"
            )
        urls.append(url.rstrip("/"))
    if not urls:
        raise ConfigError("--env-servers names no server", fix="e.g. --env-servers http://127.0.0.1:8000")
    return urls


def ws_url(base: str) -> str:
    """The session socket of the server at ``base``.

    Example:
        >>> ws_url("http://127.0.0.1:8001"), ws_url("https://h")
        ('ws://127.0.0.1:8001/xtree/ws', 'wss://h/xtree/ws')
    """
    scheme, rest = base.split("://", 1)
    scheme = {"http": "ws", "https": "wss"}.get(scheme, scheme)
    return f"{scheme}://{rest}{SESSION_PATH}"


def http_url(base: str) -> str:
    scheme, rest = base.split("://", 1)
    return f"{ {'ws': 'http', 'wss': 'https'}.get(scheme, scheme) }://{rest}"


class EnvServers:
    """The servers of one run: sessions held on each, which are down, and when each was last probed."""

    def __init__(
        self, urls: Sequence[str], token: str | None = None, wait_s: float = WAIT_FOR_SERVER_S
    ) -> None:
        self.urls = list(urls)
        self.token = token if token is not None else (os.environ.get(TOKEN_ENV) or None)
        self.wait_s = wait_s
        self.load = dict.fromkeys(self.urls, 0)
        self.down: dict[str, float] = {}  # url -> when last probed
        self.max_sessions: dict[str, int] = {}
        self.lock = threading.Lock()

    def health(self, url: str, timeout: float = 15.0) -> dict[str, Any] | None:
        """The server's ``/health`` answer, or None when it does not answer 200.

        A dead server refuses the connection at once; the timeout only bounds a live one slowed by its load (a
        busy 2-core machine can take seconds), which must not be taken for dead.
        """
        import httpx

        try:
            r = httpx.get(http_url(url) + HEALTH_PATH, timeout=timeout)
            return dict(r.json()) if r.status_code == 200 else None
        except (httpx.HTTPError, ValueError, TypeError):
            return None

    def check(self, env_id: str) -> int:
        """Probe every server once; one clear error when none answers or one serves another env.

        Returns the sessions the reachable servers take in all.
        """
        answers = {url: self.health(url) for url in self.urls}
        up = {u: a for u, a in answers.items() if a is not None}
        if not up:
            raise ConfigError(
                f"no env server answers at {', '.join(self.urls)} (GET /health)",
                fix=f"start them with `xtree serve {env_id} --port P`, or fix --env-servers",
            )
        for url, answer in up.items():
            if answer.get("env") != env_id:
                raise ConfigError(
                    f"the env server at {url} serves {answer.get('env')!r}, not {env_id!r}",
                    fix=f"start it with `xtree serve {env_id}`, or drop it from --env-servers",
                )
            self.max_sessions[url] = int(answer.get("max_sessions") or 1)
        now = time.monotonic()
        self.down = {u: now for u in self.urls if u not in up}
        return sum(self.max_sessions.values())

    def mark_down(self, url: str) -> None:
        with self.lock:
            self.down.setdefault(url, time.monotonic())

    def _up(self) -> list[str]:
        """Servers up now; a down one whose last probe is over a second old is probed again."""
        now = time.monotonic()
        for url, last in list(self.down.items()):
            if now - last >= PROBE_EVERY_S:
                self.down[url] = now
                if self.health(url, timeout=5.0) is not None:
                    del self.down[url]
        return [u for u in self.urls if u not in self.down]

    def pick(self, avoid: str | None = None) -> str:
        """The least-loaded server up (``avoid`` last); waits up to ``wait_s`` when all are down."""
        deadline = time.monotonic() + self.wait_s
        while True:
            with self.lock:
                up = self._up()
                if up:
                    return min(up, key=lambda u: (u == avoid, self.load[u], self.urls.index(u)))
            if time.monotonic() >= deadline:
                raise EnvFault(f"no env server answers (of {', '.join(self.urls)}) after {self.wait_s:g}s")
            time.sleep(min(PROBE_EVERY_S, max(0.0, deadline - time.monotonic())))

    def opened(self, url: str, delta: int = 1) -> None:
        with self.lock:
            self.load[url] += delta


def _closed_errors() -> tuple[type[BaseException], ...]:
    from websockets.exceptions import WebSocketException

    return (OSError, EOFError, WebSocketException)


class RemoteHandle:
    """One session on an env server: :class:`~xtree_gym.agents.play.envproc.ProcessHandle`'s interface."""

    def __init__(
        self, servers: EnvServers, env_id: str, kwargs: Mapping[str, Any], harness: Any, oracle: bool
    ) -> None:
        from .envproc import jsonable

        self.servers = servers
        self.env_id = env_id
        self.kwargs = jsonable(dict(kwargs))
        self.harness = harness_spec(harness)
        self.oracle = bool(oracle)
        self.url: str | None = None
        self.ws: Any = None
        self.alive = True
        self._sent: tuple[dict[str, Any], float | None, float] | None = None

    def _open(self, timeout: float | None, avoid: str | None = None, tries: int | None = None) -> None:
        """Connect to the least-loaded server and open the session (a refusal is one clear error)."""
        from websockets.sync.client import connect

        url = self.servers.pick(avoid)
        headers = {"Authorization": f"Bearer {self.servers.token}"} if self.servers.token else None
        wait = min(timeout or 30.0, 30.0)
        hello = {"cmd": "open", "env": self.env_id, "harness": self.harness, "oracle": self.oracle,
                 "env_args": self.kwargs}  # fmt: skip
        try:
            ws = connect(ws_url(url), additional_headers=headers, open_timeout=wait, max_size=MAX_ANSWER_BYTES,
                         close_timeout=2)  # fmt: skip
            with contextlib.suppress(*_closed_errors()):  # a server refusing the token says why, then closes
                ws.send(
                    json.dumps(hello)
                )  # at once: the send can lose that race, its reason is in the buffer
            reply = json.loads(ws.recv(timeout=wait))
        except TimeoutError as exc:
            raise EnvFault(f"env server {url} did not open a session in {wait:g}s") from exc
        except _closed_errors() as exc:
            if getattr(getattr(exc, "rcvd", None), "code", None) == 1008:  # policy violation: the token
                raise ConfigError(f"env server {url} refused the session: {UNAUTHORIZED_HINT}") from None
            self.servers.mark_down(url)
            raise EnvFault(f"env server {url} is unreachable ({type(exc).__name__}: {exc})") from exc
        if "refused" in reply:
            ws.close()
            if reply.get("code") == "BUSY":  # full: another server may have room
                left = len(self.servers.urls) - 1 if tries is None else tries - 1
                if left > 0:
                    return self._open(timeout, avoid=url, tries=left)
                raise EnvFault(f"env server {url}: {reply['refused']}")
            raise ConfigError(f"env server {url} refused the session: {reply['refused']}")
        self.url, self.ws = url, ws
        self.servers.opened(url)

    def send(self, msg: dict[str, Any], timeout: float | None) -> None:
        fresh = self.ws is None
        if fresh:
            self._open(timeout)
        try:
            self.ws.send(json.dumps(msg))
        except _closed_errors() as exc:
            if msg.get("cmd") == "reset" and not fresh:  # nothing of the episode ran: start it elsewhere
                self._drop()
                return self.send(msg, timeout)
            url = self.url
            self._died(str(msg.get("cmd")))
            raise EnvFault(f"env server {url} died before {msg.get('cmd')} ({type(exc).__name__})") from exc
        self._sent = (msg, timeout, time.monotonic())

    def receive(self) -> dict[str, Any]:
        assert self._sent is not None
        msg, timeout, sent_at = self._sent
        self._sent = None
        cmd = str(msg.get("cmd"))
        left = None if timeout is None else max(0.0, timeout - (time.monotonic() - sent_at))
        try:
            text = self.ws.recv(timeout=left)
        except TimeoutError as exc:
            self.kill()
            raise EnvFault(
                f"env {cmd} hung past the {timeout:g}s timeout; the session on {self.url} was closed"
            ) from exc
        except _closed_errors() as exc:
            if cmd == "reset" and len(self.servers.urls) > 1:  # the episode had not begun: try another server
                url = self.url
                self._died(cmd)
                self.alive = True
                self._open(timeout, avoid=url)
                self.send(msg, timeout)
                return self.receive()
            url = self.url
            self._died(cmd)
            raise EnvFault(f"env server {url} died during {cmd} ({type(exc).__name__})") from exc
        return _answer(json.loads(text), self)

    def _drop(self) -> None:
        """Forget the session (its server is gone), without marking this handle dead."""
        if self.url is not None:
            self.servers.mark_down(self.url)
            self.servers.opened(self.url, -1)
        if self.ws is not None:
            with contextlib.suppress(Exception):
                self.ws.close()
        self.ws, self.url = None, None

    def _died(self, cmd: str) -> None:
        self._drop()
        self.alive = False

    def kill(self) -> None:
        """Close the socket without a goodbye (the server closes the env when the socket ends)."""
        self.alive = False
        if self.ws is not None:
            with contextlib.suppress(Exception):
                self.ws.close()
            self.ws = None
        if self.url is not None:
            self.servers.opened(self.url, -1)
            self.url = None

    def close(self) -> None:
        if not self.alive:
            return
        if self.ws is not None:
            ended: tuple[type[BaseException], ...] = (TimeoutError, *_closed_errors())
            with contextlib.suppress(*ended):  # a server gone meanwhile: nothing left to close
                self.ws.send(json.dumps({"cmd": "close"}))
                self.ws.recv(timeout=10.0)
        self.kill()


def harness_spec(harness: Any) -> str:
    """How a client names its harness to a server: the registered name, else ``module:Class``.

    Example:
        >>> from xtree_gym.agents.play.testing import EchoHarness
        >>> harness_spec(EchoHarness())
        'xtree_gym.agents.play.testing:EchoHarness'
    """
    from ..harness.base import _REGISTRY

    name = getattr(harness, "name", "")
    if name and _REGISTRY.get(name) is type(harness):
        return str(name)
    return f"{type(harness).__module__}:{type(harness).__qualname__}"
