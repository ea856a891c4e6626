"""``xtree sft-rows``: a gold corpus as SFT rows (standard / node / span), one JSON summary line."""

from __future__ import annotations

import argparse
import json
from typing import Any

from ...errors import ConfigError


def register_cli(sub: Any, collect_sub: Any) -> None:
    p = sub.add_parser("sft-rows", help="build SFT rows (standard, node-per-row or span) from a corpus")
    p.add_argument("corpus", nargs="+", help="corpus JSONL file(s) (gold trajectories)")
    p.add_argument("--tree", help="tree file (from `xtree mine`); needed for --format node and span")
    p.add_argument(
        "--format", required=True, choices=["standard", "node", "span"], help="row format (App. D)"
    )
    p.add_argument(
        "--harness", help="prompt protocol (default: rlvmr on ScienceWorld for standard, node otherwise)"
    )
    p.add_argument("--tokenizer", help="model name or HF folder whose tokenizer fills input_ids / loss_mask")
    p.add_argument("--domain", help="canonicalizer for steps without a 'token' (e.g. scienceworld)")
    p.add_argument("--seed", type=int, default=0, help="seed of the span format's random cuts")
    p.add_argument(
        "--history-cap",
        type=int,
        help="most earlier steps a prompt lists (default 1000; older ones become one 'not shown' line)",
    )
    p.add_argument("-o", "--output", required=True, help="rows file to write (JSONL)")
    p.set_defaults(func=cmd_sft_rows)


def load_tokenizer(name: str) -> Any:
    """A tokenizer by model name (``smollm2``, ``tiny-random``) or HF folder, through the models room."""
    from ..model.loading import load_tokenizer as _load

    return _load(name, option="--tokenizer")


def cmd_sft_rows(args: argparse.Namespace) -> int:
    from ...corpus.io import refuse_overwrite
    from ...corpus.records import read_corpus
    from ...mining.tree import XTree
    from .rows import RowSummary, iter_rows, write_rows

    refuse_overwrite(args.output, [*args.corpus, *([args.tree] if args.tree else [])])
    if args.history_cap is not None and args.history_cap < 1:
        raise ConfigError(f"--history-cap {args.history_cap} must be >= 1", fix="pass a positive step count")
    corpus = read_corpus(args.corpus)
    tree = XTree.load(args.tree) if args.tree else None
    tokenizer = load_tokenizer(args.tokenizer) if args.tokenizer else None
    rows = iter_rows(
        corpus.trajectories,
        args.format,
        tree=tree,
        harness=args.harness,
        harness_options=None if args.history_cap is None else {"history_cap": args.history_cap},
        domain=args.domain,
        tokenizer=tokenizer,
        seed=args.seed,
        progress=None,
    )
    summary = RowSummary()  # rows stream from the builder through the summary into the file
    write_rows(args.output, (summary.add(r) for r in rows))
    print(json.dumps(summary.result()))
    return 0
