"""The corpora the experiments mine: ScienceWorld gold episodes and a collected WebShop corpus.

ScienceWorld: ``../shared/data/scienceworld/train-gold.jsonl`` (826 gold replays over the 30 task
types) when it exists, else the packaged 278-episode sample ``xtree_gym/data/scienceworld_gold_sample``.
WebShop: collected here with ``xtree_gym.collect.webshop`` (the ``xtree collect webshop`` code) on the
1000-product catalogue in ``$XTREE_WEBSHOP_DATA`` or ``../shared/reference/webshop``; same
size and seed give the same corpus.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

from xtree_gym.corpus import Trajectory, read_corpus, trajectory_from_dict
from xtree_gym.errors import EnvConfigError

ROOT = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("XTREE_SHARED") or ROOT.parent / "shared")
"""``../shared`` beside the checkout (``$XTREE_SHARED`` overrides it, e.g. from a git worktree)."""
SCIWORLD_GOLD = SHARED / "data" / "scienceworld" / "train-gold.jsonl"
SCIWORLD_SAMPLE = ROOT / "xtree_gym" / "data" / "scienceworld_gold_sample.jsonl.gz"


def scienceworld_corpus() -> tuple[list[Trajectory], str]:
    """The ScienceWorld gold corpus and where it came from (the shared file, else the packaged sample)."""
    path = SCIWORLD_GOLD if SCIWORLD_GOLD.is_file() else SCIWORLD_SAMPLE
    return list(read_corpus(path)), (
        "shared/data/scienceworld/train-gold.jsonl" if path == SCIWORLD_GOLD else path.name
    )


def webshop_data_dir() -> Path | None:
    """``$XTREE_WEBSHOP_DATA``, else ``../shared/reference/webshop``; None when neither holds the catalogue."""
    env = os.environ.get("XTREE_WEBSHOP_DATA")
    for cand in ([Path(env)] if env else []) + [SHARED / "reference" / "webshop"]:
        if (cand / "items_shuffle_1000.json").is_file():
            return cand
    return None


def webshop_corpus(episodes: int, seed: int = 0, policy: str = "mixed") -> list[Trajectory]:
    """``episodes`` scripted-shopper episodes (successes and failures), without observations."""
    from xtree_gym.collect.webshop import collect
    from xtree_gym.envs.webshop import WebShopEnv

    data = webshop_data_dir()
    if data is None:
        raise EnvConfigError(
            "the WebShop catalogue (items_shuffle_1000.json) was not found",
            fix="set $XTREE_WEBSHOP_DATA to the folder with the 1000-product WebShop files",
        )
    env = WebShopEnv(data_dir=str(data), split="train")
    try:
        return [
            trajectory_from_dict(r) for r in collect(env, episodes, policy, seed, keep_observations=False)
        ]
    finally:
        env.close()


def subsample(corpus: list[Trajectory], n: int, seed: int) -> list[Trajectory]:
    """``n`` trajectories drawn without replacement with ``random.Random(seed)`` (all when n >= len).

    Example:
        >>> from xtree_gym.corpus import Step
        >>> c = [Trajectory(str(i), [Step("a", token="a")], True) for i in range(5)]
        >>> [t.id for t in subsample(c, 2, 0)] == [t.id for t in subsample(c, 2, 0)]
        True
        >>> len(subsample(c, 9, 0))
        5
    """
    if n >= len(corpus):
        return list(corpus)
    return random.Random(seed).sample(corpus, n)
