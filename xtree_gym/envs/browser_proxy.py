"""The allow-list where every request is seen: a filtering forward proxy the browser is forced through.

Playwright's ``route`` (the first layer, :func:`~xtree_gym.envs.browser_guard.install_route_guard`)
sees a request's first hop only: not the hops of a redirect, not WebSockets, not what a service
worker or a shared worker fetches. Chromium's network stack sees all of them, so the task browser is
launched with ``--proxy-server`` pointing at a :class:`FilteringProxy` of this process and
``--proxy-bypass-list=<-loopback>`` (without it Chromium sends loopback hosts around the proxy).
Every connection Chromium makes for a page then reaches this proxy first, one request or tunnel
at a time, redirect hop by redirect hop:

* plain ``http://`` requests (``GET http://host:port/path``), each hop of a redirect included;
* tunnels (``CONNECT host:port``): ``https://``, ``wss://`` and ``ws://`` -- Chromium opens every
  WebSocket through a tunnel.

Each destination is judged by :func:`admitted_addresses`: the host is resolved *once*, here, and the
connection goes to the very address that was checked, so a name that resolves to a public address
at check time and to ``127.0.0.1`` a moment later (DNS rebinding) gets nowhere. Everything else is
answered ``403`` and never leaves this process. The proxy listens on ``127.0.0.1`` only, with one
thread per connection, and is closed with the env.
"""

from __future__ import annotations

import contextlib
import logging
import selectors
import socket
import threading
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from .browser_address import is_public_address

if TYPE_CHECKING:
    from .browser_guard import NavigationPolicy

_log = logging.getLogger(__name__)

MAX_HEAD_BYTES = 64 * 1024
"""Longest request or response head (request line and headers) the proxy reads."""
CONNECT_TIMEOUT_S = 10.0
"""Seconds to open the upstream connection."""
HEAD_TIMEOUT_S = 30.0
"""Seconds a client or server may take to send its head."""
MAX_REFUSED_KEPT = 1000
"""Refused destinations remembered (:attr:`FilteringProxy.refused`), the latest ones."""
_HOP_HEADERS = (b"connection", b"proxy-connection", b"keep-alive", b"proxy-authorization")

Address = tuple[int, Any]  # (socket family, sockaddr) as getaddrinfo gives them


def split_host_port(target: str) -> tuple[str, int] | None:
    """``(host, port)`` of a ``CONNECT`` target (``host:port``, ``[v6]:port``), else None.

    Example:
        >>> split_host_port("example.org:443"), split_host_port("[::1]:8080"), split_host_port("h:x")
        (('example.org', 443), ('::1', 8080), None)
    """
    try:
        parts = urlsplit(f"//{target}")
        host, port = parts.hostname, parts.port
    except ValueError:
        return None
    if not host or port is None or port == 0 or parts.path or parts.query or parts.username:
        return None
    return host, port


def _netloc(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def admitted_addresses(
    policy: NavigationPolicy, schemes: tuple[str, ...], host: str, port: int
) -> list[Address] | None:
    """The addresses a connection to ``host:port`` may use under ``policy``, or None (refused).

    ``schemes`` are the URL schemes the connection may carry (``("http",)`` for a plain request,
    ``("https", "http")`` for a tunnel, which also carries ``ws://`` to an allowed http origin).
    An origin listed by name may go wherever its name resolves; under ``"*"`` every address the
    name resolves to must be public (unless ``policy.allow_private``) and only those are used.

    Example:
        >>> from xtree_gym.envs.browser_guard import NavigationPolicy
        >>> star = NavigationPolicy(origins=("http://127.0.0.1:8000", "*"))
        >>> len(admitted_addresses(star, ("http",), "127.0.0.1", 8000))
        1
        >>> [admitted_addresses(star, ("https", "http"), h, 9000) for h in ("127.0.0.1", "127.1", "localhost")]
        [None, None, None]
    """
    from .browser_guard import origin_of

    listed = any(origin_of(f"{s}://{_netloc(host, port)}/") in policy.origins for s in schemes)
    if not listed and "*" not in policy.origins:
        return None
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError, ValueError):
        return None
    addresses: list[Address] = [(int(family), sockaddr) for family, _, _, _, sockaddr in infos]
    if listed or policy.allow_private:
        return addresses or None
    if not addresses or not all(is_public_address(str(sockaddr[0])) for _, sockaddr in addresses):
        return None
    return addresses


def _read_head(sock: socket.socket) -> tuple[bytes, bytes] | None:
    """(head up to and including the blank line, bytes after it), or None (closed, too long, slow)."""
    data = b""
    sock.settimeout(HEAD_TIMEOUT_S)
    try:
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(8192)
            if not chunk or len(data) + len(chunk) > MAX_HEAD_BYTES:
                return None
            data += chunk
    except OSError:
        return None
    finally:
        with contextlib.suppress(OSError):
            sock.settimeout(None)
    head, _, rest = data.partition(b"\r\n\r\n")
    return head + b"\r\n\r\n", rest


def _rewrite_head(head: bytes, first_line: bytes, keep_upgrade: bool) -> bytes:
    """``head`` with a new first line, hop-by-hop headers dropped and ``Connection: close`` (one
    exchange per connection, so a reused connection can never carry a request nobody checked)."""
    lines = head.split(b"\r\n")
    kept = [ln for ln in lines[1:] if ln and ln.split(b":", 1)[0].strip().lower() not in _HOP_HEADERS]
    upgrade = keep_upgrade and any(ln.split(b":", 1)[0].strip().lower() == b"upgrade" for ln in kept)
    connection = b"Connection: Upgrade" if upgrade else b"Connection: close"
    return b"\r\n".join([first_line, *kept, connection]) + b"\r\n\r\n"


def _close_response(head: bytes) -> bytes:
    """A response head with ``Connection: close`` (a ``101 Switching Protocols`` keeps its upgrade)."""
    status_line = head.split(b"\r\n", 1)[0]
    if status_line.split(b" ")[1:2] == [b"101"]:
        return head
    return _rewrite_head(head, status_line, keep_upgrade=False)


def _pipe(client: socket.socket, upstream: socket.socket, response_head: bool = False) -> None:
    """Copy bytes both ways until either side closes; with ``response_head``, the upstream's first
    head passes through :func:`_close_response` (the body of a request flows meanwhile)."""
    sel = selectors.DefaultSelector()
    peers = {client: upstream, upstream: client}
    for s in peers:
        sel.register(s, selectors.EVENT_READ)
    pending = b"" if response_head else None
    try:
        while True:
            for key, _ in sel.select():
                src = key.fileobj
                assert isinstance(src, socket.socket)
                try:
                    chunk = src.recv(65536)
                except OSError:
                    return
                if not chunk:
                    return  # one side closed: the exchange is over
                if src is upstream and pending is not None:
                    pending += chunk
                    if b"\r\n\r\n" not in pending:
                        if len(pending) > MAX_HEAD_BYTES:
                            return
                        continue
                    head, _, body = pending.partition(b"\r\n\r\n")
                    chunk, pending = _close_response(head + b"\r\n\r\n") + body, None
                try:
                    peers[src].sendall(chunk)
                except OSError:
                    return
    finally:
        sel.close()


class FilteringProxy:
    """A loopback HTTP forward proxy that lets through only what ``policy`` admits.

    Example:
        >>> from xtree_gym.envs.browser_guard import NavigationPolicy
        >>> proxy = FilteringProxy(NavigationPolicy(origins=("http://127.0.0.1:8000",)))
        >>> proxy.launch_args()[1]
        '--proxy-bypass-list=<-loopback>'
        >>> proxy.close()
    """

    def __init__(self, policy: NavigationPolicy) -> None:
        self.policy = policy
        """What may pass; replace it (a reset with another start page) at any time."""
        self.refused: list[str] = []
        """Destinations refused so far (``CONNECT host:port`` or the URL), the latest :data:`MAX_REFUSED_KEPT`."""
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._closed = False
        self._thread = threading.Thread(target=self._serve, name="xtree-browser-proxy", daemon=True)
        self._thread.start()

    def launch_args(self) -> list[str]:
        """Chromium flags that send every request of the browser, loopback included, through the proxy.

        Besides the proxy itself: WebRTC may use no UDP that does not pass the proxy (its STUN and TURN
        packets would reach any address), and Chromium resolves no name itself (the proxy does), so
        nothing that might go around the proxy can even look a host up.
        """
        return [
            f"--proxy-server=http://127.0.0.1:{self.port}",
            "--proxy-bypass-list=<-loopback>",
            "--webrtc-ip-handling-policy=disable_non_proxied_udp",
            "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
        ]

    def close(self) -> None:
        """Stop listening and cut every open connection (idempotent, never raises)."""
        self._closed = True
        with contextlib.suppress(OSError):  # wakes the accept() of the serving thread (Linux)
            self._listener.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            self._listener.close()
        self._thread.join(timeout=5)
        with self._lock:
            socks, self._open = list(self._open), set()
        for s in socks:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                s.close()

    def _serve(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(
                target=self._handle, args=(client,), name="xtree-proxy-conn", daemon=True
            ).start()

    def _track(self, s: socket.socket) -> None:
        with self._lock:
            self._open.add(s)
        if self._closed:
            s.close()

    def _release(self, *socks: socket.socket | None) -> None:
        for s in socks:
            if s is None:
                continue
            with self._lock:
                self._open.discard(s)
            with contextlib.suppress(OSError):
                s.close()

    def _refuse(self, client: socket.socket, what: str) -> None:
        with self._lock:
            self.refused.append(what)
            del self.refused[:-MAX_REFUSED_KEPT]
        _log.info("browser proxy refused %s (not on the allow-list)", what)
        body = b"xtree_gym: this destination is not on the browser's allow-list\n"
        with contextlib.suppress(OSError):
            client.sendall(
                b"HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nConnection: close\r\n"
                + b"Content-Length: %d\r\n\r\n" % len(body)
                + body
            )

    def _open_upstream(self, addresses: list[Address]) -> socket.socket | None:
        for family, sockaddr in addresses:
            s = socket.socket(family, socket.SOCK_STREAM)
            self._track(s)
            s.settimeout(CONNECT_TIMEOUT_S)
            try:
                s.connect(sockaddr)
            except OSError:
                self._release(s)
                continue
            s.settimeout(None)
            return s
        return None

    def _handle(self, client: socket.socket) -> None:
        self._track(client)
        upstream = None
        try:
            got = _read_head(client)
            if got is None:
                return
            head, rest = got
            method, target, version = ([*head.split(b"\r\n", 1)[0].split(b" "), b"", b""])[:3]
            text = target.decode("latin-1")
            tunnel = method.upper() == b"CONNECT"
            if tunnel:
                upstream = self._connect(client, text, rest)
            else:
                upstream = self._forward(client, method, text, version, head, rest)
            if upstream is not None:
                _pipe(client, upstream, response_head=not tunnel)
        except OSError as exc:
            _log.debug("browser proxy connection ended: %s", exc)
        finally:
            self._release(client, upstream)

    def _connect(self, client: socket.socket, target: str, rest: bytes) -> socket.socket | None:
        """A tunnel (https, wss, ws): the destination host and port are all there is to judge."""
        hp = split_host_port(target)
        addresses = None if hp is None else admitted_addresses(self.policy, ("https", "http"), *hp)
        if addresses is None:
            self._refuse(client, f"CONNECT {target}")
            return None
        upstream = self._open_upstream(addresses)
        if upstream is None:
            client.sendall(b"HTTP/1.1 502 Bad Gateway\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")
            return None
        client.sendall(b"HTTP/1.1 200 Connection Established\r\n\r\n")
        if rest:
            upstream.sendall(rest)
        return upstream

    def _forward(
        self, client: socket.socket, method: bytes, url: str, version: bytes, head: bytes, rest: bytes
    ) -> socket.socket | None:
        """A plain ``http://`` request: judged by its URL, sent on as one exchange."""
        try:
            parts = urlsplit(url)
            host, port = parts.hostname, parts.port or 80
        except ValueError:
            host, port, parts = None, 0, None
        if parts is None or parts.scheme.lower() != "http" or not host:
            self._refuse(client, url)
            return None
        addresses = admitted_addresses(self.policy, ("http",), host, port)
        if addresses is None:
            self._refuse(client, url)
            return None
        upstream = self._open_upstream(addresses)
        if upstream is None:
            client.sendall(b"HTTP/1.1 502 Bad Gateway\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")
            return None
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        first = b" ".join([method, path.encode("latin-1"), version or b"HTTP/1.1"])
        upstream.sendall(_rewrite_head(head, first, keep_upgrade=True) + rest)
        return upstream
