"""``xtree mine --ray``: the sharded miner (:mod:`xtree_gym.mining.sharded`) with Ray actors as workers.

``ray`` is imported only here, inside the functions (``pip install 'xtree_gym[ray]'``); importing
:mod:`xtree_gym.mining` or building the CLI parser never imports it.
"""

from __future__ import annotations

import importlib.util
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import ConfigError, XTreeError, missing_dependency
from .config import MinerConfig
from .tree import XTree


def require_ray() -> None:
    """One error naming ``xtree_gym[ray]`` when Ray (or the one-pass reader's msgspec) is missing."""
    for package in ("ray", "msgspec"):
        if importlib.util.find_spec(package) is None:
            raise missing_dependency(package, "ray", "xtree mine --ray")


def _check_reachable(address: str, timeout: float = 5.0) -> None:
    """A ``host:port`` address that refuses a TCP connection is one clear error now (``ray.init`` would
    retry for minutes, logging each try); other forms (``auto``, ``ray://...``) go to Ray as given.

    Example:
        >>> _check_reachable("auto")
    """
    import socket

    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or "/" in address:
        return
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
    except OSError as exc:
        raise ConfigError(
            f"no Ray cluster answers at {address} ({exc.strerror or exc})",
            fix="pass the head node's GCS address (`ray status` there prints it), or drop --ray-address "
            "for a local cluster",
        ) from None


def mine_with_ray(
    paths: Sequence[str | Path],
    config: MinerConfig,
    *,
    address: str | None = None,
    workers: int | None = None,
    name: str = "",
    progress: bool | None = None,
) -> tuple[XTree, dict[str, Any]]:
    """Mine ``paths`` with ``workers`` Ray actors (default: the cluster's CPUs); (tree, run stats).

    Without ``address`` a local cluster is started (``ray.init()``, ``workers`` CPUs when given) and
    stopped at the end. Raises :class:`~xtree_gym.corpus.columnar.FastPathUnavailable` when the files
    need the validator (mine them in one process instead).
    """
    require_ray()
    if workers is not None and workers < 1:
        raise ConfigError(f"--ray-workers {workers}: need at least 1", fix="pass --ray-workers 2 or more")
    import ray

    from ..corpus.columnar import FastPathUnavailable
    from ..corpus.shards import check_shardable, plan_shards
    from .sharded import ShardWorker, mine_sharded

    check_shardable(paths)  # before Ray starts: a file it cannot take goes to one process at once
    t0 = time.perf_counter()
    started = not ray.is_initialized()
    if started and address:
        _check_reachable(address)
    if started:
        options: dict[str, Any] = {
            "include_dashboard": False,
            "log_to_driver": False,
            "logging_level": "ERROR",
        }
        if address is None and workers is not None:
            options["num_cpus"] = workers
        try:
            ray.init(address=address, **options)
        except (ConnectionError, ValueError, RuntimeError) as exc:
            raise ConfigError(
                f"could not reach a Ray cluster at {address or 'a new local one'}: {exc}",
                fix="check --ray-address (ray status on the head node prints it) or drop it for a local cluster",
            ) from None
    actors: list[Any] = []
    try:
        cpus = int(ray.cluster_resources().get("CPU", 1))
        if workers is not None and workers > cpus:  # each worker takes a CPU: the rest would wait forever
            raise ConfigError(
                f"--ray-workers {workers}, but the Ray cluster has {cpus} CPU(s)",
                fix=f"pass --ray-workers {cpus} or fewer, or add nodes to the cluster",
            )
        n = workers or max(1, cpus)
        shards = plan_shards(paths, n)
        actor_class = ray.remote(num_cpus=1)(ShardWorker)
        actors = [actor_class.remote([str(p) for p in paths], pieces) for pieces in shards]

        def call(method: str, args: Sequence[tuple[Any, ...]]) -> list[Any]:
            try:
                return ray.get([getattr(a, method).remote(*x) for a, x in zip(actors, args)])
            except ray.exceptions.RayTaskError as exc:  # a worker's own error, not Ray's wrapper of it
                cause = getattr(exc, "cause", None)
                if isinstance(cause, (FastPathUnavailable, XTreeError)):
                    raise cause from None
                raise

        ray_seconds = time.perf_counter() - t0
        merges, facts, examples, stats = mine_sharded(call, len(actors), config, progress=progress)
        stats["seconds"]["ray_init"] = round(ray_seconds, 3)
        stats["workers"] = call("memory", [()] * len(actors))
        stats["shards"] = shards
        tree = XTree.from_facts(merges, facts, examples, config, name=name)
    finally:
        for a in actors:
            ray.kill(a)
        if started:
            ray.shutdown()
    return tree, stats
