"""The claim check's configuration: arms, env presets, the ``--smoke`` / ``--full`` / ``--grid`` sizes.

Its own module so that :mod:`.run` and :mod:`.report` both import it and neither imports the other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym

from xtree_gym.errors import ConfigError
from xtree_gym.rewards.modes import BONUS_MODES, check_bonus_mode

ARM_SPECS: dict[str, tuple[str | None, str]] = {
    "outcome": (None, "eq3"),
    "xtree": ("xtree", "eq3"),
    "xtree_normalized": ("xtree", "normalized"),
    "xtree_gated": ("xtree", "gated"),
    "xtree_annealed": ("xtree", "annealed"),
    "xtree_contrastive_gated": ("xtree", "contrastive_gated"),
    "xtree_contrastive_normalized": ("xtree", "contrastive_normalized"),
    "xtree_potential": ("xtree", "potential"),
    "random_tree": ("random_tree", "eq3"),
    "random_tree_contrastive_gated": ("random_tree", "contrastive_gated"),
    "subgoal": ("subgoal", "eq3"),
    "remine": ("remine", "eq3"),
    "self_mined": ("self_mined", "auto"),
}
"""arm -> (bonus source, bonus mode). Sources: the mined X-Tree, a random tree drawn per seed
(matched node count and length histogram), the env's hand-named subgoals, the in-loop tree mined
from the agent's own rollouts; modes: :data:`xtree_gym.rewards.modes.BONUS_MODES`. ``self_mined``: the tree and its
contrastive values from the agent's own episodes only (:func:`xtree_gym.agents.grpo.remine.self_mine`, the rule of
``xtree train rlvr --remine-every K`` without ``--tree``), its mode re-picked by ``auto``'s rule at each re-mine."""
ISSUE34_ARMS = (
    "outcome", "xtree_gated", "xtree_contrastive_gated", "xtree_contrastive_normalized", "xtree_potential",
    "random_tree", "random_tree_contrastive_gated", "subgoal",
)  # fmt: skip
"""Issue 34's grid: outcome, the best issue-23 design, the tree-derived designs (contrastive node values:
each node of the arm's tree weighed by how it separates the corpus's successes from its failures), both
random-tree controls, the env's hand-named subgoals."""
ARMS = tuple(ARM_SPECS)
LEGACY_ARMS = ("outcome", "xtree", "random_tree")
"""The three arms of the first claim check (``--full``)."""
ENVS: dict[str, tuple[str, int]] = {
    "doorkey5": ("MiniGrid-DoorKey-5x5-v0", 100),
    "doorkey6": ("MiniGrid-DoorKey-6x6-v0", 150),  # between 5x5 (off the floor) and 8x8 (at it)
    "doorkey8": ("MiniGrid-DoorKey-8x8-v0", 200),
    "unlock": ("MiniGrid-Unlock-v0", 100),
    "keycorridor": ("MiniGrid-KeyCorridorS3R1-v0", 100),
    "unlockpickup": ("MiniGrid-UnlockPickup-v0", 150),
    "multiroom": ("MiniGrid-MultiRoom-N2-S4-v0", 40),
    "redbluedoors": ("MiniGrid-RedBlueDoors-6x6-v0", 100),  # a task without keys: two doors, in order
    "keyinbox": ("XTreeClaim/KeyInBox-S5-v0", 100),  # the key hidden in a box: open it, take the key, unlock
}
"""``--env`` short names -> (Gymnasium id, max_steps). Random play (100 episodes, seeds 0..99) wins DoorKey-5x5
≈ 1 %, MultiRoom-N2-S4 3 %, and DoorKey-8x8, Unlock, KeyCorridorS3R1, UnlockPickup, RedBlueDoors-6x6 0 % at these
limits; KeyInBox-S5 1 % (seeds 0..99).

``XTreeClaim/KeyInBox-S5-v0`` is BabyAI-KeyInBox-v0 at ``room_size`` 5 on a 2 x 2 room grid (a 9 x 9 grid; only
the agent's room is reachable, 3 x 3 inside). The registered level is 22 x 22: the full-grid view would make a run
cost what MultiRoom's does (≈ 43 CPU-s), and the task is the same in the one room the agent can reach."""
KEYINBOX_ID = "XTreeClaim/KeyInBox-S5-v0"
if KEYINBOX_ID not in gym.registry:  # every module of the claim check imports this one: workers see it too
    gym.register(
        KEYINBOX_ID,
        entry_point="minigrid.envs.babyai.unlock:KeyInBox",
        kwargs={"room_size": 5, "num_rows": 2, "num_cols": 2},
    )
SUBGOALS = ("pickup<key>", "toggle<door>")
"""DoorKey's hand-named subgoals (the subgoal-shaping arm): each pays once per episode."""
SUBGOALS_BY_ENV: dict[str, tuple[tuple[str, ...], str]] = {
    "MiniGrid-DoorKey-5x5-v0": (SUBGOALS, "get the key, open the locked door; the goal is then a walk away"),
    "MiniGrid-DoorKey-6x6-v0": (SUBGOALS, "get the key, open the locked door; the goal is then a walk away"),
    "MiniGrid-DoorKey-8x8-v0": (SUBGOALS, "get the key, open the locked door; the goal is then a walk away"),
    "MiniGrid-Unlock-v0": (
        ("pickup<key>",),
        "get the key; opening the locked door with it is the task itself (the success step), not a subgoal",
    ),
    "MiniGrid-KeyCorridorS3R1-v0": (
        ("pickup<key>", "toggle<door>", "drop<empty>"),
        "get the key, open the locked room, put the key down (one hand: the ball cannot be picked up holding it;"
        " the token names the cell dropped onto, so a no-op drop with empty hands pays it too, once)",
    ),
    "MiniGrid-UnlockPickup-v0": (
        ("pickup<key>", "toggle<door>", "drop<empty>"),
        "get the key, open the locked room, put the key down (one hand: the box cannot be picked up holding it;"
        " the token names the cell dropped onto, so a no-op drop with empty hands pays it too, once)",
    ),
    "MiniGrid-RedBlueDoors-6x6-v0": (
        ("toggle<door>",),
        "open the red door; opening the blue one after it is the task itself (the success step). The token has"
        " no colour, so opening the blue door first pays it too, in an episode that ends there as a failure",
    ),
    KEYINBOX_ID: (
        ("toggle<box>", "pickup<key>"),
        "open the box (the key appears in its cell), take the key; opening the locked door with it is the task"
        " itself (the success step), not a subgoal",
    ),
    "MiniGrid-MultiRoom-N2-S4-v0": (
        ("toggle<door>", "forward<door>"),
        "open the door between the two rooms and walk through it; the goal is in the second room",
    ),
}
"""env id -> (hand-named subgoal tokens, the reason a domain expert names them). Written before any run."""
HELDOUT = ("seeds", "layouts")


@dataclass(frozen=True)
class ClaimConfig:
    """Everything the claim check runs at; ``--smoke``, ``--full`` and ``--grid`` are instances."""

    env_id: str = "MiniGrid-DoorKey-5x5-v0"
    """MiniGrid env: random play rarely wins it (≈1 % at 100 steps)."""
    max_steps: int = 100
    """Episode step limit."""
    group_sizes: tuple[int, ...] = (2, 4, 8, 16)
    """GRPO group sizes n (Table 3's grid)."""
    seeds: tuple[int, ...] = (0, 1, 2, 3, 4)
    """Training seeds per (arm, n)."""
    arms: tuple[str, ...] = LEGACY_ARMS
    """Which arms to run (:data:`ARM_SPECS`)."""
    batch_episodes: int = 16
    """Episodes per update, for every n (so n=2 has 8 groups, n=16 has 1)."""
    updates: int = 64
    """Updates per run: the run sees ``updates · batch_episodes`` episodes."""
    lr: float = 2e-3
    """Adam learning rate."""
    epochs: int = 4
    """Clipped-loss passes per batch (cheap next to the rollouts; the clip keeps them near the old policy)."""
    hidden: int = 64
    """Policy MLP width."""
    lambda0: float = 0.75
    """Eq. 3 λ0 (Table 7)."""
    w_ref: float = 0.4
    """Eq. 3 w_ref (ScienceWorld's value, Table 7; the depth b_v design and nesting rule go with it)."""
    eval_episodes: int = 64
    """Held-out episodes sampled from each final policy."""
    demo_episodes: int = 80
    """Demonstrations in the mining corpus."""
    demo_noise: tuple[float, ...] = (0.0, 0.3, 0.6, 1.0)
    """Random-action rates the demonstrations cycle through (1.0: pure random play, mostly failures)."""
    miner: dict[str, Any] = field(
        default_factory=lambda: {"cap": 24, "min_freq": 5, "max_len": 8, "eta": 0.5}
    )
    """MinerConfig fields for every tree (X-Tree, random trees, the in-loop tree)."""
    random_tree_draws: int = 20
    """``random_tree_mode`` ``closest``: seeded draws, the closest histogram wins; ``exact``: tries per seed."""
    random_tree_mode: str = "closest"
    """``closest`` (one draw for all seeds, the first claim check) or ``exact`` (a fresh draw per training
    seed with exactly the X-Tree's node count and length histogram, rejection-sampled, no other filter)."""
    heldout: str = "seeds"
    """``seeds``: train on env seeds 0..9999, evaluate on 20000.. (layouts may repeat); ``layouts``: the
    layouts are split by hash, training and evaluation seeds drawn on disjoint sides (checked distinct)."""
    train_pool: int = 2000
    """``heldout layouts``: env seeds 0..train_pool-1 scanned for training-side layouts."""
    bonus_margin: float = 0.09
    """``xtree_normalized``: most a bonus-only episode earns; below MiniGrid's smallest win (1 − 0.9 = 0.1)."""
    anneal_end: float = 1.0
    """``xtree_annealed``: fraction of the run at which the bonus weight reaches 0."""
    remine_every: int = 4
    """``remine``, ``self_mined``: updates between re-minings of the in-loop tree (``self_mined``: outcome only
    for the first ``remine_every`` updates, then the bonus of the tree mined from them)."""
    remine_buffer: int = 256
    """``remine``, ``self_mined``: FIFO of the agent's own episodes (successes and failures) the tree is mined
    from (the window: 256 = the last 16 updates at 16 episodes per update)."""
    window: int = 5
    """Updates in the moving average of training success (curves, final success, episodes-to-threshold)."""
    thresholds: tuple[float, ...] = (0.1, 0.3)
    """Fixed success levels for episodes-to-threshold."""
    workers: int = 2
    """Worker processes (at most 2: the machine is shared)."""
    subgoals: tuple[str, ...] = ()
    """``subgoal`` arm's tokens; empty: the env's own (:data:`SUBGOALS_BY_ENV`)."""

    def subgoal_tokens(self) -> tuple[str, ...]:
        """The subgoal arm's tokens: ``subgoals``, else the env's hand-named ones (DoorKey's for an unlisted env).

        Example:
            >>> ClaimConfig(env_id="MiniGrid-Unlock-v0").subgoal_tokens()
            ('pickup<key>',)
        """
        return self.subgoals or SUBGOALS_BY_ENV.get(self.env_id, (SUBGOALS, ""))[0]

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ClaimConfig:
        """The config a ``runs.jsonl`` line or ``results.json`` recorded (JSON lists back to tuples).

        Example:
            >>> ClaimConfig.from_dict({"seeds": [3, 4], "group_sizes": [2]}).seeds
            (3, 4)
        """
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in d.items()})

    def __post_init__(self) -> None:
        bad = [n for n in self.group_sizes if n < 2 or self.batch_episodes % n]
        if bad:
            raise ConfigError(
                f"group sizes {bad} do not divide batch_episodes = {self.batch_episodes} (or are < 2)",
                fix="use group sizes >= 2 that divide batch_episodes",
            )
        unknown = sorted(set(self.arms) - set(ARMS))
        if unknown:
            raise ConfigError(f"unknown arms {unknown}", fix=f"use some of {list(ARMS)}")
        if self.remine_every < 1 or self.remine_buffer < 1:
            raise ConfigError(
                f"remine_every = {self.remine_every}, remine_buffer = {self.remine_buffer}",
                fix="use >= 1 for both (updates between re-mines, episodes in the window)",
            )
        if not 1 <= self.workers <= 2:
            raise ConfigError(f"workers = {self.workers}", fix="use 1 or 2 (the machine is shared)")
        if "outcome" not in self.arms:
            raise ConfigError(
                "the outcome arm is missing", fix="it is what every arm is compared to; keep it"
            )
        if self.heldout not in HELDOUT or self.random_tree_mode not in ("closest", "exact"):
            raise ConfigError(
                f"heldout = {self.heldout!r}, random_tree_mode = {self.random_tree_mode!r}",
                fix="heldout: seeds | layouts; random_tree_mode: closest | exact",
            )
        if not self.seeds or len(set(self.seeds)) != len(self.seeds):
            raise ConfigError(f"seeds {list(self.seeds)}", fix="give distinct seeds, e.g. --seeds 100-114")
        check_bonus_mode(BONUS_MODES[0], self.bonus_margin, self.anneal_end)


SMOKE = ClaimConfig(
    max_steps=30, group_sizes=(2, 4), seeds=(0,), batch_episodes=8, updates=3, eval_episodes=8,
    demo_episodes=24, random_tree_draws=3, window=2, workers=1,
    miner={"cap": 8, "min_freq": 3, "max_len": 6, "eta": 0.5},
)  # fmt: skip
FULL = ClaimConfig()
GRID = ClaimConfig(
    group_sizes=(2, 16), seeds=tuple(range(100, 115)), arms=ARMS, random_tree_mode="exact",
    random_tree_draws=400, heldout="layouts",
)  # fmt: skip
"""Issue 23's grid: every arm, n ∈ {2, 16}, 15 seeds (100..114), exact random tree per seed, held-out layouts."""
