"""``xtree serve ENV_ID``: argument parsing only; the server is :mod:`xtree_gym.adapters.env_server`."""

from __future__ import annotations

import argparse
from typing import Any

DEFAULT_PORT = 8000
DEFAULT_MAX_SESSIONS = 16
SERVE_PACKAGES = ("fastapi", "uvicorn", "openenv", "websockets", "httpx")
"""What ``xtree serve`` imports (the ``interop`` extra); checked before any of it is imported."""


def _handler(args: argparse.Namespace) -> int:
    from ..agents.play.cli import parse_env_args
    from ..errors import require_extra

    require_extra("interop", SERVE_PACKAGES, "xtree serve")
    require_extra("gym", ("gymnasium",), "xtree serve")
    from .env_server import serve

    serve(
        args.env_id, host=args.host, port=args.port, env_args=parse_env_args(args.env_arg),
        max_sessions=args.max_sessions, token_file=args.token_file,
    )  # fmt: skip
    return 0


def register_cli(subparsers: Any, collect_subparsers: Any) -> None:
    """Add ``xtree serve``."""
    p = subparsers.add_parser(
        "serve",
        help="serve an env (OpenEnv routes, /health, and the sessions of --env-servers rollouts)",
        description="Serve ENV_ID over HTTP/WebSocket: OpenEnv's /ws, /reset, /step; GET /health; and "
        "/xtree/ws, the sessions `xtree eval` / `xtree train rlvr --env-servers URL` play episodes over.",
    )
    p.add_argument("env_id", metavar="ENV_ID", help="e.g. XTree-ScienceWorld-v0, XTree-WebShop-v0")
    p.add_argument("--host", default="127.0.0.1", help="default 127.0.0.1; any other needs --token-file")
    p.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"default {DEFAULT_PORT}; 0 = any free port"
    )
    p.add_argument("--env-arg", action="append", metavar="K=V", help="env constructor argument (repeatable)")
    p.add_argument(
        "--max-sessions", type=int, default=DEFAULT_MAX_SESSIONS,
        help=f"sessions open at once (default {DEFAULT_MAX_SESSIONS}); one more is refused 'server busy'",
    )  # fmt: skip
    p.add_argument("--token-file", metavar="F", help="every client must send this file's token (Bearer)")
    p.set_defaults(func=_handler)
