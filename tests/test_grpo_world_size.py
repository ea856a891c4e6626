"""Scale-out II, item 1: the step's mini-batches and their loss do not depend on the number of processes.

Pure functions here (the global order and cut of ``grpo/updates.py``, each rank's slice, the loss
normalisation with the whole mini-batch's counts); the real 1-vs-2-process runs are in
``tests/test_fsdp_cpu.py`` (``test_mini_batches_*``).
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from xtree_gym.agents.grpo.losses import clipped_policy_loss, loss_weights  # noqa: E402
from xtree_gym.agents.grpo.rows import Row, place_rows  # noqa: E402
from xtree_gym.agents.grpo.updates import epoch_seed, global_mini_batches, rank_slice  # noqa: E402
from xtree_gym.agents.types import Episode  # noqa: E402

TASKS, MEMBERS = 4, 2


def _turns(task: int, member: int) -> int:
    """Turns of an episode (1-3, uneven): 4 tasks × 2 members give 16 rows."""
    return 1 + (task + 2 * member) % 3


def rank_rows(rank: int, world: int) -> list[Row]:
    """The rows rank ``rank`` of ``world`` builds: its tasks (every world-th), its groups numbered locally."""
    episodes, rows = [], []
    for group, _task in enumerate(range(rank, TASKS, world)):
        for member in range(MEMBERS):
            episodes.append(Episode(f"{_task}.{member}", "env", "t", "g", 0, group=group, member=member))
            for turn in range(_turns(_task, member)):
                rows.append(Row([1, 2], [False, True], [0.0, 0.0], episode=len(episodes) - 1, turn=turn))
    place_rows(rows, episodes, rank, world)
    return rows


def step_mini_batches(world: int, parts: int, seed: int) -> tuple[list[list[tuple]], list[list[list[tuple]]]]:
    """(the mini-batches as keys, each mini-batch's per-rank shares as keys) at ``world`` processes.

    Every rank's rows concatenated in rank order, as :func:`~xtree_gym.agents.grpo.updates.gather_rows` gives them.
    """
    gathered = [r for rank in range(world) for r in rank_rows(rank, world)]
    keys = [r.key for r in gathered]
    batches = global_mini_batches(keys, parts, seed)
    shares = [[[keys[j] for j in rank_slice(b, rank, world)] for rank in range(world)] for b in batches]
    return [[keys[j] for j in b] for b in batches], shares


def test_the_mini_batches_are_the_same_at_world_1_2_and_4() -> None:
    seed = epoch_seed(11, step=3, epoch=1)
    one, _ = step_mini_batches(1, parts=5, seed=seed)
    assert [len(b) for b in one] == [4, 3, 3, 3, 3]  # 16 rows in 5 mini-batches
    assert len({k for b in one for k in b}) == 16  # every row once: (task, member, turn) is unique
    for world in (2, 4):
        batches, shares = step_mini_batches(world, parts=5, seed=seed)
        assert batches == one, world  # the same rows, in the same order, cut the same way
        assert len(shares) == 5
        for batch, per_rank in zip(batches, shares):
            assert sorted(k for share in per_rank for k in share) == sorted(batch)  # the union is the batch
            assert sum(len(s) for s in per_rank) == len(batch)  # ... and the shares are disjoint
            assert max(map(len, per_rank)) - min(map(len, per_rank)) <= 1
    _, shares4 = step_mini_batches(4, parts=5, seed=seed)
    assert [len(s) for s in shares4[3]] == [1, 1, 1, 0]  # uneven: 3 rows on 4 ranks, one rank has none
    _, shares2 = step_mini_batches(2, parts=5, seed=seed)
    assert [len(s) for s in shares2[3]] == [2, 1]  # uneven: 3 rows on 2 ranks


def test_the_order_is_seeded_by_seed_step_epoch_and_the_slices_are_deterministic() -> None:
    a, _ = step_mini_batches(2, parts=3, seed=epoch_seed(11, 1, 0))
    b, _ = step_mini_batches(2, parts=3, seed=epoch_seed(11, 1, 0))
    c, _ = step_mini_batches(2, parts=3, seed=epoch_seed(11, 1, 1))
    assert a == b and a != c  # another epoch, another shuffle
    assert global_mini_batches([(2,), (0,), (1,)], 1, None) == [[1, 2, 0]]  # unshuffled: key order
    assert rank_slice([5, 6, 7, 8, 9], 0, 2) == [5, 6, 7] and rank_slice([5, 6, 7, 8, 9], 1, 2) == [8, 9]
    assert rank_slice([5, 6, 7], 0, 4) == [5] and rank_slice([5, 6, 7], 3, 4) == []
    assert (
        epoch_seed(11, 1, 0) == ((11 * 1_000_003 + 1) * 97 + 0) * 64
    )  # rank 0's seed of before: 1 process unchanged


def test_place_rows_gives_the_same_key_at_any_world_size() -> None:
    keys = {
        world: sorted(r.key for rank in range(world) for r in rank_rows(rank, world)) for world in (1, 2, 4)
    }
    assert keys[1] == keys[2] == keys[4]
    assert len(keys[1]) == 16 and keys[1][:3] == [(0, 0, 0), (0, 1, 0), (0, 1, 1)]


# -- the loss normalisation: per-rank losses with the mini-batch's counts sum to the 1-process loss -----------
MASK = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0], [1.0, 1.0, 1.0]])  # 6 tokens in 3 rows
ADV = torch.tensor([1.0, -2.0, 0.5])


def _loss(rows: list[int], norm: str, **totals: float) -> float:
    """The pg loss of ``rows`` of the mini-batch (ρ = 1, so each token's loss is −A) with the given weights."""
    mask = MASK[rows]
    w = loss_weights(mask, norm=norm, **totals)  # type: ignore[arg-type]
    logp = torch.zeros_like(mask)
    return float(clipped_policy_loss(logp, logp, ADV[rows], w, denom=1.0)[0])


@pytest.mark.parametrize(
    ("norm", "extra", "expected"),
    [
        ("token", {}, -(2 * 1.0 + 1 * -2.0 + 3 * 0.5) / 6),  # Σ −A over the tokens / 6 tokens = −0.25
        ("sequence", {}, -(1.0 - 2.0 + 0.5) / 3),  # mean of the row means: +0.1667
        ("trl-dapo", {"step_tokens": 8.0, "updates": 2}, -(2 * 1.0 + 1 * -2.0 + 3 * 0.5) * 2 / 8),  # −0.375
    ],
)
def test_rank_losses_with_the_mini_batch_counts_sum_to_the_one_process_loss(norm, extra, expected) -> None:
    totals = {"total_tokens": 6.0, "total_rows": 3.0, **extra}  # the whole mini-batch, summed over the ranks
    one = _loss([0, 1, 2], norm, **totals)
    assert one == pytest.approx(expected, abs=1e-7)
    for shares in ([[0, 2], [1]], [[0], [1], [2]], [[1], [0, 2], []]):  # 2 ranks, 3 ranks, 3 with one empty
        ranks = [_loss(s, norm, **totals) if s else 0.0 for s in shares]
        assert sum(ranks) == pytest.approx(expected, abs=1e-7), shares
    # normalising each rank by its own counts instead would not be the 1-process loss
    own = _loss([0, 2], norm, total_tokens=5.0, total_rows=2.0, **extra) + _loss(
        [1], norm, total_tokens=1.0, total_rows=1.0, **extra
    )
    if norm != "trl-dapo":  # trl-dapo's weight is the step's: the same on every rank by construction
        assert own != pytest.approx(expected, abs=1e-3)
