"""Agreement of our canonicalizers with the X-Tree authors' own raw -> token pairs.

The authors' project page (``xtree-site``: ``trees/*.json``, ``data.js``, ``integ_data.js``)
releases raw actions next to the tokens their canonicalizer produced:

* ``trees/*.json``: each node's ``example`` (raw actions) aligned with its ``expansion``
  (ScienceWorld raw commands; WebShop and MiniWoB++ examples are already in token form
  ``click<option-color>(black)``; WebArena keeps none);
* ``data.js``: per trajectory ``commands`` (raw), ``grounded`` (a readable rendering) and
  ``tokens``; WebShop records add ``goal_options`` (the context);
* ``integ_data.js``: the RLVR groups' steps (``g``, ``tok``): ScienceWorld raw commands, WebShop
  readable renderings (turned back into raw actions here, see :func:`_webshop_display_to_raw`).

A pair is *determinable* when the released data carry the context the token needs: always for
ScienceWorld and WebShop; for WebArena only when the function implies the role (``fill``,
``select_option``; a click's role needs the AXTree, which the authors did not release); for
MiniWoB++ when ``grounded`` names the element kind (``click button "OK"``).

Nothing here is needed at run time; tests and ``benchmarks/canon_fidelity.py`` call it with
the path of the reference data.
"""

from __future__ import annotations

import json
import os
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import get_canonicalizer

DOMAINS = {
    "ScienceWorld": "scienceworld",
    "WebShop": "webshop",
    "WebArena": "browsergym",
    "MiniWoB++": "miniwob",
}
_TREES = {"scienceworld.json": "ScienceWorld", "webshop.json": "WebShop", "miniwob.json": "MiniWoB++"}


@dataclass
class Pair:
    """One released raw action with the authors' token and the context we could recover.

    Example:
        >>> r = measure([Pair("ScienceWorld", "demo", "open door to kitchen", "open<door>")])
        >>> r[("ScienceWorld", "all")].rate()
        1.0
    """

    env: str
    source: str
    raw: str
    expected: str
    context: dict[str, Any] | None = None
    determinable: bool = True


@dataclass
class Agreement:
    """Counts for one (env, source): all pairs and the determinable ones.

    Example:
        >>> a = Agreement(n=4, agree=3, n_det=2, agree_det=2)
        >>> a.rate(), a.rate(determinable_only=True)
        (0.75, 1.0)
    """

    n: int = 0
    agree: int = 0
    n_det: int = 0
    agree_det: int = 0
    disagreements: list[tuple[str, str, str, bool]] = field(default_factory=list)
    """(raw, expected, ours, determinable) per disagreeing pair."""

    def rate(self, determinable_only: bool = False) -> float:
        n, a = (self.n_det, self.agree_det) if determinable_only else (self.n, self.agree)
        return a / n if n else float("nan")


def _load_js(path: Path) -> Any:
    text = path.read_text(encoding="utf-8")
    return json.loads(text.split("=", 1)[1].strip().rstrip(";"))


def _tree_pairs(site: Path) -> list[Pair]:
    pairs = []
    for fname, env in _TREES.items():
        tree = json.loads((site / "trees" / fname).read_text(encoding="utf-8"))
        for node in tree["nodes"]:
            for raw, tok in zip(node.get("example") or [], node["expansion"]):
                pairs.append(Pair(env, "tree", raw, tok))
    return pairs


_MINIWOB_KINDS = {
    "button": {"tag": "button"},
    "checkbox": {"tag": "input", "type": "checkbox"},
    "radio": {"tag": "input", "type": "radio"},
    "link": {"tag": "a"},
}


def _miniwob_context(grounded: str) -> dict[str, Any] | None:
    m = re.match(r'^\w+\s+(\w+)\s+"(.*)"$', grounded)
    if m and m.group(1) in _MINIWOB_KINDS:
        return {"element": {**_MINIWOB_KINDS[m.group(1)], "label": m.group(2)}}
    return None


def _datajs_pairs(site: Path) -> list[Pair]:
    pairs = []
    for block in _load_js(site / "data.js"):
        env = block["env"]
        for ex in block["examples"]:
            for raw, grounded, tok in zip(ex["commands"], ex["grounded"], ex["tokens"]):
                ctx: dict[str, Any] | None = None
                det = True
                if env == "WebShop":
                    ctx = {"goal_options": ex.get("goal_options") or {}}
                elif env == "WebArena":
                    det = raw.split("(", 1)[0].strip() in ("fill", "select_option", "type")
                elif env == "MiniWoB++":
                    ctx = _miniwob_context(grounded)
                    det = ctx is not None
                pairs.append(Pair(env, "data.js", raw, tok, ctx, det))
    return pairs


def _webshop_display_to_raw(g: str, goal_options: dict[str, str]) -> str:
    """The authors' readable WebShop rendering -> the raw action it renders."""
    if g.startswith(("click[", "search[")):
        return g
    if g == "buy now":
        return "click[buy now]"
    m = re.match(r'^search "(.*)"$', g)
    if m:
        return f"search[{m.group(1)}]"
    m = re.match(r"^open item (\S+)$", g)
    if m:
        return f"click[{m.group(1).lower()}]"
    m = re.match(r'^click (.+?) "(.*)"$', g)
    if m:
        return f"click[{m.group(2)}]"
    return g


def _integ_pairs(site: Path, goal_by_task: dict[str, dict[str, str]]) -> list[Pair]:
    pairs = []
    for rec in _load_js(site / "integ_data.js")["rlvr"]:
        env = rec["env"]
        goal = goal_by_task.get(rec["task"], {})
        for group in rec["group"]:
            for s in group["steps"]:
                if env == "WebShop":
                    raw = _webshop_display_to_raw(s["g"], goal)
                    pairs.append(Pair(env, "integ_data.js", raw, s["tok"], {"goal_options": goal}))
                else:
                    pairs.append(Pair(env, "integ_data.js", s["g"], s["tok"]))
    return pairs


def load_reference_pairs(site_dir: str | os.PathLike[str]) -> list[Pair]:
    """Every released raw -> token pair under ``site_dir`` (the xtree-site folder)."""
    site = Path(site_dir)
    goal_by_task = {
        ex["utterance"]: ex.get("goal_options") or {}
        for block in _load_js(site / "data.js")
        if block["env"] == "WebShop"
        for ex in block["examples"]
    }
    return _tree_pairs(site) + _datajs_pairs(site) + _integ_pairs(site, goal_by_task)


def measure(pairs: list[Pair]) -> dict[tuple[str, str], Agreement]:
    """Canonicalize every pair; ``(env, source) -> Agreement`` plus ``(env, "all")`` totals."""
    out: dict[tuple[str, str], Agreement] = defaultdict(Agreement)
    for p in pairs:
        ours = get_canonicalizer(DOMAINS[p.env])(p.raw, p.context).token
        ok = ours == p.expected
        for key in ((p.env, p.source), (p.env, "all")):
            a = out[key]
            a.n += 1
            a.agree += ok
            a.n_det += p.determinable
            a.agree_det += ok and p.determinable
            if not ok and key[1] != "all":
                a.disagreements.append((p.raw, p.expected, ours, p.determinable))
    return dict(out)


def format_table(result: dict[tuple[str, str], Agreement]) -> str:
    """A plain-text table: env, source, pairs, agreement, determinable pairs, their agreement."""
    lines = [f"{'env':<13}{'source':<15}{'pairs':>6}{'agree':>8}{'det.':>6}{'agree(det.)':>13}"]
    for (env, source), a in sorted(result.items(), key=lambda kv: (kv[0][0], kv[0][1] == "all", kv[0][1])):
        lines.append(f"{env:<13}{source:<15}{a.n:>6}{a.rate():>8.1%}{a.n_det:>6}{a.rate(True):>13.1%}")
    return "\n".join(lines)
