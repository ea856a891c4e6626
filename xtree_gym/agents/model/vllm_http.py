"""One JSON request to a vLLM server, and the one error that names it: shared by the generator (:mod:`.vllm`) and the
weight sync (:mod:`.vllm_sync`), so neither imports the other at its top."""

from __future__ import annotations

import http.client
import json
from typing import Any

from ...errors import ServerError

REQUEST_TIMEOUT = 600.0
"""Seconds one request to a server (a completion, a weight load) may take before the step fails naming it."""
RESUME_FIX = (
    "start it again (xtree vllm-serve MODEL --port PORT), then resume the run: xtree train rlvr --resume RUN"
)


def http_json(
    url: str, path: str, body: Any = None, *, timeout: float = REQUEST_TIMEOUT, fix: str = RESUME_FIX
) -> Any:
    """``GET`` (no body) or ``POST`` (JSON body) ``url + path``; the JSON answer, or one :class:`ServerError`
    naming the URL (refused, reset, died, timed out, or an HTTP error with the server's words)."""
    import urllib.error
    import urllib.request

    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(f"{url}{path}", data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            raw = resp.read()
    except urllib.error.HTTPError as exc:
        detail = exc.read()[:400].decode("utf-8", "replace").strip()
        raise ServerError(f"vLLM server {url}: {path} answered HTTP {exc.code} ({detail})", fix=fix) from None
    except (OSError, http.client.HTTPException) as exc:  # refused, reset, died mid-answer, timed out
        reason = getattr(exc, "reason", None) or exc or type(exc).__name__
        raise ServerError(f"vLLM server {url} is not answering ({path}: {reason})", fix=RESUME_FIX) from None
    return json.loads(raw) if raw.strip() else None
