"""Where a completion ends: EOS or a stop string. Shared by the hf and vllm generators (no circle)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def cut_completion(
    ids: Sequence[int], eos_ids: Sequence[int], stop: Sequence[str], decode: Any
) -> tuple[int, str]:
    """(how many of ``ids`` to keep, finish reason): up to and including EOS or a stop string.

    The kept ids end with the token that completed the first stop string (their decoded text
    may run a few characters past it when that token does); with neither, everything is kept
    and the reason is ``"length"``.

    Example:
        >>> dec = lambda ids: "".join(chr(i) for i in ids)
        >>> cut_completion([ord(c) for c in "ab</a>cd"], [], ["</a>"], dec)
        (6, 'stop')
        >>> cut_completion([97, 0, 98], [0], [], dec), cut_completion([97, 98], [0], [], dec)
        ((2, 'stop'), (2, 'length'))
    """
    n = len(ids)
    for i, t in enumerate(ids):
        if t in eos_ids:
            n = i + 1
            break
    if stop:
        # decode growing prefixes only past the point where a stop string could first appear
        text = decode(list(ids[:n]))
        if any(s in text for s in stop):
            for k in range(1, n + 1):
                if any(s in decode(list(ids[:k])) for s in stop):
                    return k, "stop"
    if n < len(ids) or (n and ids[n - 1] in eos_ids):
        return n, "stop"
    return n, "length"
