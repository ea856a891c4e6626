"""``xtree serve ENV_ID``: one env's OpenEnv server, plus the session route a remote rollout plays over.

The app is :func:`~xtree_gym.adapters.openenv_env.make_app`'s (OpenEnv's ``/ws``, ``/reset``,
``/step``, with its input guards and size limits) with two routes added:

* ``GET /health``: 200 with ``{"status": "ok", "env", "sessions", "max_sessions"}`` once the server
  can take sessions (the env was built once at start-up, so a bad id or argument fails before it);
* ``/xtree/ws``: one WebSocket per episode slot of a remote rollout
  (:class:`~xtree_gym.agents.play.remote.RemoteHandle`). The first frame opens the session --
  ``{"cmd": "open", "env", "harness", "oracle", "env_args"}``: the client names its harness, so one
  server serves every harness -- and every later frame is one message of the worker protocol of
  :mod:`~xtree_gym.agents.play.envproc` (``reset`` / ``step`` / ``close``), answered as a local worker
  answers it: ``{"ok": {...}}`` (observation, info with ``info["xtree"]``, the harness's view, the
  valid actions when it lists them, the oracle's next action), ``{"error": ...}`` or
  ``{"build_error": ...}``. One turn is one round trip. A refused open is ``{"refused": MESSAGE,
  "code": CODE}`` and the socket closes.

Security: the server binds loopback unless ``--token-file`` is given; with a token every route but
``/health`` needs ``Authorization: Bearer TOKEN`` (compared in constant time), checked before any
env is built or any frame is read, so nothing of an episode reaches a client without it.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import importlib
import ipaddress
import itertools
import json
import sys
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from ..agents.play.remote import HEALTH_PATH, SESSION_PATH
from ..errors import ConfigError, XTreeError

UNAUTHORIZED = (
    "unauthorized: this env server needs its token; send it as 'Authorization: Bearer TOKEN' "
    "(xtree eval / train: set XTREE_SERVE_TOKEN to the content of the server's --token-file)"
)


def is_loopback(host: str) -> bool:
    """Whether ``host`` only reaches this machine.

    Example:
        >>> [is_loopback(h) for h in ("127.0.0.1", "localhost", "::1", "0.0.0.0", "10.0.0.5")]
        [True, True, True, False, False]
    """
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def read_token(path: str | None, host: str) -> str | None:
    """The token from ``--token-file``; refuses a non-loopback ``host`` without one."""
    if path is None:
        if not is_loopback(host):
            raise ConfigError(
                f"--host {host} is not a loopback address: anyone who reaches it could play (and read) the env",
                fix="add --token-file FILE (every client then sends that token), or serve on 127.0.0.1",
            )
        return None
    try:
        token = Path(path).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(
            f"cannot read the token file: {exc}", where=path, fix="write the token as text"
        ) from None
    if len(token) < 16:
        raise ConfigError(
            "the token file holds fewer than 16 characters", where=path,
            fix='write a long random token, e.g. python -c "import secrets; print(secrets.token_hex(32))" > FILE',
        )  # fmt: skip
    return token


def authorized(headers: list[tuple[bytes, bytes]], token: str | None) -> bool:
    """Whether an ASGI scope's ``headers`` carry ``Authorization: Bearer token`` (always, without a token).

    Example:
        >>> authorized([(b"authorization", b"Bearer s3cret")], "s3cret"), authorized([], "s3cret")
        (True, False)
    """
    if token is None:
        return True
    for name, value in headers:
        if name.lower() == b"authorization":
            scheme, _, given = value.decode("latin-1").partition(" ")
            return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), token.encode())
    return False


class _TokenGuard:
    """ASGI wrapper: every route but ``/health`` needs the token, before anything else runs."""

    def __init__(self, app: Any, token: str | None) -> None:
        self.app = app
        self.token = token

    def __getattr__(self, name: str) -> Any:
        return getattr(self.app, name)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        kind = scope["type"]
        if (
            kind not in ("http", "websocket")
            or scope.get("path") == HEALTH_PATH
            or authorized(scope.get("headers", []), self.token)
        ):
            await self.app(scope, receive, send)
        elif kind == "http":
            from fastapi.responses import JSONResponse

            await JSONResponse({"detail": UNAUTHORIZED}, status_code=401)(scope, receive, send)
        else:  # accept, say why, close: a refused handshake alone would tell the client nothing
            await receive()  # websocket.connect
            await send({"type": "websocket.accept"})
            frame = {"refused": UNAUTHORIZED, "code": "UNAUTHORIZED", "type": "error",
                     "data": {"message": UNAUTHORIZED, "code": "UNAUTHORIZED"}}  # fmt: skip
            await send({"type": "websocket.send", "text": json.dumps(frame)})
            await send({"type": "websocket.close", "code": 1008})


def load_harness(spec: str) -> Any:
    """The harness a client names: a registered name, or ``xtree_gym.…:Class`` (only our own modules).

    Only its env-side reads run here (``look``: the view and the valid actions).
    """
    from ..agents.harness import get_harness
    from ..agents.harness.base import Harness

    if ":" not in spec:
        return get_harness(spec)
    module, _, attr = spec.partition(":")
    if module.split(".")[0] != "xtree_gym":
        raise ConfigError(
            f"harness {spec!r}: a server builds only xtree_gym's harnesses", fix="name a registered one"
        )
    try:
        cls = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"cannot import harness {spec!r}: {exc}") from None
    if not (isinstance(cls, type) and issubclass(cls, Harness)):
        raise ConfigError(f"{spec!r} is not a Harness class")
    return cls()


def open_problem(msg: Any, env_id: str) -> str | None:
    """What is wrong with a session's opening frame, or None.

    Example:
        >>> open_problem({"cmd": "open", "env": "E", "harness": "rlvmr", "oracle": False, "env_args": {}}, "E")
        >>> open_problem({"cmd": "open", "env": "F", "harness": "rlvmr"}, "E")
        "this server serves 'E', not 'F'"
    """
    if not isinstance(msg, dict) or msg.get("cmd") != "open":
        return 'the first frame opens the session: {"cmd": "open", "env": ..., "harness": ..., "oracle": ...}'
    if msg.get("env") != env_id:
        return f"this server serves {env_id!r}, not {msg.get('env')!r}"
    if not isinstance(msg.get("harness"), str):
        return "the opening frame names no harness (a string)"
    if not isinstance(msg.get("env_args", {}), dict):
        return "env_args must be a JSON object"
    return None


class SessionCounter:
    """Open ``/xtree/ws`` sessions (the loop's thread only: no lock needed)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.open = 0
        self.ids = itertools.count(1)


def _reply(holder: Any, msg: Any) -> dict[str, Any]:
    """One worker-protocol answer (what ``envproc._worker_main`` sends), never raising."""
    from ..agents.play.envproc import EnvBuildError, _describe

    if not isinstance(msg, dict):
        return {"error": 'a message is a JSON object such as {"cmd": "step", "actions": [...]}'}
    try:
        return {"ok": holder.handle(msg)}
    except EnvBuildError as exc:
        return {"build_error": str(exc)}
    except BaseException as exc:  # the env's own failure: the client's episode ends as a fault
        return {"error": _describe(exc)}


def add_session_routes(app: Any, env_id: str, env_args: Mapping[str, Any], counter: SessionCounter) -> None:
    """``GET /health`` and the ``/xtree/ws`` session route, on the FastAPI ``app``."""
    from fastapi import WebSocket, WebSocketDisconnect

    # OpenEnv has a /health of its own ({"status": "healthy"}): ours, which says the env and load, replaces it
    app.router.routes[:] = [r for r in app.router.routes if getattr(r, "path", None) != HEALTH_PATH]

    @app.get(HEALTH_PATH)
    def health() -> dict[str, Any]:
        return {"status": "ok", "env": env_id, "sessions": counter.open, "max_sessions": counter.limit}

    async def session(ws: WebSocket) -> None:
        await ws.accept()
        # a client that left mid-answer is not an error (RuntimeError/OSError: a send to a closed socket)
        with contextlib.suppress(WebSocketDisconnect, RuntimeError, OSError):
            await _session(ws, env_id, env_args, counter)

    # the class itself, not the string postponed annotations make of it: FastAPI resolves a string in
    # this module's globals, where fastapi is not imported (importing this module stays light)
    session.__annotations__ = {"ws": WebSocket, "return": None}
    app.add_api_websocket_route(SESSION_PATH, session)
    del health  # registered on the app


async def _refuse(ws: Any, message: str, code: str) -> None:
    await ws.send_text(json.dumps({"refused": message, "code": code}))
    await ws.close(code=1008 if code == "UNAUTHORIZED" else 1013 if code == "BUSY" else 1003)


async def _session(ws: Any, env_id: str, env_args: Mapping[str, Any], counter: SessionCounter) -> None:
    from ..agents.play.envproc import EnvHolder
    from ..corpus.io import JSONProblem, loads_strict

    try:
        hello = loads_strict(await ws.receive_text(), max_depth=32)
    except JSONProblem as exc:
        return await _refuse(ws, f"bad opening frame: {exc}", "BAD_OPEN")
    problem = open_problem(hello, env_id)
    if problem:
        return await _refuse(ws, problem, "BAD_OPEN")
    if counter.open >= counter.limit:
        busy = f"server busy: all {counter.limit} sessions are in use; retry later, or serve with a larger --max-sessions"
        return await _refuse(ws, busy, "BUSY")
    try:
        harness = load_harness(hello["harness"])
    except XTreeError as exc:
        return await _refuse(ws, str(exc), "BAD_OPEN")
    # the server's own --env-arg values win: they name this machine's paths and settings
    kwargs = {**dict(hello.get("env_args") or {}), **dict(env_args)}
    holder = EnvHolder(env_id, kwargs, harness, bool(hello.get("oracle")))
    counter.open += 1
    pool = ThreadPoolExecutor(1, thread_name_prefix="xtree-serve")  # one thread: browser envs stay on theirs
    loop = asyncio.get_running_loop()
    try:
        await ws.send_text(json.dumps({"ok": {"env": env_id, "session": next(counter.ids)}}))
        while True:
            text = await ws.receive_text()
            try:
                msg: Any = loads_strict(text, max_depth=32)
            except JSONProblem as exc:
                await ws.send_text(json.dumps({"error": f"bad message: {exc}"}))
                continue
            answer = await loop.run_in_executor(pool, _reply, holder, msg)
            await ws.send_text(json.dumps(answer))
            if isinstance(msg, dict) and msg.get("cmd") == "close":
                break
    finally:
        counter.open -= 1
        pool.submit(
            holder.close
        )  # after a call still running; never awaited (a stuck env must not stop the loop)
        pool.shutdown(wait=False)


def make_serve_app(
    env_id: str,
    *,
    env_args: Mapping[str, Any] | None = None,
    max_sessions: int = 16,
    token: str | None = None,
    max_message_bytes: int | None = None,
) -> Any:
    """The ASGI app of ``xtree serve``: OpenEnv's routes (registered env ids), ``/health``, ``/xtree/ws``.

    ``env_args`` go to the env's constructor and win over a client's; ``max_sessions`` bounds the open
    ``/xtree/ws`` sessions (and OpenEnv's own); with ``token`` every route but ``/health`` needs it.
    """
    import gymnasium as gym
    from fastapi import FastAPI

    from ..agents.play.envproc import make_env
    from ..envs import register_envs
    from .openenv_env import MAX_MESSAGE_BYTES, make_app

    if isinstance(max_sessions, bool) or not isinstance(max_sessions, int) or max_sessions < 1:
        raise ConfigError(f"--max-sessions {max_sessions!r}", fix="use an int >= 1")
    limit = max_message_bytes or MAX_MESSAGE_BYTES
    args = dict(env_args or {})
    register_envs()
    if env_id in gym.registry:
        guard = make_app(env_id, max_sessions=max_sessions, max_message_bytes=limit, env_kwargs=args)
        app, outer = guard.app, guard
    else:  # a module:Callable env: no OpenEnv routes, but built once here so a bad one fails now
        make_env(env_id, args).close()
        app = FastAPI(title=f"xtree_gym env server: {env_id}")
        outer = app
    add_session_routes(app, env_id, args, SessionCounter(max_sessions))
    wrapped = _TokenGuard(outer, token)
    wrapped.max_message_bytes = limit  # type: ignore[attr-defined]
    return wrapped


def serve(
    env_id: str,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    env_args: Mapping[str, Any] | None = None,
    max_sessions: int = 16,
    token_file: str | None = None,
) -> None:
    """Serve ``env_id`` until interrupted (defaults: ``xtree serve``'s); prints ``serving ENV at http://HOST:PORT`` once it listens."""
    import socket

    import uvicorn

    token = read_token(token_file, host)
    app = make_serve_app(env_id, env_args=env_args, max_sessions=max_sessions, token=token)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        raise ConfigError(
            f"cannot listen on {host}:{port}: {exc.strerror or exc}", fix="use another --port"
        ) from None
    sock.listen(128)
    bound = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    config = uvicorn.Config(app, ws_max_size=app.max_message_bytes, log_level="warning", lifespan="off")
    print(f"serving {env_id} at http://{shown}:{bound} (sessions: {SESSION_PATH}, health: {HEALTH_PATH})",
          file=sys.stderr, flush=True)  # fmt: skip
    uvicorn.Server(config).run(sockets=[sock])
