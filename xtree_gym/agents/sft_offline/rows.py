"""SFT rows from a gold corpus in three formats (X-Tree App. D): standard, node, span.

* ``standard`` -- one action per row, the harness's full prompt every time (RLVMR's form on
  ScienceWorld): the goal, the current observation and the step-level history.
* ``node`` -- one top-level tiling segment per row (a mined node, or a primitive the tree left
  uncovered): the context is encoded once per segment, the target is a ``<planning>`` block plus
  one ``<action>`` per primitive, and the history the prompt carries is node-level (each earlier
  segment's joined actions and the observation after its last action) -- the same history
  :class:`~xtree_gym.wrappers.macro.MacroAction` produces at test time.
* ``span`` -- the control: the same action stream cut at random, with the same segment lengths as
  the node rows of that trajectory (a seeded permutation of them), rendered like the node rows.

All three supervise the identical action stream; only the cut differs. With a tokenizer, each row
also carries ``input_ids`` (chat template applied to prompt + target) and ``loss_mask`` (1 on the
target tokens, the assistant turn's end token included; 0 on the prompt).

Follow one row: trajectory --tile--> segments ``[(start, end, node)]`` --> HarnessState(goal,
observation before ``start``, node-level history) --harness.render--> messages; the gold actions
``[start, end)`` --node_target--> target text --tokenizer--> ids + mask.
"""

from __future__ import annotations

import importlib
import json
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ...corpus.io import atomic_open, read_records
from ...errors import ConfigError, CorpusError
from ..harness.base import Harness, HarnessState, Message, get_harness
from .chat_ids import ChatIds

if TYPE_CHECKING:
    from ...corpus.records import Trajectory
    from ...mining.tree import XTree

FORMATS = ("standard", "node", "span")
"""The row formats of ``xtree sft-rows --format``."""

DEFAULT_HARNESS = {
    "scienceworld": "rlvmr",
    "webshop": "verl-agent",
    "miniwob": "browsergym",
    "webarena": "browsergym",
}
"""The harness a ``standard`` row uses on each env when ``--harness`` is not given."""

JOIN = "; "
"""How a segment's actions join into one node-level history entry (as MacroAction joins a turn)."""


@dataclass
class SFTRow:
    """One supervised row: a prompt, a target, and (with a tokenizer) ids and a loss mask."""

    id: str
    """``{trajectory_id}@{start}:{end}#{format}``."""
    format: str
    """One of :data:`FORMATS`."""
    trajectory_id: str
    """The trajectory the row was cut from."""
    start: int
    """First gold step the target supervises."""
    end: int
    """One past the last supervised step."""
    node: str
    """The tree node the segment instantiates (``""`` for a primitive, a standard or a span row)."""
    messages: list[Message]
    """The prompt as chat messages (the harness's rendering)."""
    target: str
    """The assistant text the loss is taken on."""
    actions: list[str] = field(default_factory=list)
    """The gold actions of ``[start, end)``, in order."""
    input_ids: list[int] | None = None
    """Prompt + target token ids (chat template applied), when a tokenizer was given."""
    loss_mask: list[int] | None = None
    """1 on target tokens, 0 on prompt tokens; same length as ``input_ids``."""

    @property
    def n_actions(self) -> int:
        return self.end - self.start

    def to_dict(self) -> dict[str, Any]:
        """The row as a JSON object: ``asdict``'s content; ``input_ids`` / ``loss_mask`` are the row's own lists
        (``asdict`` copied them one element at a time: most of the time of writing a long episode's rows).

        Example:
            >>> from dataclasses import asdict
            >>> r = SFTRow("t@0:1#standard", "standard", "t", 0, 1, "", [{"role": "user", "content": "go"}], "x")
            >>> r.to_dict() == {k: v for k, v in asdict(r).items() if k not in ("input_ids", "loss_mask")}
            True
        """
        d: dict[str, Any] = {f: getattr(self, f) for f in self.__dataclass_fields__}
        d["messages"] = [dict(m) for m in self.messages]
        d["actions"] = list(self.actions)
        if self.input_ids is None:
            del d["input_ids"], d["loss_mask"]
        return d

    @classmethod
    def from_dict(cls, d: Any) -> SFTRow:
        if not isinstance(d, dict):
            raise ValueError(f"record is {type(d).__name__}, expected an object")
        missing = [k for k in ("id", "format", "messages", "target", "start", "end") if k not in d]
        if missing:
            raise ValueError(f"missing key(s) {missing}")
        row = cls(**{k: d[k] for k in d if k in cls.__dataclass_fields__})  # type: ignore[arg-type]
        ids, mask = row.input_ids, row.loss_mask
        if ids is not None and (mask is None or len(mask) != len(ids)):
            raise ValueError("input_ids and loss_mask differ in length")
        return row


# ----------------------------------------------------------------------------- segments


def tiling_segments(tree: XTree, tokens: Sequence[str]) -> list[tuple[int, int, str]]:
    """The top-level tiling as ``(start, end, node)``; a primitive left uncovered has node ``""``.

    Example:
        >>> from xtree_gym.corpus import Step, Trajectory
        >>> from xtree_gym.mining import mine
        >>> from xtree_gym.mining.config import MinerConfig
        >>> trajs = [Trajectory(str(i), [Step(a, token=a) for a in "abcab"], True) for i in range(6)]
        >>> tree = mine(trajs, MinerConfig(min_freq=3, eta=0.5, cap=1))
        >>> tiling_segments(tree, list("abcab"))
        [(0, 2, 'S0'), (2, 3, ''), (3, 5, 'S0')]
    """
    return [(s.start, s.end, s.symbol if s.is_node else "") for s in tree.tile(tokens)]


def span_segments(lengths: Sequence[int], rng: np.random.Generator) -> list[tuple[int, int, str]]:
    """A length-matched random cut: the same segment lengths in a seeded random order.

    Example:
        >>> span_segments([3, 1, 1], np.random.default_rng(0))
        [(0, 1, ''), (1, 4, ''), (4, 5, '')]
    """
    order = rng.permutation(len(lengths))
    out, start = [], 0
    for k in order:
        out.append((start, start + int(lengths[k]), ""))
        start += int(lengths[k])
    return out


def standard_segments(n_steps: int) -> list[tuple[int, int, str]]:
    """One segment per action.

    Example:
        >>> standard_segments(3)
        [(0, 1, ''), (1, 2, ''), (2, 3, '')]
    """
    return [(i, i + 1, "") for i in range(n_steps)]


# ----------------------------------------------------------------------------- targets


def planning_text(thoughts: Sequence[str | None], glosses: Sequence[str]) -> str:
    """What the ``<planning>`` block says: the steps' thoughts when the corpus has them, else the glosses.

    Example:
        >>> planning_text([None, None], ["open the door", "go to the kitchen"])
        'open the door, then go to the kitchen'
        >>> planning_text(["The door first.", None], ["open the door", "go to the kitchen"])
        'The door first.'
    """
    said = [t.strip() for t in thoughts if t and t.strip()]
    return " ".join(said) if said else ", then ".join(glosses)


def node_target(harness: Harness, actions: Sequence[str], planning: str) -> str:
    """The node-format target: the harness's own multi-action writer, else ``<planning>`` + ``<action>`` tags.

    A harness that knows the node protocol exposes ``format_actions(actions, planning)``; the
    fallback writes the form App. D describes, which the ``node`` harness parses.

    Example:
        >>> print(node_target(Harness(), ["open door", "go to hallway"], "leave the room"))
        <planning>leave the room</planning>
        <action>open door</action>
        <action>go to hallway</action>
    """
    writer = getattr(harness, "format_actions", None)
    if callable(writer):
        return str(writer(list(actions), planning))
    return "\n".join([f"<planning>{planning}</planning>", *(f"<action>{a}</action>" for a in actions)])


# ----------------------------------------------------------------------------- rows


def _state(
    traj: Trajectory, start: int, history: list[tuple[str, str]], turn: int, tokens: Sequence[str]
) -> HarnessState:
    """What the agent saw before step ``start``: the step's recorded ``info`` (e.g. objects in view) if any.

    ``history`` and ``tokens`` are passed as they are, not copied: the state lives only while the
    harness renders it, and a copy per row would make a long trajectory's rows quadratic.
    """
    first = str(traj.extra.get("initial_observation", ""))
    prev = traj.steps[start - 1] if start else None
    obs = prev.observation if prev is not None else first
    info = prev.extra.get("info") if prev is not None else traj.extra.get("initial_info")
    return HarnessState(
        goal=traj.goal,
        observation=obs,
        history=history,
        turn=turn,
        info=dict(info) if isinstance(info, dict) else {},
        initial_observation=first,
        tokens=tokens,  # type: ignore[arg-type]  # a read-only view is enough for rendering
    )


class _Prefix(Sequence[str]):
    """``tokens[:end]`` without the copy (``end`` moves forward as rows are built)."""

    def __init__(self, tokens: Sequence[str]) -> None:
        self.tokens, self.end = tokens, 0

    def __len__(self) -> int:
        return min(self.end, len(self.tokens))

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return list(self.tokens[: len(self)])[i]
        return self.tokens[range(len(self))[i]]  # range() raises the IndexError a list would


def trajectory_rows(
    traj: Trajectory,
    segments: Sequence[tuple[int, int, str]],
    harness: Harness,
    fmt: str,
    tokens: Sequence[str],
    glosses: Sequence[str],
) -> Iterator[SFTRow]:
    """The rows of one trajectory cut at ``segments``, one at a time; ``tokens[i]`` / ``glosses[i]`` are step i's.

    ``glosses`` phrase the planning block; ``tokens`` (may be empty) fill ``HarnessState.tokens``
    with the steps before the row, for harnesses whose advice reads them.

    A ``standard`` row's target is ``harness.format_response(action, thought)`` and its history is
    one entry per step; the other formats carry one entry per segment and a :func:`node_target`.
    Rows are yielded as they are built and the harness bounds what a prompt lists
    (``history_cap``), so memory stays flat however long the trajectory is.
    """
    history: list[tuple[str, str]] = []
    seen = _Prefix(tokens)
    for turn, (start, end, node) in enumerate(segments):
        steps = traj.steps[start:end]
        actions = [s.action for s in steps]
        if fmt == "standard":
            target = harness.format_response(actions[0], steps[0].thought or "")
        else:
            planning = planning_text([s.thought for s in steps], glosses[start:end])
            target = node_target(harness, actions, planning)
        seen.end = start
        yield SFTRow(
            id=f"{traj.id}@{start}:{end}#{fmt}",
            format=fmt,
            trajectory_id=traj.id,
            start=start,
            end=end,
            node=node,
            messages=harness.render(_state(traj, start, history, turn, seen)),
            target=target,
            actions=actions,
        )
        history.append((JOIN.join(actions), steps[-1].observation))


def load_harness(name: str, **kwargs: Any) -> Harness:
    """``get_harness(name)``, importing ``xtree_gym.agents.harness.<name>`` first if it registers there."""
    module = f"{__package__}.harness.{name.replace('-', '_')}"
    try:
        importlib.import_module(f"{__package__}.harness")
        importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name not in (module, f"{__package__}.harness"):
            raise
    return get_harness(name, **kwargs)


def default_harness_name(fmt: str, env: str) -> str:
    """``node`` for node/span rows; the env's standard protocol for standard rows (``rlvmr`` on ScienceWorld).

    Example:
        >>> default_harness_name("standard", "scienceworld"), default_harness_name("span", "webshop")
        ('rlvmr', 'node')
    """
    if fmt != "standard":
        return "node"
    if env not in DEFAULT_HARNESS:
        raise ConfigError(
            f"no default standard harness for env {env!r}",
            fix=f"pass --harness NAME (defaults exist for {', '.join(sorted(DEFAULT_HARNESS))})",
        )
    return DEFAULT_HARNESS[env]


def build_rows(trajectories: Sequence[Trajectory], fmt: str, **options: Any) -> list[SFTRow]:
    """The SFT rows of a corpus in format ``fmt`` as a list; ``options`` as :func:`iter_rows` (which streams them)."""
    return list(iter_rows(trajectories, fmt, **options))


def iter_rows(
    trajectories: Sequence[Trajectory],
    fmt: str,
    *,
    tree: XTree | None = None,
    harness: Harness | str | None = None,
    domain: str | None = None,
    tokenizer: Any = None,
    seed: int = 0,
    progress: bool | None = False,
    harness_options: dict[str, Any] | None = None,
    line_cache: bool = True,
) -> Iterator[SFTRow]:
    """The SFT rows of a corpus in format ``fmt``, yielded one at a time (see the module docstring).

    ``tree`` is required for ``node`` and ``span`` (the span lengths are the node rows' lengths);
    ``domain`` canonicalizes steps without a ``token``. ``harness`` is a :class:`Harness`, a name,
    or ``None`` for :func:`default_harness_name`; ``harness_options`` (e.g. ``{"history_cap": 200}``)
    build a named one. ``span`` cuts are drawn from ``seed`` in corpus
    order, so the same corpus and seed give the same rows. Bad arguments raise before the first
    row; progress counts steps (so one long trajectory shows it moving). ``line_cache`` tokenizes
    each line of the prompts once (:class:`~.chat_ids.ChatIds`: the same ids, in linear time);
    ``False`` tokenizes every text whole (the reference it is tested and benchmarked against).
    """
    from ...render.cards import domain_glosses

    if fmt not in FORMATS:
        raise ConfigError(f"unknown row format {fmt!r}", fix=f"use one of {list(FORMATS)}")
    if fmt != "standard" and tree is None:
        raise ConfigError(f"--format {fmt} needs a tree", fix="pass --tree tree.json (from `xtree mine`)")
    trajs = [t for t in trajectories if t.steps]
    if not trajs:
        raise CorpusError("the corpus has no trajectory with steps", fix="check the corpus file(s)")
    if harness is None or isinstance(harness, str):
        name = harness or default_harness_name(fmt, trajs[0].env or (domain or ""))
        harness = load_harness(name, **(harness_options or {}))
    tokens = _tokens(trajs, domain, required=fmt != "standard")
    table = domain_glosses(domain or trajs[0].env)
    return _rows(trajs, tokens, fmt, tree, harness, table, tokenizer, seed, progress, line_cache)


def _rows(
    trajs: list[Trajectory],
    tokens: list[list[str]],
    fmt: str,
    tree: XTree | None,
    harness: Harness,
    table: Any,
    tokenizer: Any,
    seed: int,
    progress: bool | None,
    line_cache: bool = True,
) -> Iterator[SFTRow]:
    """The generator behind :func:`iter_rows` (split off so argument errors raise at the call)."""
    from ...progress import Progress
    from ...render.cards import gloss

    rng = np.random.default_rng(seed)
    chat = None if tokenizer is None else ChatIds(tokenizer, split=line_cache)
    bar = Progress(total=sum(len(t.steps) for t in trajs), desc=f"sft rows ({fmt}, steps)", enabled=progress)
    try:
        for traj, toks in zip(trajs, tokens):
            if fmt == "standard":
                segs = standard_segments(len(traj.steps))
            else:
                assert tree is not None
                segs = tiling_segments(tree, toks)
                if fmt == "span":
                    segs = span_segments([e - s for s, e, _ in segs], rng)
            for row in trajectory_rows(traj, segs, harness, fmt, toks, [gloss(k, table) for k in toks]):
                yield tokenize_row(row, tokenizer, chat) if tokenizer is not None else row
                bar.update(row.end - row.start)
    finally:
        bar.close()


# ----------------------------------------------------------------------------- tokens


def _tokens(trajs: Sequence[Trajectory], domain: str | None, *, required: bool) -> list[list[str]]:
    """Each trajectory's canonical tokens; standard rows need none, so there a corpus without them is fine."""
    from ...errors import CanonicalizationError
    from ...mining.miner import trajectory_tokens

    try:
        return trajectory_tokens(trajs, domain)
    except CanonicalizationError:
        if required:
            raise
        return [[] for _ in trajs]


def tokenize_row(row: SFTRow, tokenizer: Any, chat: ChatIds | None = None) -> SFTRow:
    """Fill ``input_ids`` and ``loss_mask``: the prompt with the generation prompt, then the target turn.

    The target ids are the chat template's rendering of the full conversation minus the prompt's
    (so they end with the template's end-of-turn token, which the model must learn to emit); a
    template that does not extend its own prompt falls back to the target text + EOS.

    ``chat`` (a :class:`~.chat_ids.ChatIds` of ``tokenizer``, shared by the rows of a run) tokenizes
    each line once and reuses it in later rows, with ids equal to tokenizing each text whole; without
    it each text is tokenized whole.
    """
    chat = chat if chat is not None else ChatIds(tokenizer, split=False)
    prompt, target = chat.turn(row.messages, row.target)
    if target is None:
        target = [int(i) for i in tokenizer(row.target, add_special_tokens=False)["input_ids"]]
        if tokenizer.eos_token_id is not None:
            target.append(int(tokenizer.eos_token_id))
    row.input_ids = prompt + target
    row.loss_mask = [0] * len(prompt) + [1] * len(target)
    return row


class RowSummary:
    """The JSON line ``xtree sft-rows`` prints, accumulated one row at a time (rows are streamed).

    ``tokens`` (prompt + target) and ``tokens_per_action`` are ``None`` when the rows were built
    without a tokenizer; ``prompt_share`` is the fraction of the tokens that are prompt.
    """

    def __init__(self) -> None:
        self.rows = self.actions = self.tokens = self.prompt = 0
        self.tokenized = True

    def add(self, row: SFTRow) -> SFTRow:
        """Count ``row`` and return it (so the summary can sit inside a stream)."""
        self.rows += 1
        self.actions += row.n_actions
        if row.input_ids is None or row.loss_mask is None:
            self.tokenized = False
        else:
            self.tokens += len(row.input_ids)
            self.prompt += len(row.loss_mask) - sum(row.loss_mask)
        return row

    def result(self) -> dict[str, Any]:
        if not self.rows or not self.tokenized:
            return {
                "rows": self.rows,
                "supervised_actions": self.actions,
                "tokens": None,
                "tokens_per_action": None,
            }
        return {
            "rows": self.rows,
            "supervised_actions": self.actions,
            "tokens": self.tokens,
            "tokens_per_action": round(self.tokens / max(self.actions, 1), 2),
            "prompt_share": round(self.prompt / max(self.tokens, 1), 4),
        }


def summarize(rows: Iterable[SFTRow]) -> dict[str, Any]:
    """The JSON line ``xtree sft-rows`` prints: rows, supervised_actions, tokens, tokens_per_action.

    One pass over ``rows`` (see :class:`RowSummary`).

    Example:
        >>> r = SFTRow("t@0:2#node", "node", "t", 0, 2, "S0", [], "x", ["a", "b"], [1, 2, 3, 4], [0, 0, 0, 1])
        >>> summarize([r])
        {'rows': 1, 'supervised_actions': 2, 'tokens': 4, 'tokens_per_action': 2.0, 'prompt_share': 0.75}
    """
    acc = RowSummary()
    for row in rows:
        acc.add(row)
    return acc.result()


def write_rows(path: str | os.PathLike[str], rows: Iterable[SFTRow]) -> int:
    """Write rows as JSON lines (:func:`row_json`), atomically; returns how many were written."""
    n = 0
    with atomic_open(path) as fh:
        for row in rows:
            fh.write(row_json(row) + "\n")
            n += 1
    return n


_BEFORE_IDS = ("actions", "end", "format", "id")
"""The row's keys that sort before ``input_ids`` (the rest, but ``loss_mask``, sort after it)."""


def row_json(row: SFTRow) -> str:
    """``json.dumps(row.to_dict(), ensure_ascii=False, sort_keys=True)``, with a 0s-then-1s loss mask written fast.

    A standard row's mask is thousands of 0s then a few 1s; it is written as repeated text instead
    of one number at a time (when it holds only the ints 0 and 1 in that order, else as JSON does).

    Example:
        >>> r = SFTRow("t@0:1#node", "node", "t", 0, 1, "S0", [{"role": "user", "content": "é"}], "x", ["a"],
        ...            [5, 6, 7], [0, 0, 1])
        >>> row_json(r) == json.dumps(r.to_dict(), ensure_ascii=False, sort_keys=True)
        True
    """
    d = row.to_dict()
    if "input_ids" not in d:
        return json.dumps(d, ensure_ascii=False, sort_keys=True)
    ids, mask = d.pop("input_ids"), d.pop("loss_mask")
    head = json.dumps({k: d.pop(k) for k in _BEFORE_IDS}, ensure_ascii=False, sort_keys=True)
    tail = json.dumps(d, ensure_ascii=False, sort_keys=True)
    return f'{head[:-1]}, "input_ids": {json.dumps(ids, ensure_ascii=False)}, "loss_mask": {_mask_json(mask)}, {tail[1:]}'


def _mask_json(mask: list[int] | None) -> str:
    """``json.dumps(mask)``; a list of int 0s then int 1s as repeated text.

    Example:
        >>> _mask_json([0, 0, 1]), _mask_json([]), _mask_json([1, 0]), _mask_json([0, True]), _mask_json(None)
        ('[0, 0, 1]', '[]', '[1, 0]', '[0, true]', 'null')
    """
    if not isinstance(mask, list) or not mask:
        return json.dumps(mask)
    zeros = mask.count(0)
    if mask[:zeros].count(0) != zeros or mask.count(1) != len(mask) - zeros or set(map(type, mask)) != {int}:
        return json.dumps(mask)
    return "[" + ("0, " * zeros + "1, " * (len(mask) - zeros))[:-2] + "]"


def read_rows(path: str | os.PathLike[str]) -> list[SFTRow]:
    """Read rows written by :func:`write_rows`; a bad line raises naming ``file:line``."""
    return read_records(
        path, SFTRow.from_dict, what="row file", fix="write the file with `xtree sft-rows`", allow_empty=False
    )
