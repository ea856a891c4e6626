"""Shared pytest set-up.

Fixture modules live in ``tests/fixtures/*.py`` (one per area: ScienceWorld's session-wide
simulator, the browser, small corpora); every fixture they define is made visible here.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED = Path(
    os.environ.get("XTREE_SHARED_DIR") or ROOT.parent / "shared"
)  # a worktree points it at ../shared
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def _load_fixture_modules() -> None:
    for path in sorted((Path(__file__).parent / "fixtures").glob("*.py")):
        if path.name.startswith("_"):
            continue
        spec = importlib.util.spec_from_file_location(f"xtree_test_fixtures_{path.stem}", path)
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        for name, value in vars(module).items():
            if not name.startswith("_") and _is_fixture(value):
                globals()[name] = value


def _is_fixture(value: object) -> bool:
    # pytest >= 8.4 wraps fixtures in FixtureFunctionDefinition; older ones mark the function.
    return type(value).__name__ == "FixtureFunctionDefinition" or hasattr(value, "_pytestfixturefunction")


_load_fixture_modules()


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """../shared beside the checkout; tests that need it skip with a reason when it is absent."""
    if not SHARED.is_dir():
        pytest.skip("../shared is not present (it is in CI); this test reads the shared reference data")
    return SHARED
