"""Folds and variation splits of ScienceWorld: static checks, and the table against the real jar."""

from __future__ import annotations

import numpy as np
import pytest

from xtree_gym.envs import sciworld_folds as folds
from xtree_gym.errors import EnvConfigError


def _pairs(name: str) -> set[tuple[str, int]]:
    return set(folds.get_fold(name).pairs())


def test_task_type_split_is_19_plus_10_and_disjoint() -> None:
    seen, held = set(folds.SEEN_TYPES), set(folds.HELD_OUT_TYPES)
    assert len(seen) == 19 and len(held) == 10
    assert not seen & held
    assert seen | held | set(folds.UNFOLDED_TYPES) == set(folds.TASK_NAMES)
    assert folds.UNFOLDED_TYPES == ("use-thermometer",)


def test_folds_are_rlvmrs_levels_and_disjoint_where_they_must_be() -> None:
    train, train_all, g0, g1, g2 = (_pairs(n) for n in ("train", "train-all", "G0", "G1", "G2"))
    types = {name: {t for t, _ in pairs} for name, pairs in (("train", train), ("all", train_all), ("G0", g0), ("G1", g1), ("G2", g2))}  # fmt: skip
    # Sizes of RLVMR's index lists (L0 test 1661, L1 test 1684, L2 train 2242 / test 549, L0/L1 train 3322);
    # the paper reports G0 n=1.6k, G1 n=1.6k, G2 n=0.5k.
    assert [len(p) for p in (train, train_all, g0, g1, g2)] == [2242, 3322, 1661, 1684, 549]
    assert types["G0"] == types["G1"] == types["all"] == set(folds.FOLD_TYPES)
    assert types["train"] == set(folds.SEEN_TYPES) and types["G2"] == set(folds.HELD_OUT_TYPES)
    assert not types["G2"] & types["train"]  # G2: task types its training set never shows
    assert not train_all & g0 and not train_all & g1 and not g0 & g1  # evaluation never on trained variations
    assert train < train_all and g2 < g1
    assert {v for t, v in g0 if t == "boil"} == set(range(14, 21))  # ScienceWorld's dev split of boil


def test_splits_partition_every_task() -> None:
    for task, (_tid, n, dev, test) in folds.TASKS.items():
        parts = [folds.split_variations(task, s) for s in folds.SPLITS]
        assert sorted(v for p in parts for v in p) == list(range(n)), task
        assert 0 < dev < test < n


def test_sampling_stays_in_the_fold_and_is_seeded() -> None:
    draws = [folds.sample_task_variation(np.random.default_rng(s), fold="G2") for s in range(60)]
    for task, variation in draws:
        assert task in folds.HELD_OUT_TYPES
        assert variation in folds.split_variations(task, "test")
    assert len({t for t, _ in draws}) >= 6  # task types are drawn uniformly, not weighted by size
    again = [folds.sample_task_variation(np.random.default_rng(s), fold="G2") for s in range(60)]
    assert draws == again


def test_bad_names_raise_one_clear_error() -> None:
    with pytest.raises(EnvConfigError, match="unknown fold 'G3'"):
        folds.get_fold("G3")
    with pytest.raises(EnvConfigError, match="not in fold G2"):
        folds.get_fold("G2").variations("boil")
    assert folds.resolve_task("10-2") == "mendelian-genetics-unknown-plant"


@pytest.mark.jvm
def test_split_table_matches_the_simulator(sciworld_jvm) -> None:
    iface = sciworld_jvm.new_interface()
    assert tuple(str(n) for n in iface.getTaskNames()) == folds.TASK_NAMES
    # Every third task type (a load costs 0.2-1 s); the table's shape is checked for all 30 above.
    for task in folds.TASK_NAMES[::3]:
        iface.load(task, 0, "", False)
        got = [
            list(iface.getVariationsTrain()),
            list(iface.getVariationsDev()),
            list(iface.getVariationsTest()),
        ]
        want = [list(folds.split_variations(task, s)) for s in folds.SPLITS]
        assert got == want, task
        assert int(iface.getTaskMaxVariations(task)) == folds.TASKS[task][1]
