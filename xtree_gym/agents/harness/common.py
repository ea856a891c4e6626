"""What the protocol harnesses share: wording fields with template override, the advice option,
and the ``<think>``/``<action>`` reader.

Every protocol harness takes the same keyword options through ``get_harness(name, ...)``:

* ``template=PATH`` (or a mapping): replaces named wording fields (:mod:`.wording`);
* ``advice=TREE`` with ``advice_corpus=CORPUS``: the in-context advice hint of X-Tree App. C (the
  top-8 nodes for the task by utterance n-gram overlap, plus where the recent steps are inside one),
  added to every prompt; ``advice`` may also be a ready :class:`~xtree_gym.render.advice.Advisor`;
* ``advice_domain=D``: the canonicalizer whose glosses phrase the hint (and that tokenizes corpus
  steps without a token); each protocol's env by default, none for ``node``;
* ``history_length=N``: how many recent steps the prompt shows in full (each protocol's default).
* ``history_cap=N``: the most earlier steps any part of a prompt lists (default
  :data:`DEFAULT_HISTORY_CAP`), so a prompt stays bounded however long the episode runs.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar

from ...errors import ConfigError
from ..types import ParsedAction
from .base import Harness, HarnessState
from .wording import first_tag, load_wording, tag_blocks

TemplateArg = str | os.PathLike[str] | Mapping[str, str] | None


def build_advisor(
    tree: Any,
    corpus: Any,
    *,
    top_k: int = 8,
    domain: str | None = None,
    options: bool = False,
) -> Any:
    """An :class:`~xtree_gym.render.advice.Advisor` from a tree (path or XTree) and its corpus (path(s) or trajectories).

    The corpus is needed because nodes are ranked by the goals of the trajectories they occur in.
    """
    from ...corpus.records import read_corpus
    from ...mining.tree import XTree
    from ...render.advice import Advisor
    from ...render.stats import CorpusUsage

    if isinstance(tree, (str, os.PathLike)):  # a missing file is said first: it is the first thing wrong
        from ...corpus.io import input_problem

        problem = input_problem(tree, "advice tree file")
        if problem:
            raise ConfigError(problem, fix="pass the tree file written by `xtree mine` (--advice TREE.json)")
    if corpus is None:
        raise ConfigError(
            "advice needs the corpus the tree was mined from (nodes are ranked by the goals they occur in)",
            fix="pass advice_corpus=CORPUS.jsonl next to advice=TREE.json",
        )
    xtree = tree if isinstance(tree, XTree) else XTree.load(tree)
    trajs: list[Any]
    if isinstance(corpus, (str, os.PathLike)):
        trajs = read_corpus([corpus]).trajectories
    elif isinstance(corpus, Sequence) and corpus and isinstance(corpus[0], (str, os.PathLike)):
        trajs = read_corpus(list(corpus)).trajectories
    else:
        trajs = list(corpus)
    usage = CorpusUsage.build(xtree, trajs, domain)
    return Advisor(xtree, usage, top_k=top_k, domain=domain, options=options)


DEFAULT_HISTORY_CAP = 1000
"""The most earlier steps a prompt lists by default: above every gold episode we ship (ScienceWorld's
longest is 754 steps), so no shipped row changes, while a 10^6-step trajectory's prompts stay bounded."""


class WordedHarness(Harness):
    """A harness whose prompt text lives in named wording fields (``WORDING``) with declared placeholders."""

    WORDING: ClassVar[dict[str, str]] = {}
    """Field name -> built-in wording (``str.format`` text)."""
    PLACEHOLDERS: ClassVar[dict[str, frozenset[str]]] = {}
    """Field name -> the placeholders that field may use."""
    default_history: ClassVar[int] = 2
    """Recent steps shown in full by default."""
    advice_domain: ClassVar[str | None] = None
    """Canonicalizer domain whose glosses phrase the advice's next-step line."""

    def __init__(
        self,
        *,
        template: TemplateArg = None,
        advice: Any = None,
        advice_corpus: Any = None,
        advice_top_k: int = 8,
        advice_domain: str | None = None,
        history_length: int | None = None,
        history_cap: int | None = None,
    ) -> None:
        self._advice_domain = advice_domain  # overrides the protocol's domain (``node`` runs on any env)
        self.words = load_wording(self.WORDING, self.PLACEHOLDERS, template)
        self.history_length = self.default_history if history_length is None else int(history_length)
        if self.history_length < 0:
            raise ConfigError(f"history_length={history_length!r} must be >= 0")
        self.history_cap = DEFAULT_HISTORY_CAP if history_cap is None else int(history_cap)
        if self.history_cap < 1:
            raise ConfigError(f"history_cap={history_cap!r} must be >= 1", fix="pass a positive step count")
        # the recent window never lists more than the cap either
        self.history_length = min(self.history_length, self.history_cap)
        if advice is None or hasattr(advice, "hint"):
            self.advisor = advice
        else:
            self.advisor = build_advisor(
                advice,
                advice_corpus,
                top_k=advice_top_k,
                domain=self.advice_glosses(),
                options=self.advice_glosses() == "webshop",
            )

    def advice_glosses(self) -> str | None:
        """The canonicalizer domain whose glosses phrase the advice (``advice_domain`` unless overridden)."""
        return self._advice_domain or self.advice_domain

    def say(self, field: str, **values: Any) -> str:
        """The wording ``field`` filled with ``values``."""
        return self.words[field].format(**values)

    def advice_block(self, state: HarnessState) -> str:
        """The advice hint plus a blank line, or ``""`` without advice (goes where ``{advice}`` stands)."""
        if self.advisor is None:
            return ""
        hint = self.advisor.hint(state.goal, history=list(state.tokens))
        return f"{hint}\n\n" if hint else ""


def observation_before(state: HarnessState, j: int) -> str:
    """The observation the agent saw before action ``j`` of ``state.history`` (O(1), for bounded prompts).

    Example:
        >>> s = HarnessState(goal="g", observation="o2", history=[("a1", "o1"), ("a2", "o2")],
        ...                  initial_observation="o0")
        >>> [observation_before(s, j) for j in range(2)]
        ['o0', 'o1']
    """
    return state.initial_observation if j == 0 else state.history[j - 1][1]


def listed_from(state: HarnessState, cap: int) -> int:
    """The first history index a prompt lists when it shows at most ``cap`` earlier steps.

    Example:
        >>> listed_from(HarnessState(goal="g", observation="o", history=[("a", "o")] * 5), 3)
        2
    """
    return max(0, len(state.history) - cap)


def observations_before(state: HarnessState) -> list[str]:
    """The observation the agent saw before each action of ``state.history`` (the reset text first).

    Example:
        >>> s = HarnessState(goal="g", observation="o2", history=[("a1", "o1"), ("a2", "o2")],
        ...                  initial_observation="o0")
        >>> observations_before(s)
        ['o0', 'o1']
    """
    return [state.initial_observation] + [obs for _, obs in state.history[:-1]]


def parse_think_action(text: str, *, think_tag: str = "think", action_tag: str = "action") -> ParsedAction:
    """Read ``<think>…</think><action>…</action>``: the first closed action block is the action.

    A missing (or empty) action block is an invalid response; a missing think block is not (the
    action still runs, ``thought`` is None), as verl-agent executes it too. Never raises.

    Example:
        >>> parse_think_action("<think>go</think><action>open door</action>").action
        'open door'
        >>> parse_think_action("open door").error
        'no <action>...</action> block in the response'
    """
    if not isinstance(text, str):
        return ParsedAction(None, error=f"response is {type(text).__name__}, not text")
    thought = first_tag(text, think_tag)
    blocks = [b.strip() for b in tag_blocks(text, action_tag)]
    if not blocks:
        return ParsedAction(
            None, error=f"no <{action_tag}>...</{action_tag}> block in the response", thought=thought
        )
    if not blocks[0]:
        return ParsedAction(None, error=f"the <{action_tag}> block is empty", thought=thought)
    return ParsedAction(blocks[0], thought=thought, actions=(blocks[0],))


def format_think_action(
    action: str, thought: str = "", *, think_tag: str = "think", action_tag: str = "action"
) -> str:
    """The response :func:`parse_think_action` reads back to ``action``.

    Example:
        >>> format_think_action("look around", "I should look.")
        '<think>I should look.</think>\\n<action>look around</action>'
    """
    return f"<{think_tag}>{thought}</{think_tag}>\n<{action_tag}>{action}</{action_tag}>"


def joined(items: Iterable[str], sep: str = ", ") -> str:
    """``sep``-joined strings (a tiny helper so templates get lists the same way everywhere)."""
    return sep.join(str(x) for x in items)
