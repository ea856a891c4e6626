"""Matching node expansions in token sequences: offline (all occurrences) and streaming.

Both run an Aho-Corasick automaton over the nodes' primitive expansions, so a sequence of
``T`` tokens is matched in ``O(T + matches)`` whatever the number of nodes. The streaming
matcher memoizes transitions (a lazily built DFA), so a step is one dict lookup; it is what
the reward wrappers call on every environment step.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from typing import NamedTuple


class Match(NamedTuple):
    """One occurrence of a node: primitives ``start .. end - 1`` (end exclusive).

    A named tuple, because the streaming matcher builds one per completed node on every
    environment step and tuples are the cheapest records Python has.
    """

    node: str
    start: int
    end: int

    @property
    def length(self) -> int:
        return self.end - self.start


_MEMO_CAP = 4096  # memoized DFA edges per state


class _Automaton:
    """Aho-Corasick over token tuples; state 0 is the root."""

    def __init__(self, patterns: Iterable[tuple[str, tuple[str, ...]]]) -> None:
        self.goto: list[dict[str, int]] = [
            {}
        ]  # state -> token -> state (trie edges, then memoized DFA edges)
        self.fail: list[int] = [0]  # state -> longest proper suffix state
        self.out: list[tuple[tuple[str, int], ...]] = [()]  # state -> ((node, length), ...) ending here
        self.depth: list[int] = [0]
        own: list[list[tuple[str, int]]] = [[]]
        for node, expansion in patterns:
            if not expansion:
                continue
            s = 0
            for tok in expansion:
                nxt = self.goto[s].get(tok)
                if nxt is None:
                    nxt = len(self.goto)
                    self.goto[s][tok] = nxt
                    self.goto.append({})
                    self.fail.append(0)
                    self.out.append(())
                    self.depth.append(self.depth[s] + 1)
                    own.append([])
                s = nxt
            own[s].append((node, len(expansion)))
        self.trie_edges = [dict(g) for g in self.goto]  # the pure trie, for failure resolution
        order: deque[int] = deque()
        for child in self.goto[0].values():
            order.append(child)
        bfs: list[int] = []
        while order:
            s = order.popleft()
            bfs.append(s)
            for tok, child in self.trie_edges[s].items():
                f = self.fail[s]
                while f and tok not in self.trie_edges[f]:
                    f = self.fail[f]
                cand = self.trie_edges[f].get(tok, 0)
                self.fail[child] = cand if cand != child else 0
                order.append(child)
        for s in [0, *bfs]:  # BFS order: a state's fail state is finished before it
            merged = own[s] + list(self.out[self.fail[s]]) if s else own[s]
            merged.sort(key=lambda m: (m[1], m[0]))  # shortest span first, then node id
            self.out[s] = tuple(merged)

    def step(self, state: int, tok: str) -> int:
        nxt = self.goto[state].get(tok)
        if nxt is not None:
            return nxt
        s = state
        while s and tok not in self.trie_edges[s]:
            s = self.fail[s]
        nxt = self.trie_edges[s].get(tok, 0)
        memo = self.goto[state]
        if len(memo) < _MEMO_CAP:  # bounded: free-form catch-all tokens must not grow memory forever
            memo[tok] = nxt  # the next time this is one lookup
        return nxt


class StreamingMatcher:
    """Feed one token per step; get the nodes whose expansion ends at this step.

    Example:
        >>> m = StreamingMatcher([("S0", ("a", "b")), ("S1", ("a", "b", "c"))])
        >>> [m.feed(t) for t in ["a", "b", "c"]]
        [[], [Match(node='S0', start=0, end=2)], [Match(node='S1', start=0, end=3)]]
    """

    def __init__(self, patterns: Iterable[tuple[str, Sequence[str]]]) -> None:
        self._ac = _Automaton((node, tuple(exp)) for node, exp in patterns)
        self._goto = self._ac.goto  # state -> token -> state (shared, filled lazily)
        self._out = self._ac.out  # state -> ((node, length), ...)
        self.state = 0
        self.position = 0  # number of tokens fed since reset

    def reset(self) -> None:
        self.state = 0
        self.position = 0

    def feed(self, token: str) -> list[Match]:
        """Advance by one token; the matches completed at it, shortest span first."""
        # The common case is one memoized DFA edge: a dict lookup, no method call.
        nxt = self._goto[self.state].get(token)
        self.state = nxt if nxt is not None else self._ac.step(self.state, token)
        self.position += 1
        out = self._out[self.state]
        if not out:
            return []
        end = self.position
        return [Match(node, end - length, end) for node, length in out]


def find_matches(patterns: Iterable[tuple[str, Sequence[str]]], tokens: Sequence[str]) -> list[Match]:
    """Every occurrence of every pattern in ``tokens`` (overlaps included), by end then length.

    Example:
        >>> find_matches([("S0", ("a", "a"))], ["a", "a", "a"])
        [Match(node='S0', start=0, end=2), Match(node='S0', start=1, end=3)]
    """
    m = StreamingMatcher(patterns)
    out: list[Match] = []
    for tok in tokens:
        out.extend(m.feed(tok))
    return out


def naive_find_matches(patterns: Iterable[tuple[str, Sequence[str]]], tokens: Sequence[str]) -> list[Match]:
    """The obviously-correct O(T x total pattern length) version of :func:`find_matches`."""
    out = []
    toks = list(tokens)
    for node, exp in patterns:
        n = len(exp)
        for s in range(len(toks) - n + 1) if n else ():
            if toks[s : s + n] == list(exp):
                out.append(Match(node, s, s + n))
    return sorted(out, key=lambda m: (m.end, m.length, m.node))
