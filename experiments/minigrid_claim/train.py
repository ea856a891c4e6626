"""GRPO on MiniGrid with a small torch policy, using the LLM trainer's own pieces.

Imported, not copied: the group advantage (:func:`xtree_gym.agents.grpo.advantages.grouped_advantages`),
Eq. 3 (:func:`xtree_gym.rewards.group_rewards`, whose λ_g is :func:`xtree_gym.rewards.lambda_g`),
the per-episode bonus with the nesting rule (:class:`xtree_gym.wrappers.reward.XTreeBonus` in
``record`` mode, i.e. :func:`xtree_gym.rewards.sequence_bonus` streamed) and the clipped policy
loss (:func:`xtree_gym.agents.grpo.losses.clipped_policy_loss`). One update: ``groups`` tasks (env
seeds) x ``n`` rollouts each, every rollout run to its end; rewards per group by Eq. 3;
advantages per group; ``epochs`` passes of the clipped loss over the batch.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from xtree_gym.agents.grpo.advantages import grouped_advantages
from xtree_gym.agents.grpo.losses import clipped_policy_loss
from xtree_gym.agents.grpo.remine import NO_BONUS, SelfMined, self_mine
from xtree_gym.corpus import Step, Trajectory
from xtree_gym.mining.tree import XTree
from xtree_gym.rewards import lambda_g, sequence_bonus
from xtree_gym.rewards.contrastive import NodeValueBonus
from xtree_gym.rewards.modes import AUTO_MODE, CONTRASTIVE_MODES, max_episode_bonus, shaped_group_rewards
from xtree_gym.wrappers.discrete import xtree_discrete

from .config import ARM_SPECS, SUBGOALS
from .controls import subgoal_bonus

N_TYPES, N_STATES, N_DIRS = 11, 3, 4  # MiniGrid's object-type and door-state indices, agent directions


@dataclass(frozen=True)
class RunSpec:
    """One training run: an arm, a group size, a seed, and the sizes it runs at."""

    arm: str
    """One of :data:`.config.ARM_SPECS`: ``outcome`` (R_out only) or a bonus source with a bonus mode."""
    n: int
    """GRPO group size: rollouts per task."""
    seed: int
    """Seeds the policy's initial weights, its sampling and the training env seeds."""
    env_id: str
    """Gymnasium id of the MiniGrid env."""
    max_steps: int
    """Episode step limit (the env's truncation)."""
    batch_episodes: int
    """Episodes per update (``batch_episodes / n`` groups): the same for every n."""
    updates: int
    """Policy updates per run."""
    lr: float
    """Adam learning rate."""
    epochs: int
    """Passes of the clipped loss over each batch (old log-probs fixed at rollout time)."""
    hidden: int
    """Width of the policy MLP's two hidden layers."""
    lambda0: float
    """Eq. 3 λ0."""
    w_ref: float
    """Eq. 3 w_ref: the group win rate at which the bonus weight reaches 0."""
    eval_episodes: int
    """Held-out episodes (env seeds from 20_000, or ``eval_seeds``) sampled from the final policy."""
    bonus_margin: float = 0.09
    """Bonus mode ``normalized``: most a bonus-only episode earns."""
    anneal_end: float = 1.0
    """Bonus mode ``annealed``: fraction of the run at which the weight reaches 0."""
    max_bonus: float = 0.0
    """Bonus mode ``normalized``: the tree's largest reachable Σ b_v (0 for the in-loop tree: its own)."""
    subgoal_value: float = 0.0
    """Arm ``subgoal``: bonus per hand-named subgoal reached."""
    subgoals: tuple[str, ...] = SUBGOALS
    """Arm ``subgoal``: the env's hand-named subgoal tokens (each paid once per episode)."""
    remine_every: int = 4
    """Arms ``remine``, ``self_mined``: updates between re-minings."""
    remine_buffer: int = 256
    """Arms ``remine``, ``self_mined``: FIFO of own episodes mined."""
    miner: tuple[tuple[str, Any], ...] = ()
    """Arms ``remine``, ``self_mined``: MinerConfig fields (as pairs, so the spec stays hashable)."""
    train_seeds: tuple[int, ...] = ()
    """Env seeds training tasks are drawn from (empty: 0..9999)."""
    eval_seeds: tuple[int, ...] = ()
    """Held-out env seeds (empty: 20_000, 20_001, …)."""


_TYPE_IDX: dict[str, int] = {"unseen": 0, "empty": 1, "wall": 2, "floor": 3, "door": 4, "key": 5, "ball": 6,
                             "box": 7, "goal": 8, "lava": 9, "agent": 10}  # minigrid's OBJECT_TO_IDX  # fmt: skip
_EYE_T = np.eye(N_TYPES, dtype=np.float32)
_EYE_S = np.eye(N_STATES, dtype=np.float32)
_EYE_D = np.eye(N_DIRS, dtype=np.float32)


def full_view(self: Any) -> dict[str, Any]:
    """The whole grid around the agent, egocentric: installed as the env's ``gen_obs``.

    Each cell holds minigrid's object-type index and state index (what ``FullyObsWrapper``
    encodes, colour left out), padded, cropped to a ``(2R+1)²`` window centred on the agent
    (R = grid size − 1, so the window always holds the whole grid) and rotated so the agent faces
    the same way in every view. No occlusion. Why not MiniGrid's own 7x7 view: its Python
    slice/rotate/visibility pass is three quarters of a step's time; this is one pass over the cells.
    """
    g = self.grid
    cells = g.grid  # row-major: index y * width + x
    codes = [(1, 0) if c is None else (_TYPE_IDX[c.type], _state(c)) for c in cells]
    img = np.array(codes, dtype=np.int64).reshape(g.height, g.width, 2).transpose(1, 0, 2)  # [x, y, ch]
    r = max(g.width, g.height) - 1
    pad = np.zeros((g.width + 2 * r, g.height + 2 * r, 2), dtype=np.int64)  # type 0 ("unseen") outside
    pad[r : r + g.width, r : r + g.height] = img
    x, y = int(self.agent_pos[0]), int(self.agent_pos[1])
    crop = np.rot90(pad[x : x + 2 * r + 1, y : y + 2 * r + 1], k=-int(self.agent_dir), axes=(0, 1))
    return {"image": crop, "direction": self.agent_dir, "carrying": self.carrying is not None}


def _state(cell: Any) -> int:
    """MiniGrid's state index of a cell: door open 0, closed 1, locked 2; anything else 0."""
    if cell is None or cell.type != "door":
        return 0
    return 2 if cell.is_locked else (0 if cell.is_open else 1)


def obs_dim(env: gym.Env) -> int:
    """Length of :func:`encode`'s vector for ``env``'s grid."""
    u: Any = env.unwrapped
    side = 2 * (max(int(u.width), int(u.height)) - 1) + 1
    return side * side * (N_TYPES + N_STATES) + N_DIRS + 1


def encode(obs: dict[str, Any]) -> np.ndarray:
    """:func:`full_view` as one-hot object types and states per cell, the direction, the carry flag."""
    img = obs["image"]
    t = _EYE_T[img[..., 0]]  # MiniGrid indices are in range: types 0..10, states 0..2
    s = _EYE_S[img[..., 1]]
    d = _EYE_D[int(obs["direction"]) % N_DIRS]
    return np.concatenate([t.reshape(-1), s.reshape(-1), d, [float(obs["carrying"])]]).astype(np.float32)


def make_policy(in_dim: int, hidden: int, n_actions: int) -> torch.nn.Module:
    """A two-hidden-layer tanh MLP from the encoded grid to action logits."""
    return torch.nn.Sequential(
        torch.nn.Linear(in_dim, hidden),
        torch.nn.Tanh(),
        torch.nn.Linear(hidden, hidden),
        torch.nn.Tanh(),
        torch.nn.Linear(hidden, n_actions),
    )


@dataclass
class Episode:
    """One rollout's record: what the loss needs and what the report counts."""

    obs: list[np.ndarray]
    actions: list[int]
    logps: list[float]
    reward: float = 0.0
    won: bool = False
    bonus: float = 0.0
    tokens: list[str] = field(default_factory=list)
    terminated: bool = False
    """Ended in a terminal state (not at the step limit): bonus mode ``potential`` zeroes Φ there."""


def node_values(spec: RunSpec, tree: XTree | None) -> NodeValueBonus | None:
    """The contrastive b_v of an arm whose mode uses them (the tree carries them in ``extra["node_values"]``)."""
    if tree is None or ARM_SPECS[spec.arm][1] not in CONTRASTIVE_MODES:
        return None
    return NodeValueBonus(dict(tree.extra["node_values"]))


def make_envs(spec: RunSpec, tree: XTree | None, count: int) -> list[gym.Env]:
    """``count`` envs with tokens, and the bonus ledger (``record`` mode) when the arm has a tree."""
    import types

    bonus: dict[str, Any] = (
        {"weight": "record", "lambda0": spec.lambda0, "w_ref": spec.w_ref} if tree is not None else {}
    )
    values = node_values(spec, tree)
    if values is not None:  # contrastive b_v, nesting rule on: a nested family earns its largest member
        bonus.update(bonus=values, nesting=True)
    out = []
    for _ in range(count):
        base = gym.make(spec.env_id, max_steps=spec.max_steps, disable_env_checker=True)
        base.unwrapped.gen_obs = types.MethodType(full_view, base.unwrapped)  # type: ignore[attr-defined]
        out.append(xtree_discrete(base, tree, **bonus))
    return out


@torch.no_grad()
def rollout(
    policy: torch.nn.Module, envs: list[gym.Env], seeds: list[int], gen: torch.Generator
) -> list[Episode]:
    """Run one episode per env (env i reset with ``seeds[i]``) in lockstep, sampling from ``policy``."""
    eps = [Episode([], [], []) for _ in envs]
    cur = [encode(env.reset(seed=s)[0]) for env, s in zip(envs, seeds)]
    live = list(range(len(envs)))
    while live:
        x = torch.from_numpy(np.stack([cur[i] for i in live]))
        logp = torch.log_softmax(policy(x), dim=-1)
        acts = torch.multinomial(logp.exp(), 1, generator=gen).squeeze(1)
        lp = logp.gather(1, acts[:, None]).squeeze(1)
        still = []
        for j, i in enumerate(live):
            a = int(acts[j])
            e = eps[i]
            e.obs.append(cur[i])
            e.actions.append(a)
            e.logps.append(float(lp[j]))
            o, r, term, trunc, info = envs[i].step(a)
            e.tokens.append(str(info["xtree"]["token"]))
            if term or trunc:
                e.reward, e.won, e.terminated = float(r), float(r) > 0, bool(term)
                e.bonus = float(info["xtree"].get("episode_bonus", 0.0))
            else:
                cur[i] = encode(o)
                still.append(i)
        live = still
    return eps


def update(
    policy: torch.nn.Module, opt: torch.optim.Optimizer, eps: list[Episode], adv: list[float], epochs: int
) -> float:
    """``epochs`` steps of the clipped loss on one batch; returns the last loss value."""
    t_max = max(len(e.actions) for e in eps)
    b = len(eps)
    obs = np.zeros((b, t_max, len(eps[0].obs[0])), dtype=np.float32)
    acts = torch.zeros(b, t_max, dtype=torch.long)
    old = torch.zeros(b, t_max)
    mask = torch.zeros(b, t_max)
    for i, e in enumerate(eps):
        k = len(e.actions)
        obs[i, :k] = np.stack(e.obs)
        acts[i, :k] = torch.tensor(e.actions)
        old[i, :k] = torch.tensor(e.logps)
        mask[i, :k] = 1.0
    x = torch.from_numpy(obs)
    a = torch.tensor(adv, dtype=torch.float32)
    loss_value = 0.0
    for _ in range(epochs):
        logp = torch.log_softmax(policy(x), dim=-1).gather(-1, acts[..., None]).squeeze(-1)
        loss, _ = clipped_policy_loss(logp, old, a, mask)
        opt.zero_grad()
        loss.backward()
        opt.step()
        loss_value = float(loss.detach())
    return loss_value


def batch_rewards(
    eps: list[Episode],
    n: int,
    arm: str,
    lambda0: float,
    w_ref: float,
    mode: str | None = None,
    **design: float,
) -> tuple[list[float], list[float]]:
    """Each group of ``n`` consecutive episodes rewarded by the arm's bonus mode; returns (rewards, weight per group).

    The outcome-only arm uses R_out alone; its λ_g is still reported (what Eq. 3 would weigh).
    Other arms go through :func:`xtree_gym.rewards.modes.shaped_group_rewards` (``eq3``: Eq. 3 itself)
    with ``design`` its parameters (``max_bonus``, ``margin``, ``best_win_rate``, ``progress``). ``mode``
    overrides the arm's (``self_mined``: the mode picked at the last re-mine; ``none``: R_out alone).

    Example:
        >>> e = [Episode([], [], [], r, r > 0, b) for r, b in [(0.0, 2.0), (0.0, 0.0), (0.9, 1.0), (0.0, 3.0)]]
        >>> batch_rewards(e, 2, "xtree", 0.75, 0.4)
        ([1.5, 0.0, 0.9, 0.0], [0.75, 0.0])
        >>> batch_rewards(e, 2, "outcome", 0.75, 0.4)[0]
        [0.0, 0.0, 0.9, 0.0]
        >>> batch_rewards(e, 2, "xtree_gated", 0.75, 0.4)
        ([1.5, 0.0, 0.9, 0.0], [0.75, 0.0])
    """
    mode = mode or ARM_SPECS[arm][1]
    rewards: list[float] = []
    lams: list[float] = []
    for g in range(0, len(eps), n):
        grp = eps[g : g + n]
        out = [e.reward for e in grp]
        won = [e.won for e in grp]
        if arm == "outcome" or mode in (NO_BONUS, AUTO_MODE):
            lams.append(lambda_g(sum(won) / len(grp), lambda0, w_ref))
            rewards.extend(out)
            continue
        ends = {"terminated": [e.terminated for e in grp]} if mode == "potential" else {}
        r, lam = shaped_group_rewards(out, [e.bonus for e in grp], won, mode=mode, lambda0=lambda0, w_ref=w_ref,
                                      **design, **ends)  # fmt: skip
        rewards.extend(r)
        lams.append(lam)
    return rewards, lams


def evaluate(policy: torch.nn.Module, spec: RunSpec, gen: torch.Generator) -> float:
    """Success rate of the (sampled) policy on held-out env seeds 20_000 …"""
    envs = make_envs(spec, None, min(spec.eval_episodes, 32))
    wins = 0
    for start in range(0, spec.eval_episodes, len(envs)):
        k = min(len(envs), spec.eval_episodes - start)
        seeds = list(spec.eval_seeds[start : start + k]) or [20_000 + start + i for i in range(k)]
        eps = rollout(policy, envs[:k], seeds, gen)
        wins += sum(e.won for e in eps)
    return wins / spec.eval_episodes


class InLoopTree:
    """Arms ``remine`` and ``self_mined``: the tree mined every ``remine_every`` updates from a FIFO of the agent's
    own episodes. Nothing privileged goes in: only the policy's rollouts, successes and failures both kept.

    ``remine``: no tree (no bonus) until the buffer holds a success; Eq. 3 with the depth design.
    ``self_mined``: :func:`xtree_gym.agents.grpo.remine.self_mine` (the product's rule, not a copy): the tree
    valued on the same buffer, the mode re-picked by ``auto``'s rule (both labels ``contrastive_gated``,
    successes only ``eq3``, no success ``none``: R_out alone); :attr:`log` keeps each re-mine's record.
    """

    def __init__(self, spec: RunSpec) -> None:
        from xtree_gym.mining.config import MinerConfig

        self.spec = spec
        self.config = MinerConfig(**dict(spec.miner))
        self.buffer: deque[Trajectory] = deque(maxlen=spec.remine_buffer)
        self.tree: XTree | None = None
        self.mined: SelfMined | None = None
        self.log: list[dict[str, Any]] = []

    def observe(self, eps: list[Episode], update_index: int) -> None:
        """Add the batch; re-mine after every ``remine_every``-th update."""
        from xtree_gym.mining import mine

        for k, e in enumerate(eps):
            steps = [Step(t, token=t) for t in e.tokens]
            self.buffer.append(Trajectory(f"u{update_index}-{k}", steps, e.won, env=self.spec.env_id,
                                          task=self.spec.env_id, reward=e.reward))  # fmt: skip
        if (update_index + 1) % self.spec.remine_every:
            return
        if self.spec.arm == "self_mined":
            self.mined = self_mine(list(self.buffer), self.config, name="minigrid-self-mined")
            self.tree = self.mined.tree
            self.log.append({"update": update_index + 1, **self.mined.record()})
        elif any(t.success for t in self.buffer):
            self.tree = mine(list(self.buffer), self.config, name="minigrid-in-loop")

    @property
    def mode(self) -> str | None:
        """The bonus mode now (``self_mined``: ``none`` until the first re-mine); None: the arm's own."""
        if self.spec.arm != "self_mined":
            return None
        return self.mined.mode if self.mined is not None else NO_BONUS

    def bonus(self, tokens: list[str]) -> float:
        """Σ b_v of one episode under the current tree (0 without one, or in mode ``none``)."""
        if self.tree is None or self.mode == NO_BONUS:
            return 0.0
        values = self.mined.values if self.mined is not None else None
        if values is None:
            return sequence_bonus(self.tree, tokens).total
        return sequence_bonus(self.tree, tokens, NodeValueBonus(values), nesting=True).total


def post_hoc_bonus(spec: RunSpec, eps: list[Episode], loop: InLoopTree | None) -> None:
    """Σ b_v of the arms whose bonus is not on the env: ``subgoal`` and ``remine`` (in place)."""
    for e in eps:
        if spec.arm == "subgoal":
            e.bonus = subgoal_bonus(e.tokens, spec.subgoal_value, spec.subgoals)
        elif loop is not None:
            e.bonus = loop.bonus(e.tokens)


def _design(
    spec: RunSpec, u: int, best: float, loop: InLoopTree | None, values: NodeValueBonus | None = None
) -> dict[str, float]:
    """The bonus mode's parameters at update ``u`` (Eq. 3 needs none)."""
    mode = ARM_SPECS[spec.arm][1]
    if mode in ("contrastive_normalized", "potential") and values is not None:
        return {"max_bonus": values.total(), "margin": spec.bonus_margin}
    if mode == "normalized":
        cap = spec.max_bonus if loop is None or loop.tree is None else max_episode_bonus(loop.tree)
        return {"max_bonus": cap, "margin": spec.bonus_margin}
    if mode == "annealed":
        return {"best_win_rate": best, "progress": u / spec.updates, "anneal_end": spec.anneal_end}
    return {}


def train_run(spec: RunSpec, tree: XTree | None) -> dict[str, Any]:
    """One run; returns its per-update curves and its final numbers."""
    torch.manual_seed(spec.seed)
    gen = torch.Generator().manual_seed(spec.seed)
    envs = make_envs(spec, tree, spec.batch_episodes)
    policy = make_policy(obs_dim(envs[0]), spec.hidden, int(envs[0].action_space.n))  # type: ignore[attr-defined]
    opt = torch.optim.Adam(policy.parameters(), lr=spec.lr)
    groups = spec.batch_episodes // spec.n
    task_rng = np.random.default_rng(1_000_003 * spec.seed + 7)
    loop = InLoopTree(spec) if spec.arm in ("remine", "self_mined") else None
    values = node_values(spec, tree)
    curve: dict[str, list[float]] = {
        k: [] for k in ("success", "lambda_g", "bonus", "all_fail", "no_signal", "length", "tree_nodes")
    }
    best = 0.0  # best moving success so far (bonus mode ``annealed``)
    t0 = time.perf_counter()
    for u in range(spec.updates):
        if spec.train_seeds:
            tasks = task_rng.choice(np.asarray(spec.train_seeds), size=groups)
        else:
            tasks = task_rng.integers(
                0, 10_000, size=groups
            )  # env seeds below the demo (10_000) and eval ranges
        seeds = [int(s) for s in tasks for _ in range(spec.n)]
        eps = rollout(policy, envs, seeds, gen)
        post_hoc_bonus(spec, eps, loop)
        rewards, lams = batch_rewards(eps, spec.n, spec.arm, spec.lambda0, spec.w_ref, loop.mode if loop else None,
                                      **_design(spec, u, best, loop, values))  # fmt: skip
        adv = grouped_advantages(rewards, [i // spec.n for i in range(len(eps))])
        update(policy, opt, eps, adv, spec.epochs)
        wins = [e.won for e in eps]
        per_group = [wins[g : g + spec.n] for g in range(0, len(eps), spec.n)]
        curve["success"].append(sum(wins) / len(eps))
        best = max(best, float(np.mean(curve["success"][-5:])))
        curve["lambda_g"].append(float(np.mean(lams)))
        curve["bonus"].append(float(np.mean([e.bonus for e in eps])))
        curve["all_fail"].append(sum(not any(g) for g in per_group) / groups)
        curve["no_signal"].append(
            sum(all(abs(a) < 1e-12 for a in adv[g : g + spec.n]) for g in range(0, len(eps), spec.n)) / groups
        )
        curve["length"].append(float(np.mean([len(e.actions) for e in eps])))
        if loop is not None:
            loop.observe(eps, u)
        curve["tree_nodes"].append(
            float(len(loop.tree)) if loop is not None and loop.tree is not None else 0.0
        )
    eval_success = evaluate(policy, spec, gen)
    return {
        "arm": spec.arm,
        "n": spec.n,
        "seed": spec.seed,
        "episodes_per_update": spec.batch_episodes,
        "curve": curve,
        "eval_success": eval_success,
        "seconds": time.perf_counter() - t0,
        **({"remines": loop.log} if loop is not None and loop.log else {}),
    }
