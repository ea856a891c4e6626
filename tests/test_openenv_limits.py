"""OpenEnv server limits and logs (Hardening IV, 5): real uvicorn servers on 127.0.0.1 only.

An HTTP body over ``max_message_bytes`` is a 413 before it is read whole, a ``/ws`` frame over it an
error frame (or, served with ``ws_max_size``, a close 1009), and a client that goes away is not an
error in the server's log, while a real error still is. The server whose memory and log are read
runs in a process of its own (``_SERVER``); every wait has a deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import select
import socket
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("openenv.core", reason="openenv-core is not installed: pip install 'xtree_gym[interop]'")

import websockets
from openenv.core import GenericEnvClient

from xtree_gym.adapters.openenv_env import MAX_MESSAGE_BYTES, make_app

MIB = 1 << 20

# The served app, with two real errors planted for the log test: reset(seed=666) raises (an HTTP 500),
# and the cleanup of a session that tried it raises after its client has gone.
_SERVER = """
import socket, sys
import uvicorn
from xtree_gym.adapters import openenv_env as oe

real_reset, real_destroy = oe.XTreeOpenEnv.reset, oe._SessionServer._destroy_session

def reset(self, seed=None, **kwargs):
    if seed == 666:
        self.boom = True
        raise ValueError("boom: a real error in reset")
    return real_reset(self, seed=seed, **kwargs)

async def destroy(self, session_id):
    env = self._sessions.get(session_id)
    await real_destroy(self, session_id)
    if getattr(env, "boom", False):
        raise RuntimeError("boom: a real error in cleanup")

oe.XTreeOpenEnv.reset, oe._SessionServer._destroy_session = reset, destroy
app = oe.make_app("XTree-Countdown-v0", max_sessions=4)
sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
sock.bind(("127.0.0.1", 0))
ws_max_size = getattr(app, "max_message_bytes", 16 * 2**20)  # as the docs serve it (16 MiB: uvicorn's own)
config = uvicorn.Config(app, log_level="info", ws_max_size=ws_max_size)
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(str(sock.getsockname()[1]))
import os; os.replace(sys.argv[1] + ".tmp", sys.argv[1])
uvicorn.Server(config).run(sockets=[sock])
"""


class Served:
    """The server process: its base url, port, pid and log file (stdout and stderr together)."""

    def __init__(self, proc: subprocess.Popen[bytes], port: int, log: Path) -> None:
        self.proc, self.port, self.log = proc, port, log
        self.url = f"http://127.0.0.1:{port}"

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def peak_rss(self) -> int:
        """The process's peak resident memory (VmHWM), bytes."""
        status = Path(f"/proc/{self.proc.pid}/status").read_text()
        return next(int(line.split()[1]) * 1024 for line in status.splitlines() if line.startswith("VmHWM:"))

    def mark(self, name: str, timeout: float = 20) -> str:
        """The log up to a marker request's access line (everything logged before it is in)."""
        time.sleep(0.5)  # the server's cleanup of a closed socket runs after the client saw it close
        with socket.create_connection(("127.0.0.1", self.port), timeout=10) as s:
            s.sendall(f"GET /health?mark={name} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
            s.recv(4096)
        deadline = time.monotonic() + timeout
        while f"mark={name}" not in (text := self.text()):
            assert time.monotonic() < deadline, f"marker {name} never reached the server's log"
            time.sleep(0.05)
        return text


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    if not Path("/proc/self/status").exists():
        pytest.skip("needs /proc to read the server's memory")
    tmp = tmp_path_factory.mktemp("openenv_server")
    log, port_file = tmp / "server.log", tmp / "port"
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-u", "-c", _SERVER, str(port_file)], stdout=out, stderr=out)
    try:
        deadline = time.monotonic() + 60
        while not port_file.exists():
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
        server = Served(proc, int(port_file.read_text()), log)
        while "Application startup complete" not in server.text():
            assert proc.poll() is None and time.monotonic() < deadline, server.text()
            time.sleep(0.05)
        yield server
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=20)


def _send_and_listen(port: int, head: bytes, parts: Iterable[bytes], wait_s: float = 10) -> tuple[bytes, int]:
    """Send ``head``, then ``parts`` until the server answers or hangs up; (its answer, body bytes sent).

    The answer is read for ``wait_s`` after the last part: a server that waits for the rest of a body
    answers nothing.
    """
    sent, answer = 0, b""
    with socket.create_connection(("127.0.0.1", port), timeout=wait_s) as s:
        s.sendall(head)
        for part in parts:
            if select.select([s], [], [], 0)[0]:
                break  # it answered already
            try:
                s.sendall(part)
            except (BrokenPipeError, ConnectionResetError, TimeoutError):
                break  # it hung up on the rest
            sent += len(part)
        deadline = time.monotonic() + wait_s
        with contextlib.suppress(ConnectionResetError, TimeoutError):
            while b"\r\n\r\n" not in answer and time.monotonic() < deadline:
                if select.select([s], [], [], 0.1)[0]:
                    chunk = s.recv(65536)
                    if not chunk:
                        break
                    answer += chunk
            if select.select([s], [], [], 0.5)[0]:
                answer += s.recv(65536)  # the rest of a small answer's body
    return answer, sent


def _head(path: str, length: int | None) -> bytes:
    size = f"Content-Length: {length}" if length is not None else "Transfer-Encoding: chunked"
    return f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n{size}\r\n\r\n".encode()


def _chunked(total: int, size: int = 64 * 1024) -> Iterator[bytes]:
    """A chunked JSON body of ``total`` bytes (``{"seed": 1}`` and spaces), never terminated."""
    data = b'{"seed": 1}' + b" " * (size - 11)
    for _ in range(total // size):
        yield f"{len(data):x}\r\n".encode() + data + b"\r\n"
        data = b" " * size


def test_http_body_over_the_limit_is_413_before_it_is_read_whole(served: Served) -> None:
    """1 MiB by default: a 100 MB Content-Length is refused after 64 KiB of it; a chunked body is cut
    past the limit without being finished; 64 MB streamed at it does not grow the server's memory."""
    declared, sent_declared = _send_and_listen(served.port, _head("/reset", 100 * MIB), [b" " * 65536])
    cut, sent_cut = _send_and_listen(served.port, _head("/reset", None), _chunked(2 * MIB))
    before = served.peak_rss()
    _flood, sent_flood = _send_and_listen(served.port, _head("/reset", None), _chunked(64 * MIB), wait_s=5)
    grown = served.peak_rss() - before
    fits, _ = _send_and_listen(
        served.port, _head("/reset", MAX_MESSAGE_BYTES), [b'{"seed": 1}' + b" " * (MAX_MESSAGE_BYTES - 11)]
    )
    assert declared.startswith(b"HTTP/1.1 413"), declared[:200]
    assert sent_declared == 65536  # the server answered with 99.9 % of the body never sent
    detail = json.loads(declared.split(b"\r\n\r\n", 1)[1])["detail"]
    assert "too large" in detail and str(MAX_MESSAGE_BYTES) in detail and "max_message_bytes" in detail
    assert cut.startswith(b"HTTP/1.1 413"), cut[:200]  # answered although the body never ended
    assert MAX_MESSAGE_BYTES < sent_cut <= sum(map(len, _chunked(2 * MIB)))  # never the closing 0-chunk
    assert grown < 16 * MIB, f"peak RSS grew by {grown / MIB:.0f} MiB for {sent_flood / MIB:.0f} MiB sent"
    assert fits.startswith(b"HTTP/1.1 200"), fits[:200]  # a body of exactly the limit is served


def test_ws_frame_over_the_limit_is_an_error_frame_and_the_session_goes_on(loopback, run_async) -> None:
    limit = 64 * 1024

    async def scenario(url: str) -> tuple[list[dict], dict, dict, str]:
        async with websockets.connect(url.replace("http://", "ws://") + "/ws", max_size=None) as ws:

            async def ask(frame: str | bytes) -> dict:
                await ws.send(frame)
                return json.loads(await asyncio.wait_for(ws.recv(), timeout=20))

            assert (await ask(json.dumps({"type": "reset", "data": {"seed": 4}})))["type"] == "observation"
            big = json.dumps({"type": "step", "data": {"reply": "x" * limit}})
            errors = [await ask(big), await ask(b"\x00" * (limit + 1))]
            exact = await ask('{"type": "state"}' + " " * (limit - 17))  # exactly the limit: served
            async with GenericEnvClient(base_url=url) as other:  # another session meanwhile
                other_text = (await other.reset(seed=5)).observation["text"]
            step = await ask(json.dumps({"type": "step", "data": {"reply": "op(+, 1, 2)"}}))
        async with websockets.connect(url.replace("http://", "ws://") + "/mcp", max_size=None) as mcp:
            await mcp.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "x" * limit}))
            errors.append(json.loads(await asyncio.wait_for(mcp.recv(), timeout=20)))
        return errors, exact, step, other_text

    with loopback(make_app("XTree-Countdown-v0", max_sessions=2, max_message_bytes=limit)) as url:
        errors, exact, step, other_text = run_async(asyncio.wait_for(scenario(url), timeout=60))
    assert [e.get("type") for e in errors] == ["error", "error", None]
    assert [e["data"]["code"] for e in errors[:2]] == ["MESSAGE_TOO_BIG"] * 2
    rpc = errors[2]["error"]  # /mcp answers in JSON-RPC: an invalid request
    assert rpc["code"] == -32600 and "too large" in rpc["message"]
    message = errors[0]["data"]["message"]
    assert f"limit of {limit} bytes" in message and "max_message_bytes" in message and "too large" in message
    assert exact["type"] == "state" and exact["data"]["step_count"] == 0  # the big step never ran
    assert step["type"] == "observation" and "Target" in other_text


def test_ws_frame_over_uvicorns_ws_max_size_is_closed_1009_and_the_server_stays(
    served: Served, run_async
) -> None:
    """Served with ``ws_max_size=app.max_message_bytes`` (as the docs say), uvicorn refuses a bigger
    frame from its header (close 1009) before reading it; other sessions go on."""

    async def scenario() -> tuple[int | None, str]:
        url = served.url.replace("http://", "ws://") + "/ws"
        async with websockets.connect(url, max_size=None) as ws:
            await ws.send(json.dumps({"type": "reset", "data": {"seed": 1}}))
            await asyncio.wait_for(ws.recv(), timeout=20)
            await ws.send(json.dumps({"type": "step", "data": {"reply": "x" * (2 * MIB)}}))
            with pytest.raises(websockets.exceptions.ConnectionClosed) as closed:
                await asyncio.wait_for(ws.recv(), timeout=20)
        async with GenericEnvClient(base_url=served.url) as after:
            text = (await after.reset(seed=2)).observation["text"]
        return closed.value.rcvd.code if closed.value.rcvd else None, text

    code, text = run_async(asyncio.wait_for(scenario(), timeout=60))
    assert code == 1009 and "Target" in text


async def _ws_sessions(url: str, seed: int) -> list[str]:
    """A closed session, a dropped one (no close frame) and one gone mid-step: each client's first reply."""
    first = []
    for how in ("close", "drop", "mid-step"):
        ws = await websockets.connect(url.replace("http://", "ws://") + "/ws")
        await ws.send(json.dumps({"type": "reset", "data": {"seed": seed}}))
        first.append(json.loads(await asyncio.wait_for(ws.recv(), timeout=20))["type"])
        if how == "close":
            await ws.close()
        else:
            if how == "mid-step":
                await ws.send(json.dumps({"type": "step", "data": {"reply": "op(+, 1, 2)"}}))
            ws.transport.abort()
    return first


def _http_disconnects(port: int) -> None:
    """A body cut short, a request whose answer nobody reads, and a body over the limit, each then gone."""
    for head, body in (
        (_head("/reset", 100), b'{"seed"'),
        (_head("/reset", 11), b'{"seed": 1}'),
        (_head("/step", 5 * MIB), b" " * 4096),
    ):
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.sendall(head + body)


def test_client_disconnects_log_no_error_but_real_errors_still_do(served: Served, run_async) -> None:
    import httpx

    first = run_async(asyncio.wait_for(_ws_sessions(served.url, seed=3), timeout=60))
    _http_disconnects(served.port)
    quiet = served.mark("quiet")
    with httpx.Client(base_url=served.url, timeout=30) as http:
        failed = http.post("/reset", json={"seed": 666})

    async def real_error() -> str:
        async with websockets.connect(served.url.replace("http://", "ws://") + "/ws") as ws:
            await ws.send(json.dumps({"type": "reset", "data": {"seed": 666}}))
            return str(json.loads(await asyncio.wait_for(ws.recv(), timeout=20))["type"])

    errored = run_async(asyncio.wait_for(real_error(), timeout=60))
    loud = served.mark("loud")[len(quiet) :]
    assert first == ["observation"] * 3 and quiet.count('"WebSocket /ws" [accepted]') >= 3
    bad = [line for line in quiet.splitlines() if "ERROR" in line or "Traceback" in line]
    assert bad == [], quiet[quiet.find("ERROR") :][:4000]
    assert failed.status_code == 500 and errored == "error"
    assert loud.count("ERROR") >= 2 and loud.count("Traceback") >= 2, loud[-2000:]
    assert "boom: a real error in reset" in loud and "boom: a real error in cleanup" in loud


@pytest.mark.parametrize("bad", [0, -1, True, 1.5, "1MiB"])
def test_make_app_rejects_a_bad_max_message_bytes(bad: Any) -> None:
    from xtree_gym.errors import EnvConfigError

    with pytest.raises(EnvConfigError, match="max_message_bytes"):
        make_app("XTree-Countdown-v0", max_message_bytes=bad)


def test_the_default_limit_is_one_mib() -> None:
    assert MAX_MESSAGE_BYTES == 1 << 20
    assert make_app("XTree-Countdown-v0").max_message_bytes == MAX_MESSAGE_BYTES
