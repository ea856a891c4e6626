"""Collection rules for the doctests of the package (pytest's testpaths include ``xtree_gym``).

``xtree_gym/adapters/tinker_env.py`` subclasses tinker-cookbook's ``Env`` at import, so its doctest can only be
collected where ``xtree_gym[tinker]`` is installed; that extra is kept out of ``test`` (tinker-cookbook caps
transformers at 5.5.4), so elsewhere the module is skipped here, with the reason, instead of failing collection.
"""

from __future__ import annotations

import importlib.util

collect_ignore: list[str] = []
if importlib.util.find_spec("tinker_cookbook") is None:  # pip install 'xtree_gym[tinker]' collects it
    collect_ignore.append("xtree_gym/adapters/tinker_env.py")
