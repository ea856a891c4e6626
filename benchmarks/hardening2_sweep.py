"""Issue 25's (and issue 33's) surfaces as a careless and a hostile user meets them; counts the outcomes.

    python benchmarks/hardening2_sweep.py                  # the checkout on PYTHONPATH (or installed)
    PYTHONPATH=/path/to/main python benchmarks/hardening2_sweep.py   # "before"
    python benchmarks/hardening2_sweep.py --issue33        # issue 33's cases only (run folders, messages)

Every case runs ``xtree`` (or a short Python snippet) in its own subprocess, under a time limit, in
a scratch folder. An outcome is

* ``handled``: what the issue asks for (one ``xtree CMD: error:`` line and exit 1 for a refusal, or
  exit 0 and the right files when the input is fine but odd);
* ``traceback``: an exception escaped;
* ``silent``: exit 0 on something that must be refused, or a wrong result;
* ``destroyed``: a run folder, input or device was changed or replaced;
* ``hang``: the case ran past its limit (or used far too much memory).

Cases need only what the ``test`` extra installs; the browser cases are counted only when Debian
``chromium`` is there (``--no-browser`` leaves them out).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import textwrap
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path

SAMPLE = str(files("xtree_gym") / "data/scienceworld_gold_sample.jsonl.gz")
OUTCOMES = ("handled", "traceback", "silent", "destroyed", "hang")

ENVS = """
import math
from xtree_gym.agents.play.testing import EchoEnv

class NaNEnv(EchoEnv):
    def step(self, action):
        obs, r, term, trunc, info = super().step(action)
        return obs, float("nan"), term, trunc, info

class SurrogateEnv(EchoEnv):
    def step(self, action):
        obs, r, term, trunc, info = super().step(action)
        return obs + " \\udc80", r, term, trunc, info

class StuckCloseEnv(EchoEnv):
    def close(self):
        import time
        time.sleep(3600)
"""


@dataclass
class Result:
    rc: int | None
    out: str
    err: str
    peak_kib: int = 0


@dataclass
class Case:
    name: str
    argv: list[str]
    judge: Callable[[Result], str]
    limit: float = 120.0
    watch: list[Path] = field(default_factory=list)  # files/folders that must not change
    python: bool = False  # argv[0] is Python source, not xtree arguments
    fsize: int | None = None  # RLIMIT_FSIZE for the child


def digest(paths: list[Path]) -> str:
    h = hashlib.sha256()
    for p in paths:
        items = sorted(p.rglob("*")) if p.is_dir() else [p]
        for q in items:
            st = os.lstat(q) if os.path.lexists(q) else None
            h.update(f"{q}:{st and stat.S_IFMT(st.st_mode)}".encode())
            if st is not None and stat.S_ISREG(st.st_mode):
                h.update(q.read_bytes())
    return h.hexdigest()


def run(case: Case, work: Path) -> Result:
    cmd = (
        [sys.executable, "-c", case.argv[0]]
        if case.python
        else [sys.executable, "-m", "xtree_gym", *case.argv]
    )
    env = {**os.environ, "XTREE_PROGRESS": "0", "PYTHONPATH": os.pathsep.join(
        [p for p in (os.environ.get("PYTHONPATH", ""), str(work)) if p])}  # fmt: skip

    def limits() -> None:
        if case.fsize is not None:
            import signal

            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (case.fsize, case.fsize))

    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=work, timeout=case.limit,
                           preexec_fn=limits, errors="replace")  # fmt: skip
    except subprocess.TimeoutExpired as exc:
        return Result(None, str(exc.stdout or ""), str(exc.stderr or ""))
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return Result(p.returncode, p.stdout, p.stderr, peak if peak > before else 0)


# -- judges ------------------------------------------------------------------------------------------
def refused(*needles: str) -> Callable[[Result], str]:
    """Exit 1, one ``xtree ...: error:`` line (or argparse's usage error, exit 2) holding every needle."""

    def judge(r: Result) -> str:
        if r.rc is None:
            return "hang"
        if "Traceback" in r.err:
            return "traceback"
        lines = [ln for ln in r.err.splitlines() if ": error: " in ln]
        if r.rc in (1, 2) and len(lines) == 1 and all(n in lines[0] for n in needles):
            return "handled"
        return "silent"

    return judge


def succeeds(check: Callable[[Result], bool] = lambda r: True) -> Callable[[Result], str]:
    def judge(r: Result) -> str:
        if r.rc is None:
            return "hang"
        if "Traceback" in r.err:
            return "traceback"
        return "handled" if r.rc == 0 and check(r) else "silent"

    return judge


# -- the cases ---------------------------------------------------------------------------------------
def setup(work: Path) -> dict[str, Path]:
    """A finished SFT run, rows, responses, a NUL bomb, odd Parquet/metrics files, devices."""
    (work / "sweep_envs.py").write_text(ENVS)
    rows = work / "rows.jsonl"
    subprocess.run([sys.executable, "-m", "xtree_gym", "mine", SAMPLE, "--domain", "scienceworld", "-o",
                    str(work / "tree.json")], check=True, cwd=work, capture_output=True)  # fmt: skip
    subprocess.run([sys.executable, "-m", "xtree_gym", "sft-rows", SAMPLE, "--tree", str(work / "tree.json"),
                    "--format", "node", "--domain", "scienceworld", "-o", str(rows)],
                   check=True, cwd=work, capture_output=True)  # fmt: skip
    lines = rows.read_text().splitlines()[:4]
    rows.write_text("\n".join(lines) + "\n")
    run_dir = work / "run"
    subprocess.run([sys.executable, "-m", "xtree_gym", "train", "sft", "--rows", str(rows), "-o", str(run_dir),
                    "--epochs", "1", "--batch-size", "2", "--no-progress", "--no-tensorboard"],
                   check=True, cwd=work, capture_output=True)  # fmt: skip
    resp = work / "responses.json"
    resp.write_text(json.dumps(["<answer>op(+, 1, 2)</answer>"]))
    react = work / "react.json"
    react.write_text(json.dumps(["Thought: \nAction: wait", "Thought: \nAction: win"]))
    stuck = work / "stuck.json"
    stuck.write_text(json.dumps(["Thought: \nAction: win"]))
    for name, text in {"r-notjson.json": "not json", "r-object.json": '{"a": 1}', "r-ints.json": "[1, 2]",
                       "r-empty.json": "", "r-nan.json": '["ok", NaN]'}.items():  # fmt: skip
        (work / name).write_text(text)
    import gzip

    with gzip.open(work / "bomb.jsonl.gz", "wb", compresslevel=9) as fh:
        for _ in range(1024):
            fh.write(b"\0" * (1 << 20))
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.table({"id": ["a"], "success": [True], "steps": ["x"]}), work / "steps-str.parquet")
        pq.write_table(
            pa.table({"id": ["a"], "success": [True], "steps": [[1, 2]]}), work / "steps-int.parquet"
        )
    except ImportError:
        pass
    from xtree_gym.corpus import Step, Trajectory, write_corpus

    steps = [Step(f"look at thing {i}", observation=f"You see thing {i}.") for i in range(10_000)]
    write_corpus(work / "long.jsonl", [Trajectory("long", steps, True, env="scienceworld", goal="g")])
    bad_metrics = work / "badrun"
    bad_metrics.mkdir()
    (bad_metrics / "metrics.jsonl").write_text('{"step": "one", "loss": 1.0}\n{"step": "two", "loss": 0.5}\n')
    return {"rows": rows, "run": run_dir, "resp": resp, "react": react, "stuck": stuck}


def _copy_run(work: Path, src: Path, name: str, corrupt: bool = False) -> Path:
    dst = work / name
    shutil.copytree(src, dst)
    if corrupt:
        for w in dst.glob("checkpoint-*/model/model.safetensors"):
            w.write_bytes(w.read_bytes()[:100])
    return dst


def _sft_argv(rows: str) -> list[str]:
    """`xtree train sft` on ``rows``: one epoch, batch 2, quiet (each case adds its folder and flags)."""
    return [
        "train",
        "sft",
        "--rows",
        rows,
        "--epochs",
        "1",
        "--batch-size",
        "2",
        "--no-progress",
        "--no-tensorboard",
    ]


def train_cases(work: Path, f: dict[str, Path]) -> list[Case]:
    rows, run_dir = str(f["rows"]), f["run"]
    sft = _sft_argv(rows)
    cases = [
        Case("sft new run into a finished run", [*sft, "-o", str(run_dir), "--lr", "2e-3"],
             refused("already holds a run"), watch=[run_dir]),
        Case("rlvr new run into a finished run", ["train", "rlvr", "-o", str(run_dir), "--steps", "1"],
             refused("already holds a run"), limit=90, watch=[run_dir]),
        Case("offline new run into a finished run", ["train", "offline", "--corpus", SAMPLE, "--tree", str(work / "tree.json"), "--domain",
             "scienceworld", "--steps", "1", "-o", str(run_dir)],
             refused("already holds a run"), limit=90, watch=[run_dir]),
        Case("sft resume with other settings", [*sft, "--resume", str(run_dir), "-o", str(run_dir), "--config",
             str(_yaml(work, "other", f"rows: {rows}\nlr: 0.5\n"))], refused("other settings"), watch=[run_dir]),
    ]  # fmt: skip
    broken = _copy_run(work, run_dir, "run-corrupt", corrupt=True)
    cases.append(Case("sft resume from a truncated checkpoint", [*sft, "--resume", str(broken), "-o",
                      str(work / "r-out"), "--epochs", "2"], refused("safetensors")))  # fmt: skip
    model = work / "model-corrupt"
    shutil.copytree(next(run_dir.glob("checkpoint-*")) / "model", model)
    (model / "model.safetensors").write_bytes((model / "model.safetensors").read_bytes()[:1000])
    cases.append(Case("sft --model with truncated weights", [*sft, "--model", str(model), "-o", str(work / "m-out")],
                      refused("weights")))  # fmt: skip
    pc = ["train", "rlvr", "--print-config"]
    for flag, value in [("--temperature", "nan"), ("--lr", "inf"), ("--invalid-penalty", "nan"), ("--kl-coef", "nan"),
                        ("--max-grad-norm", "nan"), ("--step-timeout", "nan"), ("--max-new-tokens", "100000000"),
                        ("--seed", "-1"), ("--top-p", "nan")]:  # fmt: skip
        cases.append(
            Case(f"rlvr {flag} {value}", [*pc, f"{flag}={value}"], refused(flag[2:].replace("-", "_")))
        )
    cases.append(
        Case("sft --lr nan", ["train", "sft", "--rows", rows, "--print-config", "--lr", "nan"], refused("lr"))
    )
    for field_, text in [("n", "n: '2'"), ("env_kwargs", "env_kwargs: foo"), ("output_dir", "output_dir: 7"),
                         ("seed", "seed: -3"), ("steps", "steps: 2.5"), ("progress", "progress: 'no'"),
                         ("lr", "lr: .nan")]:  # fmt: skip
        cfg = _yaml(work, f"y-{field_}", text)
        cases.append(Case(f"rlvr yaml {text}", [*pc, "--config", str(cfg)], refused(field_)))
    nan_run = work / "nan-run"
    cases.append(Case("sft lr 1e30: a non-finite step", [*sft, "-o", str(nan_run), "--lr", "1e30", "--epochs", "2",
                      "--save-every", "1", "--keep-checkpoints", "0"], refused("step 2:")))  # fmt: skip
    return cases


def _yaml(work: Path, name: str, text: str) -> Path:
    p = work / f"{name}.yaml"
    p.write_text(text + "\n")
    return p


def eval_cases(work: Path, f: dict[str, Path]) -> list[Case]:
    ev = ["eval", "XTree-Countdown-v0", "--harness", "node", "--backend", "scripted", "--tasks", "2"]
    done = work / "ev-done"
    subprocess.run([sys.executable, "-m", "xtree_gym", *ev, "--responses", str(f["resp"]), "-o", str(done)],
                   cwd=work, capture_output=True, check=True)  # fmt: skip
    other = work / "resp-other.json"
    other.write_text(json.dumps(["<answer>op(*, 1, 2)</answer>"]))
    changed = work / "resp-changed.json"
    shutil.copy(f["resp"], changed)
    same = [*ev, "--responses", str(f["resp"]), "-o", str(done)]
    cases = [
        Case("eval resume, other --responses file", [*ev, "--responses", str(other), "-o", str(done)],
             refused("other settings"), watch=[done / "episodes.jsonl"]),
        Case("eval resume, other --env-arg", [*same, "--env-arg", "max_steps=3"], refused("--env-arg"),
             watch=[done / "episodes.jsonl"]),
        Case("eval resume, other --harness-arg", [*same, "--harness-arg", "history_length=1"],
             refused("--harness-arg"), watch=[done / "episodes.jsonl"]),
        Case("eval resume, same settings", same, succeeds(lambda r: '"resumed": 2' in
             (done / "results.json").read_text())),
        Case("eval --device tpu", ["eval", "XTree-Countdown-v0", "--harness", "node", "--model", "tiny-random",
             "--device", "tpu", "-o", str(work / "ev-tpu")], refused("tpu")),
        Case("eval --step-timeout nan", [*same, "--step-timeout", "nan"], refused("step-timeout")),
    ]  # fmt: skip
    for name in ("r-notjson", "r-object", "r-ints", "r-empty", "r-nan"):
        cases.append(Case(f"eval --responses {name}", [*ev, "--responses", str(work / f"{name}.json"), "-o",
                          str(work / f"ev-{name}")], refused("responses")))  # fmt: skip
    corrupt = work / "ev-corrupt"
    shutil.copytree(done, corrupt)
    (corrupt / "run.json").write_text('{"env": ')
    cases.append(Case("eval corrupt run.json", [*ev, "--responses", str(f["resp"]), "-o", str(corrupt)],
                      refused("run.json")))  # fmt: skip
    react = ["--harness", "react", "--backend", "scripted", "--responses", str(f["react"]), "--tasks", "2"]
    nan_out = work / "ev-nan"
    cases.append(Case("eval env reward NaN", ["eval", "sweep_envs:NaNEnv", *react, "-o", str(nan_out)],
                      succeeds(lambda r: _standard_json(nan_out / "results.json"))))  # fmt: skip
    sur_out = work / "ev-sur"
    cases.append(Case("eval env observation with a lone surrogate", ["eval", "sweep_envs:SurrogateEnv", *react,
                      "-o", str(sur_out)], succeeds(lambda r: (sur_out / "episodes.jsonl").is_file())))  # fmt: skip
    cases.append(Case("eval env close() never returns", ["eval", "sweep_envs:StuckCloseEnv", "--harness", "react",
                      "--backend", "scripted", "--responses", str(f["stuck"]), "--tasks", "1", "--step-timeout", "20",
                      "-o", str(work / "ev-stuck")], succeeds(), limit=100))  # fmt: skip
    lock_dir = work / "ev-locked"
    lock_dir.mkdir()
    code = textwrap.dedent(f"""
        import fcntl, subprocess, sys
        fh = open({str(lock_dir / ".eval.lock")!r}, "a+")
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        p = subprocess.run([sys.executable, "-m", "xtree_gym", *{[*ev, "--responses", str(f["resp"]), "-o",
                            str(lock_dir)]!r}], capture_output=True, text=True)
        sys.stderr.write(p.stderr); sys.exit(p.returncode)
    """)  # fmt: skip
    cases.append(Case("two evals on one folder", [code], refused("another xtree eval"), python=True))
    return cases


def _standard_json(path: Path) -> bool:
    def refuse(name: str) -> float:
        raise ValueError(name)

    try:
        json.loads(path.read_text(), parse_constant=refuse)
    except (OSError, ValueError):
        return False
    return True


def file_cases(work: Path, f: dict[str, Path]) -> list[Case]:
    mine = ["mine", SAMPLE, "--domain", "scienceworld", "-o"]
    cases: list[Case] = []
    dev = work / "nulldev"
    try:
        os.mknod(dev, stat.S_IFCHR | 0o666, os.makedev(1, 3))
        cases.append(Case("-o a character device", [*mine, str(dev)], _still(dev, stat.S_ISCHR)))
    except OSError:
        pass
    sock = work / "sock"
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(sock))
    _KEEP.append(s)
    cases.append(Case("-o a socket", [*mine, str(sock)], refused("socket"), watch=[sock]))
    out = work / "efbig" / "tree.json"
    out.parent.mkdir()
    cases.append(
        Case("write error (file too large)", [*mine, str(out)], refused(str(out), "too large"), fsize=300)
    )
    cases.append(Case("the same corpus twice", ["stats", SAMPLE, SAMPLE], refused("again")))
    long_rows = [
        "sft-rows",
        str(work / "long.jsonl"),
        "--format",
        "standard",
        "-o",
        str(work / "long-rows.jsonl"),
    ]
    cases.append(  # was 3.7 GB RSS and quadratic time; rows now stream and each prompt is bounded
        Case(
            "sft-rows standard, one 10k-step trajectory",
            long_rows,
            succeeds(lambda r: r.peak_kib < 400 << 10),
        )
    )
    cases.append(
        Case("gz bomb: 1 GiB of NUL bytes", ["stats", str(work / "bomb.jsonl.gz")], _bounded(1 << 20))
    )
    for name in ("steps-str", "steps-int"):
        if (work / f"{name}.parquet").is_file():
            cases.append(Case(f"parquet {name}", ["stats", str(work / f"{name}.parquet")], refused("steps")))
    cases.append(Case("plot-run on non-numeric steps", ["plot-run", str(work / "badrun"), "-o", str(work / "plots")],
                      refused("step")))  # fmt: skip
    return cases


_KEEP: list[socket.socket] = []


def issue33_cases(work: Path, f: dict[str, Path]) -> list[Case]:
    """Issue 33's classes: writes through links, two runs in one folder, dead ends, line limits, messages."""
    rows, run_dir = str(f["rows"]), f["run"]
    sft = _sft_argv(rows)
    plots = work / "plots-link"
    plots.mkdir()
    linked = _copy_run(work, run_dir, "run-linked")
    os.symlink(linked / "metrics.jsonl", plots / "learning_curves.png")
    null = work / "nullrun"
    null.mkdir()
    (null / "metrics.jsonl").write_text('{"step": 1, "loss": 1.0}\n{"step": null, "loss": 0.5}\n')
    locked = work / "run-locked"
    locked.mkdir()
    hold = textwrap.dedent(f"""
        import fcntl, subprocess, sys
        fh = open({str(locked / ".run.lock")!r}, "a+")
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        p = subprocess.run([sys.executable, "-m", "xtree_gym", *{[*sft, "-o", str(locked)]!r}],
                           capture_output=True, text=True)
        sys.stderr.write(p.stderr); sys.exit(p.returncode)
    """)  # fmt: skip
    nock = _copy_run(work, run_dir, "run-nock")
    for ck in nock.glob("checkpoint-*"):
        shutil.rmtree(ck)
    (nock / "latest.json").unlink()
    big = textwrap.dedent(f"""
        import json, os, subprocess, sys
        resp = {str(work / "big.json")!r}
        open(resp, "w").write(json.dumps(["<action>" + "x" * 30000 + "</action>", "<action>win</action>"]))
        argv = [sys.executable, "-m", "xtree_gym", "eval", "xtree_gym.agents.play.testing:EchoEnv", "--harness",
                "react", "--backend", "scripted", "--responses", resp, "--tasks", "1", "-o", {str(work / "ev-big")!r}]
        env = dict(os.environ, XTREE_MAX_LINE_BYTES="20000")
        for _ in range(2):  # the second run reads the first's file
            p = subprocess.run(argv, capture_output=True, text=True, env=env)
            if p.returncode:
                sys.stderr.write(p.stderr); sys.exit(p.returncode)
    """)  # fmt: skip
    model = work / "model-badjson"
    model.mkdir()
    (model / "config.json").write_text('{"model_type": ')
    empty = work / "empty-tok"
    empty.mkdir()
    ev = ["eval", "XTree-Countdown-v0", "--harness", "node", "--backend", "scripted", "--tasks", "2",
          "--responses", str(f["resp"])]  # fmt: skip
    damaged = work / "ev-damaged"
    shutil.copytree(work / "ev-done", damaged)
    lines = (damaged / "episodes.jsonl").read_text().splitlines(keepends=True)
    (damaged / "episodes.jsonl").write_text(lines[0] + '{"id": 7}\n' + "".join(lines[1:]))
    finished = _copy_run(work, run_dir, "run-finished")
    return [
        Case("plot-run -o with a link onto the run's metrics", ["plot-run", str(linked), "-o", str(plots)],
             refused("is the input file"), watch=[linked / "metrics.jsonl"]),
        Case("plot-run on a null step", ["plot-run", str(null), "-o", str(work / "plots-null")], refused("step")),
        Case("sft into a folder another run writes", [hold], refused("another xtree train"), python=True),
        Case("sft --resume a run killed before its first checkpoint", [*sft, "--resume", str(nock)],
             succeeds(lambda r: "from step 0" in r.err and any(nock.glob("checkpoint-*")))),
        Case("eval: an episode longer than the line limit, twice", [big], succeeds(), python=True, limit=180),
        Case("rlvr --kl-coef nan with a recipe", ["train", "rlvr", "--config", "webshop-cpu-smoke", "--kl-coef",
             "nan", "-o", str(work / "r-kl")], refused("--kl-coef")),
        Case("rlvr clip_eps_low 5", ["train", "rlvr", "--print-config", "--config",
             str(_yaml(work, "clip", "clip_eps_low: 5"))], refused("clip_eps_low")),
        Case("eval --advice nosuch.json", [*ev, "--advice", "nosuch.json", "-o", str(work / "ev-adv")],
             refused("does not exist")),
        Case("eval resume, a damaged episodes.jsonl", [*ev, "-o", str(damaged)], _refused_without("--skip-bad")),
        Case("eval --model a folder with a broken config.json", ["eval", "XTree-Countdown-v0", "--harness", "node",
             "--model", str(model), "-o", str(work / "ev-badmodel")], refused("config.json is broken")),
        Case("sft-rows --tokenizer a folder without config.json", ["sft-rows", SAMPLE, "--format", "standard",
             "--domain", "scienceworld", "--tokenizer", str(empty), "-o", str(work / "tok-rows.jsonl")],
             refused("--tokenizer")),
        Case("sft --resume with another --model", [*sft, "--resume", str(run_dir), "--model", str(work / "nosuch")],
             refused("other settings"), watch=[run_dir]),
        Case("sft --resume a finished run", [*sft, "--resume", str(finished)],
             succeeds(lambda r: "already finished at step" in r.out), watch=[finished / "metrics.jsonl"]),
        Case("mine --preset scienceworld, untokenized sample", ["mine", SAMPLE, "--preset", "scienceworld", "-o",
             str(work / "preset-tree.json")], succeeds()),
    ]  # fmt: skip


def _refused_without(text: str) -> Callable[[Result], str]:
    def judge(r: Result) -> str:
        out = refused()(r)
        return "silent" if out == "handled" and text in r.err else out

    return judge


def _still(path: Path, is_kind: Callable[[int], bool]) -> Callable[[Result], str]:
    def judge(r: Result) -> str:
        if not is_kind(os.lstat(path).st_mode):
            return "destroyed"
        return succeeds()(r)

    return judge


def _bounded(kib: int) -> Callable[[Result], str]:
    def judge(r: Result) -> str:
        out = refused("longer than")(r)
        if out == "handled" and r.peak_kib > kib:
            return "hang"  # the error came, after GBs of RAM
        return "silent" if out == "silent" and r.peak_kib > kib else out

    return judge


def browser_cases(work: Path) -> list[Case]:
    site = work / "site"
    site.mkdir()
    (site / "start.html").write_text("<html><body><h1>Start</h1></body></html>")
    (site / "framed.html").write_text(
        '<html><body><h1>Framed</h1><iframe src="file:///etc/hostname"></iframe></body></html>'
    )
    (site / "secret.html").write_text("<html><body><p>sweep-secret-4711</p></body></html>")
    head = textwrap.dedent(f"""
        import functools, http.server, threading, sys
        h = functools.partial(http.server.SimpleHTTPRequestHandler, directory={str(site)!r})
        h.log_message = lambda *a: None
        srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), h)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        other = http.server.ThreadingHTTPServer(("127.0.0.1", 0), h)
        threading.Thread(target=other.serve_forever, daemon=True).start()
        base = f"http://127.0.0.1:{{srv.server_address[1]}}"
        secret = f"http://127.0.0.1:{{other.server_address[1]}}/secret.html"
        from xtree_gym.envs.browsergym import OpenURLEnv
        env = OpenURLEnv(base + "/start.html")
        env.reset(seed=0)
    """)  # fmt: skip
    tail = "\nenv.close()\n"
    return [
        Case("browser goto file:///x%00", [head + textwrap.dedent("""
            out = env.step("goto('file:///x%00')")
            print("INVALID" if out[4]["invalid_action"] else "RAN")""") + tail],
             succeeds(lambda r: "INVALID" in r.out), python=True, limit=180),
        Case("browser goto another loopback service", [head + textwrap.dedent("""
            out = env.step(f"goto({secret!r})")
            print("LEAK" if "sweep-secret-4711" in out[0] else "SAFE")""") + tail],
             succeeds(lambda r: "SAFE" in r.out), python=True, limit=180),
        Case("browser goto 169.254.169.254", [head + textwrap.dedent("""
            out = env.step("goto('http://169.254.169.254/latest/meta-data/')")
            print("BLOCKED" if out[4]["invalid_action"] else "OPEN")""") + tail],
             succeeds(lambda r: "BLOCKED" in r.out), python=True, limit=180),
        Case("browser page with a file:// iframe", [head + textwrap.dedent("""
            out = env.step(f"goto({base + '/framed.html'!r})")
            print("RETURNED")""") + tail],
             succeeds(lambda r: "RETURNED" in r.out), python=True, limit=150),
    ]  # fmt: skip


def sweep(
    work: Path, browser: bool, only: str | None = None, issue33_only: bool = False
) -> tuple[Counter[str], list[str]]:
    f = setup(work)
    cases = [*train_cases(work, f), *eval_cases(work, f), *file_cases(work, f)]
    new = issue33_cases(work, f)  # after eval_cases: it copies the finished evaluation those made
    cases = new if issue33_only else [*cases, *new]
    if browser and not issue33_only:
        cases += browser_cases(work)
    counts: Counter[str] = Counter()
    lines = []
    for case in cases:
        if only and only not in case.name:
            continue
        before = digest(case.watch)
        r = run(case, work)
        outcome = "destroyed" if case.watch and digest(case.watch) != before else case.judge(r)
        counts[outcome] += 1
        detail = (r.err.strip().splitlines() or [""])[-1][:150]
        lines.append(f"{outcome:9} {case.name}" + ("" if outcome == "handled" else f"  | {detail}"))
        print(lines[-1], flush=True)
    return counts, lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--no-browser", action="store_true", help="leave out the Chromium cases")
    ap.add_argument("-k", dest="only", help="only the cases whose name holds this text")
    ap.add_argument("--issue33", action="store_true", help="only issue 33's cases (run folders, messages)")
    args = ap.parse_args()
    import xtree_gym

    browser = not args.no_browser and shutil.which("chromium") is not None
    print(f"xtree_gym from {Path(xtree_gym.__file__).parent}; load {os.getloadavg()[0]:.1f}", flush=True)
    with tempfile.TemporaryDirectory() as d:
        counts, _ = sweep(Path(d), browser, args.only, args.issue33)
    total = sum(counts.values())
    print(f"{total} cases: " + ", ".join(f"{counts[k]} {k}" for k in OUTCOMES))
    return 0 if counts["handled"] == total else 1


if __name__ == "__main__":
    sys.exit(main())
