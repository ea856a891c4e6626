"""``xtree serve`` and ``--env-servers``: real servers as subprocesses on 127.0.0.1 (ephemeral ports).

Served episodes equal the local workers' (same seeds), a server killed with -9 ends only its
in-flight episodes (as faults), no reachable server is one line, a non-loopback host needs a token,
and a token is checked before anything of an episode is sent.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="the interop extra (fastapi) is not installed")
pytest.importorskip("websockets", reason="the interop extra (websockets) is not installed")
pytest.importorskip("uvicorn", reason="the interop extra (uvicorn) is not installed")
httpx = pytest.importorskip("httpx", reason="the interop extra (httpx) is not installed")

from xtree_gym.agents.model.generation import ScriptedGenerator  # noqa: E402
from xtree_gym.agents.play.rollout import rollout  # noqa: E402
from xtree_gym.agents.play.testing import ECHO_ENV, EchoHarness  # noqa: E402
from xtree_gym.agents.types import TaskSpec  # noqa: E402
from xtree_gym.errors import ConfigError  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
HANGING_ENV = "xtree_gym.agents.play.testing:HangingEnv"
RESPONSES = ["<action>hello</action>", "<action>hello</action>", "<action>win</action>"]


class Server:
    """One ``xtree serve`` subprocess; ``url`` once it listens and ``/health`` answers."""

    def __init__(self, env_id: str, *args: str, log: Path, env: dict[str, str] | None = None) -> None:
        cmd = [sys.executable, "-m", "xtree_gym", "serve", env_id, "--port", "0", *args]
        self.log = log
        with open(log, "w") as err:  # the child keeps its own copy of the descriptor
            self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, env=env, cwd=ROOT)
        self.url = self._wait()

    def _wait(self, limit: float = 240.0) -> str:
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            found = re.search(r"at (http://127\.0\.0\.1:\d+)", self.log.read_text())
            if found:
                url = found.group(1)
                try:
                    if httpx.get(url + "/health", timeout=2).status_code == 200:
                        return url
                except httpx.HTTPError:
                    pass
            if self.proc.poll() is not None:
                raise AssertionError(f"xtree serve exited {self.proc.returncode}: {self.log.read_text()}")
            time.sleep(0.2)
        raise AssertionError(f"xtree serve did not start in {limit:g}s: {self.log.read_text()}")

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[Any]:
    """``start(env_id, *args)`` starts one more server; all are killed at the end."""
    started: list[Server] = []

    def start(env_id: str, *args: str, env: dict[str, str] | None = None) -> Server:
        s = Server(env_id, *args, log=tmp_path / f"serve{len(started)}.log", env=env)
        started.append(s)
        return s

    yield start
    for s in started:
        s.kill()


def _echo(**kw: Any) -> list[Any]:
    tasks = [TaskSpec("echo", seed=s) for s in range(3)]
    return rollout(ECHO_ENV, tasks, ScriptedGenerator(RESPONSES, cycle=True), EchoHarness(), n=2, **kw)


def _rows(episodes: list[Any]) -> list[dict[str, Any]]:
    return [e.to_trajectory().to_dict() for e in episodes]


def test_served_echo_episodes_equal_the_local_workers(servers) -> None:
    a, b = servers(ECHO_ENV), servers(ECHO_ENV)
    # a scripted list is answered in call order: --workers 2 sets the episodes at once on both sides
    local = _rows(_echo(workers=2))
    served = _rows(_echo(env_servers=f"{a.url},{b.url}", workers=2))
    assert len(local) == len(served) == 6
    assert served == local  # actions, tokens, rewards, observations
    assert all(r["success"] for r in served)
    for s in (a, b):  # every session was closed at the end
        assert httpx.get(s.url + "/health", timeout=60).json()["sessions"] == 0


def test_a_server_killed_mid_run_ends_only_its_in_flight_episodes(servers) -> None:
    # both serve an env that hangs at step 2 on the first server only (its --env-arg wins)
    a = servers(HANGING_ENV, "--env-arg", "hang_at=2")
    b = servers(HANGING_ENV, "--env-arg", "hang_at=99")

    second_turn = threading.Event()

    class Signalling(ScriptedGenerator):  # tells the killer when turn 2 is asked for (turn 1 answered)
        calls = 0

        def generate(self, requests: Any) -> Any:
            Signalling.calls += 1
            if Signalling.calls == 2:
                second_turn.set()
            return super().generate(requests)

    def killer() -> None:  # once step 2 hangs on the first server: kill -9
        second_turn.wait(120)
        time.sleep(1.5)
        a.kill()

    thread = threading.Thread(target=killer)
    thread.start()
    tasks = [TaskSpec("echo", seed=s) for s in range(4)]
    gen = Signalling(["<action>hello</action>"], cycle=True)
    eps = rollout(
        HANGING_ENV, tasks, gen, EchoHarness(), n=1, env_servers=[a.url, b.url], max_live=4, max_steps=4
    )
    thread.join()
    assert len(eps) == 4
    faults = [e for e in eps if e.fault]
    assert len(faults) == 2 and all(a.url in e.fault and "died during step" in e.fault for e in faults)
    assert all(e.truncated and e.turns[-1].info.get("fault") for e in faults)
    # the others (on the second server) played to the step cap
    assert [len(e.turns) for e in eps if not e.fault] == [4, 4]


def test_a_server_back_up_is_used_again(servers) -> None:
    from xtree_gym.agents.play.remote import EnvServers

    a = servers(ECHO_ENV)
    pool = EnvServers([a.url])
    assert pool.check(ECHO_ENV) == 16
    pool.mark_down(a.url)
    pool.down[a.url] -= 5  # probed long ago: the next pick probes /health, which answers
    assert pool.pick() == a.url and not pool.down


def test_a_registered_env_keeps_openenv_routes_beside_ours(servers) -> None:
    s = servers("XTree-Countdown-v0")
    health = httpx.get(s.url + "/health", timeout=60).json()  # ours, not OpenEnv's own /health
    assert health == {"status": "ok", "env": "XTree-Countdown-v0", "sessions": 0, "max_sessions": 16}
    r = httpx.post(s.url + "/reset", json={"seed": 0}, timeout=60)  # OpenEnv's HTTP route, still served
    assert r.status_code == 200 and "Target" in r.json()["observation"]["text"]


def test_no_server_reachable_is_one_line(tmp_path: Path) -> None:
    responses = tmp_path / "r.json"
    responses.write_text(json.dumps(["<action>op(+, 1, 2)</action>"]))
    urls = "http://127.0.0.1:9,http://127.0.0.1:7"
    cmd = [sys.executable, "-m", "xtree_gym", "eval", "XTree-Countdown-v0", "--harness", "countdown",
           "--backend", "scripted", "--responses", str(responses), "--tasks", "2", "--env-servers", urls,
           "-o", str(tmp_path / "out")]  # fmt: skip
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert r.stderr.strip().count("\n") == 0, r.stderr
    assert "no env server answers at http://127.0.0.1:9, http://127.0.0.1:7" in r.stderr


def test_train_rlvr_plays_its_rollouts_on_env_servers(servers, tmp_path: Path) -> None:
    pytest.importorskip("torch", reason="the train extra (torch) is not installed")
    s = servers("XTree-Countdown-v0")
    base = [sys.executable, "-m", "xtree_gym", "train", "rlvr", "--config", "scienceworld-cpu-smoke",
            "--env", "XTree-Countdown-v0", "--harness", "countdown"]  # fmt: skip
    ok = subprocess.run([*base, "--env-servers", s.url, "-o", str(tmp_path / "a")], capture_output=True,
                        text=True, cwd=ROOT, timeout=600)  # fmt: skip
    assert ok.returncode == 0, ok.stderr
    assert len((tmp_path / "a" / "metrics.jsonl").read_text().splitlines()) == 2
    # the rollouts go to the servers named: an unreachable one ends the run with one line
    dead = subprocess.run([*base, "--env-servers", "http://127.0.0.1:9", "-o", str(tmp_path / "b")],
                          capture_output=True, text=True, cwd=ROOT, timeout=600)  # fmt: skip
    assert dead.returncode == 1 and "Traceback" not in dead.stderr
    assert "xtree train: error: no env server answers at http://127.0.0.1:9" in dead.stderr


def test_non_loopback_host_needs_a_token_file(tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "xtree_gym", "serve", ECHO_ENV, "--host", "0.0.0.0", "--port", "0"]
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert r.returncode == 1 and "Traceback" not in r.stderr and r.stderr.count("\n") == 1
    assert "not a loopback address" in r.stderr and "--token-file" in r.stderr


def test_a_token_server_refuses_clients_without_it(servers, tmp_path: Path, monkeypatch) -> None:
    token = "t0k3n-" + "x" * 40
    (tmp_path / "token").write_text(token + "\n")
    s = servers(ECHO_ENV, "--token-file", str(tmp_path / "token"))
    assert httpx.get(s.url + "/health", timeout=60).status_code == 200  # health tells nothing of an episode
    r = httpx.post(s.url + "/reset", json={"seed": 0}, timeout=60)
    assert r.status_code == 401 and "unauthorized" in r.json()["detail"]
    monkeypatch.delenv("XTREE_SERVE_TOKEN", raising=False)
    with pytest.raises(ConfigError, match="refused the session: unauthorized"):
        _echo(env_servers=s.url)
    monkeypatch.setenv("XTREE_SERVE_TOKEN", "wrong" + token)
    with pytest.raises(ConfigError, match="unauthorized"):
        _echo(env_servers=s.url)
    monkeypatch.setenv("XTREE_SERVE_TOKEN", token)
    eps = _echo(env_servers=s.url)
    assert len(eps) == 6 and all(e.fault is None and e.turns for e in eps) and any(e.success for e in eps)


def test_serve_cli_refuses_a_bad_env_and_too_many_sessions(servers) -> None:
    from websockets.sync.client import connect

    s = servers(ECHO_ENV, "--max-sessions", "1")
    hello = {"cmd": "open", "env": ECHO_ENV, "harness": "xtree_gym.agents.play.testing:EchoHarness"}
    with connect(s.url.replace("http", "ws") + "/xtree/ws") as first:
        first.send(json.dumps(hello))
        assert "ok" in json.loads(first.recv(timeout=30))
        with connect(s.url.replace("http", "ws") + "/xtree/ws") as second:
            second.send(json.dumps(hello))
            answer = json.loads(second.recv(timeout=30))
            assert answer["code"] == "BUSY" and "server busy" in answer["refused"]
        with connect(s.url.replace("http", "ws") + "/xtree/ws") as third:
            third.send(json.dumps({**hello, "env": "XTree-Other-v0"}))
            assert "serves" in json.loads(third.recv(timeout=30))["refused"]
        # a rollout meeting the full server plays on the other one instead
        other = servers(ECHO_ENV)
        eps = _echo(env_servers=[s.url, other.url], max_live=2)
        assert len(eps) == 6 and all(e.fault is None for e in eps)


# -- the benchmarks of the issue: WebShop and ScienceWorld, served vs --workers 2 ----------------------
def _eval_rows(out: Path) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    return sorted(rows, key=lambda r: r["id"])


def _comparable(row: dict[str, Any]) -> list[Any]:
    """What must be equal: per step the action, token, reward and observation; and the outcome."""
    steps = [(s.get("action"), s.get("token"), s.get("reward"), s.get("observation")) for s in row["steps"]]
    return [row["id"], row.get("success"), row.get("reward"), steps]


@pytest.mark.slow
def test_served_webshop_oracle_episodes_equal_the_local_workers(servers, webshop_data_dir, tmp_path) -> None:
    from xtree_gym.agents.play.evaluate import evaluate

    env = {**os.environ, "XTREE_WEBSHOP_DATA": str(webshop_data_dir)}
    args = {"data_dir": str(webshop_data_dir)}
    a = servers("XTree-WebShop-v0", "--env-arg", f"data_dir={webshop_data_dir}", env=env)
    b = servers("XTree-WebShop-v0", "--env-arg", f"data_dir={webshop_data_dir}", env=env)
    kw: dict[str, Any] = dict(harness="verl-agent", backend="oracle", tasks=6, n=2, env_args=args)
    evaluate("XTree-WebShop-v0", workers=2, output_dir=tmp_path / "local", **kw)
    evaluate("XTree-WebShop-v0", env_servers=[a.url, b.url], output_dir=tmp_path / "served", **kw)
    local, served = _eval_rows(tmp_path / "local"), _eval_rows(tmp_path / "served")
    assert len(local) == len(served) == 12
    assert [_comparable(r) for r in served] == [_comparable(r) for r in local]
    assert sum(len(r["steps"]) for r in served) >= 12


def _sciworld_env() -> dict[str, str]:
    return {**os.environ, "JAVA_TOOL_OPTIONS": "-Xmx1g"}


@pytest.mark.slow
def test_served_scienceworld_oracle_episodes_equal_the_local_workers(servers, sciworld_jvm, tmp_path) -> None:
    from xtree_gym.agents.play.evaluate import evaluate

    # ScienceWorld's gold path depends on what its JVM loaded before (workers=0, one JVM for all, differs
    # from workers=2 too): a JVM per env (jvm=own) and the same episodes at once (--workers 2) on the
    # servers give each env the history a local worker's has
    a = servers("XTree-ScienceWorld-v0", "--env-arg", "jvm=own", env=_sciworld_env())
    b = servers("XTree-ScienceWorld-v0", "--env-arg", "jvm=own", env=_sciworld_env())
    kw: dict[str, Any] = dict(harness="rlvmr", backend="oracle", fold="G1", tasks=4, workers=2)
    evaluate("XTree-ScienceWorld-v0", output_dir=tmp_path / "local", **kw)
    evaluate("XTree-ScienceWorld-v0", env_servers=[a.url, b.url], output_dir=tmp_path / "served", **kw)
    local, served = _eval_rows(tmp_path / "local"), _eval_rows(tmp_path / "served")
    assert len(local) == len(served) == 4
    assert [_comparable(r) for r in served] == [_comparable(r) for r in local]


@pytest.mark.slow
def test_scienceworld_eval_survives_a_server_killed_with_minus_9(servers, sciworld_jvm, tmp_path) -> None:
    a = servers("XTree-ScienceWorld-v0", env=_sciworld_env())
    b = servers("XTree-ScienceWorld-v0", env=_sciworld_env())
    out = tmp_path / "ev"
    cmd = [sys.executable, "-m", "xtree_gym", "eval", "XTree-ScienceWorld-v0", "--harness", "rlvmr",
           "--backend", "oracle", "--fold", "G1", "--tasks", "8", "--env-servers", f"{a.url},{b.url}",
           "-o", str(out)]  # fmt: skip
    log = tmp_path / "eval.err"
    env = {**_sciworld_env(), "XTREE_PROGRESS": "1"}  # the bar redraws per turn: we see turns in flight
    with open(log, "w") as err_file:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err_file, text=True, cwd=ROOT, env=env)
    deadline, turns = time.monotonic() + 600, 0
    while time.monotonic() < deadline and turns < 16 and proc.poll() is None:  # every reset done
        found = re.findall(r"(\d+) turns", log.read_text(errors="replace"))
        turns = int(found[-1]) if found else 0
        time.sleep(0.2)
    a.kill()
    proc.wait(1200)
    err = log.read_text(errors="replace")
    assert proc.returncode == 0, err
    rows = _eval_rows(out)
    assert len(rows) == 8
    result = json.loads((out / "results.json").read_text())
    assert result["episodes"] == 8 and result["faults"] >= 1  # the killed server's episodes in flight
    from xtree_gym.agents.play.evaluate import read_episodes

    faults = [e.fault for e in read_episodes(out / "episodes.jsonl") if e.fault]
    assert len(faults) == result["faults"] and all(f"env server {a.url}" in f for f in faults), faults
