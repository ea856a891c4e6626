"""Package exports imported on first use (PEP 562), so importing a package costs only what is used.

A package lists ``name -> module`` once and gets the module-level ``__getattr__`` and ``__dir__``
that import the module the first time the name is asked for:

Example:
    >>> ns = {"__name__": "pkg"}
    >>> getattr_, dir_ = lazy_exports(ns, {"sqrt": "math"})
    >>> getattr_("sqrt")(9.0), "sqrt" in ns, "sqrt" in dir_()
    (3.0, True, True)
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(
    namespace: dict[str, Any], exports: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for a package whose public names live in the modules ``exports`` maps to."""

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {namespace['__name__']!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value  # later look-ups are plain attribute reads
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(exports))

    return __getattr__, __dir__
