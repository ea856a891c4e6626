"""The browser's filtering proxy on its own (no browser): real loopback sockets, raw HTTP.

It must refuse every spelling of a forbidden host, tunnel and forward only what the policy admits,
never carry a second request on a connection it already judged, and connect to the very address it
checked (a name that resolves to a public and a loopback address is refused under ``"*"``).
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest

from xtree_gym.envs.browser_guard import NavigationPolicy
from xtree_gym.envs.browser_proxy import FilteringProxy, admitted_addresses

LOOPBACK_SPELLINGS = (
    "127.0.0.1", "127.1", "2130706433", "0x7f000001", "0x7f.1", "0177.0.0.1", "127.000.000.001",
    "::1", "::ffff:127.0.0.1", "::ffff:7f00:1", "0:0:0:0:0:0:0:1", "localhost", "localhost.", "LOCALHOST",
    "a.localhost", "0.0.0.0", "0", "169.254.169.254", "10.0.0.7", "192.168.1.1", "172.16.0.1", "100.64.0.1",
    "fc00::1", "fe80::1", "127%2e0%2e0%2e1", "\uff11\uff12\uff17.\uff10.\uff10.\uff11",
)  # fmt: skip


def test_every_spelling_of_a_non_public_host_is_refused_under_star() -> None:
    star = NavigationPolicy(origins=("http://127.0.0.1:8000", "*"))
    refused = [h for h in LOOPBACK_SPELLINGS for schemes in (("http",), ("https", "http"))
               if admitted_addresses(star, schemes, h, 9000) is None]  # fmt: skip
    assert len(refused) == 2 * len(LOOPBACK_SPELLINGS) == 52
    # the listed origin itself is admitted, only on its own port; private hosts with allow_private
    assert admitted_addresses(star, ("http",), "127.0.0.1", 8000)
    assert (
        admitted_addresses(NavigationPolicy(origins=("http://127.0.0.1:8000",)), ("http",), "127.0.0.1", 8001)
        is None
    )
    private = NavigationPolicy(origins=("*",), allow_private=True)
    assert admitted_addresses(private, ("http",), "127.0.0.1", 9000)


def test_a_name_with_any_non_public_address_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """DNS cannot be served here, so getaddrinfo is replaced: a rebinding name answering a public and a
    loopback address is refused under ``"*"``; a public-only one is admitted with exactly its addresses."""
    answers = {
        "rebind.example": ["93.184.216.34", "127.0.0.1"],
        "public.example": ["93.184.216.34"],
    }

    def fake(host: str, port: int, *args: Any, **kwargs: Any) -> list[Any]:
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port)) for a in answers[host]]

    monkeypatch.setattr(socket, "getaddrinfo", fake)
    star = NavigationPolicy(origins=("*",))
    assert admitted_addresses(star, ("http",), "rebind.example", 80) is None
    assert admitted_addresses(star, ("http",), "public.example", 80) == [
        (socket.AF_INET, ("93.184.216.34", 80))
    ]


@pytest.fixture()
def proxy(hostile_site: str) -> Iterator[FilteringProxy]:
    p = FilteringProxy(NavigationPolicy.for_start_url(hostile_site + "/start.html"))
    try:
        yield p
    finally:
        p.close()


def _exchange(proxy: FilteringProxy, data: bytes, then: bytes = b"") -> bytes:
    """Send ``data`` to the proxy (and ``then`` after the first answer), read until it closes."""
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as s:
        s.sendall(data)
        out = s.recv(65536)
        if then:
            try:
                s.sendall(then)
            except OSError:
                return out
        try:
            while chunk := s.recv(65536):
                out += chunk
        except ConnectionResetError:  # the proxy closed with our second request unread: that is the point
            pass
    return out


def test_plain_requests_and_tunnels_to_forbidden_hosts_never_leave(
    proxy: FilteringProxy, hostile_site: str, secret_servers: Any
) -> None:
    p2 = secret_servers.secret.rsplit(":", 1)[1]
    p3 = secret_servers.websocket.rsplit(":", 1)[1]
    before = secret_servers.reached()
    attempts = [
        f"GET http://127.0.0.1:{p2}/ HTTP/1.1\r\nHost: 127.0.0.1:{p2}\r\n\r\n",
        f"GET http://127.1:{p2}/ HTTP/1.1\r\nHost: x\r\n\r\n",
        f"GET http://2130706433:{p2}/ HTTP/1.1\r\nHost: x\r\n\r\n",
        f"GET http://localhost.:{p2}/ HTTP/1.1\r\nHost: x\r\n\r\n",
        f"CONNECT 127.0.0.1:{p3} HTTP/1.1\r\nHost: 127.0.0.1:{p3}\r\n\r\n",
        f"CONNECT [::ffff:127.0.0.1]:{p2} HTTP/1.1\r\n\r\n",
        f"GET ftp://127.0.0.1:{p2}/ HTTP/1.1\r\n\r\n",
        f"GET /relative HTTP/1.1\r\nHost: 127.0.0.1:{p2}\r\n\r\n",
    ]
    answers = [_exchange(proxy, a.encode()) for a in attempts]
    assert all(a.startswith(b"HTTP/1.1 403") for a in answers), answers
    assert len(proxy.refused) == len(attempts) == 8
    assert secret_servers.reached() == before


def test_allowed_traffic_passes_one_exchange_per_connection(
    proxy: FilteringProxy, hostile_site: str, secret_servers: Any
) -> None:
    p1 = hostile_site.rsplit(":", 1)[1]
    # a redirect passes as it is (the browser's next hop comes back to the proxy as a new request)
    answer = _exchange(
        proxy, f"GET http://127.0.0.1:{p1}/r302 HTTP/1.1\r\nHost: 127.0.0.1:{p1}\r\n\r\n".encode()
    )
    assert answer.startswith(b"HTTP/1.1 302") and secret_servers.secret.encode() in answer
    assert b"\r\nConnection: close\r\n" in answer
    # a second request on the same connection, for a forbidden host, goes nowhere
    before = secret_servers.reached()
    second = f"GET {secret_servers.secret}/ HTTP/1.1\r\nHost: x\r\n\r\n".encode()
    answer = _exchange(
        proxy, f"GET http://127.0.0.1:{p1}/start.html HTTP/1.1\r\nHost: h\r\n\r\n".encode(), second
    )
    assert b"Start page" in answer and secret_servers.secret_text.encode() not in answer
    assert secret_servers.reached() == before
    # a tunnel to the allowed origin carries its bytes both ways
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as s:
        s.sendall(f"CONNECT 127.0.0.1:{p1} HTTP/1.1\r\n\r\n".encode())
        assert s.recv(4096).startswith(b"HTTP/1.1 200")
        s.sendall(b"GET /start.html HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")
        got = b""
        while chunk := s.recv(65536):
            got += chunk
    assert b"Start page" in got


def test_close_ends_open_tunnels(proxy: FilteringProxy, hostile_site: str) -> None:
    p1 = hostile_site.rsplit(":", 1)[1]
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as s:
        s.sendall(f"CONNECT 127.0.0.1:{p1} HTTP/1.1\r\n\r\n".encode())
        assert s.recv(4096).startswith(b"HTTP/1.1 200")
        proxy.close()
        assert s.recv(4096) == b""
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", proxy.port), timeout=2).close()
