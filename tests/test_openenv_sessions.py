"""OpenEnv 0.3 adapter: real uvicorn servers on 127.0.0.1 and OpenEnv's own client over ``/ws``.

Every loop is bounded (a fixed number of steps, a deadline for each wait) and every socket is loopback.
"""

from __future__ import annotations

import asyncio
import contextlib
import json

import pytest

pytest.importorskip("openenv.core", reason="openenv-core is not installed: pip install 'xtree_gym[interop]'")

import websockets
from openenv.core import GenericEnvClient

from xtree_gym.adapters.openenv_env import make_app
from xtree_gym.adapters.text_env import TextEpisode


def _solution(seed: int) -> list[str]:
    ep = TextEpisode("XTree-Countdown-v0")
    ep.reset(seed=seed)
    return list(ep.info["solution"])


async def _play(url: str, seed: int, plan: list[str]) -> tuple[dict, int, str]:
    """One client's episode over its own ``/ws`` session: reset(seed), the plan, then the state."""
    async with GenericEnvClient(base_url=url) as client:
        first = await client.reset(seed=seed)
        assert "Target" in first.observation["text"]
        result = first
        for action in plan:
            result = await client.step({"reply": action})
        state = await client.state()
        return (
            result.observation | {"done": result.done, "reward": result.reward},
            state["step_count"],
            state["episode_id"],
        )


def test_concurrent_clients_each_play_their_own_episode(loopback, run_async):
    """Four clients at once, each a different puzzle: no client sees another's state."""
    seeds = [3, 5, 7, 9]
    plans = {s: _solution(s) for s in seeds}
    plans[9] = plans[9][:-1]  # one client stops one op short: it must not be marked won
    with loopback(make_app("XTree-Countdown-v0", max_sessions=4)) as url:

        async def everyone() -> list[tuple[dict, int, str]]:
            return await asyncio.wait_for(
                asyncio.gather(*(_play(url, s, plans[s]) for s in seeds)), timeout=120
            )

        results = run_async(everyone())
    for seed, (obs, steps, episode_id) in zip(seeds, results):
        ep = TextEpisode("XTree-Countdown-v0")
        ep.reset(seed=seed)
        for a in plans[seed]:
            ep.step(a)
        assert steps == len(plans[seed]) and episode_id.startswith(f"XTree-Countdown-v0/{seed}/")
        assert obs["done"] is ep.done and obs["won"] is ep.won
        if ep.done:
            assert obs["tokens"] == ep.tokens and obs["reward"] == 10.0
    assert [r[0]["done"] for r in results] == [True, True, True, False]


def test_session_cap_says_busy_and_frees_on_close(loopback, run_async):
    async def scenario(url: str) -> str:
        async with GenericEnvClient(base_url=url) as a, GenericEnvClient(base_url=url) as b:
            await a.reset(seed=0)
            await b.reset(seed=1)
            third = GenericEnvClient(base_url=url)
            # OpenEnv sends the refusal as the socket's one frame, then closes it: its client fails
            with pytest.raises((RuntimeError, websockets.exceptions.ConnectionClosed)):
                await third.reset(seed=2)
            with contextlib.suppress(Exception):
                await third.close()
            # ... and a plain websocket reads the message itself
            async with websockets.connect(url.replace("http://", "ws://") + "/ws") as raw:
                refusal = json.loads(await asyncio.wait_for(raw.recv(), timeout=10))
        # both closed: a new client gets a session again
        for _ in range(50):  # the server frees the slots when it sees the close; bounded wait
            try:
                async with GenericEnvClient(base_url=url) as c:
                    await c.reset(seed=2)
                    break
            except RuntimeError:
                await asyncio.sleep(0.1)
        else:
            pytest.fail("no session after both clients closed")
        return str(refusal)

    with loopback(make_app("XTree-Countdown-v0", max_sessions=2)) as url:
        msg = run_async(asyncio.wait_for(scenario(url), timeout=60))
    assert "server busy" in msg and "2 sessions" in msg and "CAPACITY_REACHED" in msg


def test_idle_session_expires_with_a_clear_error(loopback, run_async):
    async def scenario(url: str) -> str:
        async with GenericEnvClient(base_url=url) as client:
            await client.reset(seed=0)
            await asyncio.sleep(6.5)  # idle 1 s is enough; OpenEnv's reaper looks every 5 s
            with pytest.raises(RuntimeError) as err:
                await client.step({"reply": "op(+, 55, 87)"})
            return str(err.value)

    with loopback(make_app("XTree-Countdown-v0", max_sessions=1, idle_timeout_s=1.0)) as url:
        msg = run_async(asyncio.wait_for(scenario(url), timeout=60))
    assert "session expired" in msg and "reconnect" in msg


def test_bad_requests_are_4xx_with_a_message_never_500(loopback, run_async):
    import httpx

    with loopback(make_app("XTree-Countdown-v0")) as url:
        with httpx.Client(base_url=url, timeout=30) as http:
            before_reset = http.post("/step", json={"action": {"reply": "op(+, 55, 87)"}})
            as_string = http.post("/step", json={"action": "op(+, 55, 87)"})
            unknown = http.post("/step", json={"action": {"reply": "x", "bogus": 1}})
            assert http.post("/reset", json={"seed": 1}).status_code == 200

        async def after_end() -> tuple[str, str]:
            async with GenericEnvClient(base_url=url) as client:
                with pytest.raises(RuntimeError) as early:
                    await client.step({"reply": "op(+, 55, 87)"})
                await client.reset(seed=0)
                for a in _solution(0):
                    await client.step({"reply": a})
                with pytest.raises(RuntimeError) as late:
                    await client.step({"reply": "op(+, 1, 2)"})
                again = await client.reset(seed=0)  # the session survives its errors
                assert again.done is False
                return str(early.value), str(late.value)

        early, late = run_async(asyncio.wait_for(after_end(), timeout=60))
    assert before_reset.status_code == 409 and "step before reset" in before_reset.json()["detail"]
    assert "/ws" in before_reset.json()["detail"]
    assert as_string.status_code == 422 and "dict" in str(as_string.json()["detail"]).lower()
    assert unknown.status_code == 422 and "bogus" in str(unknown.json()["detail"])
    assert "step before reset" in early and "step after the episode ended" in late


def test_make_app_rejects_bad_limits_and_ids():
    from xtree_gym.errors import EnvConfigError

    with pytest.raises(EnvConfigError, match="max_sessions"):
        make_app("XTree-Countdown-v0", max_sessions=0)
    with pytest.raises(EnvConfigError, match="idle_timeout_s"):
        make_app("XTree-Countdown-v0", idle_timeout_s=0)
    with pytest.raises(EnvConfigError, match="XTree-Nope-v0"):
        make_app("XTree-Nope-v0")


# -- frames and bodies OpenEnv's own loop would die on (issue 33) -----------------------------------
BAD_FRAMES = {
    "a list": "[1, 2, 3]",
    "a string": '"hello"',
    "null": "null",
    "100k-deep nesting": "[" * 100_000 + "]" * 100_000,
    "a binary frame": b"\x00\x01binary",
    "NaN in a step": '{"type": "step", "data": {"reply": NaN}}',
    "Infinity in a reset": '{"type": "reset", "data": {"seed": Infinity}}',
    "not JSON": "{not json",
}


def test_bad_ws_frames_get_an_error_frame_and_the_episode_goes_on(loopback, run_async):
    """Each bad frame, sent mid-episode, is answered with an error frame; the socket stays open and the
    same episode plays on to its win (OpenEnv 0.3's loop alone ends the session on most of them)."""
    plan = _solution(4)

    async def scenario(url: str) -> tuple[list[dict], dict, dict]:
        async with websockets.connect(url.replace("http://", "ws://") + "/ws", max_size=None) as ws:

            async def ask(frame: str | bytes) -> dict:
                await ws.send(frame)
                return json.loads(await asyncio.wait_for(ws.recv(), timeout=20))

            assert (await ask(json.dumps({"type": "reset", "data": {"seed": 4}})))["type"] == "observation"
            await ask(json.dumps({"type": "step", "data": {"reply": plan[0]}}))
            errors = [await ask(frame) for frame in BAD_FRAMES.values()]
            last: dict = {}
            for action in plan[1:]:
                last = await ask(json.dumps({"type": "step", "data": {"reply": action}}))
            state = await ask(json.dumps({"type": "state"}))
            return errors, last, state

    with loopback(make_app("XTree-Countdown-v0", max_sessions=1)) as url:
        errors, last, state = run_async(asyncio.wait_for(scenario(url), timeout=120))
    assert len(errors) == len(BAD_FRAMES)
    for name, err in zip(BAD_FRAMES, errors):
        assert err["type"] == "error", name
        assert err["data"]["code"] != "SESSION_ERROR" and err["data"]["message"], (name, err)
    by_name = dict(zip(BAD_FRAMES, (e["data"]["message"] for e in errors)))
    assert "not a list" in by_name["a list"] and "binary" in by_name["a binary frame"]
    assert "nested deeper" in by_name["100k-deep nesting"] and "NaN" in by_name["NaN in a step"]
    assert last["data"]["done"] is True and last["data"]["observation"]["won"] is True
    assert state["data"]["step_count"] == len(plan)  # one episode, every good step counted, no bad one


BAD_BODIES = {
    "/step": [
        b'{"action": {"reply": NaN}}',
        b'{"action": {"reply": Infinity}}',
        b'{"action": {"reply": 1e999}}',
        b'{"action": NaN}',
        b'{"action": {"reply": "x"}, "timeout_s": -Infinity}',
        b'{"action": [1, 2]}',
        b'{"action": {"reply": 5}}',
        b"[1, 2, 3]",
        b"null",
        b"[" * 100_000 + b"]" * 100_000,
        b"\xff\xfe",
    ],
    "/reset": [b'{"seed": NaN}', b'{"seed": 1e999}', b'"hello"', b'{"seed": -1}'],
}


def test_bad_http_bodies_are_422_with_a_message(loopback):
    import httpx

    answers = []
    with loopback(make_app("XTree-Countdown-v0")) as url:
        for route, bodies in BAD_BODIES.items():
            for body in bodies:
                with httpx.Client(base_url=url, timeout=30) as http:  # a 500 may drop the connection
                    r = http.post(route, content=body, headers={"content-type": "application/json"})
                answers.append((route, body[:40], r.status_code, r.text))
    assert len(answers) == sum(map(len, BAD_BODIES.values()))
    for route, body, code, text in answers:
        assert code == 422, (route, body, code, text)
        assert json.loads(text)["detail"], (route, body, text)
    assert "NaN is not a number" in answers[0][3] and "overflows" in answers[2][3]


def test_bad_mcp_frames_get_a_json_rpc_error_and_the_socket_stays(loopback, run_async):
    """The ``/mcp`` socket has OpenEnv's same loop (``**[1]`` ends it): a JSON-RPC error instead."""

    async def scenario(url: str) -> list[dict]:
        async with websockets.connect(url.replace("http://", "ws://") + "/mcp") as ws:
            answers = []
            for frame in (
                "[1]",
                b"\x00",
                "null",
                json.dumps({"jsonrpc": "2.0", "id": 7, "method": "tools/list"}),
            ):
                await ws.send(frame)
                answers.append(json.loads(await asyncio.wait_for(ws.recv(), timeout=20)))
            return answers

    with loopback(make_app("XTree-Countdown-v0", max_sessions=1)) as url:
        answers = run_async(asyncio.wait_for(scenario(url), timeout=60))
    assert [a["error"]["code"] for a in answers[:3]] == [-32600, -32700, -32600]
    assert "not a list" in answers[0]["error"]["message"] and "jsonrpc" in answers[0]["error"]["message"]
    assert answers[3]["id"] == 7  # the socket still answers a real request (this env has no MCP tools)
