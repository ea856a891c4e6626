"""Readers of the ShareGPT-style conversation formats: AgentGym's AgentTraj-L and ETO's SFT sets.

Both store one trajectory as ``{"conversations": [{"from": "human"|"gpt", "value": ...}, ...]}``
with ReAct turns (``Thought: ...\\nAction: ...``):

* **AgentGym / AgentTraj-L** (JSON list or JSONL): ``item_id`` such as ``"sciworld_354"`` or
  ``"webshop_12"`` names the environment; each turn may carry ``"loss"`` (``false`` on the
  prompt turns). Every trajectory of the set is an expert success; ``success`` is therefore
  ``true`` unless the record says otherwise (``success`` or ``reward`` keys).
* **ETO** (``webshop_sft.json``, ``sciworld_sft.json``: a JSON list): ``id`` names the
  trajectory, ``reward`` (WebShop) is the final reward; success is ``reward >= 1.0`` (the
  threshold is a parameter) and ``true`` when there is no reward.

The layout of a conversation: an instruction turn and the model's acknowledgement (``"OK"``),
then the task (human), then alternating model actions and observations. Each model turn with an
``Action:`` marker is one step: the action is the text after the last ``Action:`` (first line
for single-line action languages), the thought the text after ``Thought:`` before it, and the
observation the next human turn (``Observation:`` prefix removed). A model turn without the
marker after the task is kept as a step with the whole text as its action (never dropped), and
``extra["no_action_marker"]`` set.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

from ..records import Step, Trajectory
from ._records import bad_record, iter_records

# item_id prefix -> (corpus env name, canonicalizer domain)
ENV_PREFIXES: dict[str, str] = {
    "sciworld": "scienceworld",
    "scienceworld": "scienceworld",
    "webshop": "webshop",
    "alfworld": "alfworld",
    "babyai": "babyai",
    "textcraft": "textcraft",
    "maze": "maze",
    "wordle": "wordle",
    "webarena": "webarena",
}
_ACTION = re.compile(r"(?:^|\n)\s*Action\s*:\s*", re.IGNORECASE)
_THOUGHT = re.compile(r"^\s*Thought\s*:\s*", re.IGNORECASE)
_FIX = "each record needs 'conversations': a list of {'from': 'human'|'gpt', 'value': str}"


def split_react(text: str) -> tuple[str | None, str, bool]:
    """Split a ReAct model turn into ``(thought, action, had_marker)``.

    Example:
        >>> split_react("Thought: I need the kitchen.\\nAction: go to kitchen")
        ('I need the kitchen.', 'go to kitchen', True)
        >>> split_react("OK")
        (None, 'OK', False)
    """
    matches = list(_ACTION.finditer(text))
    if not matches:
        return None, text.strip(), False
    last = matches[-1]
    action = text[last.end() :].strip()
    # Action languages here are one line; anything after is the model rambling, kept in thought.
    first_line, _, rest = action.partition("\n")
    thought = _THOUGHT.sub("", text[: last.start()]).strip()
    if rest.strip():
        thought = f"{thought}\n[after action] {rest.strip()}".strip()
    return (thought or None), first_line.strip(), True


def _strip_observation(text: str) -> str:
    return re.sub(r"^\s*Observation\s*:\s*", "", text, flags=re.IGNORECASE).strip()


def _check_turns(where: str, rec: Any) -> list[Mapping[str, Any]]:
    if not isinstance(rec, Mapping):
        raise bad_record(where, f"record is {type(rec).__name__}, expected a JSON object", _FIX)
    conv = rec.get("conversations")
    if not isinstance(conv, list):
        raise bad_record(where, f"'conversations' is {type(conv).__name__}, expected a list", _FIX)
    for i, turn in enumerate(conv):
        if not isinstance(turn, Mapping):
            raise bad_record(where, f"conversations[{i}] is {type(turn).__name__}, expected an object", _FIX)
        if turn.get("from") not in ("human", "gpt", "user", "assistant", "system"):
            raise bad_record(where, f"conversations[{i}].from is {turn.get('from')!r}", _FIX)
        if not isinstance(turn.get("value"), str):
            raise bad_record(where, f"conversations[{i}].value is not a string", _FIX)
    return conv


def _is_model(turn: Mapping[str, Any]) -> bool:
    return turn["from"] in ("gpt", "assistant")


def _task_index(conv: list[Mapping[str, Any]]) -> int:
    """Index of the human turn that states the task (after instruction + acknowledgement)."""
    if len(conv) >= 3 and not _is_model(conv[0]) and _is_model(conv[1]) and "Action" not in conv[1]["value"]:
        return 2
    return 0


def goal_from_task(text: str) -> str:
    """The goal sentence of a task turn (WebShop's ``Instruction: [SEP] ... [SEP]`` or the text).

    Example:
        >>> goal_from_task("WebShop [SEP] Instruction: [SEP] i need a blue cord [SEP] Search")
        'i need a blue cord'
    """
    m = re.search(r"Instruction:\s*\[SEP\]\s*(.*?)\s*\[SEP\]", text, re.DOTALL)
    if m:
        return m.group(1).strip()
    text = re.sub(r"^\s*(Task Description|Observation)\s*:\s*", "", text.strip(), flags=re.IGNORECASE)
    return text.split("\n\n")[0].strip()


def conversation_to_trajectory(
    where: str, rec: Any, *, id_key: str, env: str | None, success_threshold: float
) -> Trajectory:
    """One conversation record -> :class:`Trajectory` (uncanonicalized)."""
    conv = _check_turns(where, rec)
    tid = rec.get(id_key, rec.get("id", rec.get("item_id")))
    if tid is None:
        raise bad_record(where, f"record has no {id_key!r}", f"give each record an {id_key!r}")
    tid = str(tid)
    if env is None:
        prefix = re.split(r"[_\-/]", tid, maxsplit=1)[0].lower()
        env = ENV_PREFIXES.get(prefix, prefix)
    start = _task_index(conv)
    task_text = conv[start]["value"] if start < len(conv) and not _is_model(conv[start]) else ""
    steps: list[Step] = []
    for i in range(start, len(conv)):
        turn = conv[i]
        if not _is_model(turn):
            continue
        thought, action, marked = split_react(turn["value"])
        nxt = conv[i + 1] if i + 1 < len(conv) and not _is_model(conv[i + 1]) else None
        step = Step(action, _strip_observation(nxt["value"]) if nxt else "", thought)
        if not marked:
            step.extra["no_action_marker"] = True
        steps.append(step)
    reward = rec.get("reward")
    reward = float(reward) if isinstance(reward, (int, float)) and not isinstance(reward, bool) else None
    success = rec.get("success")
    if not isinstance(success, bool):
        success = True if reward is None else reward >= success_threshold
    known = {"conversations", id_key, "reward", "success", "goal", "task"}
    extra = {k: v for k, v in rec.items() if k not in known}
    extra["source_format"] = "conversations"
    goal = rec.get("goal") if isinstance(rec.get("goal"), str) else goal_from_task(task_text)
    task = rec.get("task") if isinstance(rec.get("task"), str) else ""
    return Trajectory(tid, steps, success, env=env, task=task, goal=goal, reward=reward, extra=extra)


def read_agentgym(path: str | os.PathLike[str], *, env: str | None = None) -> list[Trajectory]:
    """Read an AgentGym / AgentTraj-L file (JSON list or JSONL) into trajectories.

    ``env`` overrides the environment read from each ``item_id`` prefix.
    """
    return [
        conversation_to_trajectory(where, rec, id_key="item_id", env=env, success_threshold=1.0)
        for where, rec in iter_records(path)
    ]


def read_eto(
    path: str | os.PathLike[str], *, env: str | None = None, success_threshold: float = 1.0
) -> list[Trajectory]:
    """Read an ETO SFT file (``[{"id", "conversations", "reward"?}, ...]``) into trajectories.

    ETO ids are bare numbers, so ``env`` defaults to ``webshop`` when the id has no prefix.
    """
    out = []
    for where, rec in iter_records(path):
        t = conversation_to_trajectory(where, rec, id_key="id", env=env, success_threshold=success_threshold)
        if env is None and t.env not in ENV_PREFIXES.values():
            t.env = "webshop"
        out.append(t)
    return out
