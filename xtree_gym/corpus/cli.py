"""``xtree convert IN OUT``: a corpus between JSONL(.gz) and Parquet, both ways, losslessly."""

from __future__ import annotations

import argparse
from typing import Any

from ..errors import CorpusError
from .io import refuse_overwrite
from .records import iter_corpus, write_corpus


def register_cli(sub: Any, collect_sub: Any) -> None:
    p = sub.add_parser("convert", help="convert a corpus between JSONL(.gz) and Parquet")
    p.add_argument("input", help="corpus file (.jsonl, .jsonl.gz or .parquet)")
    p.add_argument("output", help="file to write; its suffix picks the format (.parquet, .jsonl, .jsonl.gz)")
    p.add_argument("--skip-bad", action="store_true", help="skip and count malformed input lines")
    p.set_defaults(func=cmd_convert)


def convert(src: str, dst: str, *, skip_bad: bool = False) -> tuple[int, int]:
    """Copy the corpus ``src`` to ``dst`` (format by suffix); returns (written, skipped).

    Reading and writing go through :func:`xtree_gym.corpus.iter_corpus` and
    :func:`xtree_gym.corpus.write_corpus`, the functions every other command uses.

    Example:
        >>> import tempfile, pathlib
        >>> d = pathlib.Path(tempfile.mkdtemp())
        >>> line = '{"id": "a", "env": "", "task": "", "goal": "", "success": true, "steps": [{"action": "go", "observation": ""}]}\\n'
        >>> _ = (d / "c.jsonl").write_text(line)
        >>> convert(str(d / "c.jsonl"), str(d / "c.parquet")), convert(str(d / "c.parquet"), str(d / "back.jsonl"))
        ((1, 0), (1, 0))
        >>> (d / "back.jsonl").read_text() == line
        True
    """
    refuse_overwrite(dst, [src], error=CorpusError)  # the one rule: through .., symlinks and hard links
    skipped: list[Any] = []
    n = write_corpus(dst, iter_corpus(src, skip_bad=skip_bad, skipped=skipped))
    return n, len(skipped)


def cmd_convert(args: argparse.Namespace) -> int:
    n, skipped = convert(args.input, args.output, skip_bad=args.skip_bad)
    if skipped:
        print(f"skipped {skipped} bad line(s)")
    print(f"wrote {n} trajectories to {args.output}")
    return 0
