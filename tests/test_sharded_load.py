"""Scale-out II, item 2: under FSDP a model folder is built on the meta device, sharded, and each rank reads
only its rows of the safetensors (:mod:`xtree_gym.agents.model.sharded_load`).

Two gloo processes load a small Qwen2-shaped folder (written to ``tmp_path``) as the trainer does; the
full state dict they export must equal, tensor by tensor, what one process loads whole (the file's
values, and with LoRA the same seeded adapters); each rank must have read about half the bytes and the
two together every byte exactly once; tied embeddings stay one parameter and the rotary ``inv_freq``
(not in the file) holds the right values.
"""

from __future__ import annotations

import json
import os
import re
import socket
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
from safetensors.torch import load_file, save_file  # noqa: E402

from xtree_gym.agents.model.sharded_load import SliceReader, local_rows, read_header  # noqa: E402


def write_folder(folder: Path, hidden: int = 128, layers: int = 3) -> None:
    """A random Qwen2-shaped model (tied embeddings, the tiny tokenizer) saved as an HF folder (~6 MB)."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from xtree_gym.agents.model.loading import tiny_tokenizer

    tok = tiny_tokenizer()
    config = Qwen2Config(  # type: ignore[call-arg]
        vocab_size=len(tok), hidden_size=hidden, intermediate_size=3 * hidden, num_hidden_layers=layers,
        num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=True, rope_theta=5000.0,
        eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id, bos_token_id=None,
    )  # fmt: skip
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(1)
        Qwen2ForCausalLM(config).save_pretrained(str(folder))
    tok.save_pretrained(str(folder))


def test_slice_reader_reads_only_the_rows_asked(tmp_path: Path) -> None:
    tensors = {
        "a": torch.arange(40.0).view(10, 4),
        "b": torch.arange(6.0).to(torch.bfloat16),
        "s": torch.tensor(3.5),
    }
    save_file(tensors, str(tmp_path / "m.safetensors"))
    header = read_header(tmp_path / "m.safetensors")
    assert sorted(header) == ["a", "b", "s"]
    reader = SliceReader(tmp_path)
    assert torch.equal(reader.rows("a", 3, 5), tensors["a"][3:5])
    assert reader.bytes_read == 2 * 4 * 4  # two rows of four float32
    assert torch.equal(reader.rows("b", 4, 99), tensors["b"][4:])  # clipped at the end
    assert reader.bytes_read == 32 + 2 * 2
    assert reader.rows("a", 10, 12).shape == (0, 4) and reader.bytes_read == 36
    assert float(reader.rows("s", 0, 1)) == 3.5 and reader.bytes_read == 40
    assert local_rows(torch.zeros(7, 2)) == (0, 7)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _rank(rank: int, world: int, port: int, folder: str, out: str, lora: bool) -> None:
    """One rank: the trainer's sliced load (LoRA if asked), then the full state dict gathered to rank 0."""
    import torch.distributed as dist
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    from xtree_gym.agents.model.lora import apply_lora
    from xtree_gym.agents.model.sharded_load import load_sharded
    from xtree_gym.agents.run.sharding import shard

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    try:
        torch.manual_seed(0)
        readers: list[SliceReader] = []
        got = load_sharded(
            folder, device=torch.device("cpu"), dtype=torch.float32, attn=None, shard=shard,
            adapt=(lambda m: apply_lora(m, r=4, alpha=8, targets="all-linear")) if lora else (lambda m: m),
            reader_hook=readers.append,
        )  # fmt: skip
        assert got is not None
        model = got[0]
        base = model.get_base_model() if lora else model
        full = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
        report = {
            "bytes": readers[0].bytes_read,
            "local": {n: [p.numel(), p.to_local().numel()] for n, p in base.named_parameters()},
            "tied": base.lm_head.weight is base.model.embed_tokens.weight,
            "trainable": sorted(n for n, p in model.named_parameters() if p.requires_grad),
            "inv_freq": base.model.rotary_emb.inv_freq.tolist(),
            "original_inv_freq": base.model.rotary_emb.original_inv_freq.tolist(),
        }
        if rank == 0:
            save_file({k: v.contiguous() for k, v in full.items()}, os.path.join(out, "full.safetensors"))
        Path(out, f"rank{rank}.json").write_text(json.dumps(report))
    finally:
        dist.destroy_process_group()


def _load_on_two_ranks(folder: Path, out: Path, lora: bool) -> list[dict]:
    import torch.multiprocessing as mp

    port = _free_port()
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_rank, args=(r, 2, port, str(folder), str(out), lora)) for r in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=240)
    assert [p.exitcode for p in procs] == [0, 0]
    return [json.loads((out / f"rank{r}.json").read_text()) for r in range(2)]


@pytest.mark.parametrize("lora", [False, True], ids=["full", "lora"])
def test_two_ranks_read_only_their_rows_and_hold_the_checkpoints_values(tmp_path: Path, lora: bool) -> None:
    """Two spawned gloo ranks (~10-30 s on 2 loaded cores): each reads its half, together they hold the file."""
    from xtree_gym.agents.model.loading import load_model
    from xtree_gym.agents.model.lora import apply_lora

    folder = tmp_path / "model"
    write_folder(folder)
    ranks = _load_on_two_ranks(folder, tmp_path, lora)
    file = load_file(str(folder / "model.safetensors"))
    total = sum(v.numel() * v.element_size() for v in file.values())
    # every byte of the file read exactly once over the two ranks, about half by each
    assert sum(r["bytes"] for r in ranks) == total
    assert all(r["bytes"] <= 0.6 * total for r in ranks)
    for r in ranks:  # the materialised tensors are shards: each rank holds at most half (+1 row) of each
        assert len(r["local"]) >= 3 * 9 + 2
        assert all(local <= (full + 1) // 2 + full // 16 for full, local in r["local"].values())
    assert sum(r["local"]["model.embed_tokens.weight"][1] for r in ranks) == 512 * 128

    # one process loads the same folder whole (today's path): the same tensors, bit for bit
    torch.manual_seed(0)
    whole, _ = load_model(str(folder))
    if lora:
        whole = apply_lora(whole, r=4, alpha=8, targets="all-linear")
    want = whole.state_dict()
    got = load_file(str(tmp_path / "full.safetensors"))
    assert sorted(got) == sorted(want)
    compared = 0
    for name, value in want.items():
        assert torch.equal(got[name], value), name
        compared += 1
    plain = [k for k in want if "lora_" not in k]
    assert (
        compared == len(want) and len(plain) == len(file) + 1
    )  # + the tied head (the embedding, in the dict)
    for name in file:  # every checkpoint tensor, against the file itself
        key = (
            name
            if not lora
            else "base_model.model." + re.sub(r"_proj\.(weight|bias)$", r"_proj.base_layer.\1", name)
        )
        assert torch.equal(got[key], file[name]), name
    assert lora == any("lora_A" in k and got[k].abs().sum() > 0 for k in got)  # seeded adapters, not zeros
    inner = whole.get_base_model() if lora else whole
    trainable = sorted(n for n, p in whole.named_parameters() if p.requires_grad)
    assert len(trainable) == (3 * 7 * 2 if lora else len(file))  # the adapters only, or every tensor
    for r in ranks:
        assert r["trainable"] == trainable  # LoRA's frozen base stays frozen
        assert r["tied"]
        assert r["inv_freq"] == inner.model.rotary_emb.inv_freq.tolist()
        assert r["original_inv_freq"] == r["inv_freq"]


def test_what_cannot_be_read_in_slices_loads_whole_and_a_truncated_file_is_one_error(tmp_path: Path) -> None:
    """tiny-random and hub ids take the whole-model path; so does a checkpoint naming tensors otherwise."""
    from xtree_gym.agents.model.sharded_load import load_sharded, sliced_source
    from xtree_gym.errors import ConfigError

    assert sliced_source("tiny-random") is None
    assert sliced_source("Qwen/Qwen2.5-0.5B-Instruct") is None
    folder = tmp_path / "model"
    write_folder(folder, hidden=32, layers=1)
    assert sliced_source(str(folder)) == folder
    weights = load_file(str(folder / "model.safetensors"))
    save_file({f"transformer.{k}": v for k, v in weights.items()}, str(folder / "model.safetensors"))

    def no_shard(model: object) -> None:
        raise AssertionError("a checkpoint with other names must not be sharded here")

    got = load_sharded(
        str(folder), device="cpu", dtype=torch.float32, attn=None, adapt=lambda m: m, shard=no_shard
    )
    assert got is None
    reader = SliceReader(folder)  # the header is read now; the file is cut inside the last tensor's first row
    name = max(reader.entries, key=lambda n: reader.entries[n].end)
    data = (folder / "model.safetensors").read_bytes()
    (folder / "model.safetensors").write_bytes(data[: reader.entries[name].start + 2])
    with pytest.raises(ConfigError, match="ends inside tensor"):
        reader.rows(name, 0, 1)
    (folder / "model.safetensors").write_bytes(b"\x05")
    with pytest.raises(ConfigError, match="cannot read the safetensors header"):
        SliceReader(folder)
