"""Gymnasium environments that report canonical tokens online.

Every env puts the canonical action it just executed in ``info["xtree"]``
(``{"token", "verb", "role", "slots", "raw"}``, see ``CanonicalAction.to_info``), so any wrapper
in :mod:`xtree_gym.wrappers` can match it against a tree. Registration uses entry-point strings,
so importing this package imports no simulator, browser or search library.
"""

from __future__ import annotations

import importlib.machinery
import sys
from typing import Any

# gym id -> (entry point, default kwargs)
ENV_SPECS: dict[str, tuple[str, dict[str, object]]] = {
    "XTree-ScienceWorld-v0": ("xtree_gym.envs.scienceworld:ScienceWorldEnv", {}),
    "XTree-WebShop-v0": ("xtree_gym.envs.webshop:WebShopEnv", {}),
    "XTree-MiniWoB-v0": ("xtree_gym.envs.browsergym:MiniWoBEnv", {}),
    "XTree-WebArena-v0": ("xtree_gym.envs.browsergym:WebArenaEnv", {}),
    "XTree-OpenURL-v0": ("xtree_gym.envs.browsergym:OpenURLEnv", {}),
    "XTree-Countdown-v0": ("xtree_gym.envs.countdown:CountdownEnv", {}),
    "XTree-TWCooking-v0": ("xtree_gym.envs.twcooking:TWCookingEnv", {}),
    "XTree-ALFWorld-v0": ("xtree_gym.envs.alfworld:ALFWorldEnv", {}),
    "XTree-NodeReplay-v0": ("xtree_gym.envs.node_replay:NodeReplayEnv", {}),
}


def register_envs() -> bool:
    """Register every XTree-* id with Gymnasium; returns False when gymnasium is not installed."""
    try:
        import gymnasium as gym
    except ImportError:
        return False
    for env_id, (entry_point, kwargs) in ENV_SPECS.items():
        if env_id not in gym.registry:
            gym.register(id=env_id, entry_point=entry_point, kwargs=dict(kwargs), disable_env_checker=True)
    return True


def register_envs_on_import() -> None:
    """Register the XTree-* ids now if gymnasium is imported, else the moment it is.

    ``import xtree_gym`` calls this instead of :func:`register_envs`, so a process that never uses
    gymnasium (``xtree mine``) never imports it (0.05 s of start-up), while
    ``import xtree_gym; import gymnasium as gym; gym.make("XTree-...")`` works as before.
    """
    if "gymnasium" in sys.modules:
        register_envs()
    elif not any(isinstance(f, _RegisterOnImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _RegisterOnImport())


class _RegisterOnImport:
    """Finds nothing itself: when ``gymnasium`` is first imported, runs :func:`register_envs` after it loads.

    A meta path finder by protocol (``find_spec``): subclassing ``importlib.abc.MetaPathFinder`` would
    import ``importlib.resources`` and ``tempfile`` into every ``import xtree_gym``.
    """

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != "gymnasium":
            return None
        # Stay in sys.meta_path until gymnasium really loads: ``importlib.util.find_spec("gymnasium")`` (an
        # extras check) also lands here, and must not use up the hook without importing anything.
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        loader = spec.loader
        run = loader.exec_module

        def exec_module(module: Any) -> None:
            if self in sys.meta_path:
                sys.meta_path.remove(self)  # once loaded, the hook's work is done
            run(module)
            sys.modules[name] = module  # register_envs imports it by name
            register_envs()

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec
