"""What the trainer pushes into a vLLM engine: base-model names and tensors, one at a time.

vLLM loads checkpoint-format names (``model.layers.0.self_attn.q_proj.weight``). A trainer's
``state_dict`` differs from that in two ways, both handled here with pure functions on tensors:

* LoRA (PEFT): names carry PEFT's prefix and wrappers (``base_model.model.X.base_layer.weight``,
  ``X.lora_A.default.weight``, ``X.lora_B.default.weight``); :func:`merged_weights` folds each
  adapter into its base weight, ``W + scaling · B·A`` (transposed for ``fan_in_fan_out`` layers and
  for embeddings, as PEFT's ``merge_and_unload``), adds ``scaling · lora_B.bias`` to the base bias
  where the adapter has one, renames ``X.modules_to_save.default.*`` to ``X.*`` and drops
  ``X.original_module.*`` (the frozen copy the trained one replaces);
* sharding (FSDP2): parameters are ``DTensor`` shards; :func:`gathered` turns them into full
  tensors one parameter at a time (``full_tensor()`` is a collective: every rank iterates), so the
  full model never sits in memory at once -- at most one LoRA module's pieces are held for the merge.

:func:`push_state` chains both over a model's ``state_dict`` (which only references the live
tensors). :func:`xtree_gym.agents.model.vllm.push_weights_to_vllm` feeds it to the engine, or to the
servers' transport (:mod:`xtree_gym.agents.model.vllm_sync`); :func:`push_metadata` says what it will yield.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from ...errors import ConfigError

PEFT_PREFIX = "base_model.model."
"""The prefix a PEFT ``PeftModelForCausalLM`` puts before the base model's names."""


def gathered(items: Iterable[tuple[str, Any]]) -> Iterator[tuple[str, Any]]:
    """``(name, tensor)`` with every ``DTensor`` shard replaced by its full tensor, one at a time.

    Example:
        >>> import torch
        >>> [(n, t.tolist()) for n, t in gathered([("w", torch.ones(2))])]
        [('w', [1.0, 1.0])]
    """
    try:
        from torch.distributed.tensor import DTensor
    except ImportError:  # a torch without distributed: nothing can be sharded
        DTensor = ()  # type: ignore[assignment,misc]
    for name, t in items:
        if isinstance(t, DTensor):
            t = t.full_tensor()
        yield name, t.detach()


def _split(name: str, adapter: str) -> tuple[str, str, str]:
    """``(module, role, leaf)`` of a PEFT state-dict name; role ``base``, ``A``, ``B``, ``keep``, ``drop``.

    Example:
        >>> _split("m.q.base_layer.weight", "default"), _split("m.q.lora_A.default.weight", "default")
        (('m.q', 'base', 'weight'), ('m.q', 'A', 'weight'))
        >>> _split("e.lora_embedding_B.default", "default"), _split("h.original_module.weight", "default")
        (('e', 'Bemb', ''), ('h', 'drop', 'weight'))
        >>> _split("h.modules_to_save.default.weight", "default"), _split("norm.weight", "default")
        (('h', 'keep', 'weight'), ('norm', 'keep', 'weight'))
    """
    parts = name.split(".")
    for i, p in enumerate(parts):
        module, rest = ".".join(parts[:i]), parts[i + 1 :]
        if p == "base_layer":
            return module, "base", ".".join(rest)
        if p in ("lora_A", "lora_B", "lora_embedding_A", "lora_embedding_B", "lora_magnitude_vector"):
            if not rest or rest[0] != adapter:
                return module, "drop", ""  # another (inactive) adapter
            if p == "lora_magnitude_vector":
                raise ConfigError(
                    f"weight push: {name!r} is a DoRA magnitude, which this merge does not fold",
                    fix="train plain LoRA (no use_dora) with the vllm backend, or use backend hf",
                )
            role = {"lora_A": "A", "lora_B": "B", "lora_embedding_A": "Aemb", "lora_embedding_B": "Bemb"}[p]
            return module, role, ".".join(rest[1:])
        if p == "original_module":
            return module, "drop", ".".join(rest)
        if p == "modules_to_save":
            if not rest or rest[0] != adapter:
                return module, "drop", ""
            return module, "keep", ".".join(rest[1:])
    return ".".join(parts[:-1]), "keep", parts[-1]


def _join(module: str, leaf: str) -> str:
    return f"{module}.{leaf}" if module and leaf else module or leaf


def _fold(pieces: dict[str, Any], scaling: float, fan_in_fan_out: bool) -> dict[str, Any]:
    """One LoRA module's base tensors with its adapter folded in (computed in float32, cast back)."""
    out = {k[5:]: v for k, v in pieces.items() if k.startswith("base.")}
    if "Aemb." in pieces:  # embeddings: A [r, vocab], B [dim, r]; delta (B·A)ᵀ = [vocab, dim]
        delta = (pieces["Bemb."].float() @ pieces["Aemb."].float()).T * scaling
    else:
        delta = (pieces["B.weight"].float() @ pieces["A.weight"].float()) * scaling
        if fan_in_fan_out:
            delta = delta.T
    w = out["weight"]
    out["weight"] = (w.float() + delta).to(w.dtype)
    if "B.bias" in pieces:  # lora_bias: the adapter's bias folds into the base bias
        b = out["bias"]
        out["bias"] = (b.float() + pieces["B.bias"].float() * scaling).to(b.dtype)
    return out


def merged_weights(
    items: Iterable[tuple[str, Any]],
    scaling: Mapping[str, float],
    *,
    adapter: str = "default",
    fan_in_fan_out: bool = False,
) -> Iterator[tuple[str, Any]]:
    """PEFT-named ``(name, tensor)`` pairs -> the merged model's names and tensors (see the module doc).

    ``scaling`` maps each LoRA module's name (without :data:`PEFT_PREFIX`) to its ``lora_alpha / r``
    (:func:`lora_scaling`). Names without PEFT's prefix pass unchanged (a model without LoRA).
    A LoRA module's pieces are held until the next module's name arrives (PEFT orders them together).

    Example:
        >>> import torch
        >>> sd = [("base_model.model.q.base_layer.weight", torch.eye(2)),
        ...       ("base_model.model.q.lora_A.default.weight", torch.tensor([[1.0, 2.0]])),
        ...       ("base_model.model.q.lora_B.default.weight", torch.tensor([[1.0], [0.0]])),
        ...       ("base_model.model.norm.weight", torch.ones(2))]
        >>> [(n, t.tolist()) for n, t in merged_weights(sd, {"q": 2.0})]  # I + 2·B·A
        [('q.weight', [[3.0, 4.0], [0.0, 1.0]]), ('norm.weight', [1.0, 1.0])]
    """
    current = ""  # the LoRA module being collected ...
    pieces: dict[str, Any] = {}  # ... and its tensors so far
    for name, t in items:
        module, role, leaf = (
            _split(name[len(PEFT_PREFIX) :], adapter) if name.startswith(PEFT_PREFIX) else ("", "raw", name)
        )
        if pieces and (role in ("raw", "keep") or module != current):
            yield from _flushed(current, pieces, scaling, fan_in_fan_out)
            pieces = {}
        if role == "raw":
            yield name, t
        elif role == "keep":
            yield _join(module, leaf), t
        elif role != "drop":
            current = module
            pieces[f"{role}.{leaf}"] = t
    if pieces:
        yield from _flushed(current, pieces, scaling, fan_in_fan_out)


def _flushed(
    module: str, pieces: dict[str, Any], scaling: Mapping[str, float], fan_in_fan_out: bool
) -> Iterator[tuple[str, Any]]:
    """One LoRA module's merged tensors, or one error when a piece or its scaling is missing."""
    has_ab = ("A.weight" in pieces and "B.weight" in pieces) or ("Aemb." in pieces and "Bemb." in pieces)
    if not has_ab or "base.weight" not in pieces:
        raise ConfigError(
            f"weight push: LoRA module {module!r} has only {sorted(pieces)}",
            fix="push the whole state_dict of the PEFT model (base_layer, lora_A and lora_B of each module)",
        )
    if module not in scaling:
        raise ConfigError(
            f"weight push: LoRA module {module!r} has no known scaling",
            fix="pass lora_scaling(model) of the same PEFT model",
        )
    for k, v in _fold(pieces, scaling[module], fan_in_fan_out).items():
        yield _join(module, k), v


def lora_scaling(model: Any, adapter: str = "default") -> dict[str, float]:
    """``{module name: scaling}`` of every LoRA layer of a PEFT ``model`` (names without PEFT's prefix)."""
    out: dict[str, float] = {}
    for name, module in model.named_modules():
        s = getattr(module, "scaling", None)
        if isinstance(s, dict) and adapter in s and name.startswith(PEFT_PREFIX):
            out[name[len(PEFT_PREFIX) :]] = float(s[adapter])
    return out


def push_state(model: Any) -> Iterator[tuple[str, Any]]:
    """The tensors to push for ``model`` (a plain, PEFT or FSDP2-sharded model): merged, full, one at a time."""
    inner = getattr(model, "module", model)  # DDP / Accelerate wrappers
    return _merged(inner, gathered(inner.state_dict().items()))


def push_metadata(model: Any) -> list[tuple[str, Any, tuple[int, ...]]]:
    """``(name, dtype, shape)`` of every tensor :func:`push_state` yields, in its order, without gathering
    or merging anything: the same merge runs on ``meta`` tensors of the global shapes (vLLM's NCCL weight
    transfer sizes its receive buffers from this before the bytes flow).

    Example:
        >>> import torch
        >>> push_metadata(torch.nn.Linear(3, 2))
        [('weight', torch.float32, (2, 3)), ('bias', torch.float32, (2,))]
    """
    import torch

    inner = getattr(model, "module", model)
    items = ((n, torch.empty(t.shape, dtype=t.dtype, device="meta")) for n, t in inner.state_dict().items())
    return [(n, t.dtype, tuple(t.shape)) for n, t in _merged(inner, items)]


def _merged(inner: Any, items: Iterator[tuple[str, Any]]) -> Iterator[tuple[str, Any]]:
    """``items`` of ``inner``'s state dict with its active LoRA adapter folded in (unchanged without PEFT)."""
    config = getattr(inner, "peft_config", None)
    if not config:
        return items
    adapter = str(getattr(inner, "active_adapter", "default"))
    fan = bool(getattr(config.get(adapter), "fan_in_fan_out", False))
    return merged_weights(items, lora_scaling(inner, adapter), adapter=adapter, fan_in_fan_out=fan)
