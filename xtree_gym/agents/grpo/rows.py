"""Training rows from episodes, token-budget micro-batches, and their padded tensors.

A *row* is one token sequence the model reads in a single forward pass, with a mask over the
tokens it is trained on (the model's own completions) and one advantage. Two ways to cut rows:

* ``turn`` (default): one row per turn, ``prompt_ids + completion_ids``, exactly as generated;
* ``episode``: one row per episode, each turn's completion masked inside one sequence. It is only
  exact when every turn's prompt extends the previous turn's prompt + completion (a chat that
  keeps its whole history); otherwise the completions would be scored in a context the policy
  never saw, so it is refused with a clear error.

Token ids are used as recorded (never re-tokenized). Pure functions; the trainer, SFT and offline
node RL all build their batches here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from ...errors import ConfigError
from ..types import Episode


@dataclass
class Row:
    """One training sequence.

    ``target[i]`` says whether ``input_ids[i]`` is a trained token (predicted from ``input_ids[:i]``);
    ``old_logprobs[i]`` is its generation-time logprob (0.0 where not a target).
    """

    input_ids: list[int]
    target: list[bool]
    old_logprobs: list[float]
    advantage: float = 0.0
    episode: int = 0
    """Index of the episode in the step's list (for OPSD retrieval and bookkeeping)."""
    turn: int = 0
    """First turn of the episode this row covers."""
    weight: float = 1.0
    """Free per-row weight (SFT / offline RL use it; GRPO leaves 1.0)."""
    teacher_prefix: list[int] = field(default_factory=list)
    """Ids prepended for the OPSD teacher's forward pass (the retrieved card)."""
    key: tuple[int, ...] = ()
    """The row's place in the step at any world size, ``(task, member, turn)`` (:func:`place_rows`):
    the step's mini-batches are cut from the rows in this order (``grpo/updates.py``)."""

    @property
    def n_targets(self) -> int:
        return sum(self.target)

    def __len__(self) -> int:
        return len(self.input_ids)


def turn_rows(episodes: Sequence[Episode], advantages: Sequence[float]) -> list[Row]:
    """One row per turn with a non-empty completion; the episode's advantage on every token.

    Example:
        >>> from xtree_gym.agents.types import Turn
        >>> ep = Episode("e", "env", "t", "g", 0, 0, 0, turns=[Turn([1, 2], [3, 4], [-0.5, -0.25], "", None, "")])
        >>> r = turn_rows([ep], [1.5])[0]
        >>> r.input_ids, r.target, r.old_logprobs, r.advantage
        ([1, 2, 3, 4], [False, False, True, True], [0.0, 0.0, -0.5, -0.25], 1.5)
    """
    _check_lengths(episodes, advantages)
    rows = []
    for i, (ep, adv) in enumerate(zip(episodes, advantages)):
        for k, t in enumerate(ep.turns):
            if not t.completion_ids:
                continue
            lps = _aligned_logprobs(t.logprobs, len(t.completion_ids), ep.id, k)
            rows.append(
                Row(
                    input_ids=list(t.prompt_ids) + list(t.completion_ids),
                    target=[False] * len(t.prompt_ids) + [True] * len(t.completion_ids),
                    old_logprobs=[0.0] * len(t.prompt_ids) + lps,
                    advantage=float(adv),
                    episode=i,
                    turn=k,
                )
            )
    return rows


def episode_rows(episodes: Sequence[Episode], advantages: Sequence[float]) -> list[Row]:
    """One row per episode: turn k's prompt must start with everything before it.

    Example:
        >>> from xtree_gym.agents.types import Turn
        >>> t0 = Turn([1, 2], [3], [-0.5], "", None, "")
        >>> t1 = Turn([1, 2, 3, 9], [4, 5], [-0.1, -0.2], "", None, "")  # history kept: extends
        >>> r = episode_rows([Episode("e", "env", "t", "g", 0, 0, 0, turns=[t0, t1])], [2.0])[0]
        >>> r.input_ids, r.target
        ([1, 2, 3, 9, 4, 5], [False, False, True, False, True, True])
    """
    _check_lengths(episodes, advantages)
    rows = []
    for i, (ep, adv) in enumerate(zip(episodes, advantages)):
        ids: list[int] = []
        target: list[bool] = []
        lps: list[float] = []
        for k, t in enumerate(ep.turns):
            prompt = list(t.prompt_ids)
            if prompt[: len(ids)] != ids:
                raise ConfigError(
                    f"episode {ep.id!r}, turn {k}: the prompt does not extend the previous turns",
                    fix="this harness re-renders its history each turn: use rows 'turn' (the default)",
                )
            new = prompt[len(ids) :]
            ids += new + list(t.completion_ids)
            target += [False] * len(new) + [True] * len(t.completion_ids)
            lps += [0.0] * len(new) + _aligned_logprobs(t.logprobs, len(t.completion_ids), ep.id, k)
        if any(target):
            rows.append(Row(ids, target, lps, advantage=float(adv), episode=i))
    return rows


def make_rows(episodes: Sequence[Episode], advantages: Sequence[float], mode: str = "turn") -> list[Row]:
    """:func:`turn_rows` or :func:`episode_rows` by name."""
    if mode == "turn":
        return turn_rows(episodes, advantages)
    if mode == "episode":
        return episode_rows(episodes, advantages)
    raise ConfigError(f"rows = {mode!r}", fix="use 'turn' or 'episode'")


def place_rows(rows: Sequence[Row], episodes: Sequence[Episode], rank: int, world: int) -> None:
    """Set each row's ``key`` to ``(task, member, turn)``, ``task`` its episode's task index in the step.

    Rank ``rank`` of ``world`` plays the step's tasks ``rank, rank + world, …`` (``rank_share``), so
    its group ``g`` is the step's task ``rank + g·world``: the same key for the same row at any
    world size.

    Example:
        >>> ep = Episode("e", "env", "t", "g", 0, group=1, member=3)
        >>> rs = [Row([1, 2], [False, True], [0.0, 0.0], episode=0, turn=2)]
        >>> place_rows(rs, [ep], rank=1, world=2); rs[0].key  # the step's task 1 + 1·2 = 3
        (3, 3, 2)
    """
    for r in rows:
        ep = episodes[r.episode]
        r.key = (rank + ep.group * world, ep.member, r.turn)


def _check_lengths(episodes: Sequence[Episode], advantages: Sequence[float]) -> None:
    if len(episodes) != len(advantages):
        raise ValueError(f"{len(episodes)} episodes but {len(advantages)} advantages")


def _aligned_logprobs(logprobs: Sequence[float], n: int, episode: str, turn: int) -> list[float]:
    if len(logprobs) == n:
        return [float(x) for x in logprobs]
    if not logprobs:  # scripted / oracle backends sample nothing: no generation-time logprobs
        return [0.0] * n
    raise ConfigError(
        f"episode {episode!r}, turn {turn}: {len(logprobs)} logprobs for {n} completion tokens",
        fix="record the generator's logprobs one per completion id",
    )


def micro_batches(rows: Sequence[Row], token_budget: int, *, prefix_len: int = 0) -> list[list[int]]:
    """Split row indices, in order, into micro-batches of ``rows × padded length <= token_budget``.

    ``prefix_len`` is added to every row's length (the OPSD teacher prefix, read in a second pass).
    A row longer than the budget alone gets a micro-batch of its own.

    Example:
        >>> rs = [Row([0] * k, [True] * k, [0.0] * k) for k in (3, 3, 5, 2)]
        >>> micro_batches(rs, 6), micro_batches(rs, 10)
        ([[0, 1], [2], [3]], [[0, 1], [2, 3]])
    """
    if token_budget < 1:
        raise ConfigError(f"micro-batch token budget = {token_budget}", fix="use a positive number")
    batches: list[list[int]] = []
    current: list[int] = []
    longest = 0
    for i, row in enumerate(rows):
        length = len(row) + prefix_len
        if current and (len(current) + 1) * max(longest, length) > token_budget:
            batches.append(current)
            current, longest = [], 0
        current.append(i)
        longest = max(longest, length)
    if current:
        batches.append(current)
    return batches


@dataclass
class Batch:
    """Right-padded tensors of some rows; position ``t`` of the ``[B, L-1]`` ones predicts ``input_ids[:, t+1]``."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    labels: torch.Tensor
    mask: torch.Tensor
    """``[B, L-1]`` float: 1.0 where ``labels`` is a trained token."""
    old_logprobs: torch.Tensor
    advantages: torch.Tensor
    """``[B]``."""
    weights: torch.Tensor
    """``[B]`` per-row weights."""


def collate(
    rows: Sequence[Row], pad_id: int, *, prefixes: bool = False, device: str | torch.device = "cpu"
) -> Batch:
    """Pad ``rows`` to one length (right padding); ``prefixes=True`` prepends each row's teacher prefix.

    Example:
        >>> b = collate([Row([5, 6, 7], [False, True, True], [0, -1, -2], 1.0), Row([5, 8], [False, True], [0, -3])], 0)
        >>> b.input_ids.tolist(), b.mask.tolist(), b.labels.tolist()
        ([[5, 6, 7], [5, 8, 0]], [[1.0, 1.0], [1.0, 0.0]], [[6, 7], [8, 0]])
        >>> b.old_logprobs.tolist(), b.advantages.tolist()
        ([[-1.0, -2.0], [-3.0, 0.0]], [1.0, 0.0])
        >>> collate([Row([5, 6], [False, True], [0, -1], teacher_prefix=[1, 2])], 0, prefixes=True).mask.tolist()
        [[0.0, 0.0, 1.0]]
    """
    seqs, targets, lps = [], [], []
    for r in rows:
        pre = list(r.teacher_prefix) if prefixes else []
        seqs.append(pre + list(r.input_ids))
        targets.append([False] * len(pre) + list(r.target))
        lps.append([0.0] * len(pre) + [float(x) for x in r.old_logprobs])
    length = max(len(s) for s in seqs)
    ids = torch.full((len(rows), length), pad_id, dtype=torch.long)
    attn = torch.zeros((len(rows), length), dtype=torch.long)
    tgt = torch.zeros((len(rows), length), dtype=torch.float32)
    old = torch.zeros((len(rows), length), dtype=torch.float32)
    for b, (s, t, lp) in enumerate(zip(seqs, targets, lps)):
        ids[b, : len(s)] = torch.tensor(s, dtype=torch.long)
        attn[b, : len(s)] = 1
        tgt[b, : len(t)] = torch.tensor(t, dtype=torch.float32)
        old[b, : len(lp)] = torch.tensor(lp, dtype=torch.float32)
    return Batch(
        input_ids=ids.to(device),
        attention_mask=attn.to(device),
        labels=ids[:, 1:].to(device),
        mask=tgt[:, 1:].to(device),
        old_logprobs=old[:, 1:].to(device),
        advantages=torch.tensor([r.advantage for r in rows], dtype=torch.float32, device=device),
        weights=torch.tensor([r.weight for r in rows], dtype=torch.float32, device=device),
    )


def teacher_to_student(rows: Sequence[Row], teacher: torch.Tensor) -> torch.Tensor:
    """Drop each row's prefix positions from a teacher ``[B, L'-1]`` tensor, aligning it to the student's.

    Example:
        >>> rs = [Row([5, 6], [False, True], [0, 0], teacher_prefix=[1]), Row([5, 6, 7], [False, True, True], [0, 0, 0])]
        >>> teacher_to_student(rs, torch.tensor([[9.0, 1.0, 0.0], [2.0, 3.0, 0.0]])).tolist()
        [[1.0, 0.0], [2.0, 3.0]]
    """
    length = max(len(r) for r in rows) - 1
    out = torch.zeros((len(rows), length), dtype=teacher.dtype, device=teacher.device)
    for b, r in enumerate(rows):
        k = len(r.teacher_prefix)
        n = len(r) - 1
        out[b, :n] = teacher[b, k : k + n]
    return out
