"""``xtree train offline``: offline node RL (X-Tree §3.2, Eq. 2, App. E) on the GRPO trainer.

Thin by design: each node instance of the corpus (the tree's top-level tiling, or a control set)
becomes one ``XTree-NodeReplay-v0`` episode, and :class:`~xtree_gym.agents.grpo.trainer.GRPOTrainer`
does everything else -- ``n`` rollouts per instance, group advantages, rows, the clipped loss,
checkpoints and metrics. Only two things differ from online RLVR:

* **tasks** are instances: ``tasks_per_step`` of them per step, drawn from ``(seed, step)``
  (``--curriculum depth`` draws from depth 1 first, then depth 2, ...);
* **rewards** come from the replay env: a rollout is given the gold prefix, the gold observation
  is appended after each matched step, it stops at the first mismatch, and its last step pays
  Eq. 2 (``--reward hier``), the step share alone (``plain``) or the binary completion (``outcome``).

Defaults are Table 7's first column (n 2, 805 steps, 6 nodes a step, lr 5e-7, no KL, temperature
0.7, no invalid penalty, α 0.3, γ 0.5).

This module is the method's config and its pure instance logic, and imports no torch (``xtree train
--help`` builds its flags from :class:`OfflineConfig`); the trainer subclass lives in
:mod:`xtree_gym.agents.sft_offline.offline_trainer`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ...errors import ConfigError
from ...rewards.constants import ALPHA, GAMMA
from ...rewards.node import NODE_REWARDS
from ..grpo.config import GRPOConfig
from ..types import TaskSpec

if TYPE_CHECKING:
    from ...rewards.instances import NodeInstance

INSTANCE_SETS = {
    "xtree": "node",
    "random-span": "random_span",
    "random-tree": "random_tree",
    "whole": "whole",
}
"""``--instances`` name -> instance kind (:data:`xtree_gym.rewards.instances.KINDS`): Tables 1-2's rows."""

CURRICULA = ("none", "depth")
INSTANCES_FILE = "instances.jsonl"


@dataclass
class OfflineConfig(GRPOConfig):
    """Offline node RL: GRPO on node instances replayed from a gold corpus (Table 7, first column).

    Example:
        >>> cfg = OfflineConfig(corpus="gold.jsonl", tree="tree.json").resolved()
        >>> cfg.env, cfg.harness, cfg.n, cfg.tasks_per_step, cfg.lr, cfg.kl_coef, cfg.temperature
        ('XTree-NodeReplay-v0', 'replay', 2, 6, 5e-07, 0.0, 0.7)
    """

    corpus: str = ""
    """Gold corpus JSONL (the trajectories the instances are cut from)."""
    corpus_domain: str | None = None
    """Canonicalizer for steps without a ``token`` (``--domain``, e.g. ``scienceworld``), as in ``xtree mine``."""
    instances: str = "xtree"
    """Instance set: ``xtree`` (the tree's tiling), ``random-span``, ``random-tree`` or ``whole`` (Tables 1-2)."""
    reward: str = "hier"
    """``hier`` (Eq. 2), ``plain`` (step-matching share only) or ``outcome`` (binary completion)."""
    curriculum: str = "none"
    """``none`` (all depths mixed) or ``depth`` (depth 1 first, then 2, ...; steps shared by instance count)."""
    alpha: float = ALPHA
    """Eq. 2's α: weight of the completion term (0.3)."""
    gamma: float = GAMMA
    """Eq. 2's γ: depth factor of the completion term (0.5)."""
    env: str = "XTree-NodeReplay-v0"
    """The replay env (fixed for this method)."""
    harness: str | None = "replay"
    """Prompt protocol: ``replay`` shows the gold history and asks for one action per turn."""
    n: int = 2
    """Rollouts per instance (Table 7: 2)."""
    steps: int = 805
    """Optimizer steps (Table 7: 805)."""
    tasks_per_step: int = 6
    """Instances per step (Table 7: 6 nodes)."""
    lr: float = 5e-7
    """AdamW learning rate (Table 7: 5e-7)."""
    kl_coef: float = 0.0
    """KL to the warm start (Table 7: none)."""
    temperature: float = 0.7
    """Sampling temperature in training (Table 7: 0.7)."""
    invalid_penalty: float = 0.0
    """No invalid-action penalty (Table 7: –): a mismatch already ends the rollout."""
    max_new_tokens: int = 16384
    """Response tokens per turn at most (Table 7: 16,384); the ``</action>`` stop usually ends sooner."""
    output_dir: str = "runs/offline"
    """Run folder: ``instances.jsonl``, ``metrics.jsonl``, ``checkpoint-*/``, ``config.json``."""

    def resolved(self) -> OfflineConfig:
        """GRPOConfig's defaults filled in, then the offline fields checked."""
        out = super().resolved()
        assert isinstance(out, OfflineConfig)
        check_offline(out)
        return out


def check_offline(cfg: OfflineConfig) -> None:
    """The checks of the offline fields; one :class:`ConfigError` naming the field."""
    from ..grpo.config import check_config

    if not cfg.corpus:
        raise ConfigError("no corpus", fix="pass --corpus gold.jsonl")
    if cfg.instances not in INSTANCE_SETS:
        raise ConfigError(f"instances = {cfg.instances!r}", fix=f"use one of: {', '.join(INSTANCE_SETS)}")
    if cfg.reward not in NODE_REWARDS:
        raise ConfigError(f"reward = {cfg.reward!r}", fix=f"use one of: {', '.join(NODE_REWARDS)}")
    if cfg.curriculum not in CURRICULA:
        raise ConfigError(f"curriculum = {cfg.curriculum!r}", fix=f"use one of: {', '.join(CURRICULA)}")
    if cfg.instances != "whole" and not cfg.tree:
        raise ConfigError(
            f"instances {cfg.instances!r} need a tree", fix="pass --tree tree.json (from `xtree mine`)"
        )
    if cfg.shaping != "none":
        raise ConfigError("offline node RL takes its reward from the replay env", fix="leave --shaping none")
    check_config(cfg)
    if not 0.0 <= cfg.alpha <= 1.0:
        raise ConfigError(f"alpha = {cfg.alpha!r}", fix="use a weight in [0, 1] (0.3 in the paper)")
    if not 0.0 <= cfg.gamma <= 1.0:
        raise ConfigError(f"gamma = {cfg.gamma!r}", fix="use a factor in [0, 1] (0.5 in the paper)")


def build_instances(cfg: OfflineConfig) -> list[NodeInstance]:
    """The instance set ``cfg.instances`` names, cut from ``cfg.corpus`` (same corpus + seed -> same set)."""
    from ...corpus.records import read_corpus
    from ...mining.tree import XTree
    from ...rewards.instances import make_instances

    trajs = read_corpus(cfg.corpus).trajectories
    tree = XTree.load(cfg.tree) if cfg.tree else None
    if tree is None:  # only 'whole' gets here: it needs no tree
        from ...rewards.instances import whole_trajectory_instances

        return whole_trajectory_instances(trajs, domain=cfg.corpus_domain)
    out = make_instances(INSTANCE_SETS[cfg.instances], trajs, tree, seed=cfg.seed, domain=cfg.corpus_domain)
    if not out:
        raise ConfigError(
            f"the tree tiles no node in {cfg.corpus!r}", fix="check that the tree was mined from this domain"
        )
    return out


def curriculum_phase(step: int, steps: int, depth_counts: dict[int, int]) -> int:
    """The depth a curriculum step trains on: depths in order, each for a share of the steps ∝ its instances.

    Example:
        >>> [curriculum_phase(s, 10, {1: 6, 2: 3, 3: 1}) for s in range(1, 11)]
        [1, 1, 1, 1, 1, 1, 2, 2, 2, 3]
    """
    total = sum(depth_counts.values())
    done = 0
    for depth in sorted(depth_counts):
        done += depth_counts[depth]
        if (step - 1) < steps * done / total - 1e-9:
            return depth
    return max(depth_counts)


def instance_tasks(
    instances: Sequence[NodeInstance], pool: Sequence[int], count: int, *, seed: int, step: int
) -> list[TaskSpec]:
    """``count`` instances of ``pool`` (indices) for a step, without replacement while the pool lasts.

    Example:
        >>> from xtree_gym.rewards.instances import NodeInstance
        >>> insts = [NodeInstance(f"t@{i}:{i + 1}", "t", "node", "S0", 1, i, i + 1, task="boil",
        ...          prefix=[{}] * i, gold=[{"action": "a"}]) for i in range(4)]
        >>> ts = instance_tasks(insts, [0, 1, 2, 3], 2, seed=0, step=1)
        >>> [t.reset_options["index"] for t in ts] == [t.reset_options["index"] for t in instance_tasks(insts, [0, 1, 2, 3], 2, seed=0, step=1)]
        True
    """
    import numpy as np

    rng = np.random.default_rng([int(seed), int(step), 0x0FF1])
    picks = list(rng.permutation(len(pool)))
    while len(picks) < count:
        picks += list(rng.permutation(len(pool)))
    out = []
    for j, k in enumerate(picks[:count]):
        i = int(pool[int(k)])
        inst = instances[i]
        out.append(
            TaskSpec(
                task=inst.task or inst.kind,
                seed=int(rng.integers(2**31 - 1)),
                reset_options={"index": i},
                key=f"{inst.id}/{step}.{j}",
            )
        )
    return out


def instance_summary(instances: Sequence[NodeInstance]) -> dict[str, Any]:
    """Count, kinds, depth and length histograms of an instance set (what each control flag produces).

    Example:
        >>> from xtree_gym.rewards.instances import NodeInstance
        >>> i = NodeInstance("t@0:2", "t", "node", "S0", 1, 0, 2, gold=[{"action": "a"}, {"action": "b"}])
        >>> instance_summary([i])
        {'instances': 1, 'kinds': {'node': 1}, 'depths': {1: 1}, 'lengths': {2: 1}}
    """
    from ...rewards.instances import depth_histogram, length_histogram

    return {
        "instances": len(instances),
        "kinds": dict(sorted(Counter(i.kind for i in instances).items())),
        "depths": depth_histogram(instances),
        "lengths": length_histogram(instances),
    }
