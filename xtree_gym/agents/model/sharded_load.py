"""A policy for FSDP2 that no rank ever holds whole: built on the meta device, sharded, filled slice by slice.

``accelerate launch --config_file fsdp.yaml`` on CPU shards the policy here (:mod:`..run.sharding`).
Loading it whole first would make every rank read the full checkpoint (eight ranks of a node: eight
copies of a 7B model in host memory). Instead, for a model folder (``--model PATH`` or ``smollm2``'s
cached folder) with safetensors weights:

1. the model is built from its ``config.json`` on the meta device (no memory), LoRA-adapted there
   (the adapters are created on the CPU from the run's RNG exactly as one process creates them, and
   kept whole until the fill: they are small; :func:`cpu_stand_ins`);
2. it is sharded (``fully_shard``: each parameter becomes a DTensor holding a block of rows);
3. ``to_empty`` gives each rank memory for its shards only, and :class:`SliceReader` reads exactly
   those rows' bytes from the safetensors files (no mmap, so nothing else of the file counts as the
   rank's memory);
4. non-persistent buffers (rotary ``inv_freq``: not in the checkpoint) are rebuilt from the config,
   and tied weights stay one parameter (the LM head is the embedding).

``tiny-random`` (built in-process, no file), hub ids, ``.bin`` checkpoints and checkpoints whose
tensor names differ from the model's keep the whole-model path (:func:`sliced_source` says ``None``).
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...errors import ConfigError

SAFETENSORS_DTYPES = {
    "F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16", "I64": "int64",
    "I32": "int32", "I16": "int16", "I8": "int8", "U8": "uint8", "BOOL": "bool",
    "F8_E4M3": "float8_e4m3fn", "F8_E5M2": "float8_e5m2",
}  # fmt: skip
"""safetensors dtype codes -> torch dtype names."""


@dataclass(frozen=True)
class Entry:
    """Where one tensor lies in a safetensors file: absolute byte offsets of its data."""

    file: Path
    dtype: str
    shape: tuple[int, ...]
    start: int
    end: int


def read_header(path: Path) -> dict[str, Entry]:
    """The tensors of one safetensors file (its JSON header only; the data is not read).

    Example:
        >>> import tempfile, torch
        >>> from safetensors.torch import save_file
        >>> f = Path(tempfile.mkdtemp()) / "m.safetensors"
        >>> save_file({"w": torch.zeros(3, 2)}, str(f))
        >>> e = read_header(f)["w"]; (e.dtype, e.shape, e.end - e.start)
        ('F32', (3, 2), 24)
    """
    try:
        with open(path, "rb") as fh:
            (size,) = struct.unpack("<Q", fh.read(8))
            header = json.loads(fh.read(size))
    except (OSError, ValueError, struct.error) as exc:
        raise ConfigError(
            f"cannot read the safetensors header ({type(exc).__name__}: {exc})",
            where=str(path),
            fix="the weights are truncated or corrupt: write the model folder again",
        ) from None
    base = 8 + size
    out: dict[str, Entry] = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        out[name] = Entry(path, info["dtype"], tuple(info["shape"]), base + begin, base + end)
    return out


class SliceReader:
    """Reads row blocks of the tensors of a model folder's ``*.safetensors`` files; counts the bytes it read.

    Example:
        >>> import tempfile, torch
        >>> from safetensors.torch import save_file
        >>> d = Path(tempfile.mkdtemp()); save_file({"w": torch.arange(12.0).view(6, 2)}, str(d / "m.safetensors"))
        >>> r = SliceReader(d)
        >>> r.rows("w", 2, 4).tolist(), r.bytes_read
        ([[4.0, 5.0], [6.0, 7.0]], 16)
    """

    def __init__(self, folder: Path) -> None:
        self.entries: dict[str, Entry] = {}
        for f in sorted(Path(folder).glob("*.safetensors")):
            self.entries.update(read_header(f))
        self.bytes_read = 0

    def rows(self, name: str, start: int, stop: int) -> Any:
        """Rows ``start:stop`` of tensor ``name`` (dim 0; a 0-dim tensor whole), read from the file alone."""
        import torch

        e = self.entries[name]
        if e.dtype not in SAFETENSORS_DTYPES:
            raise ConfigError(f"tensor {name!r} has the safetensors dtype {e.dtype!r}, which this reader does not know",
                              where=str(e.file), fix="load this model without FSDP, or convert its weights")  # fmt: skip
        dtype = getattr(torch, SAFETENSORS_DTYPES[e.dtype])
        shape: tuple[int, ...]
        if not e.shape:  # a scalar: all of it
            start, stop, shape = 0, 1, ()
        else:
            stop = min(stop, e.shape[0])
            shape = (max(stop - start, 0), *e.shape[1:])
        row_bytes = (e.end - e.start) // max(e.shape[0] if e.shape else 1, 1)
        count = max(stop - start, 0) * row_bytes
        if count == 0:
            return torch.empty(shape, dtype=dtype)
        buf = bytearray(count)
        with open(e.file, "rb") as fh:  # plain reads, no mmap: only these rows ever enter this process
            fh.seek(e.start + start * row_bytes)
            got = fh.readinto(buf)
        if got != count:
            raise ConfigError(f"the safetensors file ends inside tensor {name!r}", where=str(e.file),
                              fix="the weights are truncated: write the model folder again")  # fmt: skip
        self.bytes_read += count
        return torch.frombuffer(buf, dtype=dtype).view(shape)


def local_rows(t: Any) -> tuple[int, int]:
    """``(start, stop)``: the rows (dim 0) of the full tensor that this rank's piece of ``t`` holds.

    A plain tensor holds all of them; an FSDP2 parameter (a DTensor sharded on dim 0) a block of them.
    """
    if not hasattr(t, "placements"):
        return 0, (t.shape[0] if t.dim() else 1)
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor._utils import compute_local_shape_and_global_offset

    if any(
        not isinstance(p, (Replicate, Shard)) or (isinstance(p, Shard) and p.dim != 0) for p in t.placements
    ):
        raise ConfigError(f"cannot fill a tensor placed as {t.placements} from row slices",
                          fix="report this: FSDP2 shards parameters on dim 0")  # fmt: skip
    shape, offset = compute_local_shape_and_global_offset(t.shape, t.device_mesh, t.placements)
    if not shape:
        return 0, 1
    return offset[0], offset[0] + shape[0]


def checkpoint_name(name: str) -> str:
    """The checkpoint's name of a parameter of a (LoRA-wrapped) base model.

    Example:
        >>> checkpoint_name("model.layers.0.self_attn.q_proj.base_layer.weight")
        'model.layers.0.self_attn.q_proj.weight'
    """
    return name.replace(".base_layer.", ".")


def persistent_buffers(model: Any) -> Iterator[tuple[str, Any]]:
    """``(name, buffer)`` of the buffers a state dict holds (not the non-persistent ones)."""
    for mod_name, mod in model.named_modules():
        for name, buf in mod._buffers.items():
            if buf is not None and name not in mod._non_persistent_buffers_set:
                yield (f"{mod_name}.{name}" if mod_name else name), buf


def wanted(model: Any) -> list[tuple[str, Any]]:
    """``(name, tensor)`` of everything to fill: parameters (tied ones once) and persistent buffers."""
    return [*model.named_parameters(), *persistent_buffers(model)]


def fill(model: Any, reader: SliceReader, own: dict[str, Any]) -> int:
    """Copy into every parameter's local piece (and persistent buffer) its rows; returns how many were filled.

    ``own``: values built in this process (LoRA adapters), by the model's names; the rest comes from
    ``reader`` under the checkpoint's names.
    """
    import torch

    count = 0
    with torch.no_grad():
        for name, t in wanted(model):
            start, stop = local_rows(t)
            local = t.to_local() if hasattr(t, "to_local") else t
            if name in own:
                src = own[name][start:stop] if own[name].dim() else own[name]
            else:
                src = reader.rows(checkpoint_name(name), start, stop)
            if tuple(src.shape) != tuple(local.shape):
                raise ConfigError(
                    f"tensor {name!r}: the checkpoint's rows {start}:{stop} have shape {tuple(src.shape)}, "
                    f"the model's piece {tuple(local.shape)}",
                    fix="the weights do not fit config.json: write the model folder again",
                )
            local.copy_(src)
            count += 1
    return count


def rebuild_buffers(model: Any, device: Any) -> int:
    """Recompute the non-persistent buffers (rotary ``inv_freq``...) from each owning module's config.

    They are not in the checkpoint, and ``to_empty`` left garbage in them. Returns how many were set.
    """
    import torch

    count = 0
    for mod_name, mod in model.named_modules():
        names = [n for n, b in mod._buffers.items() if b is not None and n in mod._non_persistent_buffers_set]
        if not names:
            continue
        config = getattr(mod, "config", None)
        try:
            with torch.device(device):
                fresh = type(mod)(config)
        except Exception as exc:  # a module this loader does not know how to rebuild
            raise ConfigError(
                f"cannot rebuild the buffers {names} of {mod_name or 'the model'} ({type(mod).__name__}: {exc})",
                fix="load this model without FSDP, or report the model class",
            ) from None
        for n in names:
            mod._buffers[n] = getattr(fresh, n).to(device=device, dtype=mod._buffers[n].dtype)
            count += 1
    return count


@contextmanager
def cpu_stand_ins(model: Any) -> Iterator[None]:
    """While open, every meta Linear / Embedding weight of ``model`` is a CPU stand-in of its shape and dtype
    that costs one element (a zero-stride view); on leaving, the meta weights are put back.

    PEFT creates LoRA adapters on the CPU from the run's RNG and then moves them to the device of the
    layer they adapt: on the meta device they would lose those (seeded) values. With the stand-ins they
    stay on the CPU, cast to the layer's dtype, as in a model loaded whole.
    """
    import torch

    saved = []
    for mod in model.modules():
        w = mod._parameters.get("weight") if isinstance(mod, (torch.nn.Linear, torch.nn.Embedding)) else None
        if w is not None and w.is_meta:
            saved.append((mod, w))
            stand_in = torch.zeros((), dtype=w.dtype).expand(w.shape)
            mod._parameters["weight"] = torch.nn.Parameter(stand_in, requires_grad=w.requires_grad)
    try:
        yield
    finally:
        for mod, w in saved:  # the same Parameter objects: tied weights stay tied
            stand_in = mod._parameters.get("weight")
            if stand_in is not None:  # PEFT froze the stand-in: the weight it stood for is frozen too
                w.requires_grad_(stand_in.requires_grad)
            mod._parameters["weight"] = w


def sliced_source(name: str) -> Path | None:
    """The folder of ``--model name`` when it can be loaded slice by slice (safetensors), else ``None``."""
    from .loading import MODEL_NAMES, _source

    if name == "tiny-random" or (name not in MODEL_NAMES and not Path(name).expanduser().is_dir()):
        return None
    source, local = _source(name)
    folder = Path(source)
    if not local or not any(folder.glob("*.safetensors")):
        return None
    return folder


def meta_model(name: str, folder: Path, *, dtype: Any, attn: str | None) -> tuple[Any, Any]:
    """``(model on the meta device, tokenizer)``: what :func:`..loading.load_model` gives, without weights."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, GenerationConfig

    from .loading import MODEL_NAMES, load_tokenizer

    tok = load_tokenizer(str(folder))
    config = AutoConfig.from_pretrained(str(folder), local_files_only=True)
    kwargs: dict[str, Any] = {"attn_implementation": attn} if attn else {}
    with torch.device("meta"):
        model: Any = AutoModelForCausalLM.from_config(config, dtype=dtype, **kwargs)
    if (folder / "generation_config.json").is_file():
        model.generation_config = GenerationConfig.from_pretrained(str(folder), local_files_only=True)
    if model.generation_config.pad_token_id is None:
        model.generation_config.pad_token_id = tok.pad_token_id
    if name in MODEL_NAMES:  # as load_model: PEFT records the short name
        model.name_or_path = name
    model.eval()
    return model, tok


def load_sharded(
    name: str, *, device: Any, dtype: Any, attn: str | None, adapt: Callable[[Any], Any],
    shard: Callable[[Any], Any], reader_hook: Callable[[SliceReader], None] | None = None,
) -> tuple[Any, Any] | None:  # fmt: skip
    """``(sharded model, tokenizer)`` read slice by slice, or ``None`` where the whole-model path must serve.

    ``adapt``: LoRA / gradient checkpointing (on the meta model); ``shard``: ``fully_shard`` it;
    ``reader_hook``: sees the reader after the fill (tests count its bytes).
    """
    import torch

    folder = sliced_source(name)
    if folder is None:
        return None
    reader = SliceReader(folder)
    model, tok = meta_model(name, folder, dtype=dtype, attn=attn)
    if any(checkpoint_name(n) not in reader.entries for n, _ in wanted(model)):
        return None  # the checkpoint names tensors otherwise (keys transformers renames): load it whole
    with cpu_stand_ins(model):  # the adapters' initial values: the same RNG draws as a model loaded whole
        model = adapt(model)
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    own = {n: t.detach().clone() for n, t in wanted(base) if not t.is_meta}
    model.to(torch.device("meta"))
    shard(model)
    model.to_empty(device=device)
    fill(base, reader, own)
    rebuild_buffers(base, device)
    if reader_hook is not None:
        reader_hook(reader)
    return model, tok
