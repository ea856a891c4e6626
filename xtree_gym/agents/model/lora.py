"""LoRA adapters (PEFT), gradient checkpointing and mixed precision for the policy.

* :func:`apply_lora` wraps the policy in a PEFT LoRA model: only the adapters train; the base
  weights stay frozen (and may stay in bf16/fp16 while the adapters are float32);
* :class:`AdapterFreeReference` is the KL reference / ``base`` OPSD teacher of a LoRA run: the same
  module with its adapters disabled for the forward pass -- no second copy of the weights;
* :func:`enable_gradient_checkpointing` recomputes each decoder layer in the backward pass;
* :func:`precision` maps ``--dtype`` to (weights dtype, Accelerate ``mixed_precision``).

Checkpoints of a LoRA run hold the adapters only (``adapter_model.safetensors`` +
``adapter_config.json``, PEFT's own format); :func:`load_adapter_weights` reads them back.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ...errors import ConfigError, missing_dependency

DTYPE_NAMES = {
    "fp32": "float32",
    "float32": "float32",
    "bf16": "bfloat16",
    "bfloat16": "bfloat16",
    "fp16": "float16",
    "float16": "float16",
}
"""``--dtype`` spellings -> torch dtype names (``auto`` / None: fp32 on CPU, bf16 on a GPU)."""


def precision(name: str | None, *, cuda: bool, lora: bool) -> tuple[str, str]:
    """``(weights dtype, Accelerate mixed_precision)`` for ``--dtype``.

    ``bf16``/``fp16`` train with float32 master weights under Accelerate's autocast (fp16 with a
    gradient scaler); with LoRA the frozen base weights are stored in the low precision (the
    adapters stay float32). ``fp32``: no autocast. ``auto``: bf16 on a GPU, fp32 on CPU.

    Example:
        >>> precision(None, cuda=False, lora=False), precision("bf16", cuda=True, lora=False)
        (('float32', 'no'), ('float32', 'bf16'))
        >>> precision("auto", cuda=True, lora=True), precision("fp16", cuda=True, lora=False)
        (('bfloat16', 'bf16'), ('float32', 'fp16'))
    """
    if name in (None, "auto"):
        name = "bf16" if cuda else "fp32"
    if name not in DTYPE_NAMES:
        raise ConfigError(f"dtype = {name!r}", fix="use fp32, bf16, fp16 or auto")
    torch_name = DTYPE_NAMES[name]
    if torch_name == "float32":
        return "float32", "no"
    if torch_name == "float16" and not cuda:
        raise ConfigError("dtype fp16 needs a GPU (CPU autocast has no fp16)", fix="use bf16 or fp32 on CPU")
    mixed = "bf16" if torch_name == "bfloat16" else "fp16"
    return (torch_name if lora else "float32"), mixed


def parse_targets(text: str) -> str | list[str]:
    """``--lora-targets``: ``all-linear`` (PEFT: every linear layer but the head) or comma-separated names.

    Example:
        >>> parse_targets("all-linear"), parse_targets("q_proj, v_proj")
        ('all-linear', ['q_proj', 'v_proj'])
    """
    text = text.strip()
    if text == "all-linear":
        return text
    names = [t.strip() for t in text.split(",") if t.strip()]
    if not names:
        raise ConfigError(
            f"lora_targets = {text!r}", fix="use all-linear or module names, e.g. q_proj,v_proj"
        )
    return names


def apply_lora(model: Any, *, r: int, alpha: int, targets: str) -> Any:
    """``model`` wrapped in a PEFT LoRA model of rank ``r`` (only the adapters require grad)."""
    import importlib.util

    if importlib.util.find_spec("peft") is None:
        raise missing_dependency("peft", "train", "--lora-r")
    from peft import LoraConfig, get_peft_model

    config = LoraConfig(
        r=r, lora_alpha=alpha, target_modules=parse_targets(targets), lora_dropout=0.0, task_type="CAUSAL_LM"
    )
    try:
        return get_peft_model(model, config)
    except ValueError as exc:  # no module matched the targets
        raise ConfigError(
            f"lora_targets = {targets!r}: {str(exc).splitlines()[0]}",
            fix="use all-linear or names of the model's linear layers (q_proj,k_proj,v_proj,o_proj...)",
        ) from exc


def is_lora(model: Any) -> bool:
    """Whether ``model`` (or what it wraps) is a PEFT model."""
    inner = getattr(model, "module", model)
    return hasattr(inner, "disable_adapter") and hasattr(inner, "peft_config")


def enable_gradient_checkpointing(model: Any) -> None:
    """Recompute decoder layers in backward (non-reentrant: frozen inputs, LoRA and DDP all work)."""
    inner = getattr(model, "module", model)
    inner.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    config = getattr(inner, "config", None)
    if config is not None:
        config.use_cache = False


class AdapterFreeReference:
    """The frozen reference of a LoRA run: ``model`` (prepared) called with its adapters disabled.

    Callable like a model; :func:`xtree_gym.agents.model.logits.output_head` finds its head. Only used
    under ``torch.no_grad`` (reference and teacher logprobs).
    """

    def __init__(self, model: Any, peft_model: Any) -> None:
        self.model, self.peft_model = model, peft_model

    def get_output_embeddings(self) -> Any:
        return self.peft_model.get_output_embeddings()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        with self.disabled():
            return self.model(*args, **kwargs)

    @contextmanager
    def disabled(self) -> Iterator[None]:
        with self.peft_model.disable_adapter():
            yield


def adapter_state(model: Any, state_dict: dict[str, Any] | None = None) -> dict[str, Any]:
    """The adapter tensors of a PEFT model (PEFT's saved naming, no adapter name)."""
    from peft import get_peft_model_state_dict

    # save_embedding_layers False: runs never resize the vocab, and "auto" asks the hub for the base's config
    return dict(get_peft_model_state_dict(model, state_dict=state_dict, save_embedding_layers=False))


def load_adapter_weights(model: Any, folder: str | Path) -> None:
    """Load ``folder/adapter_model.safetensors`` into the PEFT ``model``; one error when they do not fit."""
    from peft import set_peft_model_state_dict
    from safetensors.torch import load_file

    path = Path(folder) / "adapter_model.safetensors"
    if not is_lora(model):
        raise ConfigError(
            "the checkpoint holds LoRA adapters but the run has no LoRA",
            where=str(folder),
            fix="resume with the --lora-r/--lora-alpha/--lora-targets of the run that wrote it",
        )
    weights = load_file(str(path))
    result = set_peft_model_state_dict(model, weights)
    unexpected = list(getattr(result, "unexpected_keys", []) or [])
    expected = set(adapter_state(model))
    missing = sorted(expected - set(weights))
    if unexpected or missing:
        raise ConfigError(
            f"checkpoint adapters do not fit the model (missing {missing[:3]}, unexpected {unexpected[:3]})",
            where=str(path),
            fix="resume with the same --model and --lora-r/--lora-targets as the run that wrote it",
        )
