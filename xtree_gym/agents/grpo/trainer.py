"""Multi-turn GRPO on Accelerate: rollouts → rewards → advantages → rows → losses → update → log.

Read top to bottom, one optimizer step is (docs/training.md follows it with numbers):

1. **tasks** — ``tasks_per_step`` tasks drawn from ``(seed, step)``; rank r plays every
   ``world``-th, so a group (one task, ``n`` rollouts) is whole on one rank;
2. **rollout** — ``n`` identically seeded env copies per task, generation with the live weights
   (``hf`` backend on each rank) through the harness (:func:`xtree_gym.agents.play.rollout.rollout`);
3. **rewards** — outcome − ``invalid_penalty`` · #invalid + shaping (:mod:`.shaping`);
4. **advantages** — per group: ``(r − mean) / (sample std + 1e-6)``, 0 for a zero-variance group
   (:mod:`.advantages`), broadcast to every token of the episode's turns;
5. **rows** — one per turn (or per episode) with the completion tokens masked in (:mod:`.rows`);
6. **losses** — per token: clipped ratio (ε_low, ε_high) + ``kl_coef`` · k3 KL to the frozen warm
   start, plus the OPSD term (:mod:`.losses`); weights sum to 1 over the whole step (all
   micro-batches, all ranks), so accumulating micro-batch gradients gives exactly the step's mean;
7. **update** — ``accelerator.backward`` per micro-batch (no gradient sync until the last),
   gradient clipping, AdamW; then the EMA teacher, the in-loop tree, metrics and checkpoints.
"""

from __future__ import annotations

import dataclasses
import json
import math
import sys
import time
from collections import deque
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import torch

from ...errors import ConfigError
from ..model.lora import AdapterFreeReference, precision
from ..model.vllm import push_weights_to_vllm
from ..model.vllm_sync import trainer_server_generator
from ..play.tasks import generic_tasks, rank_share, scienceworld_tasks, webshop_goal_indices, webshop_tasks
from ..run import checkpoint as ckpt
from ..run.guards import check_finite_step
from ..run.metrics import MetricsWriter, reduce_sums, safe_div, step_line
from ..run.runfolder import check_resume_config, refuse_existing_run
from ..run.scaleout import load_any, save_any
from ..run.sharding import clip_grad_norm, fsdp_requested, gathered, max_over_ranks, write_parallel
from ..run.tracking import Trackers, resolve_trackers
from ..types import Episode, Generation, GenRequest, TaskSpec
from .advantages import grouped_advantages
from .config import GRPOConfig
from .learning_signal import SignalWatch, signal_counts, step_signal
from .losses import clipped_policy_loss, k3_kl, loss_weights, opsd_term, opsd_zero_gradient
from .opsd import TeacherContext, make_card_fn
from .policy import build_models, ema_update, make_accelerator, sequence_logps
from .remine import NO_BONUS, RolloutBuffer, mined_state, miner_from_spec, node_diff, self_mine
from .rows import Row, collate, make_rows, micro_batches, place_rows, teacher_to_student
from .schedule import lr_at
from .shaping import SegCostShaping, StepRewards, plain_rewards, xtree_bonuses, xtree_rewards
from .updates import ppo_updates

# ----------------------------------------------------------------------------- rollout helpers


class MixedGenerator:
    """Routes each request by group member: members ``< k`` to ``first``, the rest to ``second``.

    ``oracle_mix`` uses it to put expert rollouts in every group (off-policy guidance), which
    also gives a random model reward variance to learn from in smoke tests.

    Example:
        >>> from xtree_gym.agents.types import Generation
        >>> class G:
        ...     needs_oracle = False
        ...     def __init__(self, s): self.s = s
        ...     def generate(self, reqs): return [Generation(self.s) for _ in reqs]
        >>> m = MixedGenerator(G("a"), G("b"), k=1)
        >>> [g.text for g in m.generate([GenRequest([], key=(0, 1, 0)), GenRequest([], key=(0, 0, 0))])]
        ['b', 'a']
    """

    name = "mixed"

    def __init__(self, first: Any, second: Any, k: int) -> None:
        self.first, self.second, self.k = first, second, k
        self.needs_oracle = bool(first.needs_oracle or second.needs_oracle)

    def generate(self, requests: Sequence[GenRequest]) -> list[Generation]:
        picks = [len(r.key) > 1 and int(r.key[1]) < self.k for r in requests]
        out: list[Generation | None] = [None] * len(requests)
        for flag, gen in ((True, self.first), (False, self.second)):
            idx = [i for i, p in enumerate(picks) if p == flag]
            if idx:
                for i, g in zip(idx, gen.generate([requests[i] for i in idx])):
                    out[i] = g
        return [g for g in out if g is not None]


# ----------------------------------------------------------------------------- the trainer


class GRPOTrainer:
    """Owns the policy, its reference, the optimizer and the run folder; :meth:`train` runs it."""

    method = "rlvr"
    """The ``xtree train`` method name shown on the progress bar."""

    def __init__(
        self, cfg: GRPOConfig, *, accelerator: Any = None, generator_factory: Callable[..., Any] | None = None
    ):
        self.cfg = cfg.resolved()
        weights, mixed = precision(self.cfg.dtype, cuda=torch.cuda.is_available(), lora=self.cfg.lora_r > 0)
        self.acc = accelerator or make_accelerator(mixed_precision=mixed)
        self.generator_factory = generator_factory
        self.run_dir = Path(self.cfg.output_dir)
        if not self.cfg.resume:
            refuse_existing_run(self.run_dir)
        torch.manual_seed(self.cfg.seed)
        built = build_models(self.cfg, self.acc, weights)  # plain, DDP or FSDP as launched
        self.model, self.optimizer, self.tokenizer = built.model, built.optimizer, built.tokenizer
        self.ref, self.ema = built.ref, built.ema
        needs_base = self.cfg.kl_coef > 0 or (self.cfg.opsd != "none" and self.cfg.opsd_teacher == "base")
        if needs_base and self.cfg.lora_r:  # the reference is the base: adapters off, no second copy
            self.ref = AdapterFreeReference(self.model, self.policy)
        self.parallel = write_parallel(self.acc, self.run_dir, self.model)
        if fsdp_requested() and self.parallel["kind"] != "fsdp":
            raise ConfigError(f"FSDP was asked for, but the policy is {self.parallel['kind']!r}",
                              fix="report this: the launcher's FSDP config did not reach the model")  # fmt: skip
        self._values: Any = None  # contrastive b_v of the current tree (bonus modes contrastive_*, potential)
        self._tree_trajs: list[Any] | None = None
        self._mined_trajs: list[Any] | None = None  # the buffer a re-mined tree was mined (and is valued) on
        self.tree = self._load_tree(self.cfg.tree)
        self.cfg = dataclasses.replace(self.cfg, bonus_mode=self._pick_bonus_mode())  # config.json says which
        self.bonus_mode = self.cfg.bonus_mode  # in use now; self-mined ``auto``: re-picked at every re-mine
        if self.bonus_mode == "auto":
            self.bonus_mode = NO_BONUS  # no tree yet: outcome only until the first re-mine
        self.segcost = (
            SegCostShaping(self.cfg.max_steps or 30, self.cfg.segcost_lam, self.cfg.segcost_buffer)
            if self.cfg.shaping == "segcost"
            else None
        )
        self.buffer = RolloutBuffer(self.cfg.remine_buffer) if self.cfg.remine_every else None
        self.teacher = self._teacher_context(usage=self._tree_usage())
        self._harness_obj: Any = None
        self._vllm: Any = None
        self.step = 0
        self._win_rates: deque[float] = deque(maxlen=5)  # last steps' win rates (bonus mode ``annealed``)
        self.best_win_rate = 0.0
        self.writer = MetricsWriter(self.run_dir, tensorboard=False, enabled=self.acc.is_main_process)
        names = resolve_trackers(self.cfg.report_to, self.cfg.tensorboard)
        self.trackers = Trackers(
            names if self.acc.is_main_process else [], self.run_dir, config=self.cfg.to_dict()
        )
        self.signal = SignalWatch(self.cfg.zero_signal_steps, self.run_dir)
        self._warn_opsd()
        if self.cfg.resume:
            self.load(ckpt.find_checkpoint(self.cfg.resume))

    # -- set-up helpers --------------------------------------------------------------------
    def _warn_opsd(self) -> None:
        """Say so when the OPSD term is configured to have zero expected gradient."""
        if self.cfg.opsd == "none":
            return
        why = opsd_zero_gradient(
            grad=self.cfg.opsd_grad or "eq4", beta=self.cfg.opsd_beta or 0.0, c=self.cfg.opsd_c
        )
        if why:
            import warnings

            warnings.warn(
                f"OPSD distils nothing: {why}; use --opsd-grad rkl or --opsd-beta > 0", stacklevel=2
            )

    def _load_tree(self, path: str | None) -> Any:
        if not path:
            return None
        from ...corpus.formats._records import reading
        from ...errors import TreeFormatError
        from ...mining.tree import XTree

        if path.startswith("packaged:"):  # a tree shipped in xtree_gym/data (the CPU smoke recipes use one)
            from importlib.resources import files

            path = str(files("xtree_gym") / "data" / path.split(":", 1)[1])
        with reading(path, TreeFormatError):
            return XTree.load(path)

    def _tree_usage(self) -> Any:
        """Node usage over ``tree_corpus`` (the cards' success rates and families), when given."""
        if not self.cfg.tree_corpus or self.tree is None or self.cfg.opsd == "none":
            return None
        from ...corpus.records import read_corpus
        from ...render.stats import CorpusUsage

        return CorpusUsage.build(self.tree, read_corpus(self.cfg.tree_corpus).trajectories, self.cfg.domain())

    def _teacher_context(self, usage: Any) -> TeacherContext | None:
        if self.cfg.opsd == "none":
            return None
        card_fn = make_card_fn(
            self.cfg.opsd, tree=self.tree, domain=self.cfg.domain(), usage=usage, seed=self.cfg.seed
        )
        return TeacherContext(card_fn, self.tokenizer)

    @property
    def harness(self) -> Any:
        """The harness (built on first use: learning from given episodes needs none)."""
        if self._harness_obj is None:
            from ..harness import get_harness

            self._harness_obj = get_harness(self.cfg.harness or "")
        return self._harness_obj

    @property
    def policy(self) -> Any:
        """The bare model (not the DDP wrapper): generation and checkpoints use it."""
        return self.acc.unwrap_model(self.model)

    # -- 1. tasks ------------------------------------------------------------------------------
    def sample_tasks(self, step: int) -> list[TaskSpec]:
        """This step's tasks for all ranks (same on every rank)."""
        cfg, dom = self.cfg, self.cfg.domain()
        count = cfg.tasks_per_step
        if dom == "scienceworld":
            return scienceworld_tasks(count, seed=cfg.seed, step=step, fold=cfg.task_split or "train")
        if dom == "webshop":
            if not hasattr(self, "_goals"):
                self._goals = webshop_goal_indices(cfg.env_kwargs, cfg.task_split or "train")
            return webshop_tasks(count, seed=cfg.seed, step=step, goals=self._goals)
        return generic_tasks(str(cfg.env_kwargs.get("task", dom)), count, seed=cfg.seed, step=step)

    # -- 2. rollout ----------------------------------------------------------------------------
    def group_seed_fn(self, step: int) -> Callable[[Any, int], int]:
        """``(group, turn) -> seed`` of the ``hf`` rollouts: (seed, step, task, turn), whatever the world size.

        ``group`` indexes this rank's tasks; rank r of W holds the step's tasks r, r+W, ... (:func:`rank_share`),
        so ``task = r + group·W`` is the task's index in the step, the same at any process count.
        """
        rank, world, base = self.acc.process_index, self.acc.num_processes, self.cfg.seed * 1_000_003 + step

        def seed(group: Any, turn: int) -> int:
            task = rank + int(group or 0) * world
            return ((base * 100_003 + task) * 1_009 + turn) % (2**63)

        return seed

    def make_generator(self, step: int) -> Any:
        """The generator of this step: live weights; ``hf`` and ``vllm`` seed each group from :meth:`group_seed_fn`."""
        cfg = self.cfg
        seed = (cfg.seed * 1_000_003 + step) * 64 + self.acc.process_index
        if self.generator_factory is not None:
            return self.generator_factory(self, step, seed)
        from ..model.generation import make_generator

        stop = tuple(getattr(self.harness, "stop", ()) or ())
        sampling: dict[str, Any] = {"temperature": cfg.temperature, "top_p": cfg.top_p,
                                     "max_new_tokens": cfg.max_new_tokens}  # fmt: skip
        if cfg.backend == "vllm":  # one engine per rank, or servers; its weights follow every update
            if self._vllm is None and cfg.vllm_server:  # model/vllm_sync.py: pushes before the first rollout
                self._vllm = trainer_server_generator(self, stop=stop, seed=seed, **sampling)
            if self._vllm is None:
                from ..model.loading import smollm2_folder

                folder = str(smollm2_folder()) if cfg.model == "smollm2" else cfg.model
                self._vllm = make_generator(
                    "vllm",
                    model=folder,
                    tokenizer=self.tokenizer,
                    stop=stop,
                    seed=seed,
                    **sampling,
                    **cfg.vllm_kwargs,
                )
                if self.step:  # resumed: the engine loaded the warm start
                    push_weights_to_vllm(self._vllm, self.policy)
            gen = self._vllm
            gen.seed, gen.calls, gen.group_seed = seed, 0, self.group_seed_fn(step)
        else:
            if cfg.backend == "hf":
                sampling["group_seed"] = self.group_seed_fn(step)
            gen = make_generator(
                cfg.backend, model=self.policy, tokenizer=self.tokenizer, stop=stop, seed=seed, **sampling
            )
        k = round(cfg.oracle_mix * cfg.n)
        if k > 0:
            gen = MixedGenerator(make_generator("oracle", tokenizer=self.tokenizer), gen, k)
        return gen

    def collect(self, tasks: Sequence[TaskSpec], step: int) -> list[Episode]:
        """Play ``n`` rollouts of each task with the current weights."""
        from ..play.rollout import rollout

        cfg = self.cfg
        self.model.eval()
        try:
            with gathered(self.policy):  # sharded weights: gathered once for the whole rollout
                episodes = rollout(
                    cfg.env,
                    tasks,
                    self.make_generator(step),
                    self.harness,
                    n=cfg.n,
                    tokenizer=self.tokenizer,
                    env_kwargs=dict(cfg.env_kwargs),
                    max_steps=cfg.max_steps,
                    workers=cfg.workers,
                    env_servers=cfg.env_servers,
                    step_timeout=cfg.step_timeout,
                    episode_timeout=cfg.episode_timeout,
                    seed=cfg.seed + step,
                )
        finally:
            self.model.train()
        if cfg.domain() == "webshop":
            self._add_goal_options(episodes, tasks)
        return episodes

    def _add_goal_options(self, episodes: Sequence[Episode], tasks: Sequence[TaskSpec]) -> None:
        """WebShop's b_v and card retrieval need the goal's option types: read them off the catalogue."""
        from ...envs.webshop import load_webshop_data

        kw = self.cfg.env_kwargs
        goals = load_webshop_data(kw.get("data_dir"), int(kw.get("price_seed", 0))).goals
        for ep in episodes:
            idx = tasks[ep.group].reset_options.get("goal_idx")
            if idx is not None and "goal_options" not in ep.meta:
                ep.meta["goal_options"] = list(goals[int(idx)].goal_options)

    # -- 3. rewards ----------------------------------------------------------------------------
    def rewards(self, episodes: Sequence[Episode]) -> StepRewards:
        """Outcome − invalid penalty + the configured shaping, per episode."""
        cfg = self.cfg
        if cfg.shaping == "xtree" and self.tree is not None and self.bonus_mode != NO_BONUS:
            design = self._node_values() or cfg.bonus or "depth"
            bonuses = xtree_bonuses(episodes, self.tree, bonus=design, matching=cfg.matching)
            return xtree_rewards(
                episodes,
                bonuses,
                invalid_penalty=cfg.invalid_penalty,
                lambda0=cfg.lambda0,
                w_ref=cfg.w_ref or 0.4,
                outcome=cfg.outcome or "env",
                mode=self.bonus_mode,
                **self._bonus_design(),
            )
        if cfg.shaping == "segcost":
            assert self.segcost is not None
            return self.segcost.rewards(
                episodes, invalid_penalty=cfg.invalid_penalty, outcome=cfg.outcome or "env"
            )
        return plain_rewards(episodes, invalid_penalty=cfg.invalid_penalty, outcome=cfg.outcome or "env")

    def _tree_trajectories(self) -> list[Any]:
        """``tree_corpus``'s trajectories, read once."""
        if self._tree_trajs is None:
            from ...corpus.records import read_corpus

            assert self.cfg.tree_corpus
            self._tree_trajs = read_corpus(self.cfg.tree_corpus).trajectories
        return self._tree_trajs

    def _pick_bonus_mode(self) -> str:
        """``--bonus-mode auto`` made concrete (:func:`~xtree_gym.rewards.modes.pick_bonus_mode`), said once."""
        from ...rewards.modes import AUTO_MODE, pick_bonus_mode

        cfg = self.cfg
        if cfg.bonus_mode != AUTO_MODE or cfg.shaping != "xtree":
            return pick_bonus_mode(cfg.bonus_mode, None)  # no bonus to shape: no corpus to read
        if self.tree is None:  # self-mined: config.json keeps ``auto``, metrics say each pick
            if self.acc.is_main_process:
                print(f"bonus mode auto: no tree yet, outcome only until step {cfg.remine_every}; then picked at "
                      "each re-mine from the run's own episodes", file=sys.stderr)  # fmt: skip
            return AUTO_MODE
        won = [bool(t.success) for t in self._tree_trajectories()] if cfg.tree_corpus else None
        mode = pick_bonus_mode(AUTO_MODE, won)
        if self.acc.is_main_process:
            why = "no --tree-corpus to weigh the nodes with" if won is None else (
                f"the tree corpus holds {sum(won)} successes and {len(won) - sum(won)} failures")  # fmt: skip
            print(f"bonus mode auto: {mode} ({why})", file=sys.stderr)
        return mode

    def _node_values(self) -> Any:
        """Issue 34's contrastive b_v (:func:`~xtree_gym.rewards.contrastive.corpus_values` over ``tree_corpus``),
        computed once per tree; None for the other modes."""
        from ...rewards.modes import CONTRASTIVE_MODES

        if self.bonus_mode not in CONTRASTIVE_MODES:
            return None
        if self._values is None:
            from ...rewards.contrastive import NodeValueBonus, corpus_values

            trajs = self._mined_trajs if self._mined_trajs is not None else self._tree_trajectories()
            self._values = NodeValueBonus(corpus_values(self.tree, trajs))
        return self._values

    def _bonus_design(self) -> dict[str, float]:
        """Parameters of a non-Eq. 3 bonus mode (issue 23): B_max, margin, progress, best win rate so far."""
        cfg = self.cfg
        if self.bonus_mode == "eq3":
            return {}
        if self.bonus_mode in ("contrastive_normalized", "potential"):
            return {"max_bonus": self._node_values().total(), "margin": cfg.bonus_margin}
        if self.bonus_mode == "normalized":
            from ...rewards.modes import max_episode_bonus

            return {
                "max_bonus": max_episode_bonus(self.tree, cfg.bonus or "depth"),
                "margin": cfg.bonus_margin,
            }
        if self.bonus_mode == "annealed":
            return {"best_win_rate": self.best_win_rate, "progress": self.step / cfg.steps,
                    "anneal_end": cfg.bonus_anneal_end}  # fmt: skip
        return {}

    # -- 4-5. advantages and rows ----------------------------------------------------------------
    def rows(self, episodes: Sequence[Episode], rewards: StepRewards) -> list[Row]:
        """Group advantages broadcast to each episode's rows; teacher prefixes for OPSD."""
        adv = grouped_advantages(
            rewards.rewards, [ep.group for ep in episodes], scale=self.cfg.scale_advantages
        )
        rows = make_rows(episodes, adv, self.cfg.rows)
        place_rows(rows, episodes, self.acc.process_index, self.acc.num_processes)  # the step's global order
        if self.teacher is not None:
            for r in rows:
                r.teacher_prefix = self.teacher.prefix(episodes[r.episode])
        return rows

    # -- 6-7. losses and the update --------------------------------------------------------------
    def _teacher_model(self) -> Any:
        return {"live": self.policy, "base": self.ref, "ema": self.ema}[self.cfg.opsd_teacher]

    def micro_step(
        self, rows: Sequence[Row], totals: dict[str, float], sync: bool, stored_old: bool = False
    ) -> dict[str, float]:
        """Forward + backward of one micro-batch; returns its metric sums (token-weighted).

        π_old is the rows' ``old_logprobs`` when ``stored_old`` or ``old_logprobs rollout``, else this
        forward's own logprobs, detached (ratio 1: the single update of a step)."""
        cfg, dev = self.cfg, self.acc.device
        pad = int(self.tokenizer.pad_token_id)
        batch = collate(rows, pad, device=dev)
        world = self.acc.num_processes  # DDP averages gradients over ranks: undo it, weights sum to 1
        weights = loss_weights(
            batch.mask, norm=cfg.loss_norm, total_tokens=totals["tokens"], total_rows=totals["rows"],
            step_tokens=totals.get("step_tokens"), updates=int(totals.get("updates", 1)),
        )  # fmt: skip
        live = batch.mask * batch.weights[:, None]  # a row of weight 0 (a placeholder) counts nowhere
        weights = weights * batch.weights[:, None] * world
        with torch.no_grad():
            ref_logp = sequence_logps(self.ref, batch, cfg.temperature)[0] if cfg.kl_coef > 0 else None
            teacher_logp = None
            if self.teacher is not None:
                tbatch = collate(rows, pad, prefixes=True, device=dev)
                raw = sequence_logps(self._teacher_model(), tbatch, cfg.temperature)[0]
                teacher_logp = teacher_to_student(rows, raw)
        with nullcontext() if sync else self.acc.no_sync(self.model):
            logp, ent = sequence_logps(self.model, batch, cfg.temperature, entropy=True)
            old = logp.detach() if cfg.old_logprobs == "recompute" and not stored_old else batch.old_logprobs
            pg, clip_frac = clipped_policy_loss(
                logp,
                old,
                batch.advantages,
                weights,
                eps_low=cfg.clip_eps_low,
                eps_high=cfg.clip_eps_high,
                denom=1.0,
            )
            loss = pg
            kl_tok = k3_kl(logp, ref_logp) if ref_logp is not None else torch.zeros_like(logp)
            loss = loss + cfg.kl_coef * (kl_tok * weights).sum()
            opsd = torch.zeros((), device=dev)
            if teacher_logp is not None:
                share = len(rows) / max(totals["rows"], 1.0) * world  # opsd_term is a mean over these rows
                beta, grad = cfg.opsd_beta or 0.0, cfg.opsd_grad or "eq4"
                opsd = opsd_term(logp, teacher_logp, live, beta=beta, c=cfg.opsd_c, grad=grad) * share
                loss = loss + opsd
            self.acc.backward(loss)
        assert ent is not None
        return {
            "loss": float(loss.detach()) / world,
            "pg_loss": float(pg.detach()) / world,
            "opsd": float(opsd.detach()) / world,
            "kl_sum": float((kl_tok.detach() * live).sum()),
            "entropy_sum": float((ent * live).sum()),
            "clip_sum": float(round(float(clip_frac) * int((live != 0).sum()))),  # clipped tokens (a count)
            "ratio_sum": float((torch.exp(logp.detach() - old.detach()) * live).sum()),
        }

    def lockstep(self, rows: list[Row], batches: list[list[int]]) -> tuple[list[Row], list[list[int]]]:
        """Under FSDP, pad ``batches`` with weightless placeholder batches to the largest count of any rank.

        A sharded forward is collective (each block's weights are gathered from every rank), so every
        rank must run as many as the others; elsewhere ``rows`` and ``batches`` pass through.
        """
        if self.parallel["kind"] != "fsdp":
            return rows, batches
        pad = int(self.tokenizer.pad_token_id)
        extra = max_over_ranks(self.acc, len(batches)) - len(batches)
        if extra:
            rows = [*rows, Row([pad, pad], [False, True], [0.0, 0.0], weight=0.0)]
            batches = [*batches, *([[len(rows) - 1]] * extra)]
        return rows, batches

    def update(
        self, rows: Sequence[Row], stored_old: bool = False, norm: dict[str, float] | None = None
    ) -> dict[str, float]:
        """One optimizer step over ``rows`` (this rank's share of the update; see :mod:`.updates`).

        ``norm`` (``step_tokens``, ``updates``): the whole step's counts, for ``loss_norm trl-dapo``."""
        real = [r for r in rows if r.weight]  # weight-0 rows only take part (placeholders)
        local = {"tokens": float(sum(r.n_targets for r in real)), "rows": float(len(real))}
        totals = {**reduce_sums(local, self.acc), **(norm or {})}
        if totals["tokens"] == 0:  # every completion was empty: nothing to learn, keep going
            print(f"step {self.step + 1}: no completion tokens on any rank, no update", file=sys.stderr)
            return {"tokens": 0.0, "row_tokens": 0.0, "micro_batches": 0.0, "grad_norm": 0.0}
        if not rows:  # other ranks have rows: take part in the gradient sync with a weightless row
            pad = int(self.tokenizer.pad_token_id)
            rows = [Row([pad, pad], [False, True], [0.0, 0.0], weight=0.0)]
        sums: dict[str, float] = {}
        batches = micro_batches(rows, self.cfg.micro_batch_tokens)
        real_batches = len(batches)
        rows, batches = self.lockstep(list(rows), batches)
        for i, idx in enumerate(batches):
            part = self.micro_step(
                [rows[j] for j in idx], totals, sync=i == len(batches) - 1, stored_old=stored_old
            )
            for k, v in part.items():
                sums[k] = sums.get(k, 0.0) + v
        # clip (or, with max_grad_norm 0, only measure: a clip at inf scales by exactly 1)
        grad_norm = clip_grad_norm(self.acc, self.model, self.cfg.max_grad_norm or math.inf)
        check_finite_step(self.step + 1, loss=sums.get("loss", 0.0), grad_norm=grad_norm)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        if self.ema is not None:
            ema_update(self.ema, self.policy, self.cfg.opsd_ema)
        sums["tokens"] = local["tokens"]
        sums["row_tokens"] = float(
            sum(len(r) for r in rows if r.weight)
        )  # what the forwards read (prompts too)
        sums["micro_batches"] = float(real_batches)
        out = reduce_sums(sums, self.acc)
        out["grad_norm"] = grad_norm
        return out

    def learn(self, episodes: Sequence[Episode]) -> dict[str, float]:
        """Rewards → advantages → rows → update, on this rank's episodes; metric sums over ranks."""
        rewards = self.rewards(episodes)
        self._win_rates.append(sum(rewards.won) / max(1, len(rewards.won)))  # annealed bonus mode's ratchet
        self.best_win_rate = max(self.best_win_rate, sum(self._win_rates) / len(self._win_rates))
        rows = self.rows(episodes, rewards)
        stats, self.last_updates = ppo_updates(self, rows, self.step + 1)
        if self._vllm is not None:  # once per step, after its last update (not after each of the E·M)
            push_weights_to_vllm(self._vllm, self.policy)
        ep = {
            "episodes": float(len(episodes)),
            "reward_sum": sum(rewards.rewards),
            "win_sum": float(sum(rewards.won)),
            "lambda_sum": sum(rewards.lambdas),
            "bonus_sum": sum(rewards.bonuses),
            "invalid_sum": float(sum(rewards.invalid)),
            "turns": float(sum(len(e.turns) for e in episodes)),
            **signal_counts(rewards.rewards, [e.group for e in episodes], self.cfg.scale_advantages),
        }
        stats.update(reduce_sums(ep, self.acc))
        return stats

    # -- the loop --------------------------------------------------------------------------------
    def train_step(self) -> dict[str, Any]:
        """One full step (1-7) plus re-mining, evaluation and logging; returns the metrics line."""
        step = self.step + 1
        lr = self.set_lr(step)
        t0 = time.perf_counter()
        tasks = rank_share(self.sample_tasks(step), self.acc.process_index, self.acc.num_processes)
        episodes = self.collect(tasks, step)
        t1 = time.perf_counter()
        stats = self.learn(episodes)
        t2 = time.perf_counter()
        self.step = step
        metrics = summarize(step, stats, rollout_s=t1 - t0, update_s=t2 - t1, lr=lr)
        metrics.update(step_signal(stats, metrics))
        if self.buffer is not None:
            metrics.update(self.observe_and_remine(episodes, step))
        if self.cfg.eval_every and step % self.cfg.eval_every == 0:
            metrics["eval_success_rate"] = self.evaluate(step)
        metrics["seconds"] = time.perf_counter() - t0
        self.writer.write(metrics)
        self.trackers.log(metrics)
        if step % self.cfg.save_every == 0 or step == self.cfg.steps:
            self.save()
        self.signal.check(metrics)
        return metrics

    def train(self) -> list[dict[str, Any]]:
        """Run until ``steps``; a resumed trainer continues from its checkpoint's step."""
        from ...progress import Progress

        self.writer.truncate(self.step)
        lines = []
        enabled = self.cfg.progress and self.acc.is_main_process
        try:
            with Progress(total=self.cfg.steps, desc=self.method, enabled=None if enabled else False) as bar:
                bar.update(self.step)
                first, t0 = self.step, time.monotonic()
                while self.step < self.cfg.steps:
                    m = self.train_step()
                    lines.append(m)
                    bar.set_description(f"{self.method} reward {m['reward']:.3f} win {m['win_rate']:.2f}")
                    bar.update()
                    if self.acc.is_main_process:  # every step its line, bar or not (a recipe may turn it off)
                        left = self.cfg.steps - first
                        bar.write(step_line(self.method, m, self.step - first, left, time.monotonic() - t0))
        finally:
            self.writer.close()
            self.trackers.close()
        return lines

    def set_lr(self, step: int) -> float:
        """Put step ``step``'s scheduled learning rate (:func:`.schedule.lr_at`) on every param group."""
        cfg = self.cfg
        lr = lr_at(step, lr=cfg.lr, total=cfg.steps, warmup=cfg.warmup_steps, kind=cfg.lr_scheduler)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        return lr

    # -- the in-loop tree and evaluation -------------------------------------------------------
    def observe_and_remine(self, episodes: Sequence[Episode], step: int) -> dict[str, Any]:
        """Add every rank's episodes to the FIFO buffer; every ``remine_every`` steps, re-mine."""
        from accelerate.utils import gather_object

        assert self.buffer is not None
        mine_ready = [training_record(e) for e in episodes]
        everyone = gather_object(mine_ready) if self.acc.num_processes > 1 else mine_ready
        self.buffer.add_records(everyone)
        if step % self.cfg.remine_every:
            return {}
        old = self.tree
        got = self_mine(self.buffer.trajectories(), self.miner_config(), mode=self.cfg.bonus_mode,
                        name=f"remined-{step}")  # fmt: skip
        diff = node_diff(old, got.tree)
        self.tree, self.bonus_mode = got.tree, got.mode
        self._mined_trajs = self.buffer.trajectories()  # the new tree's corpus: its values and usage read it
        self._values = None  # per node of a tree: re-keyed to the new tree, valued on the buffer
        if self.acc.is_main_process and self.cfg.shaping == "xtree" and got.mode == NO_BONUS:
            print(f"step {step}: the re-mining buffer holds no success ({got.failures} failures): no bonus, "
                  "outcome only until one is in the window", file=sys.stderr)  # fmt: skip
        if self.teacher is not None:  # the cards follow the tree
            from ...render.stats import CorpusUsage

            usage = CorpusUsage.build(got.tree, self._mined_trajs) if len(got.tree) else None
            self.teacher = self._teacher_context(usage)
        return {**got.record(), **{f"nodes_{k}": v for k, v in diff.items()}}

    def miner_config(self) -> Any:
        """The re-miner's config: ``miner`` preset, else the starting tree's, else the domain's."""
        from ...mining.config import MinerConfig

        if self.cfg.miner:
            return miner_from_spec(self.cfg.miner)
        own = self.tree.miner_config if self.tree is not None else None
        if own is not None:
            return own
        return MinerConfig.preset(self.cfg.domain())

    def evaluate(self, step: int) -> float:
        """``evaluate`` of "Agents I" on ``eval_tasks`` tasks of the eval fold (main process)."""
        result = float("nan")
        with gathered(self.policy):  # every rank: sharded weights are gathered; rank 0 plays
            if self.acc.is_main_process:
                result = self._evaluate_main(step)
        self.model.train()
        self.acc.wait_for_everyone()
        return result

    def _evaluate_main(self, step: int) -> float:
        """The evaluation itself (rank 0, weights whole)."""
        from ..model.generation import make_generator
        from ..play.evaluate import evaluate

        cfg = self.cfg
        gen = make_generator(
            "hf",
            model=self.policy,
            tokenizer=self.tokenizer,
            temperature=cfg.eval_temperature,
            max_new_tokens=cfg.max_new_tokens,
            stop=tuple(getattr(self.harness, "stop", ()) or ()),
            seed=cfg.seed,
        )
        res = evaluate(
            self.cfg.env,
            model=cfg.model,
            generator=gen,
            harness=self.cfg.harness or "",
            fold=self.cfg.eval_fold,
            tasks=self.cfg.eval_tasks,
            n=1,
            backend="hf",
            max_steps=self.cfg.max_steps,
            env_args=dict(self.cfg.env_kwargs),
            output_dir=str(self.run_dir / f"eval-{step:06d}"),
            seed=cfg.seed,
            progress=False,
        )
        return float(res["success_rate"])

    # -- checkpoints ----------------------------------------------------------------------------
    def save(self) -> Path | None:
        """Write ``checkpoint-{step}``: plain (main process) or sharded (every rank its shards); wait for all."""
        self.acc.wait_for_everyone()
        state: dict[str, Any] = {"config": self.cfg.to_dict(), "best_win_rate": self.best_win_rate,
                                 "recent_win_rates": list(self._win_rates)}  # fmt: skip
        if self.segcost is not None:
            state["segcost"] = self.segcost.state()
        files = {}
        if self.buffer is not None:
            files["buffer.jsonl"] = "".join(json.dumps(t) + "\n" for t in self.buffer.state())
        if self.tree is not None:
            files["tree.json"] = self.tree.to_json()
        common = {
            "tokenizer": self.tokenizer,
            "state": state,
            "files": files,
            "keep": self.cfg.keep_checkpoints,
        }
        every = self.cfg.export_every
        export = self.step == self.cfg.steps or bool(every and self.step % every == 0)
        path = save_any(self.acc, self.run_dir, self.step, kind=self.parallel["kind"], model=self.policy,
                        optimizer=self.optimizer, ema=self.ema, export=export, **common)  # fmt: skip
        self.acc.wait_for_everyone()
        return path

    def load(self, path: Path) -> None:
        """Restore weights, optimizer, EMA teacher, tree, buffers and the step from a checkpoint."""
        state = ckpt.read_state(path)
        check_resume_config(state.get("config", {}), self.cfg.to_dict(), where=str(path))
        load_any(path, kind=self.parallel["kind"], model=self.policy, optimizer=self.optimizer, ema=self.ema)
        if self.segcost is not None and "segcost" in state:
            self.segcost.load_state(state["segcost"])
        if (path / "tree.json").is_file():
            self.tree = self._load_tree(str(path / "tree.json"))
            self._values = None
            if "self_mined" in self.tree.extra:  # a re-mined tree: its mode and values on its own buffer
                self.bonus_mode, self._values = mined_state(self.tree)
        if self.buffer is not None and (path / "buffer.jsonl").is_file():
            lines = (path / "buffer.jsonl").read_text(encoding="utf-8").splitlines()
            self.buffer.load_state([json.loads(x) for x in lines if x.strip()])
        if self.teacher is not None and self.buffer is not None and self.tree is not None and len(self.tree):
            from ...render.stats import CorpusUsage

            self.teacher = self._teacher_context(CorpusUsage.build(self.tree, self.buffer.trajectories()))
        self.step = int(state["step"])
        self.best_win_rate = float(state.get("best_win_rate", 0.0))
        self._win_rates.extend(float(x) for x in state.get("recent_win_rates", []))


def training_record(ep: Episode) -> dict[str, Any]:
    """The JSON record the re-mining buffer keeps of an episode."""
    from .remine import training_trajectory

    return training_trajectory(ep).to_dict()


def summarize(
    step: int, s: dict[str, float], *, rollout_s: float, update_s: float, lr: float
) -> dict[str, Any]:
    """The metrics line of a step from the summed statistics (contract keys first).

    Example:
        >>> s = {"episodes": 4, "reward_sum": 2.0, "win_sum": 1, "lambda_sum": 1.5, "bonus_sum": 4.0,
        ...      "invalid_sum": 2, "turns": 8, "loss": 0.5, "kl_sum": 0.2, "entropy_sum": 20.0, "tokens": 10}
        >>> m = summarize(3, s, rollout_s=1.0, update_s=1.0, lr=1e-6)
        >>> m["reward"], m["win_rate"], m["lambda_g"], m["bonus"], m["invalid_rate"], m["kl"], m["entropy"]
        (0.5, 0.25, 0.375, 1.0, 0.25, 0.02, 2.0)
    """
    n, tok = s.get("episodes", 0.0), s.get("tokens", 0.0)
    return {
        "step": step,
        "reward": safe_div(s.get("reward_sum", 0.0), n),
        "win_rate": safe_div(s.get("win_sum", 0.0), n),
        "lambda_g": safe_div(s.get("lambda_sum", 0.0), n),
        "bonus": safe_div(s.get("bonus_sum", 0.0), n),
        "loss": s.get("loss", 0.0),
        "kl": safe_div(s.get("kl_sum", 0.0), tok),
        "entropy": safe_div(s.get("entropy_sum", 0.0), tok),
        "invalid_rate": safe_div(s.get("invalid_sum", 0.0), s.get("turns", 0.0)),
        "tokens": int(tok),
        "seconds": rollout_s + update_s,
        "pg_loss": s.get("pg_loss", 0.0),
        "opsd": s.get("opsd", 0.0),
        "clip_frac": safe_div(s.get("clip_sum", 0.0), tok),
        "grad_norm": s.get("grad_norm", 0.0),
        "episodes": int(n),
        "turns": int(s.get("turns", 0.0)),
        "micro_batches": int(s.get("micro_batches", 0.0)),
        "rollout_seconds": rollout_s,
        "update_seconds": update_s,
        "update_tokens_per_s": safe_div(tok, update_s),
        "row_tokens": int(s.get("row_tokens", 0.0)),
        "lr": lr,
    }
