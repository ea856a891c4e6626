"""A scripted MiniGrid solver and the labelled demonstration corpus the tree is mined from.

The solver reads the full grid (it is privileged, like an oracle): if a locked door exists and the
agent holds no key it walks to the key and picks it up, then it walks to the goal, toggling every
closed or locked door on its path. Envs without a goal cell: the target is the mission object
(``env.obj``: the ball of KeyCorridor, the box of UnlockPickup), picked up after the key is dropped
once no locked door is left; with no such object (Unlock) the target is the locked door itself.
RedBlueDoors: the red door, then the blue one (toggled on arrival). KeyInBox: no key in sight, so the box
is toggled open first (the key appears in its cell). Breadth-first search over cells;
turns toward the next cell.
With probability ``noise`` a step takes a uniformly random action instead, so the corpus holds
successes and failures (the episode's own verifier labels them: reward > 0).
"""

from __future__ import annotations

from collections import deque
from typing import Any

import gymnasium as gym
import numpy as np

from xtree_gym.corpus import Step, Trajectory
from xtree_gym.wrappers.discrete import DiscreteTokens, step_record

LEFT, RIGHT, FORWARD, PICKUP, DROP, TOGGLE, DONE = range(7)
DIR_VEC = ((1, 0), (0, 1), (-1, 0), (0, -1))  # MiniGrid's agent_dir 0..3: right, down, left, up


def _find(u: Any, kind: str) -> list[tuple[int, int]]:
    return [
        (x, y)
        for x in range(u.grid.width)
        for y in range(u.grid.height)
        if (c := u.grid.get(x, y)) is not None and c.type == kind
    ]


def _passable(u: Any, pos: tuple[int, int], has_key: bool) -> bool:
    c = u.grid.get(*pos)
    if c is None or c.type in ("goal", "floor"):
        return True
    if c.type == "door":
        return has_key or not c.is_locked  # a closed door is toggled open on the way
    return False


def _bfs(
    u: Any, start: tuple[int, int], targets: set[tuple[int, int]], has_key: bool
) -> list[tuple[int, int]]:
    """Shortest cell path from ``start`` to any target (targets need not be passable)."""
    prev: dict[tuple[int, int], tuple[int, int] | None] = {start: None}
    todo = deque([start])
    while todo:
        cur = todo.popleft()
        if cur in targets:
            path = [cur]
            while (p := prev[path[-1]]) is not None:
                path.append(p)
            return path[::-1]
        for dx, dy in DIR_VEC:
            nxt = (cur[0] + dx, cur[1] + dy)
            if nxt in prev or not (0 <= nxt[0] < u.grid.width and 0 <= nxt[1] < u.grid.height):
                continue
            if nxt in targets or _passable(u, nxt, has_key):
                prev[nxt] = cur
                todo.append(nxt)
    return []


def _targets(u: Any, has_key: bool, locked: list[tuple[int, int]]) -> tuple[set[tuple[int, int]], str]:
    """Where the solver heads and what it does on arrival: ``pickup`` (key, mission object), ``toggle`` (a box
    hiding the key) or ``reach``."""
    red, blue = getattr(u, "red_door", None), getattr(u, "blue_door", None)
    if red is not None and blue is not None:  # RedBlueDoors: open the red door, then the blue one
        door = blue if red.is_open else red
        return {p for p in _find(u, "door") if u.grid.get(*p) is door}, "reach"
    keys = _find(u, "key")
    if locked and not has_key and keys:
        return set(keys), "pickup"
    boxes = _find(u, "box")
    if locked and not has_key and boxes and getattr(u, "obj", None) is None:
        return set(boxes), "toggle"  # KeyInBox: the key is inside a box; toggling the box shows it
    goals = _find(u, "goal")
    if goals:
        return set(goals), "reach"
    obj = getattr(u, "obj", None)
    if obj is not None and obj.cur_pos is not None and u.carrying is not obj:
        return {(int(obj.cur_pos[0]), int(obj.cur_pos[1]))}, "pickup"
    return set(locked), "reach"  # Unlock: toggling the locked door is the task


def solver_action(env: gym.Env) -> int:
    """The solver's next action on a live DoorKey / MultiRoom / Unlock / KeyCorridor / UnlockPickup /
    RedBlueDoors / KeyInBox env."""
    u: Any = env.unwrapped
    pos = (int(u.agent_pos[0]), int(u.agent_pos[1]))
    carrying = u.carrying
    has_key = carrying is not None and carrying.type == "key"
    locked = [p for p in _find(u, "door") if u.grid.get(*p).is_locked]
    targets, verb = _targets(u, has_key, locked)
    if verb == "pickup" and carrying is not None and not (has_key and locked):
        # hands full (the key, no lock left): drop it on the nearest free cell off the way first
        way = set(_bfs(u, pos, targets, True))
        verb = "drop"
        targets = {
            (x, y)
            for x in range(u.grid.width)
            for y in range(u.grid.height)
            if u.grid.get(x, y) is None and (x, y) not in way
        }
    path = _bfs(u, pos, targets, has_key)
    if len(path) < 2:
        return FORWARD if not path else DONE
    nxt = path[1]
    need = DIR_VEC.index((nxt[0] - pos[0], nxt[1] - pos[1]))
    turn = (need - int(u.agent_dir)) % 4
    if turn:
        return RIGHT if turn == 1 else LEFT
    cell = u.grid.get(*nxt)
    if nxt in targets and verb != "reach":
        return {"pickup": PICKUP, "drop": DROP, "toggle": TOGGLE}[verb]
    if cell is not None and cell.type == "door" and not cell.is_open:
        return TOGGLE
    return FORWARD


def demo_episode(
    env: DiscreteTokens, seed: int, noise: float, rng: np.random.Generator, tag: str
) -> Trajectory:
    """One noisy-solver episode as a corpus trajectory (tokens from the wrapper, label from the env)."""
    env.reset(seed=seed)
    steps: list[Step] = []
    n_actions = int(env.action_space.n)  # type: ignore[attr-defined]
    reward = 0.0
    while True:
        a = int(rng.integers(n_actions)) if rng.random() < noise else solver_action(env)
        _, r, term, trunc, info = env.step(a)
        rec = step_record(info)
        steps.append(Step(rec["action"], token=rec["token"], slots=rec["slots"]))
        if term or trunc:
            reward = float(r)
            break
    env_id = env.spec.id if env.spec is not None else "minigrid"
    return Trajectory(
        f"{tag}-s{seed}-e{noise:g}", steps, reward > 0, env=env_id, task=env_id, reward=reward,
        extra={"seed": seed, "noise": noise},
    )  # fmt: skip


def demo_corpus(
    env_id: str, max_steps: int, n_episodes: int, noises: tuple[float, ...], seed0: int = 10_000
) -> list[Trajectory]:
    """``n_episodes`` demonstrations, noise levels cycling over ``noises``; env seeds from ``seed0``.

    Deterministic: the same arguments give the same corpus.
    """
    env = DiscreteTokens(gym.make(env_id, max_steps=max_steps))
    rng = np.random.default_rng(seed0)
    out = [demo_episode(env, seed0 + i, noises[i % len(noises)], rng, "demo") for i in range(n_episodes)]
    env.close()
    return out
