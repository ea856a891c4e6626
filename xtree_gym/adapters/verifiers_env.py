"""verifiers adapter (``verifiers`` 0.4, ``verifiers.v1``): our envs as a ``Taskset`` and an ``Env``.

verifiers 0.4's stack is ``verifiers.v1``: a *taskset* yields typed tasks, an *env* turns one
task into one episode by driving its agents, per-trace rewards are recorded on each ``Trace``,
and cross-trace judgement (a group) is the env's ``finalize``. Here:

* :class:`XTreeTaskset` yields one task per seed of ``env_id`` (its ``prompt`` is the first
  prompt of the episode, written by our harness when one is named);
* :class:`XTreeEnv` plays each task as a *group* of ``n`` attempts (one agent seat, ``n``
  interactions, as verifiers' own ``best-of-n`` env): ``gym.make(env_id)`` is stepped host-side,
  each reply parsed by the harness (or its last line), the env's text the next user turn. Each
  trace gets ``xtree_outcome`` (the episode's env reward); ``finalize`` adds Eq. 3's group term
  ``xtree_bonus = λ_g · Σ b_v`` with λ_g from the group's own win rate, so a trace's reward is
  Eq. 3's r_i.

verifiers resolves a taskset id to a *top-level* module exporting one ``Taskset`` (and one
``Env``) via ``__all__``: that module is :mod:`xtree_gym_verifiers` (id ``xtree-gym-verifiers``),
e.g. ``vf-eval xtree-gym-verifiers --env.taskset.env-id XTree-Countdown-v0 ...``.

Example:
    >>> ts = XTreeTaskset(XTreeTasksetConfig(id="xtree-gym-verifiers", num_examples=2))
    >>> [(t.data.name, t.data.info["seed"]) for t in ts]
    [('XTree-Countdown-v0#0', 0), ('XTree-Countdown-v0#1', 1)]
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import verifiers.v1 as vf
from pydantic import Field

from ..mining.tree import XTree
from ..rewards.constants import LAMBDA0, W_REF
from .text_env import TextEpisode, episode_bonus, group_bonus_rewards

VERIFIERS_VERSION = "0.4.0"
"""The ``verifiers`` release this adapter is tested against (the ``interop`` pin)."""

__all__ = ["XTreeEnv", "XTreeEnvConfig", "XTreeTask", "XTreeTaskData", "XTreeTaskset", "XTreeTasksetConfig"]


class XTreeTasksetConfig(vf.TasksetConfig):
    """Which env, which seeds, which harness writes the prompts."""

    env_id: str = "XTree-Countdown-v0"
    """The gym id every task plays."""
    num_examples: int = Field(64, ge=1)
    """Tasks (seeds) in the taskset."""
    seed: int = Field(0, ge=0)
    """First seed; task i plays seed ``seed + i``."""
    harness: str | None = None
    """Our harness (``rlvmr``, ``react``, ...) for prompts and reply parsing; ``None``: the env's own text, last line."""
    max_steps: int | None = Field(None, ge=1)
    """Turns before the episode is truncated (``None``: the harness's step limit, else the env's)."""


class XTreeTaskData(vf.TaskData):
    info: dict
    """``{"env_id", "seed", "harness", "max_steps"}``: what the env reproduces the episode from."""


class XTreeTask(vf.Task[XTreeTaskData, vf.State, vf.TaskConfig]):
    """One seed of one of our envs (scored by :class:`XTreeEnv`, which steps the env)."""


class XTreeTaskset(vf.Taskset[XTreeTask, XTreeTasksetConfig]):
    """One task per seed; its prompt is the episode's first prompt."""

    def load(self) -> Iterator[XTreeTask]:
        cfg = self.config
        probe = TextEpisode(cfg.env_id, harness=cfg.harness, max_steps=cfg.max_steps)
        try:
            for s in range(cfg.seed, cfg.seed + cfg.num_examples):
                probe.reset(seed=s)
                msgs = probe.messages()
                system = "\n\n".join(m["content"] for m in msgs if m["role"] == "system") or None
                user = "\n\n".join(m["content"] for m in msgs if m["role"] != "system")
                info = {"env_id": cfg.env_id, "seed": s, "harness": cfg.harness, "max_steps": cfg.max_steps}
                data = XTreeTaskData(name=f"{cfg.env_id}#{s}", prompt=user, system_prompt=system, info=info)
                yield XTreeTask(data, cfg.task)
        finally:
            probe.close()


class XTreeEnvConfig(vf.EnvConfig):
    """The group: ``n`` attempts per task, and Eq. 3's tree and weights."""

    agent: vf.AgentConfig = vf.AgentConfig()
    n: int = Field(4, ge=1)
    """Attempts per task: the group λ_g is computed over."""
    tree: str | None = None
    """Path of an X-Tree (JSON); without one, ``xtree_bonus`` is not recorded."""
    bonus: str = "depth"
    """Bonus design (see :func:`xtree_gym.rewards.resolve_bonus`)."""
    lambda0: float = LAMBDA0
    """λ0 of Eq. 3."""
    w_ref: float = W_REF["scienceworld"]
    """Reference win rate of Eq. 3's λ_g."""


async def play_attempt(task: vf.Task, agent: Any) -> None:
    """One attempt: the agent answers, each reply steps the env, until the episode or the agent ends."""
    info = task.data.info
    episode = TextEpisode(info["env_id"], harness=info.get("harness"), max_steps=info.get("max_steps"))
    episode.reset(seed=int(info["seed"]))
    try:
        async with agent.interaction(task) as interaction:
            segment = await interaction.turn()
            while not segment.terminated:
                episode.step(segment.last_reply)
                if episode.done:
                    break
                segment = await interaction.turn(episode.user_text())
        trace = interaction.trace
        trace.record_reward("xtree_outcome", float(episode.total_reward), 1.0)
        trace.info["xtree"] = {
            "tokens": list(episode.tokens), "won": bool(episode.won), "steps": episode.n_steps,
            "goal_options": episode.goal_options,
        }  # fmt: skip
    finally:
        episode.close()


def record_group_bonus(episode: vf.Episode, tree: XTree, cfg: XTreeEnvConfig) -> float:
    """Eq. 3's group term on every trace of ``episode`` (``xtree_bonus``); returns λ_g."""
    traces = [t for t in episode.traces if "xtree" in t.info]
    facts = [t.info["xtree"] for t in traces]
    bonuses = [
        episode_bonus(tree, f["tokens"], bonus=cfg.bonus, goal_options=f["goal_options"]) for f in facts
    ]
    outcomes = [t.rewards["xtree_outcome"].value if t.rewards.get("xtree_outcome") else 0.0 for t in traces]
    extra, lam = group_bonus_rewards(
        outcomes, bonuses, [f["won"] for f in facts], lambda0=cfg.lambda0, w_ref=cfg.w_ref
    )
    for trace, value in zip(traces, extra):
        trace.record_reward("xtree_bonus", value, 1.0)
        trace.record_metric("xtree_lambda_g", lam)
    return lam


class XTreeEnv(vf.Env[XTreeEnvConfig]):
    """Each task is a group of ``n`` attempts; ``finalize`` adds Eq. 3's group reward."""

    _tree: XTree | None = None

    async def run(self, task: vf.Task, agents: vf.Agents) -> None:
        await asyncio.gather(*(play_attempt(task, agents.agent) for _ in range(self.config.n)))

    async def finalize(self, task: vf.Task, episode: vf.Episode) -> None:
        if self.config.tree is None:
            return
        if self._tree is None:
            self._tree = XTree.load(self.config.tree)
        record_group_bonus(episode, self._tree, self.config)
