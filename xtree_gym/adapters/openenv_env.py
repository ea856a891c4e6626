"""OpenEnv adapter (``openenv-core`` 0.3): one of our envs behind OpenEnv's ``Environment`` server.

OpenEnv serves an ``Environment`` (``reset() -> Observation``, ``step(Action) -> Observation``,
``state``) with FastAPI; TRL, Unsloth and others are its clients. :class:`XTreeOpenEnv` wraps a
:class:`~xtree_gym.adapters.text_env.TextEpisode`: an action is the model's reply
(``XTreeAction(reply=...)``), an observation its text plus reward, done, and the canonical token
(``token``), and on the last step ``won``, ``tokens`` and ``xtree_bonus`` (fields, since OpenEnv's
server drops ``metadata``). Actions, observations and state are pydantic models, as 0.2+ wants.

**Sessions.** :func:`make_app` hands OpenEnv a *factory*, so every ``/ws`` connection gets its
own env (OpenEnv's session): per-session state, at most ``max_sessions`` at once (one more is
refused with a "server busy" error), and a session idle for ``idle_timeout_s`` is closed. A
multi-turn episode therefore runs over ``/ws`` (OpenEnv's ``EnvClient``/``GenericEnvClient``);
HTTP ``/reset`` and ``/step`` build a fresh env per request (OpenEnv's design), so an HTTP
``/step`` is a step before reset: answered 409 with that explanation. Bad input is a 4xx with a
message, never a bare 500: a string ``action`` or an unknown field 422 (pydantic), step before
reset or after the end 409 (on ``/ws``: an error message, the session stays usable).

**Frames OpenEnv's loop would die on.** OpenEnv 0.3's ``/ws`` loop ends the session (``SESSION_ERROR``,
socket closed, episode gone) on a binary frame, on JSON that is not an object (``[1]``, ``"hi"``,
``null``) and on nesting deep enough to hit Python's recursion limit; and a ``NaN`` in an HTTP body
comes back in the validation error, which JSON cannot carry (a bare 500). :func:`make_app` therefore
wraps the app in :class:`_InputGuard`, which reads every ``/ws`` (and ``/mcp``) frame and every
``/reset`` / ``/step`` body *before* OpenEnv does, with :func:`~xtree_gym.corpus.io.loads_strict`
(no ``NaN``/``Infinity``, at most :data:`MAX_MESSAGE_DEPTH` levels): a bad frame is answered with an
error frame (OpenEnv's ``{"type": "error", "data": {"message", "code"}}``) and the session goes on; a
bad body is a 422 whose ``detail`` says what is wrong.

**Sizes and disconnects.** OpenEnv reads any body and frame whole. The guard refuses an HTTP body over
``max_message_bytes`` (:data:`MAX_MESSAGE_BYTES`, 1 MiB, set in :func:`make_app`) with a 413 before
reading it whole, and a bigger frame with an error frame (``MESSAGE_TOO_BIG``); served with
``uvicorn.run(app, ws_max_size=app.max_message_bytes)``, uvicorn closes on a bigger frame (1009) before
reading it. OpenEnv 0.3 closes every socket on its way out, also one its client already closed, and
catches only ``RuntimeError`` there, so each normal disconnect logged an ERROR with two tracebacks: once
the client has gone the guard drops what OpenEnv still sends it (the close, a late answer), and lets
every other error through to uvicorn's log.

Like every single-env interface it cannot see a group: with a ``tree`` the final observation's
``xtree_bonus`` holds Σ b_v for the client to weight by its group's λ_g
(:func:`~xtree_gym.adapters.text_env.group_bonus_rewards`).

Example:
    >>> env = XTreeOpenEnv("XTree-Countdown-v0", seed=0)
    >>> obs = env.reset()
    >>> obs.text.splitlines()[1], obs.done
    ('Target: 145', False)
    >>> obs = env.step(XTreeAction(reply="op(+, 55, 87)"))
    >>> obs.token, env.state.step_count
    ('add<small-small>', 1)
"""

from __future__ import annotations

import functools
import logging
import uuid
from typing import Any

from openenv.core.env_server import (
    Action,
    ConcurrencyConfig,
    Environment,
    HTTPEnvServer,
    Observation,
    SessionCapacityError,
    State,
)
from pydantic import Field

from ..corpus.io import JSONProblem, loads_strict
from ..errors import EnvConfigError, XTreeError
from ..mining.tree import XTree
from .text_env import TextEpisode, episode_bonus

_LOG = logging.getLogger(__name__)

OPENENV_VERSION = "0.3.0"
"""The ``openenv-core`` release this adapter is tested against (the ``interop`` pin)."""
MAX_MESSAGE_DEPTH = 32
"""Deepest nesting of arrays/objects accepted in a ``/ws`` frame or an HTTP body (a step is 3 levels)."""
MAX_MESSAGE_BYTES = 1 << 20
"""Largest ``/ws`` (``/mcp``) frame or HTTP body accepted, in bytes (1 MiB; ``make_app(max_message_bytes=)``)."""


class EpisodeStateError(EnvConfigError):
    """A step the episode cannot take now: before ``reset``, or after it ended (HTTP 409)."""


class XTreeAction(Action):
    """The model's reply for one turn."""

    reply: str = Field(description="The model's reply; the harness (or its last line) gives the action")


class XTreeObservation(Observation):
    """What the model reads next, plus the step's reward and end flag (``done``/``reward`` inherited)."""

    text: str = ""
    token: str | None = None
    """Canonical token of the action just executed (``None`` if the reply did not parse)."""
    invalid: bool = False
    won: bool = False
    tokens: list[str] = Field(default_factory=list)
    """Every executed token of the episode, filled on the final observation."""
    xtree_bonus: float | None = None
    """Σ b_v of the episode (final observation, with a tree): weight it by the group's λ_g."""


class XTreeOpenEnv(Environment):
    """``gym.make(env_id)`` as an OpenEnv environment; a :meth:`reset` without a seed uses the next one."""

    SUPPORTS_CONCURRENT_SESSIONS = True  # each session owns its TextEpisode; nothing is shared

    def __init__(
        self,
        env_id: str,
        *,
        seed: int = 0,
        harness: Any = None,
        tree: XTree | str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__()
        self.episode = TextEpisode(env_id, harness=harness, **kwargs)
        self.tree = XTree.load(tree) if isinstance(tree, str) else tree
        self.next_seed = seed
        self.started = False
        self._state = State()

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> XTreeObservation:
        if seed is None:
            seed, self.next_seed = self.next_seed, self.next_seed + 1
        text = self.episode.reset(seed=int(seed))
        self.started = True
        eid = episode_id or f"{self.episode.env_id}/{seed}/{uuid.uuid4().hex[:8]}"
        self._state = State(episode_id=eid, step_count=0)
        return XTreeObservation(text=text, done=False, reward=0.0, metadata={"goal": self.episode.goal})

    def step(self, action: Action, timeout_s: float | None = None, **kwargs: Any) -> XTreeObservation:
        if not self.started:
            raise EpisodeStateError(
                "step before reset: this env has no episode yet",
                fix="reset first; over HTTP every request gets a fresh env, so play an episode over "
                "the /ws session (OpenEnv's EnvClient) instead of /step",
            )
        if self.episode.done:
            raise EpisodeStateError("step after the episode ended", fix="reset to start the next episode")
        s = self.episode.step(str(getattr(action, "reply", "")))
        self._state.step_count += 1
        obs = XTreeObservation(
            text=self.episode.user_text(), done=self.episode.done, reward=s.reward, token=s.token,
            invalid=s.invalid, metadata={"action": s.action},
        )  # fmt: skip
        if self.episode.done:
            obs.won, obs.tokens = self.episode.won, list(self.episode.tokens)
            if self.tree is not None:
                obs.xtree_bonus = episode_bonus(
                    self.tree, self.episode.tokens, goal_options=self.episode.goal_options
                )
        return obs

    @property
    def state(self) -> State:
        return self._state

    def close(self) -> None:
        self.episode.close()


class _SessionServer(HTTPEnvServer):  # type: ignore[misc]
    """OpenEnv's server, with a capacity error that says "busy" and an expired session that says so."""

    async def _run_in_session_executor(self, session_id: str, func: Any, *args: Any, **kwargs: Any) -> Any:
        if session_id not in self._sessions:  # the idle reaper closed it (and its env) meanwhile
            raise EpisodeStateError(
                f"session expired: idle for more than {self._session_idle_timeout_s:g} s, its env was closed",
                fix="open a new session (reconnect) and reset",
            )
        return await super()._run_in_session_executor(session_id, func, *args, **kwargs)

    async def _create_session(self) -> Any:
        try:
            return await super()._create_session()
        except SessionCapacityError as exc:
            raise SessionCapacityError(
                exc.active_sessions,
                exc.max_sessions,
                f"server busy: all {exc.max_sessions} sessions are in use; retry later, or start the "
                "server with a larger max_sessions",
            ) from exc


WS_SHAPE = '{"type": "step", "data": {"reply": "..."}}'
"""What a ``/ws`` message looks like (``message_problem``'s default ``shape``)."""
SHAPES = {
    "/ws": WS_SHAPE,
    "/mcp": '{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}',
    "/reset": '{"seed": 0}',
    "/step": '{"action": {"reply": "..."}}',
}
"""What a message (``/ws``, ``/mcp``) or an HTTP body (``/reset``, ``/step``) looks like, per route."""


def message_problem(text: str | None, shape: str = WS_SHAPE) -> tuple[str, str] | None:
    """(what is wrong, OpenEnv's error code) for one incoming message (``None``: a binary frame), or None.

    ``shape`` is an example of a good message, quoted when the JSON is not an object.

    Example:
        >>> message_problem('{"type": "step", "data": {"reply": "x"}}') is None
        True
        >>> for bad in (None, "[1, 2, 3]", "null", '{"data": {"reply": NaN}}', "[" * 99 + "]" * 99):
        ...     problem, code = message_problem(bad)
        ...     print(code, "|", problem[:43])
        INVALID_JSON | binary frames are not understood: send each
        VALIDATION_ERROR | a message is a JSON object such as {"type":
        VALIDATION_ERROR | a message is a JSON object such as {"type":
        INVALID_JSON | NaN is not a number JSON allows (NaN/Infini
        INVALID_JSON | nested deeper than 32 levels
    """
    if text is None:
        return "binary frames are not understood: send each message as a JSON text frame", "INVALID_JSON"
    try:
        obj = loads_strict(text, max_depth=MAX_MESSAGE_DEPTH)
    except JSONProblem as exc:
        return str(exc), "INVALID_JSON"
    if not isinstance(obj, dict):
        kinds = {list: "a list", str: "a string", bool: "a boolean", type(None): "null"}
        kind = kinds.get(type(obj), "a number")
        return f"a message is a JSON object such as {shape}, not {kind}", "VALIDATION_ERROR"
    return None


def _ws_error(path: str, problem: str, code: str) -> str:
    """The error frame for ``problem`` in the protocol of the socket at ``path`` (``/ws`` or ``/mcp``)."""
    if path == "/mcp":  # JSON-RPC: a parse error, or an invalid request
        from openenv.core.env_server.mcp_types import JsonRpcErrorCode, JsonRpcResponse

        rpc = JsonRpcErrorCode.PARSE_ERROR if code == "INVALID_JSON" else JsonRpcErrorCode.INVALID_REQUEST
        return str(JsonRpcResponse.error_response(rpc, problem).model_dump_json())
    from openenv.core.env_server.types import WSErrorResponse

    return str(WSErrorResponse(data={"message": problem, "code": code}).model_dump_json())


def frame_bytes(message: dict[str, Any]) -> int:
    """Size in bytes of one ASGI ``websocket.receive`` message's payload (UTF-8 for a text frame).

    Example:
        >>> frame_bytes({"type": "websocket.receive", "text": "é!"}), frame_bytes({"bytes": b"abc"})
        (3, 3)
    """
    text = message.get("text")
    return len(text.encode("utf-8")) if text is not None else len(message.get("bytes") or b"")


def too_big(size: int | None, limit: int, what: str) -> str:
    """The message for a ``what`` (body, message) of ``size`` bytes (``None``: not known) over ``limit``.

    Example:
        >>> too_big(None, 1024, "request body")[:79]
        'request body too large: over the server limit of 1024 bytes (max_message_bytes)'
        >>> too_big(2000, 1024, "message")[:40]
        'message too large: 2000 bytes, over the '
    """
    amount = f"{size} bytes, over" if size is not None else "over"
    return (
        f"{what} too large: {amount} the server limit of {limit} bytes (max_message_bytes); send "
        "less, or serve with a larger make_app(max_message_bytes=...)"
    )


class _InputGuard:
    """ASGI wrapper that checks each ``/ws`` / ``/mcp`` frame and each HTTP body before OpenEnv sees it.

    A frame over ``max_message_bytes`` or malformed is answered with an error frame and never reaches
    OpenEnv's loop (which would end the session on it); an HTTP body over the limit is a 413, sent
    before the body is read whole (at once when its ``Content-Length`` says so, else as soon as the
    bytes read pass the limit), and a malformed ``/reset`` / ``/step`` body a 422. A client that
    leaves is not an error: OpenEnv closes every socket on its way out, and a close (or any send)
    to a client already gone would end in uvicorn's "Exception in ASGI application", so once the
    client has gone (a disconnect received, or a send failed) every send is dropped.
    """

    WS_PATHS = ("/ws", "/mcp")
    HTTP_PATHS = ("/reset", "/step")

    def __init__(self, app: Any, max_message_bytes: int = MAX_MESSAGE_BYTES) -> None:
        self.app = app
        self.max_message_bytes = max_message_bytes

    def __getattr__(self, name: str) -> Any:  # the FastAPI app's routes, state... for whoever asks
        return getattr(self.app, name)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "websocket":
            await self._socket(scope, receive, send)
        elif scope["type"] == "http":
            await self._http(scope, receive, send)
        else:
            await self.app(scope, receive, send)

    async def _socket(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        path, limit, gone = scope.get("path", ""), self.max_message_bytes, False

        async def checked() -> Any:
            nonlocal gone
            while True:  # OpenEnv waits here between messages, so answering now cannot interleave
                message = await receive()
                if message["type"] == "websocket.disconnect":
                    gone = True
                if message["type"] != "websocket.receive" or path not in self.WS_PATHS:
                    return message
                size, problem = frame_bytes(message), None
                if size > limit:
                    problem = (too_big(size, limit, "message"), "MESSAGE_TOO_BIG")
                else:
                    problem = message_problem(message.get("text"), SHAPES[path])
                if problem is None:
                    return message
                await send({"type": "websocket.send", "text": _ws_error(path, *problem)})

        async def sending(message: dict[str, Any]) -> None:
            nonlocal gone
            if gone:  # OpenEnv still answers, or closes, a client that left: no one to send to
                _LOG.debug("client left %s: dropped a %s", path, message["type"])
                return
            try:
                await send(message)
            except OSError:  # uvicorn's ClientDisconnected: it left meanwhile; OpenEnv reads that next
                gone = True

        await self.app(scope, checked, sending)

    async def _http(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        from fastapi.responses import JSONResponse

        limit = self.max_message_bytes
        declared = _content_length(scope)
        messages, size = [], 0
        if declared is None or declared <= limit:  # else answer before reading a byte of it
            while size <= limit:
                message = await receive()
                messages.append(message)
                if message["type"] != "http.request":
                    break
                size += len(message.get("body", b""))
                if not message.get("more_body", False):
                    break
        if size > limit or (declared or 0) > limit:
            content = {"detail": too_big(declared, limit, "request body")}
            # "Connection: close": uvicorn then drops the rest of the body instead of reading it
            await JSONResponse(content, status_code=413, headers={"connection": "close"})(
                scope, receive, send
            )
            return
        problem = None
        if scope.get("method") == "POST" and scope.get("path") in self.HTTP_PATHS:
            problem = body_problem(b"".join(m.get("body", b"") for m in messages), SHAPES[scope["path"]])
        if problem is not None:
            await JSONResponse(status_code=422, content={"detail": f"request body: {problem}"})(
                scope, receive, send
            )
            return
        replay = iter(messages)

        async def again() -> Any:
            return next(replay, None) or await receive()

        await self.app(scope, again, send)


def body_problem(body: bytes, shape: str) -> str | None:
    """What is wrong with one ``/reset`` / ``/step`` body, or None (an empty one is OpenEnv's to judge).

    Example:
        >>> body_problem(b'{"seed": 1}', "{}") is None, body_problem(b"", "{}") is None
        (True, True)
        >>> body_problem(b"\\xff", "{}")
        'the request body is not UTF-8 text'
    """
    if not body.strip():
        return None
    try:
        problem = message_problem(body.decode("utf-8"), shape)
    except UnicodeDecodeError:
        return "the request body is not UTF-8 text"
    return problem[0] if problem else None


def _content_length(scope: dict[str, Any]) -> int | None:
    """The request's ``Content-Length`` (None: absent, e.g. a chunked body; h11 already refused a bad one)."""
    for name, value in scope.get("headers", []):
        if name.lower() == b"content-length" and value.strip().isdigit():
            return int(value)
    return None


def make_app(
    env_id: str,
    *,
    max_sessions: int = 8,
    idle_timeout_s: float | None = 600.0,
    tree: XTree | str | None = None,
    max_message_bytes: int = MAX_MESSAGE_BYTES,
    **kwargs: Any,
) -> Any:
    """A FastAPI app serving ``XTreeOpenEnv(env_id, **kwargs)``, one env per ``/ws`` session.

    Args:
        env_id: the gym id every session plays.
        max_sessions: sessions open at once; one more is refused ("server busy").
        idle_timeout_s: a session with no message for this long is closed (``None``: never).
            OpenEnv checks every ``max(idle_timeout_s / 4, 5)`` seconds.
        tree: an X-Tree (or its path) for the final observation's ``xtree_bonus``; loaded once.
        max_message_bytes: the largest HTTP body and ``/ws`` (``/mcp``) frame accepted, in bytes
            (default :data:`MAX_MESSAGE_BYTES`, 1 MiB). A bigger body is a 413, sent before the body is
            read whole; a bigger frame is answered with an error frame (code ``MESSAGE_TOO_BIG``) and the
            session goes on.
        kwargs: for :class:`XTreeOpenEnv` (``seed``, ``harness``, ``env_kwargs``, ``max_steps``).

    Run it with ``uvicorn``, giving it the same limit for frames, so that a bigger frame is refused
    from its header (close 1009, "message too big") before it is read::

        app = make_app("XTree-Countdown-v0")
        uvicorn.run(app, host="127.0.0.1", port=8000, ws_max_size=app.max_message_bytes)

    (Without ``ws_max_size`` uvicorn reads frames up to its own 16 MiB, and the guard answers.)
    """
    from fastapi import FastAPI, Request
    from fastapi.responses import JSONResponse

    if isinstance(max_sessions, bool) or not isinstance(max_sessions, int) or max_sessions < 1:
        raise EnvConfigError(f"max_sessions = {max_sessions!r}", fix="use an int >= 1")
    if idle_timeout_s is not None and not idle_timeout_s > 0:
        raise EnvConfigError(f"idle_timeout_s = {idle_timeout_s!r}", fix="use seconds > 0, or None")
    if isinstance(max_message_bytes, bool) or not isinstance(max_message_bytes, int) or max_message_bytes < 1:
        raise EnvConfigError(
            f"max_message_bytes = {max_message_bytes!r}",
            fix=f"use an int >= 1 (bytes; default {MAX_MESSAGE_BYTES})",
        )
    loaded = XTree.load(tree) if isinstance(tree, str) else tree
    factory = functools.partial(XTreeOpenEnv, env_id, tree=loaded, **kwargs)
    factory().close()  # a bad env id or argument fails here, once, not in every session
    app = FastAPI(title=f"xtree_gym OpenEnv server: {env_id}")
    limits = ConcurrencyConfig(max_concurrent_envs=max_sessions, session_timeout=idle_timeout_s)
    _SessionServer(factory, XTreeAction, XTreeObservation, concurrency_config=limits).register_routes(app)

    async def xtree_error(request: Request, exc: Exception) -> JSONResponse:
        code = 409 if isinstance(exc, EpisodeStateError) else 400
        return JSONResponse(status_code=code, content={"detail": str(exc)})

    app.add_exception_handler(XTreeError, xtree_error)
    return _InputGuard(app, max_message_bytes)
