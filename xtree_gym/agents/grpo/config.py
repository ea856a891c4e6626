"""Trainer configuration: :class:`GRPOConfig`, one docstring per field, plus the file/CLI plumbing.

Field names are a contract (``xtree train rlvr`` has one flag per field, ``-`` for ``_``; recipes
and ``--config FILE`` use the same names). The helpers at the end (:func:`load_config_file`,
:func:`config_from_mapping`, :func:`add_config_arguments`, :func:`config_from_args`) work on any
config dataclass, so other ``xtree train`` commands reuse them.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...errors import ConfigError
from ...rewards.constants import INVALID_PENALTY, LAMBDA0, W_REF
from ...rewards.modes import AUTO_MODE, CONTRASTIVE_MODES, check_bonus_mode

ENV_ALIASES = {
    "scienceworld": "XTree-ScienceWorld-v0",
    "webshop": "XTree-WebShop-v0",
    "miniwob": "XTree-MiniWoB-v0",
}
"""Short env names accepted wherever an env id is."""

SHAPINGS = ("none", "xtree", "segcost")
OPSD_BANKS = ("none", "xtree", "empty", "scrambled")
TEACHERS = ("live", "base", "ema")
ROW_MODES = ("turn", "episode")
LOSS_NORMS = ("token", "sequence", "trl-dapo")
OLD_LOGPROBS = ("recompute", "rollout")
LR_SCHEDULERS = ("constant", "linear", "cosine")
OUTCOMES = ("env", "won10")
OPSD_GRADS = ("eq4", "rkl")


@dataclass
class GRPOConfig:
    """Multi-turn GRPO with optional X-Tree / SegCost shaping and an OPSD term (``xtree train rlvr``).

    ``None`` on a domain-dependent field means "the domain's paper value" (see :meth:`resolved`).

    Example:
        >>> cfg = GRPOConfig(env="webshop").resolved()
        >>> cfg.env, cfg.harness, cfg.w_ref, cfg.bonus, cfg.opsd_beta, cfg.max_steps
        ('XTree-WebShop-v0', 'verl-agent', 0.85, 'webshop', 0.0, 15)
    """

    # --- what to play
    env: str = "XTree-ScienceWorld-v0"
    """Gymnasium env id (or ``scienceworld`` / ``webshop`` / ``miniwob``)."""
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    """Extra env constructor arguments (``--env-kwargs KEY=VALUE``, repeatable; values read as JSON)."""
    harness: str | None = None
    """Harness name; default the domain's (``rlvmr`` ScienceWorld, ``verl-agent`` WebShop, ``countdown``...)."""
    task_split: str | None = None
    """Where training tasks come from: a ScienceWorld fold (default ``train``) or WebShop split (``train``)."""
    max_steps: int | None = None
    """Env steps per episode; default the harness's cap (30 ScienceWorld, 15 WebShop)."""
    workers: int = 0
    """Env worker subprocesses for the rollout (0 = in-process)."""
    env_servers: str | None = None
    """``xtree serve`` URLs (``URL[,URL...]``): each episode is one session on one of them (least loaded)."""
    step_timeout: float | None = None
    """Seconds one env step may take before the episode is truncated (None = no limit)."""
    episode_timeout: float | None = None
    """Seconds one episode may take (None = no limit)."""

    # --- the policy and its sampling
    model: str = "tiny-random"
    """Warm start: an HF folder, ``smollm2`` or ``tiny-random``; also the frozen KL reference."""
    dtype: str | None = None
    """Precision: ``fp32``, ``bf16``/``fp16`` (Accelerate mixed precision) or ``auto`` (None): fp32 on CPU, bf16 on GPU."""
    backend: str = "hf"
    """Generation backend on each rank: ``hf`` (``generate`` on the live weights) or ``vllm`` (weights pushed per step)."""
    vllm_kwargs: dict[str, Any] = field(default_factory=dict)
    """Extra vLLM engine arguments (``--vllm-kwargs gpu_memory_utilization=0.3``)."""
    vllm_server: str = ""
    """With ``backend vllm``: rollouts are requests to these servers (``URL[,URL...]``, started by
    ``xtree vllm-serve``; rank r asks URL r mod n), whose weights follow every step; empty = an engine per rank."""
    vllm_transport: str = "auto"
    """How weights reach the servers: ``files`` (safetensors the servers load; CPU), ``nccl`` (vLLM's weight
    transfer; GPU) or ``auto`` (nccl when the policy is on a GPU)."""
    vllm_sync_dir: str | None = None
    """Folder the ``files`` transport writes each push into (the servers must read it); default RUN/vllm-sync."""
    temperature: float = 1.0
    """Sampling temperature; the trainer's logprobs use the same temperature."""
    top_p: float = 1.0
    """Nucleus sampling threshold."""
    max_new_tokens: int = 256
    """Tokens generated per turn at most."""
    oracle_mix: float = 0.0
    """Share of each group's rollouts played by the env's oracle (off-policy expert guidance; 0 = none)."""

    # --- the step
    steps: int = 100
    """Optimizer steps to run (each: a fresh batch of rollouts)."""
    tasks_per_step: int = 8
    """Tasks (groups) sampled per optimizer step, over all ranks together."""
    n: int = 8
    """Rollouts per task (the GRPO group size)."""
    lr: float = 1e-6
    """AdamW learning rate (the peak of ``lr_scheduler``; constant by default)."""
    weight_decay: float = 0.0
    """AdamW weight decay."""
    max_grad_norm: float = 1.0
    """Gradient clipping by global norm (0 = off)."""
    micro_batch_tokens: int = 4096
    """Token budget of one micro-batch (rows × padded length); gradients accumulate over them."""
    rows: str = "turn"
    """``turn``: one training row per turn (default); ``episode``: one row per episode (prompts must extend)."""
    loss_norm: str = "token"
    """``token``: mean over every trained token of the update; ``sequence``: mean of per-row means;
    ``trl-dapo``: TRL's convention, Σ over the update's tokens / (the step's tokens ÷ updates per epoch)."""
    old_logprobs: str = "recompute"
    """π_old for the ratio: ``recompute`` (trainer forward before the update) or ``rollout`` (generator's)."""
    clip_eps_low: float = 0.2
    """PPO ratio clip below: ``1 − ε_low``."""
    clip_eps_high: float = 0.2
    """PPO ratio clip above: ``1 + ε_high`` (DAPO's clip-higher uses 0.28)."""
    kl_coef: float = 0.01
    """Weight of the k3 KL to the frozen warm start (0 = no reference model loaded)."""
    scale_advantages: bool = True
    """Divide group-centred rewards by the group's sample std (+1e-6); False = Dr. GRPO centring only."""

    # --- rewards
    invalid_penalty: float = INVALID_PENALTY
    """Subtracted from the outcome once per invalid step (unparsed response or refused action)."""
    shaping: str = "none"
    """``none`` (outcome only), ``xtree`` (Eq. 3: λ_g Σ b_v), or ``segcost`` (ReuseRL Eq. 6)."""
    tree: str | None = None
    """X-Tree JSON file: the bonus's nodes (``shaping xtree``), the OPSD cards, the re-miner's config."""
    tree_corpus: str | None = None
    """Corpus JSONL the tree was mined from: node success rates and ScienceWorld family cards for OPSD, and the
    contrastive node values of bonus modes ``contrastive_*`` and ``potential``."""
    lambda0: float = LAMBDA0
    """Eq. 3: bonus weight of a group in which no rollout wins."""
    w_ref: float | None = None
    """Eq. 3: win rate at which λ_g reaches 0; default 0.4 ScienceWorld, 0.85 WebShop."""
    bonus: str | None = None
    """b_v design: ``depth`` (1 + 0.5·d, nesting rule) or ``webshop`` (s_v·k_v/T·10); default per domain."""
    matching: str = "stream"
    """How matched(τ) is read: ``stream`` (every completed occurrence) or ``tiling``."""
    segcost_lam: float = 10.0
    """SegCost penalty λ (ReuseRL: 10 with rewards in {0, 10}; scale with the outcome's range)."""
    segcost_buffer: int = 256
    """SegCost's FIFO buffer of successful skill sequences (ReuseRL: 256)."""

    # --- bonus mode (issue 23)
    bonus_mode: str = AUTO_MODE
    """How the X-Tree bonus enters the reward: ``auto`` (default: ``contrastive_gated`` when ``tree_corpus`` holds
    successes and failures, else ``eq3``; the run's config records the mode used), ``eq3`` (the paper's),
    ``normalized``, ``gated``, ``annealed``; issue 34's ``contrastive_gated``, ``contrastive_normalized``,
    ``potential`` (node values from ``tree_corpus``)."""
    bonus_margin: float = 0.5
    """``normalized``: most a bonus-only episode earns (keep it below the smallest win reward)."""
    bonus_anneal_end: float = 1.0
    """``annealed``: fraction of the run's steps at which the bonus weight reaches 0."""

    # --- OPSD (Eq. 4)
    opsd: str = "none"
    """Teacher context: ``none`` (off), ``xtree`` (retrieved card), ``empty``, ``scrambled``, or a text file path."""
    opsd_c: float = 0.01
    """Weight c of the OPSD term."""
    opsd_beta: float | None = None
    """Gate sharpness β of g_t = σ(β δ_t); default 5 ScienceWorld, 0 WebShop."""
    opsd_teacher: str = "live"
    """Teacher weights θ̄: ``live`` (current, no grad), ``base`` (frozen warm start) or ``ema``."""
    opsd_ema: float = 0.99
    """EMA decay of the ``ema`` teacher (θ̄ ← d·θ̄ + (1−d)·θ after each step)."""

    # --- the in-loop tree
    remine_every: int = 0
    """Re-mine the tree every K steps from the FIFO buffer of own rollouts (0 = fixed tree), and value it on that
    buffer (contrastive values, ``auto``'s pick: both labels ``contrastive_gated``, successes only ``eq3``, no
    success no bonus). Without ``tree``: outcome only for K steps, then the tree mined from own episodes."""
    remine_buffer: int = 512
    """Episodes kept in that FIFO buffer (successes and failures, labelled)."""
    miner: str | None = None
    """Miner preset for re-mining, optionally with overrides (``webshop:min_freq=2``); default the tree's own
    miner config (else the domain's preset)."""

    # --- evaluation, logging, checkpoints
    eval_every: int = 0
    """Run ``evaluate`` every K steps (0 = never); writes ``eval_success_rate``."""
    eval_tasks: int = 8
    """Tasks of the eval fold per evaluation (a seeded subset)."""
    eval_temperature: float = 0.4
    """Sampling temperature of the evaluation rollouts (Table 7: 0.4)."""
    eval_fold: str | None = None
    """Eval fold (``G0``/``G1``/``G2`` ScienceWorld, ``test`` WebShop); default the env's first."""
    output_dir: str = "runs/rlvr"
    """Run folder: ``metrics.jsonl``, ``checkpoint-*/``, ``config.json``, TensorBoard events."""
    resume: str | None = None
    """Continue from a run folder (its latest checkpoint) or a ``checkpoint-*`` folder."""
    save_every: int = 1
    """Write a checkpoint every K steps (and always after the last)."""
    keep_checkpoints: int = 2
    """Checkpoints kept (oldest deleted first; 0 = keep all)."""
    export_every: int = 0
    """FSDP runs: also export the Hugging Face ``model/`` folder every K steps (0: at the last step only;
    unsharded runs write it at every checkpoint)."""
    seed: int = 0
    """Seeds task sampling, generation and model init (same seed → same run on CPU)."""
    progress: bool = True
    """Show a progress bar on stderr."""
    tensorboard: bool = True
    """Also write TensorBoard events when ``tensorboard`` is installed."""

    # --- updates / schedule / tracking / signal (issue 21) ---
    mini_batch_size: int = 0
    """Training rows (turns; episodes with ``rows episode``) per optimizer update, over all ranks; 0 = one update per step."""
    ppo_epochs: int = 1
    """Passes over the step's rows; each pass makes ceil(rows / mini_batch_size) updates against the same π_old."""
    lr_scheduler: str = "constant"
    """Learning-rate schedule over the steps: ``constant``, ``linear`` (to 0) or ``cosine`` (to 0), after warm-up."""
    warmup_steps: int = 0
    """Steps of linear warm-up from lr/warmup_steps to lr (0 = none)."""
    report_to: str | None = None
    """Trackers (Accelerate): ``none``, ``tensorboard``, ``wandb``, ``trackio``, ``mlflow``, ``all`` or a comma list; default tensorboard if installed and ``tensorboard`` is on."""
    zero_signal_steps: int = 20
    """Stop after this many steps in a row with no learning signal (every group's advantages 0, or every turn invalid); 0 = never stop."""
    outcome: str | None = None
    """R_out: ``env`` (the env's own reward) or ``won10`` (10 · success, RLVMR); default ``won10`` ScienceWorld, ``env`` else."""
    opsd_grad: str | None = None
    """OPSD gradient: ``eq4`` (Eq. 4 as written: −c·g_t/|y| per token) or ``rkl`` (−c·g_t·δ_t/|y|, sampled reverse KL); default ``rkl`` WebShop, ``eq4`` else."""

    # --- model / memory / LoRA / scale-out (issue 21) ---
    attn: str | None = None
    """Attention implementation: ``eager``, ``sdpa`` or ``flash_attention_2`` (None: transformers' default)."""
    lora_r: int = 0
    """LoRA rank (0 = full fine-tuning); with LoRA the KL reference is the base with adapters disabled."""
    lora_alpha: int = 32
    """LoRA scaling α (the adapter's update is scaled by α / r)."""
    lora_targets: str = "all-linear"
    """Modules LoRA adapts: ``all-linear`` (every linear layer but the LM head) or names, ``q_proj,v_proj``."""
    gradient_checkpointing: bool = False
    """Recompute each decoder layer in the backward pass (less activation memory, more compute)."""

    def domain(self) -> str:
        """``scienceworld``, ``webshop``, ``miniwob``... from the env id.

        Example:
            >>> GRPOConfig(env="XTree-WebShop-v0").domain()
            'webshop'
        """
        env = ENV_ALIASES.get(self.env.lower(), self.env)
        name = env.split("-")[1] if env.startswith("XTree-") else env
        return name.lower()

    def resolved(self) -> GRPOConfig:
        """A copy with every ``None`` domain default filled in and the values checked."""
        dom = self.domain()
        shop = dom == "webshop"
        defaults: dict[str, Any] = {
            "task_split": "train",
            "max_steps": 15 if shop else 30,
            "w_ref": W_REF.get(dom, W_REF["scienceworld"]),
            "bonus": "webshop" if shop else "depth",
            "opsd_beta": 0.0 if shop else 5.0,
            "outcome": "won10" if dom == "scienceworld" else "env",
            "opsd_grad": "rkl" if shop else "eq4",
        }
        out = dataclasses.replace(self, env=ENV_ALIASES.get(self.env.lower(), self.env))
        if out.harness is None:
            out.harness = default_harness(dom)
        for key, value in defaults.items():
            if getattr(out, key) is None:
                setattr(out, key, value)
        check_config(out)
        return out

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _choice(cfg: Any, name: str, allowed: Sequence[str]) -> None:
    value = getattr(cfg, name)
    if value not in allowed:
        raise ConfigError(f"{name} = {value!r}", fix=f"use one of: {', '.join(allowed)}")


def check_config(cfg: GRPOConfig) -> None:
    """Type, finiteness (:func:`~xtree_gym.agents.run.validate.check_fields`), range and choice checks; one
    :class:`ConfigError` naming the field and the fix."""
    from ..run.validate import check_fields

    check_fields(cfg)
    _choice(cfg, "shaping", SHAPINGS)
    _choice(cfg, "opsd_teacher", TEACHERS)
    _choice(cfg, "rows", ROW_MODES)
    _choice(cfg, "loss_norm", LOSS_NORMS)
    _choice(cfg, "old_logprobs", OLD_LOGPROBS)
    for name in ("steps", "tasks_per_step", "n", "micro_batch_tokens", "max_new_tokens", "save_every"):
        if int(getattr(cfg, name)) < 1:
            raise ConfigError(f"{name} = {getattr(cfg, name)!r} must be >= 1")
    for name in ("lr", "kl_coef", "opsd_c", "invalid_penalty", "lambda0", "max_grad_norm", "weight_decay"):
        if float(getattr(cfg, name)) < 0:
            raise ConfigError(f"{name} = {getattr(cfg, name)!r} must be >= 0")
    for name in (
        "remine_every",
        "eval_every",
        "keep_checkpoints",
        "workers",
        "remine_buffer",
        "export_every",
    ):
        if int(getattr(cfg, name)) < 0:
            raise ConfigError(f"{name} = {getattr(cfg, name)!r} must be >= 0")
    check_issue21_fields(cfg)
    if not 0.0 <= cfg.opsd_ema < 1.0:
        raise ConfigError(f"opsd_ema = {cfg.opsd_ema!r}", fix="use a decay in [0, 1), e.g. 0.99")
    if not 0.0 <= cfg.oracle_mix <= 1.0:
        raise ConfigError(f"oracle_mix = {cfg.oracle_mix!r}", fix="use a share in [0, 1]")
    if cfg.temperature <= 0:
        raise ConfigError(f"temperature = {cfg.temperature!r} must be > 0")
    if not 0.0 < cfg.top_p <= 1.0:
        raise ConfigError(f"top_p = {cfg.top_p!r}", fix="use a threshold in (0, 1]")
    for name in ("clip_eps_low", "clip_eps_high", "segcost_lam", "eval_temperature"):
        if getattr(cfg, name) < 0:
            raise ConfigError(f"{name} = {getattr(cfg, name)!r} must be >= 0")
    if not cfg.clip_eps_low < 1:  # the ratio's lower clip 1 - eps must stay above 0
        raise ConfigError(
            f"clip_eps_low = {cfg.clip_eps_low!r} must be < 1 (the ratio is clipped below at 1 - clip_eps_low)",
            fix="use a value in [0, 1), e.g. 0.2",
        )
    check_bonus_mode(cfg.bonus_mode, cfg.bonus_margin, cfg.bonus_anneal_end, auto=True)  # issues 23, 34
    self_mined = bool(cfg.remine_every) and not cfg.tree  # the tree and its values come from own episodes
    if (
        cfg.shaping == "xtree"
        and cfg.bonus_mode in CONTRASTIVE_MODES
        and not cfg.tree_corpus
        and not self_mined
    ):
        raise ConfigError(
            f"bonus mode {cfg.bonus_mode!r} weighs each node by how it separates the tree's successes from its failures",
            fix="pass --tree-corpus CORPUS.jsonl (the labelled corpus the tree was mined from), or drop --tree and"
            " pass --remine-every K (the tree mined and valued on the run's own episodes)",
        )
    if cfg.shaping == "xtree" and not cfg.tree and not self_mined:
        raise ConfigError(
            "shaping 'xtree' needs a tree",
            fix="pass --tree TREE.json (from `xtree mine`), or --remine-every K to mine one from the run's own episodes",
        )
    if cfg.opsd in ("xtree", "scrambled") and not cfg.tree:
        raise ConfigError(f"opsd {cfg.opsd!r} needs a tree for its cards", fix="pass --tree TREE.json")
    if cfg.miner:
        from .remine import miner_from_spec

        miner_from_spec(cfg.miner)  # one error for a bad preset or override, before any model is built
    check_model_fields(cfg)
    if cfg.opsd not in OPSD_BANKS and not Path(cfg.opsd).is_file():
        raise ConfigError(
            f"opsd = {cfg.opsd!r} is neither a bank name nor a readable text file",
            fix=f"use one of {', '.join(OPSD_BANKS)} or the path of a text file",
        )


def default_harness(domain: str) -> str:
    """The harness of an env domain (:data:`xtree_gym.agents.harness.registry.DEFAULT_HARNESS`).

    A domain with none is one :class:`ConfigError` naming ``--harness``.

    Example:
        >>> default_harness("countdown"), default_harness("scienceworld")
        ('countdown', 'rlvmr')
    """
    from ..harness.registry import harness_for_domain

    return harness_for_domain(domain)


def check_issue21_fields(cfg: GRPOConfig) -> None:
    """Checks of the mini-batch, schedule, tracker, signal, outcome and OPSD-gradient fields."""
    _choice(cfg, "lr_scheduler", LR_SCHEDULERS)
    if cfg.outcome is not None:
        _choice(cfg, "outcome", OUTCOMES)
    if cfg.opsd_grad is not None:
        _choice(cfg, "opsd_grad", OPSD_GRADS)
    if int(cfg.ppo_epochs) < 1:
        raise ConfigError(f"ppo_epochs = {cfg.ppo_epochs!r} must be >= 1")
    for name in ("mini_batch_size", "warmup_steps", "zero_signal_steps"):
        if int(getattr(cfg, name)) < 0:
            raise ConfigError(f"{name} = {getattr(cfg, name)!r} must be >= 0")
    if cfg.warmup_steps > cfg.steps:
        raise ConfigError(f"warmup_steps = {cfg.warmup_steps} exceeds steps = {cfg.steps}", fix="lower it")
    if cfg.report_to is not None:
        from ..run.tracking import parse_report_to

        parse_report_to(cfg.report_to)


def check_model_fields(cfg: GRPOConfig) -> None:
    """The issue-21 fields: dtype, attention implementation, LoRA."""
    from ..model.loading import ATTN_IMPLEMENTATIONS
    from ..model.lora import DTYPE_NAMES

    if cfg.dtype is not None and cfg.dtype != "auto" and cfg.dtype not in DTYPE_NAMES:
        raise ConfigError(f"dtype = {cfg.dtype!r}", fix="use fp32, bf16, fp16 or auto")
    if cfg.attn is not None and cfg.attn not in ATTN_IMPLEMENTATIONS:
        raise ConfigError(f"attn = {cfg.attn!r}", fix=f"use one of: {', '.join(ATTN_IMPLEMENTATIONS)}")
    if cfg.lora_r < 0 or cfg.lora_alpha <= 0:
        raise ConfigError(
            f"lora_r = {cfg.lora_r!r}, lora_alpha = {cfg.lora_alpha!r}",
            fix="use lora_r >= 0 (0 = no LoRA) and lora_alpha > 0",
        )
    if cfg.vllm_server:
        from ..model.vllm_sync import TRANSPORTS, parse_server_urls

        if cfg.backend != "vllm":
            raise ConfigError(f"vllm_server is set but backend = {cfg.backend!r}", fix="add --backend vllm")
        parse_server_urls(cfg.vllm_server)
        _choice(cfg, "vllm_transport", TRANSPORTS)
    if cfg.lora_r:
        from ..model.lora import parse_targets

        parse_targets(cfg.lora_targets)  # with backend vllm the push folds the adapters in (model/push.py)


# ----------------------------------------------------------------------------- files and flags


def load_config_file(path: str | Path) -> dict[str, Any]:
    """Read a YAML or JSON config file into a mapping (YAML needs PyYAML).

    Example:
        >>> import json, tempfile, os
        >>> with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
        ...     json.dump({"steps": 2}, fh)
        >>> load_config_file(fh.name); os.unlink(fh.name)
        {'steps': 2}
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read the config file: {exc.strerror}", where=str(p)) from exc
    try:
        if p.suffix.lower() == ".json":
            data = json.loads(text)
        else:
            import yaml

            data = yaml.safe_load(text)
    except ValueError as exc:  # json.JSONDecodeError
        raise ConfigError(f"not valid JSON: {exc}", where=str(p), fix="fix the file's syntax") from exc
    except Exception as exc:  # yaml.YAMLError (PyYAML is imported lazily, so it cannot be named here)
        mark = getattr(exc, "problem_mark", None)
        where = f"{p}:{mark.line + 1}" if mark is not None else str(p)
        raise ConfigError(f"not valid YAML: {exc}", where=where, fix="fix the file's syntax") from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError("a config file must hold a mapping of field: value", where=str(p))
    return data


def config_from_mapping(cls: type[Any], data: Mapping[str, Any], where: str = "<config>") -> Any:
    """Build ``cls`` from a mapping, refusing unknown keys (one error listing them).

    Example:
        >>> config_from_mapping(GRPOConfig, {"steps": 3}).steps
        3
        >>> config_from_mapping(GRPOConfig, {"stepz": 3})  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        xtree_gym.errors.ConfigError: <config>: unknown field(s) ['stepz'] -- fix: ...
    """
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - names)
    if unknown:
        raise ConfigError(
            f"unknown field(s) {unknown}", where=where, fix=f"use only: {', '.join(sorted(names))}"
        )
    from ..run.validate import check_fields

    cfg = cls(**dict(data))
    check_fields(cfg, where)
    return cfg


def _field_kind(f: dataclasses.Field[Any], hints: Mapping[str, Any]) -> type:
    hint = hints[f.name]
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if typing.get_origin(hint) in (typing.Union, types.UnionType) and len(args) == 1:
        hint = args[0]
    origin = typing.get_origin(hint) or hint
    return origin if isinstance(origin, type) else str


def _kv(text: str) -> tuple[str, Any]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    try:
        return key, json.loads(value)
    except ValueError:
        return key, value


def field_docs(cls: type[Any]) -> dict[str, str]:
    """The docstring under each field of a dataclass and of its bases (read from their source), for ``--help``.

    The classes of ``__mro__`` are read base first, so a subclass's own docstring of a field wins
    and a field it only inherits (or re-declares without one) keeps its base's.

    Example:
        >>> field_docs(GRPOConfig)["tasks_per_step"]
        'Tasks (groups) sampled per optimizer step, over all ranks together.'
    """
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if klass is not object:
            docs.update(_own_field_docs(klass))
    return docs


def _own_field_docs(cls: type[Any]) -> dict[str, str]:
    """The field docstrings written in ``cls``'s own class body ({} when its source cannot be read)."""
    import ast
    import inspect

    try:
        tree = ast.parse(inspect.getsource(cls))
    except (OSError, TypeError):
        return {}
    body = tree.body[0].body  # type: ignore[attr-defined]
    docs: dict[str, str] = {}
    for a, b in itertools.pairwise(body):
        doc = b.value.value if isinstance(b, ast.Expr) and isinstance(b.value, ast.Constant) else None
        if isinstance(a, ast.AnnAssign) and isinstance(a.target, ast.Name) and isinstance(doc, str):
            docs[a.target.id] = doc.strip().replace("%", "%%")
    return docs


def add_config_arguments(parser: argparse.ArgumentParser, cls: type[Any]) -> None:
    """One flag per field of ``cls`` (``--tasks-per-step``; ``-o`` for ``--output-dir``) plus ``--config``.

    Flags default to ``SUPPRESS`` so that :func:`config_from_args` knows which ones were given.
    """
    parser.add_argument("--config", default=None, help="YAML/JSON file (or a recipe name) of field: value")
    hints = typing.get_type_hints(cls)
    docs = field_docs(cls)
    for f in dataclasses.fields(cls):
        flag = "--" + f.name.replace("_", "-")
        names = ["-o", flag] if f.name == "output_dir" else [flag]
        kind = _field_kind(f, hints)
        kw: dict[str, Any] = {"dest": f.name, "default": argparse.SUPPRESS, "help": docs.get(f.name, "")}
        if kind is bool:
            parser.add_argument(*names, action=argparse.BooleanOptionalAction, **kw)
        elif kind is dict:
            parser.add_argument(*names, type=_kv, action="append", metavar="KEY=VALUE", **kw)
        else:
            parser.add_argument(*names, type=kind if kind in (int, float) else str, **kw)


def config_from_args(
    cls: type[Any], args: argparse.Namespace, recipes: Mapping[str, Path] | None = None
) -> Any:
    """Defaults < ``--config FILE`` (or recipe) < flags given on the command line."""
    data: dict[str, Any] = {}
    where = "<flags>"
    source = getattr(args, "config", None)
    if source:
        path = Path(source)
        if not path.exists() and recipes and source in recipes:
            path = recipes[source]
        if not path.exists():
            known = f" or a recipe: {', '.join(sorted(recipes))}" if recipes else ""
            raise ConfigError(f"--config {source!r}: no such file", fix=f"pass a YAML/JSON file{known}")
        data.update(load_config_file(path))
        where = str(path)
    from ..run.validate import check_fields

    names = {f.name for f in dataclasses.fields(cls)}
    for name in sorted(names):
        if name in vars(args):
            value = getattr(args, name)
            data[name] = (
                dict(value) if isinstance(value, list) and value and isinstance(value[0], tuple) else value
            )
            # a bad flag is the flag's fault, not the --config file's: checked alone, named as typed
            check_fields(cls(**{name: data[name]}), where="--" + name.replace("_", "-"))
    return config_from_mapping(cls, data, where)
