"""Typed exceptions of xtree_gym.

Every error says *what* is wrong (quoting the bad value), *where* (``file:line`` when the
input came from a file) and *how to fix it*. The CLI prints ``str(error)`` as one line and
exits non-zero; library users can catch the narrow type they care about.
"""

from __future__ import annotations


class XTreeError(Exception):
    """Base class of every error raised on purpose by xtree_gym."""

    def __init__(self, what: str, *, where: str | None = None, fix: str | None = None) -> None:
        self.what = what
        self.where = where
        self.fix = fix
        parts = [f"{where}: {what}" if where else what]
        if fix:
            parts.append(f"fix: {fix}")
        super().__init__(" -- ".join(parts))


class CorpusError(XTreeError, ValueError):
    """A corpus file or record is malformed (bad JSON, missing or mistyped field, empty corpus)."""


class ConfigError(XTreeError, ValueError):
    """A configuration value is out of range or of the wrong type."""


class TreeFormatError(XTreeError, ValueError):
    """A tree file cannot be read (bad JSON, unknown format version, inconsistent nodes)."""


class CanonicalizationError(XTreeError, ValueError):
    """A domain name is unknown, or a corpus lacks the tokens and no canonicalizer was given.

    Canonicalizers themselves never raise on an action: the catch-all rule always yields a token.
    """


class EnvConfigError(XTreeError, ValueError):
    """An environment was built with bad arguments, or something it needs is missing."""


class TrainingError(XTreeError, RuntimeError):
    """Training cannot go on (a non-finite loss or gradient); nothing of the bad step was saved."""


class DependencyError(XTreeError, ImportError):
    """An optional dependency is not installed; the message names the pip extra to install."""


class ServerError(XTreeError, RuntimeError):
    """A model server (``xtree vllm-serve``) is not there, died, or refused a request; the message names its URL."""


def missing_dependency(package: str, extra: str, feature: str) -> DependencyError:
    """Build the one error for a missing optional package.

    Example:
        >>> str(missing_dependency("scienceworld", "scienceworld", "XTree-ScienceWorld-v0"))
        "XTree-ScienceWorld-v0 needs the package 'scienceworld', which is not installed -- fix: pip install 'xtree_gym[scienceworld]'"
    """
    return DependencyError(
        f"{feature} needs the package {package!r}, which is not installed",
        fix=f"pip install 'xtree_gym[{extra}]'",
    )


def require_extra(extra: str, packages: tuple[str, ...], feature: str) -> None:
    """Raise :func:`missing_dependency` for the first of ``packages`` that cannot be imported.

    Commands call this before importing their heavy modules, so a core-only install gets one line
    naming ``xtree_gym[extra]`` instead of a traceback from deep inside an import.

    Example:
        >>> require_extra("core", ("json",), "xtree demo")
        >>> require_extra("train", ("no_such_package_xyz",), "xtree train sft")
        Traceback (most recent call last):
        ...
        xtree_gym.errors.DependencyError: xtree train sft needs the package 'no_such_package_xyz', which is not installed -- fix: pip install 'xtree_gym[train]'
    """
    import importlib.util

    for package in packages:
        try:
            found = importlib.util.find_spec(package) is not None
        except (ImportError, ValueError):  # a parent package missing, or a module set to None
            found = False
        if not found:
            raise missing_dependency(package, extra, feature)


EXTRA_OF_PACKAGE: dict[str, str] = {
    "gymnasium": "gym", "torch": "train", "transformers": "train", "accelerate": "train",
    "safetensors": "train", "gguf": "train", "peft": "train", "scienceworld": "scienceworld",
    "rapidfuzz": "webshop", "bm25s": "webshop", "Stemmer": "webshop", "textblob": "webshop",
    "browsergym": "browser", "miniwob": "browser", "playwright": "browser", "textworld": "textworld",
    "alfworld": "alfworld", "matplotlib": "render", "minigrid": "minigrid", "pyarrow": "columnar",
    "tensorboard": "tracking", "vllm": "gpu", "trl": "interop", "jmespath": "interop",
    "datasets": "interop", "verifiers": "interop", "gem": "interop", "tinker": "interop",
    "tinker_cookbook": "interop", "openenv": "interop", "fastapi": "interop", "httpx": "interop",
    "uvicorn": "interop", "websockets": "interop",
}  # fmt: skip
"""Top-level package -> the pip extra of ``pyproject.toml`` that installs it."""


def dependency_error(exc: ModuleNotFoundError, feature: str) -> DependencyError | None:
    """The one-line :class:`DependencyError` for an optional package that an import did not find, or None
    when the missing module is not one of an extra's (a bug, which should keep its traceback).

    Example:
        >>> str(dependency_error(ModuleNotFoundError("No module named 'gymnasium'", name="gymnasium"), "xtree eval"))
        "xtree eval needs the package 'gymnasium', which is not installed -- fix: pip install 'xtree_gym[gym]'"
        >>> dependency_error(ModuleNotFoundError("x", name="xtree_gym.nope"), "xtree eval") is None
        True
    """
    top = (exc.name or "").split(".")[0]
    extra = EXTRA_OF_PACKAGE.get(top)
    return missing_dependency(top, extra, feature) if extra else None


class NoSignalError(XTreeError, RuntimeError):
    """A training run stopped because its steps carry no learning signal (all advantages 0, all invalid)."""
