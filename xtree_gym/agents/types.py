"""The shapes every agents room passes on, written down once.

One *turn* is: the harness renders a prompt, a generator completes it, the harness parses an
action out of the completion, the env steps. An *episode* is the turns of one env copy until it
ends; a *group* is the ``n`` episodes of one task, played from identically seeded env copies.

Data flow (see docs/agents.md)::

    HarnessState --harness.render--> messages --tokenizer--> GenRequest.prompt_ids
    GenRequest --generator.generate--> Generation(text, completion_ids, logprobs)
    Generation.text --harness.parse--> ParsedAction(action | None) --env.step--> Turn
    [Turn, ...] --> Episode --to_trajectory--> corpus record (``xtree mine`` reads it)

Token ids and logprobs are kept exactly as generated: a trainer never re-tokenizes the text.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ..corpus.records import Step, Trajectory


@dataclass(frozen=True)
class TaskSpec:
    """One task to play: the env is reset with ``seed`` after being built with ``env_kwargs``.

    A group is ``n`` env copies of one TaskSpec, all reset with the same seed.
    """

    task: str
    """Task family name (ScienceWorld task, ``webshop``, MiniWoB task) — ``per_task`` keys on it."""
    seed: int = 0
    """Seed passed to ``env.reset(seed=...)`` (same for every member of the group)."""
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    """Extra constructor arguments for this task (``task_name``/``variation``, ``goal_index``...)."""
    reset_options: dict[str, Any] = field(default_factory=dict)
    """``options`` passed to ``env.reset``."""
    key: str = ""
    """Stable id of the task within an evaluation (resume skips keys already finished)."""


@dataclass(frozen=True)
class GenRequest:
    """One prompt to complete.

    ``oracle_text`` is filled by the rollout only when the generator says ``needs_oracle``: the
    env's gold/expert action, already written in the harness's response format.
    """

    prompt_ids: list[int]
    """Token ids of the rendered prompt (chat template applied). Empty for tokenizer-less backends."""
    prompt_text: str = ""
    """The same prompt as text (what ``prompt_ids`` decode to)."""
    oracle_text: str | None = None
    """The response the oracle backend should return; ``None`` for every other backend."""
    key: tuple[Any, ...] = ()
    """Who asked: ``(group, member, turn)``; lets scripted backends answer per episode."""


@dataclass
class Generation:
    """What a generator returns for one :class:`GenRequest`.

    ``len(completion_ids) == len(logprobs)``; ``logprobs[t]`` is log π(completion_ids[t] | prefix)
    under the sampling distribution actually used (after temperature / top-p), or 0.0 for
    backends that do not sample (scripted, oracle).
    """

    text: str
    """The decoded completion (stop string included when generation stopped on one)."""
    completion_ids: list[int] = field(default_factory=list)
    """Generated token ids, as sampled (never re-tokenized from ``text``)."""
    logprobs: list[float] = field(default_factory=list)
    """Per-token log-probabilities of ``completion_ids``."""
    finish_reason: str = "stop"
    """``"stop"`` (EOS or a stop string) or ``"length"`` (max new tokens reached)."""


@runtime_checkable
class Generator(Protocol):
    """Token ids in; completion ids, per-token logprobs and text out (batched).

    Backends: ``scripted``, ``oracle``, ``hf``, ``vllm`` (see :mod:`xtree_gym.agents.model.generation`).
    """

    name: str
    """Backend name, as ``--backend`` spells it."""
    needs_oracle: bool
    """True when each request must carry ``oracle_text`` (the oracle backend)."""

    def generate(self, requests: Sequence[GenRequest]) -> list[Generation]:
        """Complete every request; one :class:`Generation` per request, in order."""
        ...


@dataclass(frozen=True)
class ParsedAction:
    """A harness's reading of one response.

    ``action`` is the env action string to execute, or ``None`` when the response did not parse;
    then ``error`` says why and the turn is an invalid action (the env is not stepped with junk,
    the episode goes on).
    """

    action: str | None
    error: str | None = None
    thought: str | None = None
    actions: tuple[str, ...] = ()
    """For macro-action harnesses (``node``): every ``<action>`` of the response, in order."""


@dataclass
class Turn:
    """One prompt → completion → env step."""

    prompt_ids: list[int]
    completion_ids: list[int]
    logprobs: list[float]
    response: str
    """The model's text (what ``completion_ids`` decode to)."""
    action: str | None
    """The parsed env action; ``None`` when the response did not parse."""
    observation: str
    """The env's text after the step (or the parse error shown to the model)."""
    reward: float = 0.0
    """The env's reward for this step."""
    invalid: bool = False
    """True when the response did not parse or the env refused the action."""
    parse_error: str | None = None
    token: str | None = None
    """Canonical ``verb<role>`` of the executed action (``info["xtree"]["token"]``)."""
    slots: dict[str, Any] | None = None
    thought: str | None = None
    info: dict[str, Any] = field(default_factory=dict)
    """JSON-safe extras (``bonus``, ``matched``, ``score``...)."""

    def to_step(self) -> Step:
        """The corpus step of this turn; ids and logprobs ride along in ``extra``."""
        extra: dict[str, Any] = {
            "response": self.response,
            "prompt_ids": list(self.prompt_ids),
            "completion_ids": list(self.completion_ids),
            "logprobs": [float(x) for x in self.logprobs],
            "reward": float(self.reward),
            "invalid": bool(self.invalid),
        }
        if self.parse_error is not None:
            extra["parse_error"] = self.parse_error
        if self.info:
            extra["info"] = dict(self.info)
        return Step(
            action=self.action if self.action is not None else "",
            observation=self.observation,
            thought=self.thought,
            token=self.token,
            slots=self.slots,
            extra=extra,
        )


@dataclass
class Episode:
    """One env copy played to the end: a corpus record plus what the trainer needs."""

    id: str
    """Unique within a run: ``{env}/{task}/{seed}/{member}``-like."""
    env: str
    task: str
    """Task family (ScienceWorld task name, ``webshop``, MiniWoB task)."""
    goal: str
    seed: int
    group: int
    """Index of the group (one task, n members) this episode belongs to."""
    member: int
    """Index within the group, 0..n-1."""
    turns: list[Turn] = field(default_factory=list)
    success: bool = False
    """The benchmark's strict success (ScienceWorld score 100, WebShop reward 1, MiniWoB win)."""
    reward: float = 0.0
    """Outcome reward the trainer starts from (sum of env rewards, or the final one: see env)."""
    score: float = 0.0
    """Graded score as the benchmark reports it (ScienceWorld 0–100 / 100, WebShop 0–1)."""
    terminated: bool = False
    truncated: bool = False
    fault: str | None = None
    """Set when the env crashed or timed out: the episode was truncated there."""
    meta: dict[str, Any] = field(default_factory=dict)
    """JSON-safe extras (``harness``, ``backend``, ``variation``, ``done_rlvmr``...)."""

    @property
    def n_invalid(self) -> int:
        return sum(t.invalid for t in self.turns)

    def to_trajectory(self) -> Trajectory:
        """The corpus record (``xtree mine`` reads it; ids/logprobs stay on each step)."""
        extra: dict[str, Any] = {
            "score": float(self.score),
            "seed": int(self.seed),
            "group": int(self.group),
            "member": int(self.member),
            "terminated": bool(self.terminated),
            "truncated": bool(self.truncated),
        }
        if self.fault is not None:
            extra["fault"] = self.fault
        extra.update(self.meta)
        return Trajectory(
            id=self.id,
            steps=[t.to_step() for t in self.turns],
            success=bool(self.success),
            env=self.env,
            task=self.task,
            goal=self.goal,
            reward=float(self.reward),
            extra=extra,
        )

    @classmethod
    def from_trajectory(cls, traj: Trajectory) -> Episode:
        """Inverse of :meth:`to_trajectory` (for resumed runs and offline training)."""
        ex: Mapping[str, Any] = traj.extra
        turns = []
        for s in traj.steps:
            e = s.extra
            turns.append(
                Turn(
                    prompt_ids=list(e.get("prompt_ids", [])),
                    completion_ids=list(e.get("completion_ids", [])),
                    logprobs=[float(x) for x in e.get("logprobs", [])],
                    response=str(e.get("response", "")),
                    action=s.action or None,
                    observation=s.observation,
                    reward=float(e.get("reward", 0.0)),
                    invalid=bool(e.get("invalid", False)),
                    parse_error=e.get("parse_error"),
                    token=s.token,
                    slots=s.slots,
                    thought=s.thought,
                    info=dict(e.get("info", {})),
                )
            )
        known = {"score", "seed", "group", "member", "terminated", "truncated", "fault"}
        return cls(
            id=traj.id,
            env=traj.env,
            task=traj.task,
            goal=traj.goal,
            seed=int(ex.get("seed", 0)),
            group=int(ex.get("group", 0)),
            member=int(ex.get("member", 0)),
            turns=turns,
            success=traj.success,
            reward=float(traj.reward or 0.0),
            score=float(ex.get("score", 0.0)),
            terminated=bool(ex.get("terminated", False)),
            truncated=bool(ex.get("truncated", False)),
            fault=ex.get("fault"),
            meta={k: v for k, v in ex.items() if k not in known},
        )
