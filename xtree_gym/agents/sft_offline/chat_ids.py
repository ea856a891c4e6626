"""Chat-template token ids in time linear in the text: each line is tokenized once, rows reuse it.

A standard row's prompt repeats the history of the rows before it, so tokenizing every prompt from
scratch costs the square of the episode length. :class:`ChatIds` cuts a rendered chat at line
breaks, tokenizes each piece it has not seen (one batched call per text) and joins the cached ids.
The result is exactly ``tokenizer.apply_chat_template(..., tokenize=True)`` -- it is not a different
tokenization -- because the text is cut only where the tokenizer itself provably cuts:

* the tokenizer (``tokenizer.json``) has no normalizer, its pre-tokenizer is exactly
  ``ByteLevel(add_prefix_space=False, use_regex=True)`` (the GPT-2 split pattern: SmolLM2, GPT-2,
  the tiny-random tokenizer), no BPE dropout, and no added token that contains a line break or
  strips / matches by word (``lstrip``, ``rstrip``, ``single_word``);
* the cut sits before a ``"\\n"`` whose previous character is printable ASCII other than a space.

Why that is a pre-token boundary, piece by piece: added tokens are matched first, and none can
span the cut (none contains ``"\\n"``) nor eat the whitespace beside it (no strip flags). The GPT-2
pattern (``'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+``) has no
alternative that matches a non-space character followed by ``"\\n"``, so the match holding the
character before the cut ends at the cut; no alternative looks behind, and the only look-ahead
(``(?!\\S)``) follows a whitespace run, which cannot end at a non-space character; so the matches
left of the cut are the same with or without the text after it, and the scan after the cut starts
afresh. The model then encodes each pre-token alone. So the pieces' ids, joined, are the ids of the
whole text. Any other tokenizer is tokenized whole (:func:`split_problem` says why), as before.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from itertools import chain
from typing import Any

from ..harness.base import Message

BYTE_LEVEL = {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True}
"""The one pre-tokenizer the line cut is proven for (``trim_offsets`` only moves offsets, not ids)."""


def split_problem(tokenizer: Any) -> str | None:
    """Why ``tokenizer``'s text cannot be cut at line breaks (``None`` when it can: see the module doc).

    Example:
        >>> from xtree_gym.agents.model.loading import tiny_tokenizer
        >>> split_problem(tiny_tokenizer()) is None
        True
        >>> split_problem(object())
        'not a fast (tokenizers-backed) tokenizer'
    """
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None or not hasattr(backend, "to_str"):
        return "not a fast (tokenizers-backed) tokenizer"
    if not callable(getattr(tokenizer, "apply_chat_template", None)):
        return "no apply_chat_template"
    spec = json.loads(backend.to_str())
    normalizer = spec.get("normalizer")
    if normalizer is not None and normalizer != {"type": "Sequence", "normalizers": []}:
        return f"has a normalizer ({normalizer.get('type')})"
    pre = spec.get("pre_tokenizer") or {}
    if {k: pre.get(k) for k in BYTE_LEVEL} != BYTE_LEVEL or set(pre) - {*BYTE_LEVEL, "trim_offsets"}:
        return f"pre-tokenizer {json.dumps(pre)[:120]} is not {json.dumps(BYTE_LEVEL)}"
    if (spec.get("model") or {}).get("dropout"):
        return "BPE dropout is on (tokenization is random)"
    for added in spec.get("added_tokens") or []:
        content = str(added.get("content", ""))
        if "\n" in content or any(added.get(k) for k in ("lstrip", "rstrip", "single_word")):
            return f"added token {content!r} holds a line break or strips / matches by word"
    return None


_CUT = re.compile(r"(?<=[!-~])(?=\n)")
"""Zero-width: before a ``"\\n"`` whose previous character is printable ASCII other than a space (ASCII,
so Python's and the tokenizer's regex ideas of whitespace, letters and digits cannot differ there)."""


def line_pieces(text: str) -> list[str]:
    """``text`` cut before each ``"\\n"`` that follows printable non-space ASCII; the pieces join back to ``text``.

    Example:
        >>> line_pieces("a]\\n[b \\nc\\n\\nd")
        ['a]', '\\n[b \\nc', '\\n\\nd']
    """
    return _CUT.split(text)


Turn = tuple[list[int], list[int] | None]
"""``(prompt ids, reply ids)``: the reply ``None`` when the template's conversation does not extend its prompt."""


class ChatIds:
    """``apply_chat_template(..., tokenize=True)`` with each line tokenized once (see the module doc).

    ``max_cached`` bounds the cache (it is emptied when full), so memory stays flat on any corpus.
    With a tokenizer whose text cannot be cut (:func:`split_problem`), or ``split=False``, every text
    is tokenized whole by ``apply_chat_template`` itself.

    Example:
        >>> from xtree_gym.agents.model.loading import tiny_tokenizer
        >>> tok = tiny_tokenizer(); ids = ChatIds(tok)
        >>> msgs = [{"role": "user", "content": "look around\\nThe door is open."}]
        >>> ids.chat(msgs, add_generation_prompt=True) == list(tok.apply_chat_template(
        ...     msgs, add_generation_prompt=True, tokenize=True, return_dict=False))
        True
    """

    def __init__(self, tokenizer: Any, *, split: bool = True, max_cached: int = 200_000) -> None:
        self.tokenizer = tokenizer
        self.problem = split_problem(tokenizer) if split else "asked to tokenize each text whole"
        """Why texts are tokenized whole (``None``: they are cut at line breaks)."""
        self.max_cached = max_cached
        self.cache: dict[str, list[int]] = {}
        self.tokenized_chars = 0
        """Characters sent to the tokenizer so far (what the line cache saves is visible here)."""

    def render(self, messages: Sequence[Message], *, add_generation_prompt: bool = False) -> str:
        """The chat template's text (what ``apply_chat_template(tokenize=True)`` tokenizes)."""
        return str(
            self.tokenizer.apply_chat_template(
                list(messages), add_generation_prompt=add_generation_prompt, tokenize=False
            )
        )

    def chat(self, messages: Sequence[Message], *, add_generation_prompt: bool = False) -> list[int]:
        """The ids of ``messages`` under the chat template (whole: ``apply_chat_template(tokenize=True)`` itself)."""
        if self.problem is not None:
            out = self.tokenizer.apply_chat_template(
                list(messages), add_generation_prompt=add_generation_prompt, tokenize=True, return_dict=False
            )
            if hasattr(out, "keys") and "input_ids" in out:  # a BatchEncoding in some transformers versions
                out = out["input_ids"]
            return [int(i) for i in out]
        return self.encode(self.render(messages, add_generation_prompt=add_generation_prompt))

    def turn(self, messages: Sequence[Message], reply: str) -> Turn:
        """The prompt's ids (with the generation prompt) and the ids the ``reply`` turn adds to them.

        The reply's ids are the full conversation's minus the prompt's; ``None`` when the full
        conversation's ids do not start with the prompt's (or add nothing). With the line cut, the
        pieces the two texts share are joined once: the prompt's pieces but its last are the full
        text's first pieces whenever the full text starts with them (a cut depends only on the
        character before it).
        """
        convo = [*messages, {"role": "assistant", "content": reply}]
        if self.problem is not None:
            return _reply_of(self.chat(messages, add_generation_prompt=True), self.chat(convo))
        prompt_text, full_text = self.render(messages, add_generation_prompt=True), self.render(convo)
        pieces = line_pieces(prompt_text)
        head = len(prompt_text) - len(pieces[-1])
        if not full_text.startswith(prompt_text[:head]):
            return _reply_of(self.encode(prompt_text), self.encode(full_text))
        head_ids, (last, tail) = self._ids(pieces[:-1]), self._ids_each([pieces[-1], full_text[head:]])
        return head_ids + last, _reply_of(last, tail)[1]

    def encode(self, text: str) -> list[int]:
        """``tokenizer(text, add_special_tokens=False)["input_ids"]`` (as the chat template tokenizes)."""
        if self.problem is not None:
            return self._tokenize([text])[0]
        return self._ids(line_pieces(text))

    def _ids(self, pieces: list[str]) -> list[int]:
        """The joined ids of ``pieces`` (cut at proven boundaries), tokenizing those not cached."""
        cache = self.cache
        missing = [p for p in pieces if p not in cache]
        if missing:
            missing = list(dict.fromkeys(missing))
            if len(cache) + len(missing) > self.max_cached:  # start afresh: this text's pieces all again
                cache.clear()
                missing = list(dict.fromkeys(pieces))
            cache.update(zip(missing, self._tokenize(missing)))
        return list(chain.from_iterable(map(cache.__getitem__, pieces)))

    def _ids_each(self, texts: list[str]) -> list[list[int]]:
        """Each text's ids, cut at line breaks."""
        return [self._ids(line_pieces(t)) for t in texts]

    def _tokenize(self, texts: list[str]) -> list[list[int]]:
        self.tokenized_chars += sum(map(len, texts))
        out = self.tokenizer(texts, add_special_tokens=False)["input_ids"]
        return [[int(i) for i in ids] for ids in out]


def _reply_of(prompt: list[int], full: list[int]) -> Turn:
    """``(prompt, full[len(prompt):])`` when ``full`` extends ``prompt``, else ``(prompt, None)``.

    Example:
        >>> _reply_of([1, 2], [1, 2, 3]), _reply_of([1, 2], [1, 4, 3]), _reply_of([1, 2], [1, 2])
        (([1, 2], [3]), ([1, 2], None), ([1, 2], None))
    """
    if len(full) > len(prompt) and full[: len(prompt)] == prompt:
        return prompt, full[len(prompt) :]
    return prompt, None
