"""Per-rank peak memory of building the policy and its KL reference: 1 process vs FSDP over 2 processes (CPU, gloo).

A random Qwen2-shaped model whose parameters dominate (``--hidden`` 1024, ``--layers`` 26, a 512-token
vocabulary: ~300M parameters, 1.2 GB in float32) is written to a temp folder (safetensors). Each rank
then runs the trainer's own model set-up (:func:`xtree_gym.agents.grpo.policy.build_models`, float32,
``kl_coef`` 0.05 so the reference is built) and measures its resident-set high-water mark (psutil,
sampled every 5 ms) from just before the set-up to just after it:

* ``1 process``: ``python THIS`` -- the model loaded whole, the reference a copy of it;
* ``FSDP x2 whole``: the FSDP launch line with the sliced load switched off (what every rank did
  before: load the whole model, then shard it);
* ``FSDP x2 sliced``: the FSDP launch line as shipped (meta device, shard, each rank reads its rows).

It prints each rank's peak (absolute, and its growth over the resident set before the set-up: the
libraries and the process group are not the model's) and the ratios ``FSDP rank / 1 process``.
glibc's mmap threshold is fixed at 128 KiB in every run so that freed tensors leave the resident set.

    nice python benchmarks/bench_fsdp_load_memory.py [--hidden 1024] [--layers 26]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_fsdp_memory import run_world  # the same launch as the FSDP training-memory benchmark
from bench_trainer_memory import PeakRSS  # the same sampler as the other memory benchmarks

ROOT = Path(__file__).resolve().parents[1]
GIB = 2**30


def write_model(folder: Path, hidden: int, layers: int) -> int:
    """A random Qwen2-shaped causal LM (512-token tiny tokenizer, tied embeddings) saved as a folder; its size."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from xtree_gym.agents.model.loading import tiny_tokenizer

    tok = tiny_tokenizer()
    config = Qwen2Config(  # type: ignore[call-arg]
        vocab_size=len(tok), hidden_size=hidden, intermediate_size=3 * hidden, num_hidden_layers=layers,
        num_attention_heads=16, num_key_value_heads=4, tie_word_embeddings=True,
        eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id, bos_token_id=None,
    )  # fmt: skip
    torch.manual_seed(0)
    with torch.device("meta"):
        n = sum(p.numel() for p in Qwen2ForCausalLM(config).parameters())
    model = Qwen2ForCausalLM(config)
    model.save_pretrained(str(folder))
    tok.save_pretrained(str(folder))
    return n


def rank_run(out: Path, model: str, tag: str) -> None:
    """One rank: the trainer's model set-up (policy + reference), measured; writes ``out/TAG-rank{R}.json``."""
    import psutil

    from xtree_gym.agents.grpo import policy
    from xtree_gym.agents.grpo.config import GRPOConfig

    if tag == "whole":  # the path before: every rank loads the whole model, then shards it
        import xtree_gym.agents.model.sharded_load as sliced

        sliced.sliced_source = lambda name: None
    from transformers import Qwen2ForCausalLM  # noqa: F401  # the modeling code: imported before the baseline

    acc = policy.make_accelerator()
    cfg = GRPOConfig(env="XTree-Countdown-v0", model=model, kl_coef=0.05, output_dir=str(out / "run"),
                     progress=False, tensorboard=False).resolved()  # fmt: skip
    acc.wait_for_everyone()
    base = psutil.Process().memory_info().rss
    with PeakRSS() as peak:
        built = policy.build_models(cfg, acc, "float32")
    local = sum((p.to_local() if hasattr(p, "to_local") else p).numel() * 4 for p in built.model.parameters())
    body = {"rank": acc.process_index, "world": acc.num_processes, "peak": peak.peak, "base": base,
            "ref": built.ref is not None, "param_bytes": local}  # fmt: skip
    (out / f"{tag}-rank{acc.process_index}.json").write_text(json.dumps(body))
    acc.wait_for_everyone()


def launch(world: int, out: Path, model: str, tag: str) -> list[dict[str, Any]]:
    run_world(world, [str(Path(__file__).resolve()), "--rank-run", str(out), "--model", model, "--tag", tag])
    return [json.loads((out / f"{tag}-rank{r}.json").read_text()) for r in range(world)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=26)
    ap.add_argument("--rank-run", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--model", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--tag", default="one", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.rank_run:
        rank_run(Path(args.rank_run), args.model, args.tag)
        return
    tmp = Path(tempfile.mkdtemp(prefix="bench-fsdp-load-"))
    try:
        n = write_model(tmp / "model", args.hidden, args.layers)
        print(f"model: {n / 1e6:.1f}M parameters (float32 {n * 4 / GIB:.2f} GiB), vocab 512; "
              f"load {os.getloadavg()[0]:.2f}")  # fmt: skip
        runs = {"1 process": (1, "one"), "FSDP x2 whole": (2, "whole"), "FSDP x2 sliced": (2, "sliced")}
        results = {name: launch(w, tmp, str(tmp / "model"), tag) for name, (w, tag) in runs.items()}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{'run':<16}{'rank':>5}{'peak GiB':>10}{'growth GiB':>12}{'params GiB':>12}")
    for name, ranks in results.items():
        for r in ranks:
            assert r["ref"], "the reference was not built"
            print(f"{name:<16}{r['rank']:>5}{r['peak'] / GIB:>10.2f}{(r['peak'] - r['base']) / GIB:>12.2f}"
                  f"{r['param_bytes'] / GIB:>12.2f}")  # fmt: skip
    one = results["1 process"][0]
    for name in ("FSDP x2 whole", "FSDP x2 sliced"):
        peak = max(r["peak"] for r in results[name])
        growth = max(r["peak"] - r["base"] for r in results[name])
        print(f"{name} / 1 process, per-rank peak after policy + reference: {peak / one['peak']:.2f}x "
              f"(growth over the libraries: {growth / (one['peak'] - one['base']):.2f}x)")  # fmt: skip


if __name__ == "__main__":
    main()
