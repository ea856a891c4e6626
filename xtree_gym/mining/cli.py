"""Core ``xtree`` subcommands: mine, show, tile, stats."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from ..corpus.io import refuse_overwrite
from ..errors import CorpusError
from ..progress import progress
from .config import PRESETS, MinerConfig

if TYPE_CHECKING:
    from ..corpus.columnar import ColumnarCorpus
    from ..corpus.records import Corpus
    from .tree import XTree

# Registering these commands imports only the light modules above (``xtree --help`` starts without
# numpy); each command imports the corpus, miner and tree modules when it runs.

_OVERRIDES = {  # CLI option -> MinerConfig field, type
    "--p-len": ("p_len", float),
    "--p-succ": ("p_succ", float),
    "--eps": ("eps", float),
    "--eta": ("eta", float),
    "--cap": ("cap", int),
    "--max-len": ("max_len", int),
    "--min-freq": ("min_freq", int),
    "--min-succ": ("min_succ", float),
    "--min-task-types": ("min_task_types", int),
}


def register_cli(sub: Any, collect_sub: Any) -> None:
    p = sub.add_parser("mine", help="mine an X-Tree from corpus files")
    p.add_argument("corpus", nargs="+", help="corpus file(s) (.jsonl, .jsonl.gz or .parquet)")
    p.add_argument(
        "--preset",
        default=None,
        choices=sorted(PRESETS),
        help="Table 6/8 settings (default scienceworld); given, it also canonicalizes steps without a "
        "'token' unless --domain names another canonicalizer",
    )
    for opt, (field, typ) in _OVERRIDES.items():
        p.add_argument(opt, dest=field, type=typ, default=None, help=f"override MinerConfig.{field}")
    p.add_argument("--domain", help="canonicalizer for steps without a 'token' (e.g. scienceworld)")
    p.add_argument("--name", default="", help="corpus name recorded in the tree file")
    p.add_argument("--engine", default="fast", choices=["fast", "reference"], help="miner implementation")
    p.add_argument("--skip-bad", action="store_true", help="skip and count malformed corpus lines")
    add_keep_duplicates(p)
    p.add_argument(
        "--ray",
        action="store_true",
        help="split the corpus across Ray workers (byte ranges of the files; the same tree); needs xtree_gym[ray]",
    )
    p.add_argument("--ray-address", default=None, help="an existing Ray cluster (default: start a local one)")
    p.add_argument("--ray-workers", type=int, default=None, help="Ray workers (default: the cluster's CPUs)")
    p.add_argument("-o", "--output", required=True, help="tree file to write (JSON)")
    p.set_defaults(func=cmd_mine)

    p = sub.add_parser("show", help="print a tree's nodes")
    p.add_argument("tree", help="tree file (ours or the authors' released format)")
    p.add_argument("--hierarchy", action="store_true", help="indented tree instead of the node table")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(func=cmd_show)

    p = sub.add_parser("tile", help="tile a corpus's trajectories with a tree")
    p.add_argument("tree")
    p.add_argument("corpus")
    p.add_argument("--domain", help="canonicalizer for steps without a 'token'")
    p.add_argument("--limit", type=int, default=None, help="print at most this many tilings")
    p.add_argument("--skip-bad", action="store_true")
    add_keep_duplicates(p)
    p.set_defaults(func=cmd_tile)

    p = sub.add_parser("stats", help="corpus statistics")
    p.add_argument("corpus", nargs="+")
    p.add_argument("--skip-bad", action="store_true")
    add_keep_duplicates(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_stats)


def add_keep_duplicates(p: argparse.ArgumentParser) -> None:
    """The one flag that lets a corpus hold two records with one id (kept, counted, reported)."""
    p.add_argument(
        "--keep-duplicates",
        action="store_true",
        help="keep records whose id repeats an earlier one (default: error, as they count an episode twice)",
    )


def _read(paths: list[str], skip_bad: bool, keep_duplicates: bool = False) -> Corpus:
    from ..corpus.records import read_corpus

    corpus = read_corpus(paths, skip_bad=skip_bad, keep_duplicates=keep_duplicates)
    if corpus.skipped:
        print(f"skipped {len(corpus.skipped)} bad line(s); first: {corpus.skipped[0]}", file=sys.stderr)
    if corpus.duplicates:
        print(
            f"kept {len(corpus.duplicates)} record(s) with a repeated id (--keep-duplicates); "
            f"first: {corpus.duplicates[0]}",
            file=sys.stderr,
        )
    if len(corpus) == 0:
        raise CorpusError(f"no trajectories in {', '.join(paths)}", fix="check the corpus file(s)")
    return corpus


def _load(
    paths: list[str], skip_bad: bool, sort: bool = True, **read_options: Any
) -> ColumnarCorpus | Corpus:
    """Like :func:`_read`, through the columnar path when the files allow it (see ``xtree_gym.corpus.columnar``)."""
    from ..corpus.columnar import load_corpus

    corpus = load_corpus(paths, skip_bad=skip_bad, sort=sort, **read_options)
    if corpus.skipped:
        print(f"skipped {len(corpus.skipped)} bad line(s); first: {corpus.skipped[0]}", file=sys.stderr)
    duplicates = getattr(corpus, "duplicates", ())  # the object path's repeated ids (--keep-duplicates)
    if duplicates:
        print(
            f"kept {len(duplicates)} record(s) with a repeated id (--keep-duplicates); first: {duplicates[0]}",
            file=sys.stderr,
        )
    if len(corpus) == 0:
        raise CorpusError(f"no trajectories in {', '.join(paths)}", fix="check the corpus file(s)")
    return corpus


def preset_domain(preset: str | None) -> str | None:
    """The canonicalizer ``--preset NAME`` implies: the domain of that name, when one exists.

    Example:
        >>> preset_domain("scienceworld"), preset_domain(None)
        ('scienceworld', None)
    """
    if not preset:
        return None
    from ..canon import available_domains  # only then: a plain `xtree mine` never imports the canonicalizers

    return preset if preset in available_domains() else None


def cmd_mine(args: argparse.Namespace) -> int:
    refuse_overwrite(args.output, args.corpus)
    overrides = {f: getattr(args, f) for f, _ in _OVERRIDES.values()}
    cfg = MinerConfig.preset(args.preset or "scienceworld", **overrides)
    tree, why = _mine_ray(args, cfg) if args.ray else (None, "")
    if tree is None:
        tree = _mine_one_process(args, cfg)
        if why:  # said only now: when the files are bad, the one error is the reader's
            print(
                f"--ray: the files need the validated reader ({why}); mined in one process", file=sys.stderr
            )
    tree.save(args.output)
    s = tree.summary()
    print(
        f"mined {s['n_nodes']} nodes from {tree.corpus['n_trajectories']} trajectories "
        f"({s['n_primitives']} primitive tokens)"
    )
    print("depth histogram: " + ", ".join(f"d{d}: {n}" for d, n in s["depth_histogram"].items()))
    print(f"compression ratio: {s['compression_ratio']:.3f} (primitives per symbol after tiling)")
    why = (
        f"the node cap, {cfg.cap}"
        if s["bound"] == "cap"
        else "no pair passes the candidate and compression rules"
    )
    print(f"bound reached: {s['bound']} ({why})")
    print(f"wrote {args.output}")
    return 0


def _mine_one_process(args: argparse.Namespace, cfg: MinerConfig) -> XTree:
    from ..corpus.columnar import ColumnarCorpus, FastPathUnavailable
    from ..corpus.stream import read_encoded
    from .miner import mine

    try:  # one pass, file -> encoded corpus; anything it cannot take goes the validated way
        corpus: Any = read_encoded(args.corpus)
        if not len(corpus):
            raise FastPathUnavailable("empty")  # the validated way words the error
    except (FastPathUnavailable, ImportError):
        corpus = _load(args.corpus, args.skip_bad, keep_duplicates=args.keep_duplicates)
    if isinstance(corpus, ColumnarCorpus):  # nothing reads the token strings after encoding: free them
        corpus = corpus.sort()
        corpus.keep_tokens = False
    domain = args.domain or preset_domain(args.preset)
    return mine(corpus, cfg, domain=domain, progress=None, name=args.name, engine=args.engine)


def _mine_ray(args: argparse.Namespace, cfg: MinerConfig) -> tuple[XTree | None, str]:
    """The tree mined by Ray workers; ``(None, why)`` when the files need the validator (one process mines)."""
    from ..corpus.columnar import FastPathUnavailable
    from ..errors import ConfigError
    from .ray_mine import mine_with_ray, require_ray

    require_ray()  # on a core install: one line naming xtree_gym[ray]
    if args.engine != "fast":
        raise ConfigError("--ray mines with the fast engine", fix="drop --engine reference (or --ray)")
    try:
        tree, _ = mine_with_ray(
            args.corpus,
            cfg,
            address=args.ray_address,
            workers=args.ray_workers,
            name=args.name,
            progress=None,
        )
    except FastPathUnavailable as why:  # the one-process reader names the bad line or takes the file
        return None, str(why)
    return tree, ""


def node_table(tree: XTree) -> list[str]:
    """One line per node: id, depth, length, count, success, children."""
    rows = [f"{'id':>5} {'d':>2} {'len':>3} {'count':>7} {'succ':>6}  children -> expansion"]
    for n in tree:
        succ = "-" if n.success is None else f"{n.success:.3f}"
        rows.append(
            f"{n.id:>5} {n.depth:>2} {n.length:>3} {n.count:>7} {succ:>6}  "
            f"{n.children[0]} + {n.children[1]} -> {' '.join(n.expansion)}"
        )
    return rows


def cmd_show(args: argparse.Namespace) -> int:
    from .tree import XTree

    tree = XTree.load(args.tree)
    if args.json:
        print(json.dumps(tree.summary(), indent=1))
        return 0
    s = tree.summary()
    print(
        f"{tree.environment or 'tree'}: {s['n_nodes']} nodes over {s['n_primitives']} primitives, "
        f"max depth {s['max_depth']}, bound {s['bound'] or 'unknown'}"
    )
    print("\n".join(tree.hierarchy_lines() if args.hierarchy else node_table(tree)))
    return 0


def cmd_tile(args: argparse.Namespace) -> int:
    from ..corpus.columnar import ColumnarCorpus
    from .miner import trajectory_tokens
    from .tree import XTree

    tree = XTree.load(args.tree)
    corpus = _load([args.corpus], args.skip_bad, sort=False, keep_duplicates=args.keep_duplicates)
    if isinstance(corpus, ColumnarCorpus):  # tilings print in line order
        ids, tokens = corpus.id_list(), corpus.token_lists()
    else:
        ids, tokens = [t.id for t in corpus], trajectory_tokens(corpus.trajectories, args.domain)
    covered = total = 0
    shown = 0
    for tid, toks in progress(list(zip(ids, tokens)), desc="tile"):
        segs = tree.tile(toks)
        total += len(toks)
        covered += sum(s.length for s in segs if s.is_node)
        if args.limit is None or shown < args.limit:
            print(f"{tid}: " + " | ".join(f"{s.symbol}[{s.start}:{s.end}]" for s in segs))
            shown += 1
    cov = covered / total if total else 0.0
    print(f"coverage: {covered}/{total} steps inside nodes ({cov:.1%}) over {len(corpus)} trajectories")
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    from ..corpus.records import corpus_stats

    corpus = _read(args.corpus, args.skip_bad, args.keep_duplicates)
    st = corpus_stats(corpus.trajectories)
    st["n_skipped_lines"] = len(corpus.skipped)
    st["n_duplicate_ids"] = len(corpus.duplicates)
    if args.json:
        print(json.dumps(st, indent=1))
    else:
        for k, v in st.items():
            print(f"{k}: {v}")
    return 0
