"""Reader of BrowserGym / AgentLab step records (one JSON object per step).

AgentLab keeps one ``StepInfo`` per step: the observation the agent saw, the action it took
after seeing it, and the reward that action earned. Exported to JSON(L), a record looks like::

    {"episode": "webarena.310_seed0", "step": 0, "action": "click('235')",
     "obs": {"axtree_txt": "[235] link 'CUSTOMERS' ...", "goal": "Find all customers ..."},
     "reward": 0.0, "terminated": false, "truncated": false,
     "agent_info": {"think": "I should open the customers page."}}

Accepted variations: the observation fields may sit at the top level (``axtree_txt``,
``goal``) instead of under ``obs``; the episode key may be ``episode``, ``episode_id``,
``exp_dir`` or ``task_name`` (+ ``seed``); the thought may be ``think`` or ``thought`` (top
level or under ``agent_info``). AgentLab's final record (the last observation, ``action``
null) closes the episode.

Mapping to the corpus: records are grouped by episode and ordered by ``step``; a step's
``observation`` is the AXTree text of the *next* record (what the action led to), and the first
AXTree goes to ``Trajectory.extra["initial_observation"]``, so
:meth:`BrowserGymCanonicalizer.corpus_context` finds, for each action, the tree it addressed.
``success`` is whether the episode's total reward is positive.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from ..records import Step, Trajectory
from ._records import bad_record, iter_records

_FIX = "each record needs an episode key ('episode', 'episode_id', 'exp_dir' or 'task_name'), 'step' and 'action'"


def _get(rec: Mapping[str, Any], key: str) -> Any:
    if key in rec:
        return rec[key]
    obs = rec.get("obs")
    if isinstance(obs, Mapping) and key in obs:
        return obs[key]
    info = rec.get("agent_info")
    if isinstance(info, Mapping) and key in info:
        return info[key]
    return None


def _episode_key(rec: Mapping[str, Any]) -> str | None:
    for key in ("episode", "episode_id", "exp_dir"):
        if rec.get(key) is not None:
            return str(rec[key])
    if rec.get("task_name") is not None:
        seed = rec.get("seed")
        return f"{rec['task_name']}" + ("" if seed is None else f"_seed{seed}")
    return None


def _text(val: Any) -> str:
    if val is None:
        return ""
    if isinstance(val, str):
        return val
    if isinstance(val, list):  # BrowserGym's goal_object: [{"type": "text", "text": ...}]
        return " ".join(str(v.get("text", "")) if isinstance(v, Mapping) else str(v) for v in val)
    return str(val)


def read_agentlab(path: str | os.PathLike[str], *, env: str = "webarena") -> list[Trajectory]:
    """Read BrowserGym / AgentLab step records (JSON list or JSONL) into trajectories."""
    episodes: dict[str, list[tuple[int, str, Mapping[str, Any]]]] = {}  # episode -> [(step, where, record)]
    for where, rec in iter_records(path):
        if not isinstance(rec, Mapping):
            raise bad_record(where, f"record is {type(rec).__name__}, expected a JSON object", _FIX)
        key = _episode_key(rec)
        if key is None:
            raise bad_record(where, "record has no episode key", _FIX)
        step = rec.get("step")
        if not isinstance(step, int) or isinstance(step, bool) or step < 0:
            raise bad_record(where, f"'step' is {step!r}, expected a non-negative integer", _FIX)
        action = rec.get("action")
        if action is not None and not isinstance(action, str):
            raise bad_record(where, f"'action' is {action!r}, expected a string or null", _FIX)
        axtree = _get(rec, "axtree_txt")
        if axtree is not None and not isinstance(axtree, str):
            raise bad_record(where, "'axtree_txt' is not a string", "store the flattened AXTree text")
        episodes.setdefault(key, []).append((step, where, rec))
    return [_episode(key, recs, env) for key, recs in episodes.items()]


def _episode(key: str, recs: list[tuple[int, str, Mapping[str, Any]]], env: str) -> Trajectory:
    recs.sort(key=lambda r: r[0])
    seen: set[int] = set()
    for index, where, _ in recs:
        if index in seen:
            raise bad_record(where, f"episode {key!r} has step {index} twice", "keep one record per step")
        seen.add(index)
    trees = [_text(_get(r, "axtree_txt")) for _, _, r in recs]
    steps: list[Step] = []
    total = 0.0
    for i, (_, _, rec) in enumerate(recs):
        reward = rec.get("reward")
        if isinstance(reward, (int, float)) and not isinstance(reward, bool):
            total += float(reward)
        action = rec.get("action")
        if action is None:
            continue  # AgentLab's closing record: an observation with no action
        thought = _get(rec, "think") or _get(rec, "thought")
        out = Step(action, trees[i + 1] if i + 1 < len(recs) else "", _text(thought) or None)
        if isinstance(rec.get("element"), Mapping):
            out.extra["element"] = dict(rec["element"])
        steps.append(out)
    first = recs[0][2]
    goal = _text(_get(first, "goal") or _get(first, "goal_object"))
    extra: dict[str, Any] = {"source_format": "agentlab"}
    if trees and trees[0]:
        extra["initial_observation"] = trees[0]
    task = first.get("task_name")
    return Trajectory(
        key, steps, total > 0, env=env, task=str(task or ""), goal=goal, reward=total, extra=extra
    )
