"""What an env id needs before it can run: the pip extras it imports and the settings it reads.

``xtree eval XTree-WebShop-v0`` on a core-only install used to stop three times, one missing
thing a round (``[gym]``, then the data folder, then ``[webshop]``). :func:`check_env` looks at all
of it first and raises ONE error that names every missing extra (with the packages it lacks) and
every missing setting. It imports no env module: each package is looked up with ``find_spec``.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ..errors import DependencyError, EnvConfigError, XTreeError

Need = tuple[str, str]
"""(module to find, the pip extra that installs it)."""

_GYM: tuple[Need, ...] = (("gymnasium", "gym"),)
_BROWSER: tuple[Need, ...] = (*_GYM, ("browsergym.core", "browser"), ("playwright", "browser"))
ENV_PACKAGES: dict[str, tuple[Need, ...]] = {
    "XTree-ScienceWorld-v0": (*_GYM, ("scienceworld", "scienceworld")),
    "XTree-WebShop-v0": (
        *_GYM, ("rapidfuzz", "webshop"), ("bm25s", "webshop"), ("Stemmer", "webshop"), ("textblob", "webshop"),
    ),
    "XTree-MiniWoB-v0": (*_BROWSER, ("browsergym.miniwob", "browser"), ("miniwob", "browser")),
    "XTree-WebArena-v0": (*_GYM, ("browsergym.core", "webarena"), ("browsergym.webarena", "webarena")),
    "XTree-OpenURL-v0": _BROWSER,
    "XTree-Countdown-v0": _GYM,
    "XTree-TWCooking-v0": (*_GYM, ("textworld", "textworld")),
    "XTree-ALFWorld-v0": (*_GYM, ("textworld", "alfworld"), ("alfworld", "alfworld")),
    "XTree-NodeReplay-v0": _GYM,
}  # fmt: skip
"""Env id -> the modules its constructor imports (``pyproject.toml``'s extras install them)."""

BACKEND_PACKAGES: dict[str, tuple[Need, ...]] = {"hf": (("torch", "train"), ("transformers", "train"))}
"""``xtree eval --backend`` -> the modules that backend imports (scripted and oracle: none; vllm checks its own)."""

PIP_NAMES = {
    "Stemmer": "PyStemmer",
    "browsergym.core": "browsergym-core",
    "browsergym.miniwob": "browsergym-miniwob",
    "browsergym.webarena": "browsergym-webarena",
}
"""Import name -> the name pip installs it under, where they differ."""


def env_packages(env_id: str) -> tuple[Need, ...]:
    """The modules ``env_id`` needs: its own list, gymnasium for any other gym id, none for ``module:Class``.

    Example:
        >>> [extra for _, extra in env_packages("XTree-WebShop-v0")]
        ['gym', 'webshop', 'webshop', 'webshop', 'webshop']
        >>> env_packages("CartPole-v1"), env_packages("my.module:EchoEnv")
        ((('gymnasium', 'gym'),), ())
    """
    if env_id in ENV_PACKAGES:
        return ENV_PACKAGES[env_id]
    return () if ":" in env_id else _GYM


def installed(module: str) -> bool:
    """Whether ``module`` can be imported here (a missing parent package or a ``None`` entry: False).

    Example:
        >>> installed("json"), installed("no_such_package_xyz.sub")
        (True, False)
    """
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def missing_extras(needs: Iterable[Need], found: Callable[[str], bool] = installed) -> dict[str, list[str]]:
    """Extra -> its packages that ``found`` does not find, in the order first needed (no duplicates).

    Example:
        >>> missing_extras([("gymnasium", "gym"), ("Stemmer", "webshop"), ("json", "x")], found=lambda m: m == "json")
        {'gym': ['gymnasium'], 'webshop': ['PyStemmer']}
    """
    out: dict[str, list[str]] = {}
    for module, extra in needs:
        name = PIP_NAMES.get(module, module)
        if not found(module) and name not in out.get(extra, []):
            out.setdefault(extra, []).append(name)
    return out


def _webshop_setting(env_args: Mapping[str, Any], option: str) -> XTreeError | None:
    from .webshop_data import resolve_data_dir

    try:
        resolve_data_dir(env_args.get("data_dir"), option=option)
    except EnvConfigError as exc:
        return exc
    return None


def _scienceworld_setting(env_args: Mapping[str, Any], option: str) -> XTreeError | None:
    from .sciworld_jvm import java_available

    if java_available():
        return None
    return EnvConfigError(
        "ScienceWorld needs `java` on PATH, and none was found",
        fix="install a Java 11+ runtime (e.g. `apt-get install openjdk-17-jre-headless`)",
    )


def _webarena_setting(env_args: Mapping[str, Any], option: str) -> XTreeError | None:
    from .browsergym import missing_webarena_vars  # the env's own list of WA_* variables

    missing = missing_webarena_vars()
    if not missing:
        return None
    return EnvConfigError(
        f"XTree-WebArena-v0 needs the WebArena server URLs; missing: {', '.join(missing)}",
        fix="start your WebArena servers and export each base URL (WA_SHOPPING=http://HOST:7770 ...)",
    )


def _alfworld_setting(env_args: Mapping[str, Any], option: str) -> XTreeError | None:
    root = env_args.get("data_dir") or os.environ.get("ALFWORLD_DATA")
    if root and os.path.isdir(str(root)):
        return None
    what = (
        f"ALFWorld data not found at {str(root)!r}"
        if root
        else "ALFWorld needs its game data and ALFWORLD_DATA is not set"
    )
    return EnvConfigError(
        what, fix="set ALFWORLD_DATA to the folder filled by `alfworld-download`, or pass data_dir="
    )


SETTINGS: dict[str, Callable[[Mapping[str, Any], str], XTreeError | None]] = {
    "XTree-ScienceWorld-v0": _scienceworld_setting,
    "XTree-WebShop-v0": _webshop_setting,
    "XTree-WebArena-v0": _webarena_setting,
    "XTree-ALFWorld-v0": _alfworld_setting,
}
"""Env id -> its check of what the machine must provide besides packages (data, URLs, a Java runtime)."""


def needs_error(
    feature: str, extras: Mapping[str, list[str]], settings: list[XTreeError]
) -> XTreeError | None:
    """The one error naming every missing extra and setting of ``feature`` (None: nothing missing).

    A lone missing setting keeps its own error; anything with a missing package is a DependencyError.

    Example:
        >>> err = needs_error("xtree eval X", {"gym": ["gymnasium"], "webshop": ["bm25s"]},
        ...                   [EnvConfigError("no data folder", fix="set DATA")])
        >>> type(err).__name__, str(err)
        ('DependencyError', "xtree eval X is missing xtree_gym[gym] (gymnasium), xtree_gym[webshop] (bm25s); no data folder -- fix: pip install 'xtree_gym[gym,webshop]'; set DATA")
    """
    if not extras:  # no package missing: a lone setting keeps its own error
        return settings[0] if len(settings) == 1 else _settings_error(feature, settings) if settings else None
    named = ", ".join(f"xtree_gym[{extra}] ({', '.join(pkgs)})" for extra, pkgs in extras.items())
    what = "; ".join([f"{feature} is missing {named}", *(s.what for s in settings)])
    fixes = [f"pip install 'xtree_gym[{','.join(extras)}]'", *(s.fix for s in settings if s.fix)]
    return DependencyError(what, fix="; ".join(fixes))


def _settings_error(feature: str, settings: list[XTreeError]) -> XTreeError:
    what = f"{feature} is missing: " + "; ".join(s.what for s in settings)
    return EnvConfigError(what, fix="; ".join(s.fix for s in settings if s.fix))


def check_env(
    env_id: str,
    env_args: Mapping[str, Any] | None = None,
    *,
    backend: str | None = None,
    feature: str | None = None,
    option: str | None = None,
    also: Sequence[XTreeError] = (),
    found: Callable[[str], bool] = installed,
) -> None:
    """Raise one error naming everything ``env_id`` (played with ``backend``) lacks here, or return.

    ``option`` is how the caller's user passes a data folder (``--env-arg data_dir=DIR``), so the
    fix names what they can type; ``also``: the caller's own missing settings (a flag), named in
    the same message; ``found`` looks a module up (tests pass their own).

    Example:
        >>> check_env("XTree-Countdown-v0", found=lambda m: False)
        Traceback (most recent call last):
        ...
        xtree_gym.errors.DependencyError: XTree-Countdown-v0 is missing xtree_gym[gym] (gymnasium) -- fix: pip install 'xtree_gym[gym]'
    """
    args = dict(env_args or {})
    needs = [*env_packages(env_id), *BACKEND_PACKAGES.get(backend or "", ())]
    extras = missing_extras(needs, found)
    setting = SETTINGS.get(env_id)
    problem = setting(args, option or _default_option()) if setting else None
    err = needs_error(feature or env_id, extras, [*also, *([problem] if problem else [])])
    if err is not None:
        raise err


def _default_option() -> str:
    """How a library caller passes a data folder (an env constructor argument)."""
    from .webshop_data import _ENV_OPTION

    return _ENV_OPTION
