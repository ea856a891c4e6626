"""Group rollouts: n identically seeded env copies per task, generation batched across all live episodes.

One turn of every live episode (read top to bottom in :func:`rollout`)::

    HarnessState --harness.render--> messages --chat template--> GenRequest(prompt_ids)
    all requests of the turn --generator.generate (one batched call)--> Generation per episode
    Generation.text --harness.parse--> actions --MacroAction.step (in the env's process; all envs
    at once when in workers)--> Turn

Decisions worth knowing:

* **Groups.** ``group_mode="task"`` (default): group g is ``n`` copies of ``tasks[g]``, all reset
  with its seed. ``group_mode="mixed"`` reproduces RLVMR's ScienceWorld training groups: its env
  workers each draw their own task, and verl-agent groups consecutive blocks of ``group_n`` env
  indices, so a group holds ``n`` *different* tasks -- here group g plays ``tasks[g*n:(g+1)*n]``,
  one member each (the last group may be shorter).
* **Unparseable response.** The env is *not* stepped with junk: the turn is recorded with
  ``invalid=True``, ``action=None`` and the parse error as its observation; the next prompt shows
  the unchanged env observation (``HarnessState.info["parse_error"]`` says what went wrong) and the
  turn counts against the step cap, as a refused action would (RLVMR steps the env with the
  junk, which costs a step and changes nothing). A harness with ``max_parse_retries`` is re-asked
  first (BrowserGym's retries); the failed texts are kept in ``Turn.info["retries"]``.
* **Step cap.** ``max_steps`` if given, else ``harness.step_limit`` env steps (invalid turns count
  one each); reaching it truncates the episode. It is the budget of the
  :class:`~xtree_gym.wrappers.macro.MacroAction` every turn runs through (App. D's node-level
  protocol: a ``node`` turn's actions run in order, a refused one's error leads the next
  observation, a turn is cut where the budget ends; a one-action turn is one plain env step).
* **Faults.** An env that raises, dies or overruns ``step_timeout`` (or the episode's
  ``episode_timeout``) ends that episode as truncated with ``Episode.fault`` saying why; its env
  is discarded and the rest of the group goes on. Workers are killed on overrun; in-process envs
  (``workers=0``) are abandoned in their thread.
* **Tokens.** ``Turn.token``/``slots`` are the env's ``info["xtree"]`` for the executed action, so
  ``xtree mine`` reads rollouts without re-canonicalizing; a turn no env answered (parse failure,
  fault) gets ``noop<empty>``, the catch-all's token for an empty action, so every step has one.
  Ids and logprobs are the generator's.
"""

from __future__ import annotations

import re
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ...corpus.io import finite_number
from ...errors import ConfigError
from ...progress import Progress
from ..harness.base import Harness, HarnessState, Message
from ..types import Episode, Generation, Generator, GenRequest, ParsedAction, TaskSpec, Turn
from .envproc import EnvFault, EnvHolder, LocalHandle, ProcessHandle

GROUP_MODES = ("task", "mixed")
ENV_DOMAINS = {
    "XTree-ScienceWorld-v0": "scienceworld",
    "XTree-WebShop-v0": "webshop",
    "XTree-MiniWoB-v0": "miniwob",
    "XTree-WebArena-v0": "webarena",
    "XTree-OpenURL-v0": "browsergym",
    "XTree-Countdown-v0": "countdown",
    "XTree-TWCooking-v0": "twcooking",
    "XTree-ALFWorld-v0": "alfworld",
}
_SCALAR = (str, int, float, bool, type(None))
NO_ACTION_TOKEN = "noop<empty>"
"""Token of a turn no env answered (parse failure, fault): the catch-all canonicalizer's for an empty action."""


def env_domain(env_id: str) -> str:
    """The corpus ``env`` name of an env id.

    Example:
        >>> env_domain("XTree-ScienceWorld-v0"), env_domain("XTree-Foo-Bar-v2"), env_domain("pkg.mod:EchoEnv")
        ('scienceworld', 'foo-bar', 'echo')
    """
    if env_id in ENV_DOMAINS:
        return ENV_DOMAINS[env_id]
    name = re.sub(r"Env$", "", env_id.rpartition(":")[2]) if ":" in env_id else env_id
    return re.sub(r"-v\d+$", "", re.sub(r"^XTree-", "", name)).lower()


def plan_groups(tasks: Sequence[TaskSpec], n: int, group_mode: str) -> list[list[TaskSpec]]:
    """Each group's member tasks: ``n`` copies of one task, or (``mixed``) consecutive blocks of ``n``.

    Example:
        >>> ts = [TaskSpec("a"), TaskSpec("b"), TaskSpec("c")]
        >>> [[t.task for t in g] for g in plan_groups(ts, 2, "task")]
        [['a', 'a'], ['b', 'b'], ['c', 'c']]
        >>> [[t.task for t in g] for g in plan_groups(ts, 2, "mixed")]
        [['a', 'b'], ['c']]
    """
    if n < 1:
        raise ConfigError(f"n={n} must be >= 1 (episodes per group)")
    if group_mode == "task":
        return [[t] * n for t in tasks]
    if group_mode == "mixed":
        return [list(tasks[i : i + n]) for i in range(0, len(tasks), n)]
    raise ConfigError(f"unknown group_mode {group_mode!r}", fix=f"use one of {', '.join(GROUP_MODES)}")


@dataclass
class _Live:
    """One episode in flight: its record, its env handle, what its agent sees next."""

    episode: Episode
    handle: Any
    key: tuple[str, str]
    state: HarnessState
    started: float
    steps: int = 0
    last_info: dict[str, Any] = field(default_factory=dict)
    oracle: str | None = None
    scores: list[float] = field(default_factory=list)


def _messages_to_request(
    messages: list[Message], tokenizer: Any, key: tuple[int, int, int], oracle: str | None
) -> GenRequest:
    if tokenizer is None:
        text = "\n\n".join(f"{m['role']}: {m['content']}" for m in messages)
        return GenRequest([], text, oracle, key)
    ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_dict=False)
    text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    return GenRequest([int(i) for i in ids], str(text), oracle, key)


def _small_info(info: dict[str, Any]) -> dict[str, Any]:
    """The scalar facts of an env ``info`` worth keeping on a turn (score, won, invalid_action...).

    The goal is on the episode already; long texts (pages, trees) are on the observation.
    """
    return {
        k: v
        for k, v in info.items()
        if k != "goal" and isinstance(v, _SCALAR) and not (isinstance(v, str) and len(v) > 300)
    }


_SURROGATE = re.compile("[\ud800-\udfff]")


def sane_answer(answer: Any) -> Any:
    """An env answer whose strings UTF-8 can encode: a lone surrogate becomes U+FFFD (else writing the
    episode fails later, far from the env that sent it).

    Example:
        >>> sane_answer({"obs": "a" + chr(0xD83D) + " b", "reward": 1.0})["obs"] == "a" + chr(0xFFFD) + " b"
        True
    """
    if isinstance(answer, str):
        try:
            answer.encode("utf-8")
        except UnicodeEncodeError:
            return _SURROGATE.sub("\ufffd", answer)
        return answer
    if isinstance(answer, dict):
        return {k: sane_answer(v) for k, v in answer.items()}
    if isinstance(answer, list):
        return [sane_answer(v) for v in answer]
    return answer


def _outcome(ep: Episode, live: _Live) -> None:
    """Success, score and reward of a finished episode, as its benchmark counts them."""
    info = live.last_info
    ep.reward = float(sum(t.reward for t in ep.turns))
    if ep.env == "scienceworld":
        points = float(info.get("score", 0) or 0)
        ep.success = bool(info.get("won", points >= 100))
        ep.score = max(points, 0.0) / 100.0
        # RLVMR keeps the previous score when the simulator answers -100, and counts any ending
        # (completion or step limit) with a positive score as a success.
        kept = [s for s in live.scores if s != -100]
        ep.meta["score_rlvmr"] = kept[-1] if kept else 0.0
        ep.meta["done_rlvmr"] = ep.fault is None and (ep.terminated or ep.truncated)
    else:
        won = info.get("won", info.get("success"))
        ep.success = bool(won) if won is not None else (ep.terminated and ep.reward > 0)
        ep.score = max(ep.reward, 0.0) if ep.env != "webshop" else ep.reward


class _Run:
    """The state of one :func:`rollout` call (kept in one object so each phase is a short method)."""

    def __init__(self, env_id: str, generator: Generator, harness: Harness, **opts: Any) -> None:
        self.env_id = env_id
        self.domain = env_domain(env_id)
        self.generator = generator
        self.harness = harness
        self.tokenizer = opts["tokenizer"]
        self.env_kwargs = dict(opts["env_kwargs"] or {})
        self.cap = int(opts["max_steps"] or harness.step_limit)
        self.workers = int(opts["workers"])
        self.step_timeout = opts["step_timeout"]
        self.reset_timeout = opts["reset_timeout"]
        self.episode_timeout = opts["episode_timeout"]
        self.start_method = opts["start_method"]
        self.servers = opts.get("servers")
        """The run's :class:`~xtree_gym.agents.play.remote.EnvServers` (``env_servers``), or None."""
        self.on_episode: Callable[[Episode], None] | None = opts["on_episode"]
        self.idle: list[tuple[tuple[str, str], Any]] = []  # (constructor key, handle), oldest first
        self.max_idle = 16
        self.done: list[Episode] = []
        self.seen_ids: set[str] = set()
        self.bar: Progress | None = None
        self.turns = 0  # generated turns and tokens so far: the bar moves per turn, not per episode
        self.tokens = 0
        self.streamed = 0  # tokens of the generation in flight, as the generator reports them

    # -- env handles -------------------------------------------------------------------------------
    def _acquire(self, kwargs: dict[str, Any]) -> tuple[tuple[str, str], Any]:
        """An idle env built with the same arguments (reset reuses it), else a new one."""
        key = (self.env_id, repr(sorted(kwargs.items())))
        for i in range(len(self.idle) - 1, -1, -1):
            if self.idle[i][0] == key:
                return key, self.idle.pop(i)[1]
        oracle = bool(getattr(self.generator, "needs_oracle", False))
        if self.servers is not None:
            from .remote import RemoteHandle

            return key, RemoteHandle(self.servers, self.env_id, kwargs, self.harness, oracle)
        if self.workers > 0:
            return key, ProcessHandle(self.env_id, kwargs, self.harness, oracle, self.start_method)
        return key, LocalHandle(EnvHolder(self.env_id, kwargs, self.harness, oracle))

    def _release(self, live: _Live) -> None:
        """Keep a healthy env for the next group; past ``max_idle`` the oldest idle env is closed
        (MiniWoB builds one browser per task: 125 tasks must not leave 125 browsers open)."""
        if live.handle.alive:
            self.idle.append((live.key, live.handle))
        while len(self.idle) > self.max_idle:
            self.idle.pop(0)[1].close()

    def close(self) -> None:
        for _, handle in self.idle:
            handle.close()
        self.idle.clear()

    def _timeout(self, live: _Live, base: float | None) -> float | None:
        if self.episode_timeout is None:
            return base
        left = max(0.01, self.episode_timeout - (time.monotonic() - live.started))
        return left if base is None else min(base, left)

    # -- starting a group ----------------------------------------------------------------------------
    def start_group(self, g: int, members: list[TaskSpec]) -> list[_Live]:
        """Reset every member of group ``g``; the episodes that started."""
        return self.receive_resets(self.send_resets(g, members))

    def send_resets(self, g: int, members: list[TaskSpec]) -> list[_Live]:
        """Send group ``g``'s resets (an in-process env with a timeout starts its reset now, on its own
        thread, so the resets of every group started together run at once)."""
        lives = []
        for m, task in enumerate(members):
            kwargs = {**self.env_kwargs, **task.env_kwargs}
            key, handle = self._acquire(kwargs)
            tkey = task.key or f"{task.task}/{task.seed}"
            eid = f"{self.domain}/{tkey}/{m}"
            if eid in self.seen_ids:
                eid = f"{eid}#{g}"
            self.seen_ids.add(eid)
            ep = Episode(id=eid, env=self.domain, task=task.task, goal="", seed=task.seed, group=g, member=m)
            ep.meta.update(harness=self.harness.name, backend=self.generator.name, key=tkey)
            state = HarnessState(goal="", observation="")
            live = _Live(ep, handle, key, state, time.monotonic())
            opts = dict(task.reset_options)
            reset = {"cmd": "reset", "seed": task.seed, "options": opts, "budget": self.cap}
            try:
                handle.send(reset, self._timeout(live, self.reset_timeout))
            except EnvFault as exc:
                self._fault(live, str(exc))
                continue
            lives.append(live)
        return lives

    def receive_resets(self, lives: list[_Live]) -> list[_Live]:
        """The answers of :meth:`send_resets`: the episodes that started (the others ended as faults)."""
        started = []
        for live in lives:
            try:
                answer = sane_answer(live.handle.receive())
            except EnvFault as exc:
                self._fault(live, str(exc))
                continue
            live.episode.goal = answer["goal"]
            live.last_info = answer["info"]
            live.state = HarnessState.start(
                answer["goal"], answer["obs"], answer["info"], answer.get("view"), answer.get("valid")
            )
            live.oracle = answer.get("oracle")
            live.episode.meta["initial_observation"] = answer["obs"]
            started.append(live)
        return started

    # -- one turn ------------------------------------------------------------------------------------
    def _request(self, live: _Live, messages: list[Message]) -> GenRequest:
        ep = live.episode
        oracle = None
        if getattr(self.generator, "needs_oracle", False) and live.oracle is not None:
            oracle = self.harness.format_response(live.oracle, "following the reference policy")
        return _messages_to_request(messages, self.tokenizer, (ep.group, ep.member, len(ep.turns)), oracle)

    def generate(self, lives: list[_Live]) -> list[tuple[GenRequest, Generation, ParsedAction, list[str]]]:
        """One batched generation for every live episode, re-asking unparseable ones up to the harness's retries."""
        messages = [self.harness.render(live.state) for live in lives]
        requests = [self._request(live, msgs) for live, msgs in zip(lives, messages)]
        gens = self.generator.generate(requests)
        parsed = [self.harness.parse(g.text) for g in gens]
        failed: list[list[str]] = [[] for _ in lives]
        for _ in range(int(getattr(self.harness, "max_parse_retries", 0))):
            redo = [i for i, p in enumerate(parsed) if p.action is None]
            if not redo:
                break
            for i in redo:
                failed[i].append(gens[i].text)
                messages[i] = self.harness.retry_messages(messages[i], gens[i].text, parsed[i].error or "")
                requests[i] = self._request(lives[i], messages[i])
            for i, g in zip(redo, self.generator.generate([requests[i] for i in redo])):
                gens[i], parsed[i] = g, self.harness.parse(g.text)
        return [(requests[i], gens[i], parsed[i], failed[i]) for i in range(len(lives))]

    def step_all(self, lives: list[_Live]) -> list[_Live]:
        """Generate, parse and step every live episode once; returns those still running."""
        outputs = self.generate(lives)
        self._count_turns(outputs)
        sent: list[tuple[_Live, Turn, list[str]]] = []
        for live, (req, gen, parsed, failed) in zip(lives, outputs):
            turn = Turn(
                prompt_ids=list(req.prompt_ids),
                completion_ids=list(gen.completion_ids),
                logprobs=list(gen.logprobs),
                response=gen.text,
                action=parsed.action,
                observation="",
                thought=parsed.thought,
            )
            if failed:
                turn.info["retries"] = failed
            if parsed.action is None:
                self._invalid_turn(live, turn, parsed.error or "the response did not parse")
                continue
            actions = list(parsed.actions) or [parsed.action]
            msg = {"cmd": "step", "actions": actions, "budget": self.cap - live.steps}
            try:
                live.handle.send(msg, self._timeout(live, self.step_timeout))
            except EnvFault as exc:
                self._fault(live, str(exc), turn)
                continue
            sent.append((live, turn, actions))
        for live, turn, actions in sent:
            try:
                answer = sane_answer(live.handle.receive())
            except EnvFault as exc:
                self._fault(live, str(exc), turn)
                continue
            if not finite_number(answer.get("reward")):  # NaN would poison the means and the JSON written
                self._fault(live, f"the env returned a non-finite reward ({answer.get('reward')!r})", turn)
                continue
            self._record(live, turn, actions, answer)
        running = []
        for live in lives:
            if live.episode.fault is None and not (live.episode.terminated or live.episode.truncated):
                if (
                    self.episode_timeout is not None
                    and time.monotonic() - live.started > self.episode_timeout
                ):
                    self._fault(live, f"episode ran past the {self.episode_timeout:g}s episode timeout")
                    continue
                running.append(live)
        return running

    def _count_turns(self, outputs: list[tuple[GenRequest, Generation, ParsedAction, list[str]]]) -> None:
        self.turns += len(outputs)
        self.tokens += sum(len(gen.completion_ids) for _, gen, _, _ in outputs)
        self.streamed = 0
        self._show()

    def count_streamed(self, k: int) -> None:
        """The generator made ``k`` more tokens of the turns in flight."""
        self.streamed += k
        self._show()

    def _show(self) -> None:
        if self.bar is not None:
            tokens = self.tokens + self.streamed
            rate = tokens / max(self.bar.elapsed(), 1e-9)
            text = f"{self.turns} turns, {tokens} tokens, {rate:.1f} tok/s"
            per_turn = getattr(self.generator, "max_new_tokens", None)
            if (
                isinstance(per_turn, int) and self.bar.total and rate > 0
            ):  # the worst case left, at this speed
                from ...progress import format_seconds

                left = max(0, self.bar.total * self.cap * per_turn - tokens)
                text += f", ETA <= {format_seconds(left / rate)}"
            self.bar.set_postfix(text)

    def _invalid_turn(self, live: _Live, turn: Turn, error: str) -> None:
        turn.token, turn.slots = NO_ACTION_TOKEN, {"rest": ""}
        turn.invalid = True
        turn.parse_error = error
        turn.observation = f"Invalid response: {error}"
        live.episode.turns.append(turn)
        live.steps += 1
        live.state.turn += 1
        live.state.info = {**live.state.info, "parse_error": error}
        if live.steps >= self.cap:
            self._finish(live, truncated=True)

    def _record(self, live: _Live, turn: Turn, actions: list[str], answer: dict[str, Any]) -> None:
        """The turn as :class:`~xtree_gym.wrappers.macro.MacroAction` answered it (see :meth:`EnvHolder.step`)."""
        info = dict(answer["info"])
        macro = info.pop("macro")
        done = [r for r in macro["actions"] if not r["skipped"]]
        xtree = info.get("xtree") or {}
        turn.observation = answer["obs"]  # the last observation, after the refused actions' errors
        turn.reward = float(answer["reward"])
        turn.invalid = macro["invalid"] > 0
        turn.token, turn.slots = xtree.get("token"), xtree.get("slots")
        turn.info.update(_small_info(info))
        if len(actions) > 1:  # a macro turn (node harness): one record per primitive rides along
            turn.token, turn.slots = None, None
            turn.info["primitives"] = [
                {"action": r["action"], "token": r["token"], "observation": r["observation"]} for r in done
            ]
        live.episode.turns.append(turn)
        live.steps += macro["executed"]
        live.last_info = info
        if "score" in info and isinstance(info["score"], (int, float)):
            live.scores.append(float(info["score"]))
        # what the agent sees next: the step, plus the env view / valid actions / oracle read after it
        live.state.advance(
            turn.action or "", turn.observation, info, response=turn.response,
            view=answer.get("view"), valid_actions=answer.get("valid"),
        )  # fmt: skip
        live.oracle = answer.get("oracle")
        if answer["terminated"] or answer["truncated"]:  # the env ended it, or the budget ran out
            self._finish(live, terminated=answer["terminated"], truncated=answer["truncated"])

    # -- endings -------------------------------------------------------------------------------------
    def _fault(self, live: _Live, reason: str, turn: Turn | None = None) -> None:
        if turn is not None:
            turn.observation = ""
            turn.token, turn.slots = NO_ACTION_TOKEN, {"rest": ""}
            turn.info["fault"] = reason
            live.episode.turns.append(turn)
        live.episode.fault = reason
        if hasattr(live.handle, "kill"):  # a worker or a server session
            live.handle.kill()  # a healthy worker past the episode timeout goes too: it may be mid-call
        else:
            live.handle.close()
        live.handle.alive = False
        self._finish(live, truncated=True)

    def _finish(self, live: _Live, *, terminated: bool = False, truncated: bool = False) -> None:
        ep = live.episode
        ep.terminated, ep.truncated = bool(terminated), bool(truncated and not terminated)
        _outcome(ep, live)
        self._release(live)
        self.done.append(ep)
        if self.on_episode is not None:
            self.on_episode(ep)
        if self.bar is not None:
            self.bar.update()


def _check(
    workers: int,
    start_method: str,
    step_timeout: float | None,
    episode_timeout: float | None,
    max_steps: int | None,
) -> None:
    """One clear error for a bad rollout argument, before any env starts."""
    if workers < 0:
        raise ConfigError(f"workers={workers} must be >= 0")
    if start_method not in ("spawn", "forkserver"):
        raise ConfigError(f"start_method={start_method!r}", fix="use 'spawn' or 'forkserver'")
    for name, value in (("step_timeout", step_timeout), ("episode_timeout", episode_timeout)):
        if value is not None and value <= 0:
            raise ConfigError(f"{name}={value} must be positive seconds (or None)")
    if max_steps is not None and max_steps < 1:
        raise ConfigError(f"max_steps={max_steps} must be >= 1")


def _servers(env_id: str, env_servers: str | Sequence[str] | None) -> tuple[Any, int]:
    """(the run's :class:`~xtree_gym.agents.play.remote.EnvServers`, the sessions they take), or (None, 0);
    one clear error when none answers."""
    if env_servers is None or (not isinstance(env_servers, str) and not list(env_servers)):
        return None, 0
    from .remote import EnvServers, parse_servers

    servers = EnvServers(parse_servers(env_servers))
    return servers, servers.check(env_id)


def rollout(
    env_id: str,
    tasks: Sequence[TaskSpec],
    generator: Generator,
    harness: Harness,
    *,
    n: int = 1,
    tokenizer: Any = None,
    env_kwargs: dict[str, Any] | None = None,
    max_steps: int | None = None,
    workers: int = 0,
    step_timeout: float | None = None,
    episode_timeout: float | None = None,
    group_mode: str = "task",
    seed: int = 0,
    progress: bool | None = False,
    reset_timeout: float | None = None,
    max_live: int | None = None,
    start_method: str = "spawn",
    on_episode: Callable[[Episode], None] | None = None,
    env_servers: str | Sequence[str] | None = None,
) -> list[Episode]:
    """Play every task as a group of ``n`` episodes; episodes come back ordered by group, then member.

    ``workers=0`` keeps envs in this process; ``workers>0`` runs each env copy in its own
    subprocess (``start_method`` ``spawn`` or ``forkserver``) and at most ``max(workers, n)``
    episodes are live at once (default without workers: ``max(16, n)``); whole groups start
    together. ``reset_timeout`` defaults to 10 x ``step_timeout``. ``on_episode`` is called as each
    episode finishes (evaluate appends it to ``episodes.jsonl``). ``env_servers`` (``xtree serve``
    URLs) plays each episode as one session on one of them instead (:mod:`.remote`); then at most
    ``max(n, min(16, sessions / 2))`` episodes are live, half of what the servers take, so the envs
    kept for reuse fit too -- or ``max(workers, n)`` when ``workers`` is given, as locally. ``seed`` is recorded only: the
    env seeds are the TaskSpecs' and the sampling seed is the generator's.

    Example (a scripted agent in a tiny text env; see :mod:`xtree_gym.agents.play.testing`):
        >>> from xtree_gym.agents.play.testing import EchoHarness, ECHO_ENV
        >>> from xtree_gym.agents.model.generation import ScriptedGenerator
        >>> gen = ScriptedGenerator(["<action>hello</action>", "oops", "<action>win</action>"] * 2)
        >>> eps = rollout(ECHO_ENV, [TaskSpec("echo", seed=1)], gen, EchoHarness(), n=2)
        >>> [(e.member, [t.action for t in e.turns], e.success) for e in eps]
        [(0, ['hello', 'win'], True), (1, [None, 'hello', None, 'win'], True)]
    """
    _check(workers, start_method, step_timeout, episode_timeout, max_steps)
    groups = plan_groups(list(tasks), n, group_mode)
    servers, sessions = _servers(env_id, env_servers)
    run = _Run(
        env_id,
        generator,
        harness,
        tokenizer=tokenizer,
        env_kwargs=env_kwargs,
        max_steps=max_steps,
        workers=workers,
        step_timeout=step_timeout,
        reset_timeout=reset_timeout if reset_timeout is not None else (step_timeout and 10 * step_timeout),
        episode_timeout=episode_timeout,
        start_method=start_method,
        on_episode=on_episode,
        servers=servers,
    )
    capacity = max_live if max_live is not None else (max(workers, n) if workers else max(16, n))
    if servers is not None and max_live is None and not workers:
        capacity = max(n, min(16, sessions // 2), 1)
    run.max_idle = capacity
    pending = deque(enumerate(groups))
    live: list[_Live] = []
    total = sum(len(g) for g in groups)
    try:
        with Progress(total, desc=f"rollout {run.domain}", enabled=progress) as bar:
            run.bar = bar
            if bar.enabled and hasattr(generator, "on_tokens"):
                generator.on_tokens = run.count_streamed  # type: ignore[attr-defined]
            while pending or live:
                sent: list[_Live] = []
                while pending and (
                    not (live or sent) or len(live) + len(sent) + len(pending[0][1]) <= capacity
                ):
                    g, members = pending.popleft()
                    sent.extend(run.send_resets(g, members))
                live.extend(run.receive_resets(sent))
                if live:
                    live = run.step_all(live)
    finally:
        if getattr(generator, "on_tokens", None) == run.count_streamed:
            generator.on_tokens = None  # type: ignore[attr-defined]
        for lv in live:
            lv.handle.close()
        run.close()
    return sorted(run.done, key=lambda e: (e.group, e.member))
