"""Named wording fields, template files that replace them, and the tag readers every harness shares.

Each protocol keeps its prompt text as named fields (``{"user": "Your task: {task}..."}``) with
``str.format`` placeholders. ``get_harness(name, template=PATH)`` swaps any of them for the text of a
file, so a user can supply a benchmark's exact original wording without touching code:

* ``.json``: an object of field name -> string;
* ``.yaml`` / ``.yml``: the same mapping (needs PyYAML);
* anything else: text with one ``[[field]]`` line before each field's text.

A template may set any subset of fields; an unknown field, a non-string value or a placeholder the
field cannot fill is one :class:`~xtree_gym.errors.ConfigError` naming the file and the field.
"""

from __future__ import annotations

import json
import os
import re
import string
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ...errors import ConfigError

_SECTION = re.compile(r"^\[\[([A-Za-z_][A-Za-z0-9_]*)\]\]\s*$")


def placeholders(text: str) -> set[str]:
    """The ``str.format`` field names used in ``text`` (``{{`` escapes are not fields).

    Example:
        >>> sorted(placeholders("Task: {task} at step {step} {{literal}}"))
        ['step', 'task']
    """
    return {name.split(".")[0].split("[")[0] for _, name, _, _ in string.Formatter().parse(text) if name}


def _parse_text_template(text: str, where: str) -> dict[str, str]:
    """``[[field]]`` sections of a text template; the text before the first section must be blank."""
    fields: dict[str, list[str]] = {}
    current: str | None = None
    for lineno, line in enumerate(text.splitlines(), 1):
        m = _SECTION.match(line)
        if m:
            current = m.group(1)
            if current in fields:
                raise ConfigError(f"field [[{current}]] appears twice", where=f"{where}:{lineno}")
            fields[current] = []
        elif current is None:
            if line.strip():
                raise ConfigError(
                    "text before the first [[field]] line",
                    where=f"{where}:{lineno}",
                    fix="start the file with a line like [[user]]",
                )
        else:
            fields[current].append(line)
    return {k: "\n".join(v).strip("\n") for k, v in fields.items()}


def read_template(path: str | os.PathLike[str]) -> dict[str, str]:
    """The raw fields of a template file (JSON, YAML or ``[[field]]`` text); no checking of names."""
    p = Path(path)
    where = str(p)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read template file: {exc.strerror or exc}", where=where) from exc
    suffix = p.suffix.lower()
    data: Any
    if suffix == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"bad JSON: {exc.msg}", where=f"{where}:{exc.lineno}") from exc
    elif suffix in (".yaml", ".yml"):
        try:
            import yaml
        except ImportError as exc:
            raise ConfigError(
                "YAML templates need PyYAML", where=where, fix="pip install pyyaml, or use .json"
            ) from exc
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            line = f":{mark.line + 1}" if mark is not None else ""
            raise ConfigError(f"bad YAML: {exc}", where=f"{where}{line}") from exc
    else:
        data = _parse_text_template(text, where)
    if not isinstance(data, Mapping):
        raise ConfigError(
            f"a template must map field names to text, got {type(data).__name__}",
            where=where,
            fix='write e.g. {"user": "..."}',
        )
    bad = [k for k, v in data.items() if not isinstance(v, str)]
    if bad:
        raise ConfigError(f"field {bad[0]!r} is not a string", where=where, fix="every field's value is text")
    return {str(k): v for k, v in data.items()}


def load_wording(
    defaults: Mapping[str, str],
    allowed: Mapping[str, frozenset[str]],
    template: str | os.PathLike[str] | Mapping[str, str] | None,
) -> dict[str, str]:
    """The wording a harness uses: ``defaults`` with the fields of ``template`` (a path or a mapping) replaced.

    ``allowed[field]`` lists the placeholders that field may use.

    Example:
        >>> load_wording({"user": "Task: {task}"}, {"user": frozenset({"task"})}, {"user": "Do {task}!"})
        {'user': 'Do {task}!'}
        >>> load_wording({"user": "x"}, {"user": frozenset()}, {"usr": "y"})  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        xtree_gym.errors.ConfigError: <template>: unknown wording field 'usr' -- fix: use only: user
    """
    words = dict(defaults)
    if template is None:
        return words
    where = "<template>" if isinstance(template, Mapping) else str(template)
    fields = dict(template) if isinstance(template, Mapping) else read_template(template)
    for name, text in fields.items():
        if name not in defaults:
            raise ConfigError(
                f"unknown wording field {name!r}", where=where, fix=f"use only: {', '.join(sorted(defaults))}"
            )
        if not isinstance(text, str):
            raise ConfigError(f"field {name!r} is not a string", where=where)
        try:
            extra = placeholders(text) - allowed.get(name, frozenset())
        except ValueError as exc:  # an unmatched brace
            raise ConfigError(
                f"field {name!r} is not a valid format string: {exc}",
                where=where,
                fix="write literal braces as {{ }}",
            ) from exc
        if extra:
            ok = ", ".join("{" + p + "}" for p in sorted(allowed.get(name, ()))) or "(none)"
            raise ConfigError(
                f"field {name!r} uses unknown placeholder(s) {', '.join('{' + p + '}' for p in sorted(extra))}",
                where=where,
                fix=f"this field can use {ok}",
            )
        words[name] = text
    return words


def tag_blocks(text: str, tag: str) -> list[str]:
    """Contents of every closed ``<tag>…</tag>`` block, in order (tags matched case-insensitively).

    Example:
        >>> tag_blocks("<think>a</think> <action> go </action><ACTION>b</ACTION>", "action")
        [' go ', 'b']
    """
    return re.findall(rf"<{tag}>(.*?)</{tag}>", text, flags=re.DOTALL | re.IGNORECASE)


def first_tag(text: str, tag: str) -> str | None:
    """The stripped content of the first closed ``<tag>`` block, or None.

    Example:
        >>> first_tag("<think> hmm </think>", "think"), first_tag("<think>open", "think")
        ('hmm', None)
    """
    blocks = tag_blocks(text, tag)
    return blocks[0].strip() if blocks else None
