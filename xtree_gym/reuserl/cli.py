"""``xtree mdl CORPUS``: extract the ReuseRL skill dictionary of a corpus's successful trajectories."""

from __future__ import annotations

import argparse
import json
from typing import Any


def register_cli(subparsers: Any, collect_subparsers: Any) -> None:
    p = subparsers.add_parser(
        "mdl",
        help="extract the ReuseRL skill dictionary (greedy BPE under the two-part MDL code)",
        description="Extract the ReuseRL dictionary from the successful trajectories of a corpus and print it.",
    )
    p.add_argument("corpus", nargs="+", help="corpus JSONL file(s)")
    p.add_argument(
        "--domain", default=None, help="canonicalizer for steps without a token (countdown, twcooking, ...)"
    )
    p.add_argument("--max-len", type=int, default=4, help="longest phrase L (default: 4)")
    p.add_argument(
        "--horizon",
        type=int,
        default=None,
        help="T for SegCost (default: the domain's, else the longest sequence)",
    )
    p.add_argument("--all", action="store_true", help="use every trajectory, not only the successful ones")
    p.add_argument("--json", default=None, metavar="OUT", help="also write the dictionary as JSON")
    p.add_argument(
        "--keep-duplicates", action="store_true", help="keep records whose id repeats an earlier one"
    )
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from ..corpus.io import atomic_write_text, refuse_overwrite
    from ..corpus.records import read_corpus
    from ..errors import CorpusError
    from ..mining.miner import trajectory_tokens
    from .mdl import MDLConfig, SkillDictionary, extract_dictionary, skill_alphabet

    if args.json:
        refuse_overwrite(args.json, args.corpus, option="--json")
    corpus = read_corpus(args.corpus, keep_duplicates=args.keep_duplicates)
    chosen = [t for t in corpus if args.all or t.success]
    if not chosen:
        raise CorpusError("no successful trajectory in the corpus", fix="pass --all to use every trajectory")
    seqs = trajectory_tokens(chosen, args.domain)
    sigma = skill_alphabet(args.domain) if args.domain else None  # None: the skills seen
    d = extract_dictionary(seqs, sigma, config=MDLConfig(max_len=args.max_len))
    base = SkillDictionary.singletons(d.alphabet, args.max_len)
    default_t = {"countdown": 30, "twcooking": 40, "alfworld": 50}.get((args.domain or "").lower())
    horizon = args.horizon or default_t or max(len(s) for s in seqs) or 1
    uses: dict[tuple[Any, ...], int] = {}  # phrase -> uses in the minimal segmentations
    for s in seqs:
        for part in d.segment(s):
            uses[part] = uses.get(part, 0) + 1
    print(
        f"{len(seqs)} sequences, |Sigma| = {len(d.alphabet)}, |C| = {len(d)} ({len(d.merged)} merged phrases)"
    )
    print(f"BDL: singletons {base.bdl(seqs):.3f} -> dictionary {d.bdl(seqs):.3f} bits/sequence")
    mean_seg = sum(d.seg(s) for s in seqs) / len(seqs)
    mean_len = sum(len(s) for s in seqs) / len(seqs)
    print(
        f"mean seg {mean_seg:.2f} vs mean length {mean_len:.2f} (T = {horizon}: SegCost {mean_seg / horizon:.3f})"
    )
    for phrase in d.merged:
        print(f"  {uses.get(phrase, 0):6d}  {' '.join(map(str, phrase))}")
    if args.json:
        atomic_write_text(args.json, json.dumps(d.to_dict(), indent=1) + "\n")
    return 0
