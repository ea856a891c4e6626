"""Gymnasium environments that report canonical tokens online.

Every env puts the canonical action it just executed in ``info["xtree"]``
(``{"token", "verb", "role", "slots", "raw"}``, see ``CanonicalAction.to_info``), so any wrapper
in :mod:`xtree_gym.wrappers` can match it against a tree. Registration uses entry-point strings,
so importing this package imports no simulator, browser or search library.
"""

from __future__ import annotations

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
