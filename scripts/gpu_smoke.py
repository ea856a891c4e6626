"""One GRPO recipe step on one GPU with a random-weight model of the recipe's shape (no downloads).

Needs only torch, transformers and accelerate (plus this package): no vLLM, no hub, no env
simulator. It builds a Qwen2.5-shaped causal LM with random weights (``--shape 1.5b``, ``3b`` or
``7b``, the paper's scales), the in-process ``tiny-random`` tokenizer, and then runs the
recipe's sizes through the real trainer:

1. generation: ``tasks_per_step × n`` prompts of ``--prompt-tokens`` ids, ``max_new_tokens`` of the
   recipe (sampling at the recipe's temperature) with :class:`HFGenerator` on the live weights;
2. one optimizer step: seeded outcome rewards per group → advantages → per-turn rows →
   clipped ratio + k3 KL to the frozen copy (+ OPSD when the recipe has it) → AdamW.

It prints one JSON line: generation and update seconds and tokens/s, peak GPU memory. Example:

    python scripts/gpu_smoke.py --recipe scienceworld-gpu --shape 1.5b --turns 1

Without CUDA it exits 2 unless ``--cpu`` (or ``--allow-cpu``, the same) asks for the CPU run, whose
defaults are a script check's (``--shape tiny``, 64-token prompts, 2 tasks, 16 new tokens); a size
that cannot fit the host's memory is refused in one line before anything is built
(:func:`too_big_for_host`).

``--features`` checks the issue-21 options instead, on ``tiny-random`` (one JSON line each):
bf16 mixed precision, LoRA (adapters move, base frozen, adapters-off reference), gradient
checkpointing (same gradient, less memory) and FSDP (``accelerate launch`` with
``xtree_gym/agents/accelerate/fsdp-1gpu.yaml``: the same step as one plain process, then a
gathered checkpoint that resumes). Without CUDA it prints ``skipped`` and exits 0
(``--allow-cpu`` runs every check but FSDP on CPU)::

    python scripts/gpu_smoke.py --features

``--multi`` is the multi-GPU check (scripts/gpu_multi.py): FSDP over every visible GPU + vLLM colocated
+ LoRA, 2 GRPO steps of SmolLM2, one PASS/FAIL line per feature (``--multi --cpu``: the same logic on
2 CPU processes over gloo with ``tiny-random``; run it first on a new cluster, docs/training.md)::

    python scripts/gpu_smoke.py --multi
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

VOCAB = 151936  # Qwen2.5's
TIED = ("0.5b", "1.5b", "3b")  # the shapes whose LM head is the embedding matrix
FLOAT = 4  # bytes: CPU runs in float32
GPU_SIZES = {"shape": "1.5b", "prompt_tokens": 1500}  # the recipe's scale
# a script check's sizes: a few seconds of CPU
CPU_SIZES = {"shape": "tiny", "prompt_tokens": 64, "tasks_per_step": 2, "max_new_tokens": 16}
SHAPES = {  # Qwen2.5 configs (hidden, layers, heads, kv heads, intermediate); "tiny" checks the script on CPU
    "tiny": (64, 2, 4, 2, 128),
    "0.5b": (896, 24, 14, 2, 4864),
    "1.5b": (1536, 28, 12, 2, 8960),
    "3b": (2048, 36, 16, 2, 11008),
    "7b": (3584, 28, 28, 4, 18944),
}


def build_model_folder(shape: str, folder: Path, device: str) -> None:
    """A random-weight Qwen2 of ``shape`` saved (bf16, safetensors) with the tiny-random tokenizer."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from xtree_gym.agents.model.loading import load_tokenizer

    tok = load_tokenizer("tiny-random")
    hidden, layers, heads, kv, inter = SHAPES[shape]
    cfg = Qwen2Config(
        vocab_size=VOCAB,
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv,
        intermediate_size=inter,
        max_position_embeddings=32768,
        tie_word_embeddings=shape in TIED,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
        torch_dtype="bfloat16",
    )
    torch.manual_seed(0)
    with torch.device(device):
        model = Qwen2ForCausalLM(cfg).bfloat16()
    model.save_pretrained(str(folder), safe_serialization=True)
    tok.save_pretrained(str(folder))
    del model
    if device == "cuda":
        torch.cuda.empty_cache()


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--recipe", default="scienceworld-gpu")
    ap.add_argument(
        "--shape", default=None, choices=sorted(SHAPES), help="default: 1.5b on a GPU, tiny on CPU"
    )
    ap.add_argument(
        "--prompt-tokens",
        type=int,
        default=None,
        help="prompt length of every turn (default: 1500; 64 on CPU)",
    )
    ap.add_argument("--turns", type=int, default=1, help="turns per episode (rows per episode)")
    ap.add_argument("--max-new-tokens", type=int, default=None, help="default: the recipe's")
    ap.add_argument("--tasks-per-step", type=int, default=None, help="default: the recipe's")
    ap.add_argument(
        "--allow-cpu", action="store_true", help="run on CPU when no GPU is visible (script check)"
    )
    ap.add_argument("--features", action="store_true", help="check bf16, LoRA, gradient checkpointing, FSDP")
    ap.add_argument("--fsdp-child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--multi", action="store_true", help="FSDP on all GPUs + vLLM colocated + LoRA, 2 steps")
    ap.add_argument(
        "--cpu",
        action="store_true",
        help="with --multi: the same logic on 2 CPU processes; alone: the same as --allow-cpu",
    )
    ap.add_argument("--multi-child", default=None, help=argparse.SUPPRESS)
    return ap.parse_args()


def resolve_sizes(args: argparse.Namespace, cuda: bool) -> None:
    """Fill in the sizes left unset: the recipe's scale on a GPU, a few-second script check on CPU."""
    for key, value in (GPU_SIZES if cuda else CPU_SIZES).items():
        if getattr(args, key) is None:
            setattr(args, key, value)


def param_count(shape: str) -> int:
    """The parameters of the Qwen2 of ``shape`` (q/k/v biases; the LM head tied for 0.5b-3b).

    Example:
        >>> [round(param_count(s) / 1e9, 2) for s in ("0.5b", "1.5b", "7b")]
        [0.49, 1.54, 7.61]
    """
    hidden, layers, heads, kv, inter = SHAPES[shape]
    kv_dim = kv * hidden // heads
    block = 2 * hidden * hidden + 2 * hidden * kv_dim + hidden + 2 * kv_dim + 3 * hidden * inter + 2 * hidden
    return VOCAB * hidden * (1 if shape in TIED else 2) + layers * block + hidden


def host_bytes_needed(
    shape: str, *, episodes: int, turns: int, prompt: int, new: int, micro_batch_tokens: int, teacher: bool
) -> int:
    """An estimate of the CPU smoke step's peak memory (float32), in bytes.

    The weights, their gradients, AdamW's two moments and the frozen reference (+ OPSD's teacher),
    then the larger of generation (one turn of every episode at once: the KV cache and the per-token
    scores HFGenerator keeps: the scores, their log-softmax and its stack, ``episodes × new × vocab``
    each) and the update (one micro-batch's logits, log-probs and their gradient, and the blocks'
    activations).

    Example:
        >>> round(host_bytes_needed("7b", episodes=16, turns=1, prompt=64, new=16, micro_batch_tokens=4096, teacher=False) / 2**30)
        156
        >>> round(host_bytes_needed("tiny", episodes=64, turns=1, prompt=1500, new=1024, micro_batch_tokens=16384, teacher=False) / 2**30)
        112
    """
    hidden, layers, heads, kv, inter = SHAPES[shape]
    state = param_count(shape) * FLOAT * (5 + int(teacher))
    seq = prompt + new
    generation = (
        episodes * seq * layers * 2 * (kv * hidden // heads) * FLOAT + episodes * new * VOCAB * FLOAT * 3
    )
    # a micro-batch: whole rows (one per episode and turn) up to the token budget, at least one
    tokens = min(max(micro_batch_tokens // seq, 1), episodes * turns) * seq
    update = tokens * (3 * VOCAB + layers * (10 * hidden + 3 * inter)) * FLOAT
    return state + max(generation, update)


def available_bytes() -> int:
    """The memory this process can still get: the host's available memory, capped by a cgroup limit."""
    try:
        import psutil

        free = int(psutil.virtual_memory().available)
    except ImportError:  # psutil comes with accelerate; sysconf's free pages undercount (no page cache)
        free = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        used = int(Path("/sys/fs/cgroup/memory.current").read_text())
        if limit.isdigit():
            free = min(free, int(limit) - used)
    except (OSError, ValueError):
        pass
    return free


def too_big_for_host(args: argparse.Namespace, cfg: Any) -> str | None:
    """The one-line refusal when the CPU step cannot fit in memory (before any weight is built), else None."""
    episodes = cfg.tasks_per_step * cfg.n
    need = host_bytes_needed(
        args.shape, episodes=episodes, turns=args.turns, prompt=args.prompt_tokens, new=cfg.max_new_tokens,
        micro_batch_tokens=cfg.micro_batch_tokens, teacher=cfg.opsd != "none",
    )  # fmt: skip
    have = available_bytes()
    if need <= have:
        return None
    return (
        f"gpu_smoke: --shape {args.shape} ({param_count(args.shape) / 1e9:.2f}B parameters) with {episodes} episodes "
        f"of {args.prompt_tokens}+{cfg.max_new_tokens} tokens needs about {need / 2**30:.1f} GiB on CPU (float32 "
        f"weights, gradients, AdamW, reference, logits) and {have / 2**30:.1f} GiB are available: refused before "
        "building it; use a smaller --shape / --prompt-tokens / --tasks-per-step, or a GPU"
    )


def smoke_config(args: argparse.Namespace, tmp: str, cuda: bool) -> Any:
    """The recipe's config for the random model in ``tmp/model`` and no tree (no corpus needed)."""
    from xtree_gym.agents.grpo.cli import recipes
    from xtree_gym.agents.grpo.config import GRPOConfig, config_from_mapping, load_config_file

    data = load_config_file(recipes()[args.recipe])
    data.update(model=str(Path(tmp) / "model"), output_dir=f"{tmp}/run", progress=False, tensorboard=False)
    # the card text does not change the cost of OPSD's teacher pass: an empty card needs no tree
    data.update(tree=None, shaping="none", opsd="empty" if data.get("opsd", "none") != "none" else "none")
    for key in ("max_new_tokens", "tasks_per_step"):
        if getattr(args, key):
            data[key] = getattr(args, key)
    if not cuda:
        data["dtype"] = "float32"
    cfg: GRPOConfig = config_from_mapping(GRPOConfig, data, args.recipe)
    return cfg


def make_trainer(args: argparse.Namespace, cfg: Any, tmp: str, cuda: bool) -> Any:
    """The real trainer on ``cfg``, with a random model of ``--shape`` built into ``tmp/model``."""
    from xtree_gym.agents.grpo.trainer import GRPOTrainer

    build_model_folder(args.shape, Path(tmp) / "model", "cuda" if cuda else "cpu")
    return GRPOTrainer(cfg)


def generate_episodes(trainer: Any, args: argparse.Namespace, sync: Any) -> tuple[list[Any], float, int]:
    """``tasks_per_step × n`` episodes of ``--turns`` generated turns; seeded 30 % wins."""
    from xtree_gym.agents.model.generation import HFGenerator
    from xtree_gym.agents.types import Episode, GenRequest, Turn

    cfg = trainer.cfg
    rng = random.Random(0)
    count = cfg.tasks_per_step * cfg.n
    vocab = min(len(trainer.tokenizer), 4000)
    gen = HFGenerator(
        trainer.policy,
        trainer.tokenizer,
        temperature=cfg.temperature,
        max_new_tokens=cfg.max_new_tokens,
        seed=0,
        batch_size=count,
    )
    episodes = []
    for i in range(count):
        won = rng.random() < 0.3
        episodes.append(
            Episode(str(i), "smoke", "smoke", "", 0, i // cfg.n, i % cfg.n, success=won, reward=float(won))
        )
    seconds, tokens = 0.0, 0
    trainer.model.eval()
    for turn in range(args.turns):
        reqs = [
            GenRequest(
                [rng.randrange(3, vocab) for _ in range(args.prompt_tokens)],
                key=(i // cfg.n, i % cfg.n, turn),
            )
            for i in range(count)
        ]
        sync()
        t = time.perf_counter()
        outs = gen.generate(reqs)
        sync()
        seconds += time.perf_counter() - t
        tokens += sum(len(o.completion_ids) for o in outs)
        for ep, r, o in zip(episodes, reqs, outs):
            ep.turns.append(Turn(r.prompt_ids, o.completion_ids or [0], o.logprobs or [0.0], o.text, "a", ""))
    trainer.model.train()
    return episodes, seconds, tokens


def main() -> int:
    args = parse_args()
    import torch

    cuda = torch.cuda.is_available()
    if args.multi or args.multi_child:
        from gpu_multi import multi_child, run_multi

        return multi_child(args.multi_child, args.cpu) if args.multi_child else run_multi(args.cpu)
    if args.fsdp_child:
        from gpu_features import fsdp_child

        return fsdp_child(args.fsdp_child)
    if args.features:
        if not cuda and not (args.allow_cpu or args.cpu):
            print(json.dumps({"gpu_smoke": "skipped", "why": "no CUDA device visible"}))
            return 0
        from gpu_features import run_features

        return run_features(cuda)
    if not cuda and not (args.allow_cpu or args.cpu):
        print(
            "gpu_smoke: no CUDA device visible (--cpu runs the step on CPU at a script check's sizes)",
            file=sys.stderr,
        )
        return 2
    resolve_sizes(args, cuda)
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    with tempfile.TemporaryDirectory() as tmp:
        cfg = smoke_config(args, tmp, cuda)
        refused = None if cuda else too_big_for_host(args, cfg)
        if refused:
            print(refused, file=sys.stderr)
            return 2
        t0 = time.perf_counter()
        trainer = make_trainer(args, cfg, tmp, cuda)
        t_build = time.perf_counter() - t0
        episodes, gen_s, gen_tokens = generate_episodes(trainer, args, sync)
        if cuda:
            torch.cuda.reset_peak_memory_stats()
        sync()
        t = time.perf_counter()
        stats = trainer.learn(episodes)
        sync()
        upd_s = time.perf_counter() - t
        out = {
            "recipe": args.recipe,
            "shape": args.shape,
            "device": torch.cuda.get_device_name(0) if cuda else "cpu",
            "episodes": len(episodes),
            "turns": args.turns,
            "prompt_tokens": args.prompt_tokens,
            "build_seconds": round(t_build, 1),
            "generation_seconds": round(gen_s, 1),
            "generated_tokens": gen_tokens,
            "generation_tokens_per_s": round(gen_tokens / gen_s, 1),
            "update_seconds": round(upd_s, 1),
            "trained_tokens": int(stats["tokens"]),
            "read_tokens": int(stats["row_tokens"]),
            "micro_batches": int(stats["micro_batches"]),
            "update_read_tokens_per_s": round(stats["row_tokens"] / upd_s, 1),
            "peak_update_memory_gib": round(torch.cuda.max_memory_allocated() / 2**30, 1) if cuda else None,
            "loss": stats["loss"],
            "grad_norm": stats["grad_norm"],
        }
        print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
