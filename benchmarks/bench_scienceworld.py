"""Steps per second of XTree-ScienceWorld-v0 against the scienceworld package's own env.step, same run.

Every configuration replays the simulator's gold action sequences of the same task variations; only
the ``step`` calls are timed (loads and gold generation are not). Configurations:

* ``package``       -- ``scienceworld.ScienceWorldEnv.step`` (lists every valid action each step);
* ``raw``           -- the bare py4j calls our env makes (step, score, completed, moves): the floor;
* ``env``           -- ``ScienceWorldEnv.step`` (default path: canonical token, watchdog, no listing);
* ``env+valid``     -- the same with ``valid_actions=True``;
* ``2 envs``        -- two envs, each with its own JVM, stepped from two threads (aggregate steps/s).

Also prints the resident memory of one JVM: ours (``-Xmx1g``) and the package's (default heap).

Run: ``python benchmarks/bench_scienceworld.py [--episodes 4]``
"""

from __future__ import annotations

import argparse
import threading
import time
from collections.abc import Callable, Sequence

EPISODES = [("boil", 1), ("find-animal", 2), ("chemistry-mix", 3), ("power-component", 4), ("melt", 5)]
WARMUP = [("find-animal", 7)]  # replayed untimed first on every JVM, so each is measured after JIT warm-up


def _rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _replay(
    load: Callable[[str, int], list[str]], step: Callable[[str], bool], episodes: Sequence
) -> tuple[int, float]:
    """(steps, seconds spent inside ``step``) over the gold sequences of ``episodes``."""
    n, spent = 0, 0.0
    for task, variation in episodes:
        gold = load(task, variation)
        for action in gold:
            t = time.perf_counter()
            done = step(action)
            spent += time.perf_counter() - t
            n += 1
            if done:
                break
    return n, spent


def _our_env(**kwargs: object):
    from xtree_gym.envs.scienceworld import ScienceWorldEnv

    return ScienceWorldEnv(step_limit=None, **kwargs)


class _Timed:
    """One configuration's gold replays: ``load`` returns the gold actions, ``step`` says when it is done."""

    def __init__(self, name: str, load: Callable[[str, int], list[str]], step: Callable[[str], bool]) -> None:
        self.name, self.load, self.step = name, load, step
        self.n, self.seconds = 0, 0.0

    def run(self, task: str, variation: int) -> None:
        n, s = _replay(self.load, self.step, [(task, variation)])
        self.n += n
        self.seconds += s


def _package_config() -> tuple[_Timed, object]:
    from scienceworld import ScienceWorldEnv as PackageEnv

    env = PackageEnv("", envStepLimit=100_000)

    def load(task: str, variation: int) -> list[str]:
        env.load(task, variation, "", generateGoldPath=True)
        env.reset()
        return env.get_gold_action_sequence()

    return _Timed("package env.step", load, lambda a: bool(env.step(a)[2])), env


def _env_configs() -> tuple[list[_Timed], list[object]]:
    """raw / env / env+valid on ONE JVM (the valid-listing env shares the first env's JVM)."""
    env = _our_env()
    env_valid = _our_env(valid_actions=True, jvm=env.jvm)

    def loader(e):
        def load(task: str, variation: int) -> list[str]:
            e.reset(options={"task": task, "variation": variation, "gold_path": True})
            return e.gold_actions()

        return load

    def step_env(e):
        def step(action: str) -> bool:
            _o, _r, terminated, truncated, _i = e.step(action)
            return terminated or truncated

        return step

    def step_raw(action: str) -> bool:
        iface = env._iface
        iface.step(action)
        score = round(100 * float(iface.getScore()))
        completed = bool(iface.getCompleted())
        iface.getNumMoves()
        return completed or score < 0

    configs = [
        _Timed("raw py4j step (floor)", loader(env), step_raw),
        _Timed("XTree env.step", loader(env), step_env(env)),
        _Timed("XTree env.step + valid", loader(env_valid), step_env(env_valid)),
    ]
    return configs, [env_valid, env]


def bench_two_envs(episodes: Sequence) -> tuple[int, float]:
    """Two envs (own JVMs) in two threads; returns (total steps, wall seconds of the stepping)."""
    envs = [_our_env(), _our_env()]
    golds: list[list[list[str]]] = [[], []]
    for env, g in zip(envs, golds):  # generate gold paths (and warm up) first: only stepping is timed
        for task, variation in WARMUP:
            env.reset(options={"task": task, "variation": variation, "gold_path": True})
            for action in env.gold_actions():
                if any(env.step(action)[2:4]):
                    break
        for task, variation in episodes:
            env.reset(options={"task": task, "variation": variation, "gold_path": True})
            g.append(env.gold_actions())
    counts = [0, 0]
    barrier = threading.Barrier(3)

    def run(k: int) -> None:
        env = envs[k]
        plans = []
        for (task, variation), gold in zip(episodes, golds[k]):
            plans.append((task, variation, gold))
        barrier.wait()
        for task, variation, gold in plans:
            env.reset(options={"task": task, "variation": variation})
            for action in gold:
                *_, terminated, truncated, _info = env.step(action)
                counts[k] += 1
                if terminated or truncated:
                    break

    threads = [threading.Thread(target=run, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    barrier.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    for env in envs:
        env.close()
    return sum(counts), wall


def bench_overhead(blocks: int = 6, per_block: int = 50) -> tuple[float, float]:
    """(raw ms/step, env ms/step) for one fixed action in alternating blocks on one JVM and one state.

    Gold replays differ from load to load (ScienceWorld's gold paths are not deterministic), so this is
    the clean measure of what the env adds on top of the raw calls.
    """
    env = _our_env(task="find-animal", variation=1)
    env.reset()
    iface = env._iface

    def raw(action: str) -> None:
        iface.step(action)
        iface.getScore()
        iface.getCompleted()
        iface.getNumMoves()

    spent = {"raw": 0.0, "env": 0.0}
    for _ in range(blocks):
        for name, fn in (("raw", raw), ("env", env.step)):
            t = time.perf_counter()
            for _ in range(per_block):
                fn("look at agent")
            spent[name] += time.perf_counter() - t
    env.close()
    n = blocks * per_block
    return 1000 * spent["raw"] / n, 1000 * spent["env"] / n


def bench_own_state(blocks: int = 16, per_block: int = 25) -> tuple[float, float]:
    """(lock-only ms/step, own-state ms/step): what a turn on the env's own simulator state costs.

    Same run, same JVM, one fixed action, alternating blocks: ``env.step`` as it is (its turn restores
    and saves the JVM's random generator and id counter: 4 py4j calls) against the same env with a turn
    that only takes the JVM's lock.
    """
    import contextlib

    env = _our_env(task="find-animal", variation=1)
    env.reset()
    own_state = env._turn

    @contextlib.contextmanager
    def lock_only():  # type: ignore[no-untyped-def]
        with env.jvm.call_lock:
            yield env.jvm

    spent = {"lock": 0.0, "state": 0.0}
    pair = [("lock", lock_only), ("state", own_state)]
    for b in range(blocks):
        for name, turn in pair if b % 2 else pair[::-1]:  # each goes first half the time
            env._turn = turn
            t = time.perf_counter()
            for _ in range(per_block):
                env.step("look at agent")
            spent[name] += time.perf_counter() - t
    env.close()
    n = blocks * per_block
    return 1000 * spent["lock"] / n, 1000 * spent["state"] / n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--episodes", type=int, default=len(EPISODES), help="gold episodes per configuration")
    ap.add_argument(
        "--rounds", type=int, default=2, help="passes over the episodes (configurations interleaved)"
    )
    args = ap.parse_args()
    episodes = EPISODES[: args.episodes]
    print(f"replaying {len(episodes)} gold episodes x {args.rounds} rounds per configuration: {episodes}")
    package, package_env = _package_config()
    ours, our_envs = _env_configs()
    configs = [package, *ours]
    for c in configs:  # warm every JVM up untimed
        for task, variation in WARMUP:
            c.run(task, variation)
        c.n, c.seconds = 0, 0.0
    # Interleaved: each episode runs under every configuration back to back, so load drift on a shared
    # machine hits all of them alike.
    for _ in range(args.rounds):
        for task, variation in episodes:
            for c in configs:
                c.run(task, variation)
    rss_pkg = _rss_mb(package_env._gateway.java_process.pid)  # type: ignore[attr-defined]
    rss_ours = our_envs[-1].jvm.rss_bytes() / 2**20  # type: ignore[attr-defined]
    package_env.close()  # type: ignore[attr-defined]
    for e in our_envs:
        e.close()  # type: ignore[attr-defined]
    n2, wall2 = bench_two_envs(episodes)
    base = package.n / package.seconds
    print(f"{'configuration':<26} {'steps':>6} {'ms/step':>8} {'steps/s':>8} {'x package':>9}")
    for c in configs:
        print(
            f"{c.name:<26} {c.n:>6} {1000 * c.seconds / c.n:>8.2f} {c.n / c.seconds:>8.1f} {c.n / c.seconds / base:>9.2f}"
        )
    print(
        f"{'2 envs, 2 JVMs, threads':<26} {n2:>6} {1000 * wall2 / n2:>8.2f} {n2 / wall2:>8.1f} {n2 / wall2 / base:>9.2f}"
    )
    raw_ms, env_ms = bench_overhead()
    print(
        f"fixed action, alternating blocks: raw {raw_ms:.2f} ms/step, env {env_ms:.2f} ms/step "
        f"({env_ms / raw_ms:.2f}x)"
    )
    lock_ms, state_ms = bench_own_state()
    print(
        f"own simulator state per turn: lock only {lock_ms:.2f} ms/step, own state {state_ms:.2f} ms/step "
        f"({state_ms / lock_ms:.2f}x)"
    )
    print(
        f"JVM resident memory after the run: ours (-Xmx1g) {rss_ours:.0f} MB, package default {rss_pkg:.0f} MB"
    )


if __name__ == "__main__":
    main()
