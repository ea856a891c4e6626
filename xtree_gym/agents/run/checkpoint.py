"""Checkpoints any trainer can trust: HF folders, safetensors optimizer state, JSON trainer state.

A checkpoint is a folder ``RUN/checkpoint-NNNNNN/`` holding

* ``model/`` — ``save_pretrained`` (safetensors) of the policy, plus its tokenizer (a sharded run
  writes it at its last step and on request, and its weights as ``dcp/`` shards: :mod:`.scaleout`);
* ``optimizer.safetensors`` + ``optimizer.json`` — every tensor of the optimizer's state (AdamW's
  ``exp_avg``/``exp_avg_sq``/``step``) under ``state.<param>.<key>``, and the param groups and
  non-tensor entries as JSON: no pickle anywhere;
* ``extra.safetensors`` — optional named tensors (e.g. the EMA teacher's weights);
* ``trainer_state.json`` — the step, the config, and whatever JSON the trainer adds.

The folder is written under a temporary name (``.checkpoint-N.<pid>.<rand>``, swept by the next
run once its writer is dead) and renamed when complete, so a crash never leaves a half checkpoint
that ``--resume`` would pick up. Old checkpoints are rotated by step number (never the one just
written), and ``RUN/latest.json`` is written last, so it always names a checkpoint that exists.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import torch

from ...corpus.io import atomic_write_text
from ...corpus.outfolder import refuse_planted_link
from ...errors import ConfigError
from .runfolder import checkpoints_by_step, sweep_checkpoint_temps

STATE_FILE = "trainer_state.json"
LATEST_FILE = "latest.json"


def optimizer_to_flat(state: dict[str, Any]) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Split ``optimizer.state_dict()`` into named tensors and a JSON-safe rest.

    Example:
        >>> p = torch.nn.Parameter(torch.ones(2)); opt = torch.optim.AdamW([p], lr=0.1)
        >>> p.sum().backward(); opt.step()
        >>> tensors, meta = optimizer_to_flat(opt.state_dict())
        >>> sorted(tensors), meta["param_groups"][0]["lr"]
        (['state.0.exp_avg', 'state.0.exp_avg_sq', 'state.0.step'], 0.1)
    """
    tensors: dict[str, torch.Tensor] = {}
    scalars: dict[str, dict[str, Any]] = {}
    for pid, entry in state["state"].items():
        for key, value in entry.items():
            if isinstance(value, torch.Tensor):
                tensors[f"state.{pid}.{key}"] = value.detach().cpu().contiguous()
            else:
                scalars.setdefault(str(pid), {})[key] = value
    return tensors, {"param_groups": state["param_groups"], "scalars": scalars}


def optimizer_from_flat(tensors: dict[str, torch.Tensor], meta: dict[str, Any]) -> dict[str, Any]:
    """Inverse of :func:`optimizer_to_flat` (a dict ``optimizer.load_state_dict`` accepts)."""
    state: dict[int | str, dict[str, Any]] = {}
    for name, value in tensors.items():  # state.<id or parameter name>.<key>: names hold dots, keys do not
        head, key = name.rsplit(".", 1)
        state.setdefault(_param_id(head[len("state.") :]), {})[key] = value
    for pid, entry in meta.get("scalars", {}).items():
        state.setdefault(_param_id(pid), {}).update(entry)
    return {"state": state, "param_groups": meta["param_groups"]}


def _param_id(text: str) -> int | str:
    """An optimizer state key: the integer index of a plain state dict, or a parameter name (full FSDP one)."""
    return int(text) if text.isdigit() else text


def _json_default(value: Any) -> Any:
    if isinstance(value, (tuple, set)):
        return list(value)
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"not JSON-serializable: {type(value).__name__}")


def save_checkpoint(
    run_dir: str | Path,
    step: int,
    *,
    model: Any = None,
    tokenizer: Any = None,
    optimizer: Any = None,
    state: dict[str, Any] | None = None,
    extra_tensors: dict[str, torch.Tensor] | None = None,
    files: dict[str, str] | None = None,
    keep: int = 0,
    model_state: dict[str, torch.Tensor] | None = None,
    folder: Path | None = None,
) -> Path:
    """Write ``run_dir/checkpoint-{step:06d}`` atomically; keep the newest ``keep`` (0 = all).

    ``model_state``: the model's full state dict when its own is sharded; a PEFT model saves its
    adapters only. ``model=None`` writes no ``model/``. ``folder``: a temp folder (``.checkpoint-N.<pid>.*``
    in ``run_dir``) other ranks already wrote into (their shards), completed here instead of a new one.
    """
    from safetensors.torch import save_file

    run = Path(run_dir)
    run.mkdir(parents=True, exist_ok=True)
    final = run / f"checkpoint-{step:06d}"
    sweep_checkpoint_temps(run)
    tmp = folder or Path(tempfile.mkdtemp(prefix=f".{final.name}.{os.getpid()}.", dir=run))
    try:
        # a copy: transformers 5's save_pretrained empties the state dict it is handed
        kw: dict[str, Any] = {"state_dict": dict(model_state)} if model_state is not None else {}
        if hasattr(model, "peft_config"):  # runs never resize the vocab: no hub lookup of the base's config
            kw["save_embedding_layers"] = False
        if model is not None:
            model.save_pretrained(str(tmp / "model"), safe_serialization=True, **kw)
        if tokenizer is not None and model is not None:
            tokenizer.save_pretrained(str(tmp / "model"))
        if optimizer is not None:
            tensors, meta = optimizer_to_flat(optimizer.state_dict())
            save_file(tensors, str(tmp / "optimizer.safetensors"))
            (tmp / "optimizer.json").write_text(json.dumps(meta, default=_json_default), encoding="utf-8")
        if extra_tensors:
            # clone: tied weights (embeddings = LM head) share storage, which safetensors refuses
            named = {k: v.detach().cpu().clone() for k, v in extra_tensors.items()}
            save_file(named, str(tmp / "extra.safetensors"))
        for name, text in (files or {}).items():
            (tmp / name).write_text(text, encoding="utf-8")
        body = {"step": step, **(state or {})}
        (tmp / STATE_FILE).write_text(
            json.dumps(body, indent=1, default=_json_default) + "\n", encoding="utf-8"
        )
        refuse_planted_link(final)  # never replace or empty a folder through a link planted in the run
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    if keep:
        others = [c for c in checkpoints_by_step(run) if c.name != final.name]
        for old in others[: max(len(others) - (keep - 1), 0)]:
            shutil.rmtree(old, ignore_errors=True)
    atomic_write_text(run / LATEST_FILE, json.dumps({"checkpoint": final.name, "step": step}) + "\n")
    return final


def find_checkpoint(path: str | Path) -> Path:
    """The checkpoint folder ``path`` names: itself, or a run folder's latest.

    One :class:`ConfigError` when there is none.
    """
    p = Path(path)
    if (p / STATE_FILE).is_file():
        return p
    latest = p / LATEST_FILE
    if latest.is_file():
        try:
            name = json.loads(latest.read_text(encoding="utf-8"))["checkpoint"]
        except (ValueError, KeyError, TypeError) as exc:
            raise ConfigError(f"unreadable {LATEST_FILE}: {exc}", where=str(latest)) from exc
        if (p / name / STATE_FILE).is_file():
            return p / name
    found = [c for c in checkpoints_by_step(p) if (c / STATE_FILE).is_file()]
    if found:
        return found[-1]
    raise ConfigError(
        f"no checkpoint to resume from in {str(p)!r}",
        fix="pass a run folder written by `xtree train` (it holds checkpoint-*/) or a checkpoint folder",
    )


def read_state(ckpt: str | Path) -> dict[str, Any]:
    """``trainer_state.json`` of a checkpoint."""
    path = Path(ckpt) / STATE_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read the trainer state: {exc}", where=str(path)) from exc
    if not isinstance(data, dict) or "step" not in data:
        raise ConfigError(
            "the trainer state has no 'step'", where=str(path), fix="resume from another checkpoint"
        )
    return data


def read_optimizer_state(ckpt: str | Path) -> dict[str, Any]:
    """``optimizer.safetensors`` + ``optimizer.json`` as an optimizer state dict (no pickle).

    A truncated or foreign file is one :class:`ConfigError` naming it.
    """
    ckpt = Path(ckpt)
    tensors = load_tensors(ckpt / "optimizer.safetensors")
    try:
        meta = json.loads((ckpt / "optimizer.json").read_text(encoding="utf-8"))
        return optimizer_from_flat(tensors, meta)
    except (OSError, ValueError, KeyError, TypeError, RuntimeError) as exc:
        raise _optimizer_error(ckpt, exc) from None


def load_optimizer(ckpt: str | Path, optimizer: torch.optim.Optimizer) -> None:
    """Load the checkpoint's optimizer state into ``optimizer``."""
    state = read_optimizer_state(ckpt)
    try:
        optimizer.load_state_dict(state)
    except (ValueError, KeyError, TypeError, RuntimeError) as exc:
        raise _optimizer_error(Path(ckpt), exc) from None


def _optimizer_error(ckpt: Path, exc: Exception) -> ConfigError:
    return ConfigError(
        f"cannot restore the optimizer state: {exc}",
        where=str(ckpt / "optimizer.json"),
        fix="resume from a checkpoint written by the same run (same model and settings)",
    )


def load_extra(ckpt: str | Path) -> dict[str, torch.Tensor]:
    """The checkpoint's named extra tensors (empty when it has none)."""
    path = Path(ckpt) / "extra.safetensors"
    return load_tensors(path) if path.is_file() else {}


def load_tensors(path: str | Path) -> dict[str, torch.Tensor]:
    """A safetensors file's tensors; a missing, truncated or corrupt file is one :class:`ConfigError`."""
    from safetensors.torch import load_file

    try:
        return load_file(str(path))
    except Exception as exc:  # SafetensorError (not importable by name in every version), OSError
        raise ConfigError(
            f"cannot read the safetensors file ({type(exc).__name__}: {str(exc)[:200]})",
            where=str(path),
            fix="the file is truncated or corrupt: resume from another checkpoint or write it again",
        ) from None


def load_model_weights(model: Any, ckpt: str | Path) -> None:
    """Copy the checkpoint's policy weights into ``model`` (same architecture)."""
    folder = Path(ckpt) / "model"
    if (folder / "adapter_config.json").is_file():  # a LoRA run: the adapters only
        from ..model.lora import load_adapter_weights

        load_adapter_weights(model, folder)
        return
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        raise ConfigError("the checkpoint holds no model weights", where=str(folder))
    weights: dict[str, torch.Tensor] = {}
    for f in files:
        weights.update(load_tensors(f))
    try:
        missing, unexpected = model.load_state_dict(weights, strict=False)
    except RuntimeError as exc:  # "size mismatch for ...": a model of another shape
        first = str(exc).strip().splitlines()[1:2] or [str(exc)[:200]]
        raise ConfigError(
            f"checkpoint weights do not fit the model ({first[0].strip()})",
            where=str(folder),
            fix="resume with the same --model as the run that wrote it",
        ) from None
    tied = set(getattr(model, "_tied_weights_keys", None) or [])
    missing = [m for m in missing if m not in tied]
    if missing or unexpected:
        raise ConfigError(
            f"checkpoint weights do not fit the model (missing {missing[:3]}, unexpected {unexpected[:3]})",
            where=str(folder),
            fix="resume with the same --model as the run that wrote it",
        )
