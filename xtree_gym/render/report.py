"""The HTML report: one self-contained file (inline CSS, JS and SVG; nothing fetched at view time).

Sections: summary (corpus, config, what bound the mining), the sortable node table, the merge
hierarchy, depth and length histograms, success against the base rate, corpus gaps, and a few
trajectories tiled like the paper's Figure 5 (rows = steps, bands = top-level tiling symbols, the
node instances beside them with depth growing to the right). Every text from the corpus or tree
is HTML-escaped.
"""

from __future__ import annotations

from collections import Counter
from html import escape
from typing import Any

from .gaps import CorpusGaps
from .layout import node_hue, pick_trajectories, tiled_cells
from .stats import CorpusUsage
from .svg import bar_chart, hierarchy, success_vs_base

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#1d232b;background:#fbfbfc}
main{max-width:1280px;margin:0 auto;padding:18px 26px 60px}
h1{font-size:24px;margin:8px 0 4px}h2{font-size:18px;margin:30px 0 8px;border-bottom:1px solid #dde1e6;padding-bottom:4px}
nav a{margin-right:14px;color:#2456a6;text-decoration:none}
table{border-collapse:collapse;background:#fff}td,th{border:1px solid #e1e4e8;padding:3px 7px;vertical-align:top}
th{background:#f1f3f6;text-align:left;position:sticky;top:0}
table.kv td:first-child{color:#5a6270;white-space:nowrap}
table.sortable th{cursor:pointer;user-select:none}table.sortable th:after{content:" \\2195";color:#9aa3ad}
td.num{text-align:right;font-variant-numeric:tabular-nums}td.chain,td.tok{font:12px ui-monospace,Menlo,Consolas,monospace}
td.ex{color:#5a6270;font-size:12px;max-width:380px}
.wrap{overflow:auto;max-height:560px;border:1px solid #e1e4e8}
.charts{display:flex;flex-wrap:wrap;gap:18px;align-items:flex-start}
svg.chart{background:#fff;border:1px solid #e1e4e8}svg text{font:11px system-ui,sans-serif;fill:#333}
svg .ttl{font-weight:600}svg .bar{fill:#5b8def}svg .axis{stroke:#888}svg .grid{stroke:#eee}
svg .up{fill:#3fa46a}svg .down{fill:#d9534f}svg .base{stroke:#222;stroke-dasharray:4 3}
svg.hier .edges path{fill:none;stroke:#8a94a3;stroke-opacity:.35}svg.hier .edges path.hot{stroke:#d2691e;stroke-opacity:1;stroke-width:2}
svg.hier .prim{font:11px ui-monospace,monospace;fill:#444}svg.hier .hnode{cursor:pointer}
table.traj td{border-color:#eef0f3}table.traj td.nc{font:11px ui-monospace,monospace;text-align:center;vertical-align:middle;border:1px solid #fff}
.traj-box{margin:14px 0 26px}.goal{color:#333;margin:4px 0 6px}.ok{color:#2d7d46;font-weight:600}.fail{color:#b3261e;font-weight:600}
.muted{color:#6b7380}ul.gaps li{margin:2px 0}
"""

_JS = """
window.addEventListener('error',function(e){document.body.setAttribute('data-xtree-error',String(e.message));});
(function(){
  function key(td,num){var v=td.getAttribute('data-v');if(v===null)v=td.textContent;return num?parseFloat(v):v.toLowerCase();}
  document.querySelectorAll('table.sortable').forEach(function(table){
    table.querySelectorAll('th').forEach(function(th,col){
      th.addEventListener('click',function(){
        var num=th.getAttribute('data-type')==='num',asc=th.getAttribute('data-dir')!=='asc';
        th.setAttribute('data-dir',asc?'asc':'desc');
        var body=table.tBodies[0],rows=Array.prototype.slice.call(body.rows);
        rows.sort(function(a,b){var x=key(a.cells[col],num),y=key(b.cells[col],num);
          if(num){x=isNaN(x)?-1:x;y=isNaN(y)?-1:y;}return (x<y?-1:x>y?1:0)*(asc?1:-1);});
        rows.forEach(function(r){body.appendChild(r);});
      });
    });
  });
  document.querySelectorAll('svg.hier .hnode').forEach(function(g){
    var id=g.getAttribute('data-node');
    g.addEventListener('mouseenter',function(){document.querySelectorAll('svg.hier path').forEach(function(p){
      if(p.getAttribute('data-from')===id||p.getAttribute('data-to')===id)p.classList.add('hot');});});
    g.addEventListener('mouseleave',function(){document.querySelectorAll('svg.hier path.hot').forEach(function(p){
      p.classList.remove('hot');});});
    g.addEventListener('click',function(){var row=document.getElementById('node-'+id);if(row)row.scrollIntoView();});
  });
  document.getElementById('js-node-count').textContent=String(document.querySelectorAll('#nodes tbody tr').length);
  document.body.setAttribute('data-xtree-ready','1');
})();
"""


def _e(x: object) -> str:
    return escape(str(x), quote=True)


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.1f}%"


def _bound_text(tree: Any) -> str:
    cfg = tree.config or {}
    if tree.bound == "cap":
        return f"the cap: the miner made {len(tree.nodes)} merges, the most allowed (cap = {cfg.get('cap', '?')})"
    if tree.bound == "compression":
        return (
            "compression: no remaining pair passed f_uv − 1 > η(ℓ_u + ℓ_v) and the other gates"
            f" (η = {cfg.get('eta', '?')}, min. frequency = {cfg.get('min_freq', '?')})"
        )
    return "not recorded in this tree file (a released tree without a 'bound' field)"


def _kv_text(items: dict[str, Any]) -> str:
    """``k = v`` pairs, sorted, leaving out empty values (no ``name = ,`` for a tree mined without a name).

    Example:
        >>> _kv_text({"name": "", "n_trajectories": 6, "envs": []})
        'n_trajectories = 6'
    """
    return ", ".join(f"{k} = {v}" for k, v in sorted(items.items()) if v not in ("", None, [], {}))


def _config_text(config: dict[str, Any]) -> str:
    """The config with each of the authors' alias keys folded into the field it names (shown once).

    Example:
        >>> _config_text({"cap": 80, "max_skills": 80, "eta": 0.5, "mdl_lambda": 0.5, "min_frequency": 3})
        'cap = 80, eta = 0.5, min_frequency = 3'
    """
    from ..mining.tree import _AUTHOR_CONFIG

    shown = {
        k: v
        for k, v in config.items()
        if not (k in _AUTHOR_CONFIG and _AUTHOR_CONFIG[k] in config and config[_AUTHOR_CONFIG[k]] == v)
    }
    return _kv_text(shown)


def _rate_text(n_successful: Any, n_trajectories: Any) -> str | None:
    if isinstance(n_successful, int) and isinstance(n_trajectories, int) and n_trajectories > 0:
        return f"{_pct(n_successful / n_trajectories)} ({n_successful} of {n_trajectories} succeeded)"
    return None


def _report_corpus_text(tree: Any, usage: CorpusUsage) -> str:
    """The report corpus in one line; says so when the tree was mined from a corpus with another base rate."""
    steps = sum(len(t) for t in usage.tokens)
    n_ok = sum(bool(t.success) for t in usage.trajectories)
    text = f"{usage.n_trajectories} trajectories, {steps} steps, base rate {_rate_text(n_ok, usage.n_trajectories)}"
    corpus = tree.corpus or {}
    tree_rate = _rate_text(corpus.get("n_successful"), corpus.get("n_trajectories"))
    if tree_rate and (corpus.get("n_successful"), corpus.get("n_trajectories")) != (
        n_ok,
        usage.n_trajectories,
    ):
        text += f" -- not the corpus the tree was mined from (base rate {tree_rate}); node tables and charts use this one"
    return text


def _summary(tree: Any, usage: CorpusUsage | None) -> str:
    corpus = dict(tree.corpus or {})
    tree_rate = _rate_text(corpus.get("n_successful"), corpus.get("n_trajectories"))
    rows = [
        ("environment", tree.environment or "–"),
        ("tree corpus", _kv_text(corpus) + (f"; base rate {tree_rate}" if tree_rate else "") or "–"),
        ("nodes / primitives", f"{len(tree.nodes)} / {tree.n_primitives}"),
        (
            "max depth / max length",
            f"{max((n.depth for n in tree.nodes), default=0)} / "
            f"{max((n.length for n in tree.nodes), default=0)}",
        ),
        ("what bound the mining", _bound_text(tree)),
        ("compression ratio", "–" if tree.compression_ratio is None else f"{tree.compression_ratio:.3f}"),
        ("config", _config_text(tree.config or {}) or "–"),
    ]
    if usage is not None:
        rows.append(("report corpus", _report_corpus_text(tree, usage)))
    body = "".join(f"<tr><td>{_e(k)}</td><td>{_e(v)}</td></tr>" for k, v in rows)
    return f'<table class="kv">{body}</table><p class="muted">Node table rows: <span id="js-node-count">?</span></p>'


def _node_table(tree: Any, usage: CorpusUsage | None) -> str:
    cols = [
        ("id", "num"),
        ("order", "num"),
        ("depth", "num"),
        ("length", "num"),
        ("count", "num"),
        ("success", "num"),
    ]
    if usage is not None:
        cols += [
            ("occurrences", "num"),
            ("episodes", "num"),
            ("corpus success", "num"),
            ("task types", "num"),
        ]
    cols += [("chain", "text"), ("example", "text")]
    head = "".join(f'<th data-type="{t}">{_e(c)}</th>' for c, t in cols)
    rows = []
    for order, n in enumerate(tree.nodes):
        sv = -1 if n.success is None else n.success
        cells = [
            f'<td data-v="{order}">{_e(n.id)}</td>',
            f'<td class="num">{order}</td>',
            f'<td class="num">{n.depth}</td>',
            f'<td class="num">{n.length}</td>',
            f'<td class="num">{n.count}</td>',
            f'<td class="num" data-v="{sv}">{_pct(n.success)}</td>',
        ]
        if usage is not None:
            nu = usage.nodes[n.id]
            cs = nu.success
            cells += [
                f'<td class="num">{nu.occurrences}</td>',
                f'<td class="num">{len(nu.episodes)}</td>',
                f'<td class="num" data-v="{-1 if cs is None else cs}">{_pct(cs)}</td>',
                f'<td class="num">{len(usage.task_types(n.id))}</td>',
            ]
        ex = " ; ".join(n.example) if n.example else ""
        short = ex if not n.example or len(n.example) <= 3 else " ; ".join(n.example[:3]) + " ; …"
        cells += [
            f'<td class="chain">{_e(" → ".join(n.expansion))}</td>',
            f'<td class="ex" title="{_e(ex)}">{_e(short)}</td>',
        ]
        rows.append(f'<tr id="node-{_e(n.id)}" data-node="{_e(n.id)}">{"".join(cells)}</tr>')
    return (
        f'<div class="wrap"><table id="nodes" class="sortable"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table></div>"
    )


def _charts(tree: Any, usage: CorpusUsage | None, max_rows: int) -> str:
    depth = sorted(Counter(n.depth for n in tree.nodes).items())
    length = sorted(Counter(n.length for n in tree.nodes).items())
    out = ['<div class="charts">', bar_chart([(str(k), v) for k, v in depth], "nodes per depth")]
    out.append(bar_chart([(str(k), v) for k, v in length], "nodes per length (primitives)"))
    out.append("</div>")
    rated = []
    for n in tree.nodes:
        # with a corpus, both the rate and the base rate come from it; without, the tree's own numbers
        rate = usage.nodes[n.id].success if usage is not None else n.success
        occ = usage.nodes[n.id].occurrences if usage is not None else n.count
        if rate is not None:
            rated.append((n.id, rate, occ))
    base = usage.base_rate if usage is not None else None
    if not rated or base is None:
        out.append(
            '<p class="muted">Success against the base rate needs a corpus with failures'
            " (every node's success is unknown or no corpus was given).</p>"
        )
    else:
        rated.sort(key=lambda r: (-r[1], -r[2], r[0]))
        shown = rated if len(rated) <= max_rows else rated[: max_rows // 2] + rated[-(max_rows // 2) :]
        note = "" if shown is rated else f" (best and worst {max_rows // 2} of {len(rated)})"
        out.append(f"<h3>Success vs base rate{_e(note)}</h3>" + success_vs_base(shown, base))
    return "".join(out)


def _gaps(gaps: CorpusGaps | None) -> str:
    if gaps is None:
        return '<p class="muted">Needs a corpus (--corpus).</p>'
    items = "".join(f"<li>{_e(line)}</li>" for line in gaps.lines())
    return (
        '<p class="muted">Where the pool is thin: recurring but mostly failing nodes and tiling pairs,'
        " task types with few successes, tokens never merged. New trajectories there pay off most.</p>"
        f'<ul class="gaps">{items}</ul>'
    )


def _trajectory(tree: Any, usage: CorpusUsage, i: int) -> str:
    traj, toks = usage.trajectories[i], usage.tokens[i]
    segments, cells = tiled_cells(tree, toks)
    index = {n.id: k for k, n in enumerate(tree.nodes)}
    depth_max = max((c.depth for c in cells), default=0)
    starts = {(c.start, c.depth): c for c in cells}
    covered = {(r, c.depth) for c in cells for r in range(c.start + 1, c.end)}
    band = {}
    for seg in segments:
        for r in range(seg.start, seg.end):
            band[r] = seg
    head = "<th>#</th><th>action</th><th>token</th>" + "".join(
        f"<th>d{d}</th>" for d in range(1, depth_max + 1)
    )
    rows = []
    for r, (step, tok) in enumerate(zip(traj.steps, toks)):
        seg = band[r]
        bg = f"hsl({node_hue(index[seg.symbol])},55%,94%)" if seg.is_node else "#f6f6f6"
        tds = [f'<td class="num">{r}</td><td>{_e(step.action)}</td><td class="tok">{_e(tok)}</td>']
        for d in range(1, depth_max + 1):
            c = starts.get((r, d))
            if c is not None:
                col = f"hsl({node_hue(index[c.node_id])},60%,78%)"
                tds.append(
                    f'<td class="nc" rowspan="{c.end - c.start}" style="background:{col}">{_e(c.node_id)}</td>'
                )
            elif (r, d) not in covered:
                tds.append("<td></td>")
        rows.append(f'<tr style="background:{bg}">{"".join(tds)}</tr>')
    tiling = " | ".join(s.symbol for s in segments)
    status = '<span class="ok">success</span>' if traj.success else '<span class="fail">failure</span>'
    return (
        f'<div class="traj-box"><h3>{_e(traj.id)} <span class="muted">{_e(traj.task)}</span> {status}</h3>'
        f'<p class="goal">{_e(traj.goal)}</p><p class="muted">{len(toks)} steps → {len(segments)} tiling'
        f" symbols: {_e(tiling)}</p>"
        f'<table class="traj"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table></div>'
    )


def build_report(
    tree: Any,
    usage: CorpusUsage | None = None,
    *,
    gaps: CorpusGaps | None = None,
    title: str = "X-Tree report",
    max_trajectories: int = 4,
    max_success_rows: int = 80,
) -> str:
    """The whole report as one HTML string (write it with ``atomic_write_text``)."""
    sections = [
        ("summary", "Summary", _summary(tree, usage)),
        ("nodes", "Nodes", _node_table(tree, usage)),
        (
            "hierarchy",
            "Hierarchy",
            '<p class="muted">Primitives on the left, one column per depth; hover a'
            " node to light its edges, click it to jump to its table row.</p>"
            f'<div class="wrap">{hierarchy(tree)}</div>',
        ),
        ("charts", "Depth, length and success", _charts(tree, usage, max_success_rows)),
        ("gaps", "Corpus gaps", _gaps(gaps)),
    ]
    if usage is not None and max_trajectories > 0:
        picked = pick_trajectories(usage, tree, max_trajectories)
        body = "".join(_trajectory(tree, usage, i) for i in picked)
        sections.append(("trajectories", "Trajectories through the tree", body or "<p>none</p>"))
    nav = "".join(f'<a href="#{sid}">{_e(name)}</a>' for sid, name, _ in sections)
    content = "".join(
        f'<section id="{sid}"><h2>{_e(name)}</h2>{html}</section>' for sid, name, html in sections
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_e(title)}</title><style>{_CSS}</style></head>"
        f"<body><main><h1>{_e(title)}</h1><nav>{nav}</nav>{content}</main>"
        f"<script>{_JS}</script></body></html>\n"
    )
