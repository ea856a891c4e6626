"""``xtree report`` (one self-contained HTML file), ``xtree plot`` (PNG figures), ``xtree cards`` (skill bank)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ..corpus.io import refuse_overwrite
from ..errors import ConfigError, TreeFormatError
from ..mining.cli import add_keep_duplicates


def register_cli(sub: Any, collect_sub: Any) -> None:
    p = sub.add_parser("report", help="write a self-contained HTML report of a tree (and its corpus)")
    _common(p)
    p.add_argument("--title", default=None, help="page title (default: the tree file name)")
    p.add_argument("-o", "--output", required=True, help="HTML file to write")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("plot", help="write the report's figures as PNG files (needs matplotlib)")
    _common(p)
    p.add_argument("-o", "--output", required=True, help="folder to write the PNG files into")
    p.set_defaults(func=cmd_plot)

    p = sub.add_parser("cards", help="render skill cards and write the skill bank (JSON) for OPSD / advice")
    _common(p)
    p.add_argument("--task", default=None, help="also print the cards retrieved for this task text")
    p.add_argument("-o", "--output", required=True, help="skill-bank JSON file to write")
    p.set_defaults(func=cmd_cards)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("tree", help="tree file (ours or the authors' released format)")
    p.add_argument("--corpus", nargs="*", default=[], help="corpus JSONL file(s) the tree describes")
    p.add_argument("--domain", default=None, help="canonicalizer for steps without a 'token'; card style")
    p.add_argument("--skip-bad", action="store_true", help="skip and count malformed corpus lines")
    add_keep_duplicates(p)
    p.add_argument("--trajectories", type=int, default=4, help="trajectories to draw (default 4)")


def _refuse_inputs(args: argparse.Namespace, outputs: list[str | Path] | None = None) -> None:
    """No output (``-o``, or a file the command writes under it) may be the tree or a corpus it reads."""
    inputs = [args.tree, *args.corpus]
    for out in outputs or [args.output]:
        refuse_overwrite(out, inputs)


def _load(args: argparse.Namespace) -> tuple[Any, Any]:
    from ..canon import get_canonicalizer
    from ..corpus.formats._records import reading
    from ..corpus.records import read_corpus
    from ..mining.tree import XTree
    from .stats import CorpusUsage

    if args.trajectories < 0:
        raise ConfigError(
            f"--trajectories is {args.trajectories}, expected >= 0", fix="pass --trajectories 4"
        )
    if args.domain:
        get_canonicalizer(args.domain)  # an unknown domain fails before any file is read
    with reading(args.tree, TreeFormatError):
        tree = XTree.load(args.tree)
    usage = None
    if args.corpus:
        with reading(", ".join(args.corpus)):
            corpus = read_corpus(args.corpus, skip_bad=args.skip_bad, keep_duplicates=args.keep_duplicates)
        for bad in corpus.skipped:
            print(f"skipped {bad}", file=sys.stderr)
        if corpus.duplicates:
            print(f"kept {len(corpus.duplicates)} record(s) with a repeated id", file=sys.stderr)
        usage = CorpusUsage.build(tree, corpus, domain=args.domain, progress=True)
    return tree, usage


def cmd_report(args: argparse.Namespace) -> int:
    from ..corpus.formats._records import writing
    from ..corpus.io import atomic_write_text
    from .gaps import find_gaps
    from .report import build_report

    _refuse_inputs(args)
    tree, usage = _load(args)
    gaps = find_gaps(tree, usage) if usage is not None else None
    html = build_report(
        tree,
        usage,
        gaps=gaps,
        title=args.title or f"X-Tree report: {Path(args.tree).name}",
        max_trajectories=args.trajectories,
    )
    with writing(args.output):
        atomic_write_text(args.output, html)
    print(f"wrote {args.output} ({len(html.encode('utf-8')):,} bytes, {len(tree.nodes)} nodes)")
    return 0


def cmd_plot(args: argparse.Namespace) -> int:
    from ..corpus.formats._records import writing
    from .figures import write_figures

    names = ["depth_histogram.png", "length_histogram.png", "hierarchy.png", "success_vs_base.png"]
    names += [f"tiling_{k}.png" for k in range(max(args.trajectories, 0))]
    _refuse_inputs(args, [args.output, *(Path(args.output) / n for n in names)])
    tree, usage = _load(args)
    with writing(args.output):
        paths = write_figures(tree, args.output, usage, max_trajectories=args.trajectories)
    for path in paths:
        print(f"wrote {path}")
    return 0


def cmd_cards(args: argparse.Namespace) -> int:
    from ..corpus.formats._records import writing
    from .retrieval import build_skill_bank

    _refuse_inputs(args)
    tree, usage = _load(args)
    bank = build_skill_bank(tree, usage, args.domain)
    with writing(args.output):
        bank.save(args.output)
    print(f"wrote {args.output} ({len(bank.cards)} cards: {', '.join(bank.cards)})")
    if args.task:
        print(bank.context(args.task))
    return 0
