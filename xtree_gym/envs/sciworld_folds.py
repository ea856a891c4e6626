"""ScienceWorld's task types, variation splits and the paper's G0/G1/G2 folds, as static data.

Everything here is plain Python: no JVM is started. The variation splits are ScienceWorld 1.2.3's own
(``getVariationsTrain/Dev/Test``; each is a contiguous range, so a task's split is two cut points), and
``tests/test_scienceworld_folds.py`` checks this table against the running simulator.

Folds (paper §4: G0 n=1.6k, G1 n=1.6k, G2 n=0.5k) are RLVMR's (Zhang et al. 2025) three levels, whose
index files ``variations_idx/L{0,1,2}_idx.json`` each hold a training and an evaluation list:

* ``G0``        -- seen tasks (RLVMR L0): the 29 fold types x their *dev* variations (1661);
* ``G1``        -- unseen variations (RLVMR L1): the 29 fold types x their *test* variations (1684);
* ``G2``        -- unseen task types (RLVMR L2): the 10 held-out types x their *test* variations (549);
* ``train``     -- what G2 trains on (RLVMR L2): the 19 seen types x their *train* variations (2242);
  it shares no variation with G0 or G1 and no task type with G2, so it is safe for all three;
* ``train-all`` -- what G0 and G1 train on (RLVMR L0 and L1): the 29 fold types x *train* (3322).

RLVMR's lists name 29 types: ``use-thermometer`` (task 2-1) is in none of them, so it belongs to no
fold (it is still reachable with ``fold=None`` and an explicit task). G2 is a subset of G1.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import EnvConfigError

if TYPE_CHECKING:
    import numpy as np

# name -> (task id, number of variations, first dev variation, first test variation)
# train = [0, dev), dev = [dev, test), test = [test, n)  -- ScienceWorld 1.2.3, checked against the jar in tests.
TASKS: dict[str, tuple[str, int, int, int]] = {
    "boil": ("1-1", 30, 14, 21),
    "change-the-state-of-matter-of": ("1-4", 30, 14, 21),
    "chemistry-mix": ("9-1", 32, 16, 24),
    "chemistry-mix-paint-secondary-color": ("9-2", 36, 18, 27),
    "chemistry-mix-paint-tertiary-color": ("9-3", 36, 18, 27),
    "find-animal": ("4-2", 300, 150, 225),
    "find-living-thing": ("4-1", 300, 150, 225),
    "find-non-living-thing": ("4-3", 300, 150, 225),
    "find-plant": ("4-4", 300, 150, 225),
    "freeze": ("1-3", 30, 14, 21),
    "grow-fruit": ("6-3", 126, 62, 93),
    "grow-plant": ("6-2", 126, 62, 93),
    "identify-life-stages-1": ("7-1", 14, 6, 9),
    "identify-life-stages-2": ("7-2", 10, 4, 6),
    "inclined-plane-determine-angle": ("8-1", 168, 84, 126),
    "inclined-plane-friction-named-surfaces": ("8-2", 1386, 692, 1038),
    "inclined-plane-friction-unnamed-surfaces": ("8-3", 162, 80, 120),
    "lifespan-longest-lived": ("5-1", 125, 62, 93),
    "lifespan-longest-lived-then-shortest-lived": ("5-3", 125, 62, 93),
    "lifespan-shortest-lived": ("5-2", 125, 62, 93),
    "measure-melting-point-known-substance": ("2-2", 436, 218, 327),
    "measure-melting-point-unknown-substance": ("2-3", 300, 150, 225),
    "melt": ("1-2", 30, 14, 21),
    "mendelian-genetics-known-plant": ("10-1", 120, 60, 90),
    "mendelian-genetics-unknown-plant": ("10-2", 480, 240, 360),
    "power-component": ("3-1", 20, 10, 15),
    "power-component-renewable-vs-nonrenewable-energy": ("3-2", 20, 10, 15),
    "test-conductivity": ("3-3", 900, 450, 675),
    "test-conductivity-of-unknown-substances": ("3-4", 600, 300, 450),
    "use-thermometer": ("2-1", 540, 270, 405),
}

TASK_NAMES: tuple[str, ...] = tuple(sorted(TASKS))
"""All 30 task types in the simulator's own order (``getTaskNames`` is alphabetical)."""

# RLVMR's L2 index names tasks by position in TASK_NAMES: train {0,2,3,5,6,7,9,10,12,14,15,17,19,20,22,23,25,26,27},
# test {1,4,8,11,13,16,18,21,24,28}; index 29 (use-thermometer) is in neither.
HELD_OUT_TYPES: tuple[str, ...] = tuple(TASK_NAMES[i] for i in (1, 4, 8, 11, 13, 16, 18, 21, 24, 28))
"""The 10 task types never trained on (fold G2)."""
SEEN_TYPES: tuple[str, ...] = tuple(
    TASK_NAMES[i] for i in (0, 2, 3, 5, 6, 7, 9, 10, 12, 14, 15, 17, 19, 20, 22, 23, 25, 26, 27)
)
"""The 19 task types G2's policy trains on (fold ``train``)."""
UNFOLDED_TYPES: tuple[str, ...] = tuple(
    t for t in TASK_NAMES if t not in HELD_OUT_TYPES and t not in SEEN_TYPES
)
"""Task types in no fold (``use-thermometer``)."""
FOLD_TYPES: tuple[str, ...] = tuple(t for t in TASK_NAMES if t not in UNFOLDED_TYPES)
"""The 29 task types of RLVMR's lists (folds G0, G1, train-all)."""

SLOW_GOLD_TYPES: tuple[str, ...] = ("mendelian-genetics-known-plant", "mendelian-genetics-unknown-plant")
"""Tasks whose gold path takes seconds to generate and sometimes replays to a negative score."""

SPLITS = ("train", "dev", "test")
FOLDS = ("train", "train-all", "G0", "G1", "G2")

_ID_TO_NAME = {tid: name for name, (tid, *_rest) in TASKS.items()}


def resolve_task(task: str) -> str:
    """A task name from a name or a ``"1-1"`` style id; raises :class:`EnvConfigError` otherwise.

    Example:
        >>> resolve_task("1-1"), resolve_task("Boil")
        ('boil', 'boil')
    """
    key = task.strip().lower()
    if key in TASKS:
        return key
    if key in _ID_TO_NAME:
        return _ID_TO_NAME[key]
    raise EnvConfigError(
        f"unknown ScienceWorld task {task!r}", fix=f"use a name or id of: {', '.join(TASK_NAMES)}"
    )


def split_variations(task: str, split: str) -> range:
    """The variation indices of ``task`` in ScienceWorld's ``split`` (``train``/``dev``/``test``).

    Example:
        >>> split_variations("boil", "dev")
        range(14, 21)
    """
    n, dev, test = TASKS[resolve_task(task)][1:]
    if split == "train":
        return range(0, dev)
    if split == "dev":
        return range(dev, test)
    if split == "test":
        return range(test, n)
    raise EnvConfigError(f"unknown split {split!r}", fix=f"use one of {', '.join(SPLITS)}")


@dataclass(frozen=True)
class Fold:
    """A set of (task type, variation split) pairs to sample episodes from."""

    name: str
    """One of :data:`FOLDS`."""
    task_types: tuple[str, ...]
    """Task types in the fold, in the simulator's order."""
    split: str
    """ScienceWorld variation split used for every task type of the fold."""

    def variations(self, task: str) -> range:
        """The variations of ``task`` in this fold (raises when ``task`` is not in the fold)."""
        name = resolve_task(task)
        if name not in self.task_types:
            raise EnvConfigError(
                f"task {name!r} is not in fold {self.name}", fix=f"use one of: {', '.join(self.task_types)}"
            )
        return split_variations(name, self.split)

    def pairs(self) -> list[tuple[str, int]]:
        """Every (task, variation) of the fold, in order."""
        return [(t, v) for t in self.task_types for v in self.variations(t)]

    def count(self) -> int:
        """Number of (task, variation) pairs."""
        return sum(len(self.variations(t)) for t in self.task_types)


def get_fold(name: str) -> Fold:
    """The fold called ``name`` (one of :data:`FOLDS`; case-insensitive).

    Example:
        >>> [(f.name, len(f.task_types), f.split, f.count()) for f in map(get_fold, ("g0", "G1", "G2"))]
        [('G0', 29, 'dev', 1661), ('G1', 29, 'test', 1684), ('G2', 10, 'test', 549)]
    """
    key = name.strip().upper()
    if key in ("TRAIN", "TRAIN-ALL"):
        key = key.lower()
    folds = {
        "train": (SEEN_TYPES, "train"),
        "train-all": (FOLD_TYPES, "train"),
        "G0": (FOLD_TYPES, "dev"),
        "G1": (FOLD_TYPES, "test"),
        "G2": (HELD_OUT_TYPES, "test"),
    }
    if key not in folds:
        raise EnvConfigError(f"unknown fold {name!r}", fix=f"use one of {', '.join(FOLDS)}")
    types, split = folds[key]
    return Fold(key, types, split)


def candidate_variations(task: str, *, fold: str | None, split: str | None) -> Sequence[int]:
    """Variations an episode of ``task`` may use: the fold's when given, else the split's (else train)."""
    if fold is not None:
        return get_fold(fold).variations(task)
    return split_variations(task, split or "train")


def sample_task_variation(
    rng: np.random.Generator,
    *,
    fold: str | None = None,
    split: str | None = None,
    task: str | None = None,
    tasks: Sequence[str] | None = None,
) -> tuple[str, int]:
    """Draw one (task, variation): a task type uniformly (unless ``task`` is fixed), then a variation.

    Task types are drawn uniformly rather than pairs, so the 1386-variation friction task does not
    swamp the 10-variation ones. ``tasks`` narrows the candidate types (default: the fold's, or all 30).
    """
    if task is not None:
        name = resolve_task(task)
    else:
        pool = list(tasks) if tasks is not None else list(get_fold(fold).task_types if fold else TASK_NAMES)
        if not pool:
            raise EnvConfigError("no task types to sample from", fix="pass a non-empty `tasks` list")
        name = resolve_task(pool[int(rng.integers(len(pool)))])
    variations = candidate_variations(name, fold=fold, split=split)
    return name, int(variations[int(rng.integers(len(variations)))])


def fold_table() -> list[dict[str, object]]:
    """One row per fold: name, number of task types, split, number of (task, variation) pairs."""
    rows: list[dict[str, object]] = []
    for name in FOLDS:
        f = get_fold(name)
        rows.append(
            {"fold": name, "task_types": len(f.task_types), "split": f.split, "variations": f.count()}
        )
    return rows
