"""verifiers' taskset id ``xtree-gym-verifiers``: verifiers imports a taskset as a top-level module.

Everything lives in :mod:`xtree_gym.adapters.verifiers_env`; this module only re-exports it.
"""

from xtree_gym.adapters.verifiers_env import (
    XTreeEnv,
    XTreeEnvConfig,
    XTreeTask,
    XTreeTaskData,
    XTreeTaskset,
    XTreeTasksetConfig,
)

__all__ = ["XTreeEnv", "XTreeEnvConfig", "XTreeTask", "XTreeTaskData", "XTreeTaskset", "XTreeTasksetConfig"]
