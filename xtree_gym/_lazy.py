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
import importlib.machinery
import importlib.util
import sys
import types
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(
    namespace: dict[str, Any],
    exports: Mapping[str, str],
    on_missing: Callable[[ModuleNotFoundError, str], Exception | None] | None = None,
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for a package whose public names live in the modules ``exports`` maps to.

    ``on_missing(exc, name)``: the error to raise instead when a name's module needs a package that is
    not installed (None: the import error as it is).
    """

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {namespace['__name__']!r} has no attribute {name!r}")
        try:
            value = getattr(importlib.import_module(module), name)
        except ModuleNotFoundError as exc:  # an optional package: one line naming the extra
            err = on_missing(exc, f"{namespace['__name__']}.{name}") if on_missing else None
            if err is None:
                raise
            raise err from None
        namespace[name] = value  # later look-ups are plain attribute reads
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(exports))

    return __getattr__, __dir__


# ----------------------------------------------------------------------------- old module paths

OLD_PATHS: dict[str, str] = {
    "xtree_gym._io": "xtree_gym.corpus.io",
    "xtree_gym.arrow_io": "xtree_gym.corpus.arrow_io",
    "xtree_gym.columnar": "xtree_gym.corpus.columnar",
    "xtree_gym.convert_cli": "xtree_gym.corpus.cli",
    "xtree_gym.formats": "xtree_gym.canon.formats",
    "xtree_gym.formats._records": "xtree_gym.corpus.formats._records",
    "xtree_gym.formats.agentlab": "xtree_gym.corpus.formats.agentlab",
    "xtree_gym.formats.conversations": "xtree_gym.corpus.formats.conversations",
    "xtree_gym.config": "xtree_gym.mining.config",
    "xtree_gym.mining_base": "xtree_gym.mining.base",
    "xtree_gym.mining_reference": "xtree_gym.mining.reference",
    "xtree_gym.mining_fast": "xtree_gym.mining.fast",
    "xtree_gym.tree": "xtree_gym.mining.tree",
    "xtree_gym.matching": "xtree_gym.mining.matching",
    "xtree_gym.cli_core": "xtree_gym.mining.cli",
    "xtree_gym.bonus_modes": "xtree_gym.rewards.modes",
    "xtree_gym.instances": "xtree_gym.rewards.instances",
    "xtree_gym.mdl": "xtree_gym.reuserl.mdl",
    "xtree_gym.mdl_fast": "xtree_gym.reuserl.fast",
    "xtree_gym.mdl_cli": "xtree_gym.reuserl.cli",
    # House II: the agents half moved into rooms that follow a GRPO step (docs/architecture.md)
    "xtree_gym.agents.models": "xtree_gym.agents.model.loading",
    "xtree_gym.agents.lora": "xtree_gym.agents.model.lora",
    "xtree_gym.agents.logits": "xtree_gym.agents.model.logits",
    "xtree_gym.agents.stops": "xtree_gym.agents.model.stops",
    "xtree_gym.agents.generation": "xtree_gym.agents.model.generation",
    "xtree_gym.agents.vllm": "xtree_gym.agents.model.vllm",
    "xtree_gym.agents.oracle": "xtree_gym.agents.model.oracle",
    "xtree_gym.agents.runfolder": "xtree_gym.agents.run.runfolder",
    "xtree_gym.agents.checkpoint": "xtree_gym.agents.run.checkpoint",
    "xtree_gym.agents.scaleout": "xtree_gym.agents.run.scaleout",
    "xtree_gym.agents.tracking": "xtree_gym.agents.run.tracking",
    "xtree_gym.agents.metrics": "xtree_gym.agents.run.metrics",
    "xtree_gym.agents.plots": "xtree_gym.agents.run.plots",
    "xtree_gym.agents.guards": "xtree_gym.agents.run.guards",
    "xtree_gym.agents.validate": "xtree_gym.agents.run.validate",
    "xtree_gym.agents.envproc": "xtree_gym.agents.play.envproc",
    "xtree_gym.agents.tasks": "xtree_gym.agents.play.tasks",
    "xtree_gym.agents.rollout": "xtree_gym.agents.play.rollout",
    "xtree_gym.agents.evaluate": "xtree_gym.agents.play.evaluate",
    "xtree_gym.agents.testing": "xtree_gym.agents.play.testing",
    "xtree_gym.agents.cli": "xtree_gym.agents.play.cli",
    "xtree_gym.agents.config": "xtree_gym.agents.grpo.config",
    "xtree_gym.agents.trainer": "xtree_gym.agents.grpo.trainer",
    "xtree_gym.agents.advantages": "xtree_gym.agents.grpo.advantages",
    "xtree_gym.agents.shaping": "xtree_gym.agents.grpo.shaping",
    "xtree_gym.agents.rows": "xtree_gym.agents.grpo.rows",
    "xtree_gym.agents.losses": "xtree_gym.agents.grpo.losses",
    "xtree_gym.agents.updates": "xtree_gym.agents.grpo.updates",
    "xtree_gym.agents.opsd": "xtree_gym.agents.grpo.opsd",
    "xtree_gym.agents.remine": "xtree_gym.agents.grpo.remine",
    "xtree_gym.agents.schedule": "xtree_gym.agents.grpo.schedule",
    "xtree_gym.agents.learning_signal": "xtree_gym.agents.grpo.learning_signal",
    "xtree_gym.agents.policy": "xtree_gym.agents.grpo.policy",
    "xtree_gym.agents.train_cli": "xtree_gym.agents.grpo.cli",
    "xtree_gym.agents.sft_rows": "xtree_gym.agents.sft_offline.rows",
    "xtree_gym.agents.sft": "xtree_gym.agents.sft_offline.sft",
    "xtree_gym.agents.sft_cli": "xtree_gym.agents.sft_offline.rows_cli",
    "xtree_gym.agents.offline": "xtree_gym.agents.sft_offline.offline",
    "xtree_gym.agents.offline_trainer": "xtree_gym.agents.sft_offline.offline_trainer",
    "xtree_gym.agents.sft_offline_cli": "xtree_gym.agents.sft_offline.cli",
}
"""Module paths of the flat layout before the core moved into packages -> where the code lives now.

``xtree_gym.corpus``, ``xtree_gym.mining`` and ``xtree_gym.rewards`` became packages that export
every public name the old modules had, so they need no entry. An old path imported today is a
module holding the same objects as the new one (``xtree_gym.tree.XTree is xtree_gym.mining.tree.XTree``).
"""


class _OldPath:
    """Finds :data:`OLD_PATHS` after the real files are searched, and loads each as a thin alias module.

    A meta path finder and loader by protocol (``find_spec``, ``create_module``, ``exec_module``):
    subclassing ``importlib.abc``'s would import ``importlib.resources`` and ``tempfile`` into every
    ``import xtree_gym`` (5 ms).
    """

    def find_spec(
        self, fullname: str, path: Any = None, target: Any = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in OLD_PATHS:
            return None
        is_pkg = any(other.startswith(fullname + ".") for other in OLD_PATHS)
        return importlib.util.spec_from_loader(fullname, self, is_package=is_pkg)  # type: ignore[arg-type]

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> None:
        return None  # a fresh module; exec_module fills it

    def exec_module(self, module: types.ModuleType) -> None:
        target = importlib.import_module(OLD_PATHS[module.__name__])
        module.__dict__.update({k: v for k, v in vars(target).items() if not k.startswith("__")})
        module.__doc__ = f"Old path of :mod:`{target.__name__}` (the core moved into packages); same objects."
        module.__getattr__ = lambda name: getattr(target, name)  # type: ignore[method-assign]  # names set later


def install_old_paths() -> None:
    """Let ``import xtree_gym.tree`` (and every path in :data:`OLD_PATHS`) keep working; idempotent."""
    if not any(isinstance(f, _OldPath) for f in sys.meta_path):
        sys.meta_path.append(_OldPath())  # last: a real module of the same name always wins
