"""``xtree canon``: canonicalize a corpus file (or convert a published trajectory set).

xtree canon CORPUS.jsonl --domain scienceworld -o OUT.jsonl
xtree canon AgentTraj-L.json --format agentgym -o OUT.jsonl          # domain from item_id
xtree canon webshop_sft.json --format eto --domain webshop -o OUT.jsonl
xtree canon steps.jsonl --format agentlab -o OUT.jsonl                # BrowserGym/AgentLab
xtree canon --domain webshop --action "click[blue]" --context '{"goal_options": {"color": "blue"}}'
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any


def register_cli(subparsers: Any, collect_subparsers: Any) -> None:
    p = subparsers.add_parser(
        "canon",
        help="canonicalize a corpus (fill token + slots), or convert a published trajectory set",
        description="Fill every step's canonical `verb<role>` token and slots. With --format, read a "
        "published trajectory set (agentgym, eto, agentlab) and write it as a corpus.",
    )
    p.add_argument("corpus", nargs="?", help="input file (corpus JSONL, or the --format's file)")
    p.add_argument(
        "--domain", help="canonicalizer: scienceworld, webshop, browsergym (webarena), miniwob, ..."
    )
    p.add_argument("-o", "--out", help="output corpus JSONL(.gz)")
    p.add_argument(
        "--format",
        default="corpus",
        help="input format: corpus (default), agentgym, eto, agentlab (see docs/canonicalizers.md)",
    )
    p.add_argument(
        "--skip-bad", action="store_true", help="skip malformed corpus lines (counted) instead of failing"
    )
    p.add_argument("--keep-existing", action="store_true", help="keep tokens already in the corpus")
    p.add_argument(
        "--keep-duplicates",
        action="store_true",
        help="keep records whose id repeats an earlier one (counted)",
    )
    p.add_argument("--action", help="canonicalize one action and print its info as JSON")
    p.add_argument("--context", help="JSON context for --action")
    p.add_argument("--list-domains", action="store_true", help="print the registered domains and exit")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from ..errors import ConfigError, CorpusError
    from . import available_domains, get_canonicalizer

    if args.list_domains:
        print("\n".join(available_domains()))
        return 0
    if args.action is not None:
        if not args.domain:
            raise ConfigError("--action needs --domain", fix="add --domain scienceworld (or another domain)")
        ctx = _parse_context(args.context)
        print(json.dumps(get_canonicalizer(args.domain)(args.action, ctx).to_info(), ensure_ascii=False))
        return 0
    if not args.corpus or not args.out:
        raise ConfigError("need an input file and -o OUT", fix="xtree canon CORPUS --domain D -o OUT")
    from ..corpus.io import refuse_overwrite

    refuse_overwrite(args.out, [args.corpus])
    if args.domain:
        get_canonicalizer(args.domain)  # unknown domain: one clear error before any reading
    fmt = args.format.lower()
    if fmt == "corpus":
        if not args.domain:
            raise ConfigError(
                "a corpus needs --domain", fix=f"add --domain ({', '.join(available_domains())})"
            )
        from .corpus import canonicalize_file

        report = canonicalize_file(
            args.corpus,
            args.domain,
            args.out,
            skip_bad=args.skip_bad,
            keep_existing=args.keep_existing,
            keep_duplicates=args.keep_duplicates,
        )
        summary = report.summary()
        _explain(report)
    else:
        from ..corpus.formats._records import reading, writing
        from ..corpus.records import corpus_stats, write_corpus
        from .formats import read_trajectories

        with reading(args.corpus):
            trajs = read_trajectories(args.corpus, fmt, domain=args.domain)
        if not trajs:
            raise CorpusError(f"{args.corpus!r} holds no trajectories", fix="check the file and --format")
        with writing(args.out):
            write_corpus(args.out, trajs)
        summary = corpus_stats(trajs)
    print(json.dumps(summary, ensure_ascii=False), file=sys.stdout)
    return 0


def _explain(report: Any) -> None:
    """Say in words, on stderr, what the summary's counts mean (stdout stays one JSON line)."""
    fresh = report.n_steps - report.n_kept
    lines = [
        f"canonicalized {fresh} of {report.n_steps} steps in {report.n_trajectories} trajectories; "
        f"n_kept = {report.n_kept} steps kept the token they already had (--keep-existing)",
    ]
    if report.n_errors:
        lines.append(
            f"n_errors = {report.n_errors} steps where a rule failed and the catch-all token stood in"
        )
    if report.skipped:
        lines.append(
            f"skipped {len(report.skipped)} malformed line(s) (--skip-bad); first: {report.skipped[0]}"
        )
    if report.duplicates:
        lines.append(
            f"kept {len(report.duplicates)} record(s) with a repeated id; first: {report.duplicates[0]}"
        )
    print("\n".join(lines), file=sys.stderr)


def _parse_context(text: str | None) -> dict[str, Any] | None:
    from ..errors import ConfigError

    if text is None:
        return None
    from ..corpus.io import JSONProblem, loads_strict

    try:
        ctx = loads_strict(text)
    except JSONProblem as exc:
        sep = " is " if exc.problem.startswith("not valid JSON") else ": "
        raise ConfigError(f"--context{sep}{exc.problem}", fix="pass a JSON object") from None
    if not isinstance(ctx, dict):
        raise ConfigError(
            f"--context is {type(ctx).__name__}, expected a JSON object", fix="pass a JSON object"
        )
    return ctx
