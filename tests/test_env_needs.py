"""An env id's first error names every missing extra and setting (Hardening IV, item 6).

On a core-only install ``xtree eval XTree-WebShop-v0`` used to ask for ``[gym]``, then the data
folder, then ``[webshop]``, one round each; MiniWoB for ``[gym]``, then ``[browser]``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from xtree_gym.envs import ENV_SPECS
from xtree_gym.envs.needs import ENV_PACKAGES, check_env
from xtree_gym.errors import DependencyError, EnvConfigError

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def core_env(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, str]]:
    """A brand-new venv (no site-packages of this one) that sees numpy and this checkout only."""
    import numpy

    base = tmp_path_factory.mktemp("core")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(base / "venv")], check=True)
    site = base / "site"
    site.mkdir()
    for entry in Path(numpy.__file__).resolve().parent.parent.iterdir():
        if entry.name == "numpy" or entry.name.startswith(("numpy-", "numpy.libs")):
            os.symlink(entry, site / entry.name)
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV", "XTREE_WEBSHOP"))
    }
    env.update(PYTHONPATH=f"{site}{os.pathsep}{ROOT}", XTREE_PROGRESS="0")
    python = str(base / "venv" / "bin" / "python")
    probe = subprocess.run([python, "-c", "import gymnasium"], env=env, capture_output=True, text=True)
    assert probe.returncode != 0, "the core venv sees gymnasium: it is not core-only"
    return python, env


def _one_line(core_env: tuple[str, dict[str, str]], tmp_path: Path, *argv: str) -> str:
    python, env = core_env
    r = subprocess.run([python, "-m", "xtree_gym", *argv, "-o", str(tmp_path / "out")], env=env,
                       capture_output=True, text=True, cwd=tmp_path, timeout=120)  # fmt: skip
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 1 and len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    assert not (tmp_path / "out").exists()  # refused before anything was written
    return lines[0]


def test_webshop_on_a_core_install_names_both_extras_and_the_data_folder(core_env, tmp_path: Path) -> None:
    line = _one_line(core_env, tmp_path, "eval", "XTree-WebShop-v0", "--harness", "verl-agent",
                     "--backend", "oracle", "--tasks", "1")  # fmt: skip
    wanted = ["xtree_gym[gym]", "xtree_gym[webshop]", "--env-arg data_dir=DIR", "XTREE_WEBSHOP_DATA",
              "pip install 'xtree_gym[gym,webshop]'"]  # fmt: skip
    assert [w for w in wanted if w not in line] == [], line
    assert "xtree_gym[train]" not in line  # the oracle needs no model


def test_webshop_with_a_model_names_the_train_extra_too(core_env, tmp_path: Path) -> None:
    line = _one_line(core_env, tmp_path, "eval", "XTree-WebShop-v0", "--harness", "verl-agent",
                     "--model", "smollm2", "--tasks", "1", "--max-steps", "1")  # fmt: skip
    wanted = ["xtree_gym[gym]", "xtree_gym[webshop]", "xtree_gym[train]", "XTREE_WEBSHOP_DATA"]
    assert [w for w in wanted if w not in line] == [], line


def test_miniwob_on_a_core_install_names_gym_and_browser(core_env, tmp_path: Path) -> None:
    line = _one_line(core_env, tmp_path, "eval", "XTree-MiniWoB-v0", "--harness", "browsergym",
                     "--backend", "oracle", "--tasks", "1")  # fmt: skip
    wanted = ["xtree_gym[gym]", "xtree_gym[browser]", "browsergym-core", "miniwob", "playwright"]
    assert [w for w in wanted if w not in line] == [], line


def test_collect_webshop_names_the_extras_and_its_own_flag(core_env, tmp_path: Path) -> None:
    line = _one_line(core_env, tmp_path, "collect", "webshop")
    assert "xtree_gym[webshop]" in line and "xtree_gym[gym]" in line and "--data-dir DIR" in line, line


def test_every_env_id_lists_all_its_extras_at_once() -> None:
    checked = 0
    for env_id in ENV_SPECS:
        extras = {extra for _, extra in ENV_PACKAGES[env_id]}
        with pytest.raises(DependencyError) as info:
            check_env(env_id, {"data_dir": "/nonexistent"}, backend="hf", found=lambda module: False)
        text = str(info.value)
        assert [e for e in [*extras, "train"] if f"xtree_gym[{e}]" not in text] == [], text
        assert len(text.splitlines()) == 1
        checked += 1
    assert checked == len(ENV_SPECS) == 9


def test_a_lone_missing_setting_keeps_its_own_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("XTREE_WEBSHOP_DATA", raising=False)
    with pytest.raises(EnvConfigError, match="no data directory was given") as info:
        check_env("XTree-WebShop-v0", found=lambda module: True)
    assert not isinstance(info.value, DependencyError)
    check_env("XTree-Countdown-v0", found=lambda module: True)  # nothing missing: no error


def test_a_missing_model_and_data_folder_are_named_together(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys
) -> None:
    from xtree_gym.cli import main

    monkeypatch.delenv("XTREE_WEBSHOP_DATA", raising=False)
    assert main(["eval", "XTree-WebShop-v0", "--harness", "verl-agent", "-o", str(tmp_path / "o")]) == 1
    err = capsys.readouterr().err.strip()
    assert "the hf backend needs --model" in err and "--env-arg data_dir=DIR" in err, err
    assert len(err.splitlines()) == 1 and not (tmp_path / "o").exists()


def test_collect_scienceworld_names_gym_and_scienceworld(core_env, tmp_path: Path) -> None:
    line = _one_line(core_env, tmp_path, "collect", "scienceworld", "--per-task", "1")
    assert "xtree_gym[gym]" in line and "xtree_gym[scienceworld]" in line, line


def test_a_missing_java_is_named_beside_the_missing_extras(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "")  # no `java` to find
    with pytest.raises(DependencyError) as info:
        check_env("XTree-ScienceWorld-v0", found=lambda module: False, feature="xtree collect scienceworld")
    text = str(info.value)
    assert "xtree_gym[scienceworld]" in text and "`java` on PATH" in text and "Java 11+" in text, text
