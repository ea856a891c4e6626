"""The HTML report (parsed, escaped, self-contained, checked in headless Chromium) and the PNG figures."""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from html.parser import HTMLParser
from pathlib import Path
from typing import ClassVar

import pytest

from xtree_gym.cli import main
from xtree_gym.corpus import read_corpus
from xtree_gym.mining.tree import XTree
from xtree_gym.render.gaps import find_gaps
from xtree_gym.render.report import build_report
from xtree_gym.render.stats import CorpusUsage

DATA = Path(__file__).parent / "data" / "render"
CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)


class _Collector(HTMLParser):
    """Element ids, node-table rows, external references and unclosed tags of a page."""

    VOID: ClassVar[set[str]] = {"meta", "br", "img", "input", "link", "hr", "path", "rect", "line", "circle"}

    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.table_rows: list[str] = []
        self.external: list[str] = []
        self.stack: list[str] = []
        self.errors: list[str] = []
        self._in_nodes = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "id" in a:
            self.ids.add(a["id"])
        if tag == "table" and a.get("id") == "nodes":
            self._in_nodes = True
        if self._in_nodes and tag == "tr" and "data-node" in a:
            self.table_rows.append(a["data-node"])
        for key in ("src", "href"):
            if a.get(key) and not a[key].startswith("#"):
                self.external.append(a[key])
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)
        if tag not in self.VOID:
            self.stack.pop()

    def handle_endtag(self, tag):
        if tag in self.VOID:
            return
        if tag == "table" and self._in_nodes:
            self._in_nodes = False
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes <{self.stack[-1] if self.stack else None}>")
            return
        self.stack.pop()


def _parse(html: str) -> _Collector:
    c = _Collector()
    c.feed(html)
    c.close()
    return c


@pytest.fixture(scope="module")
def shop_report() -> tuple[XTree, str]:
    tree = XTree.load(DATA / "shop_tree.json")
    usage = CorpusUsage.build(tree, read_corpus([DATA / "shop_corpus.jsonl"]))
    return tree, build_report(tree, usage, gaps=find_gaps(tree, usage, min_count=2), max_trajectories=3)


def test_report_is_valid_and_lists_every_node(shop_report):
    tree, html = shop_report
    page = _parse(html)
    assert page.errors == [] and page.stack == []
    assert page.table_rows == [n.id for n in tree.nodes]
    assert {f"node-{n.id}" for n in tree.nodes} <= page.ids
    assert {"summary", "nodes", "hierarchy", "charts", "gaps", "trajectories"} <= page.ids
    assert page.external == []  # nothing is fetched at view time
    assert "http://" not in html and "https://" not in html
    assert html.count('class="traj-box"') == 1  # one task type in this corpus -> one trajectory shown
    assert "failing node S4" in html and "what bound the mining" in html


def test_report_escapes_corpus_text(tmp_path):
    tree = XTree.load(DATA / "shop_tree.json")
    rows = [json.loads(line) for line in (DATA / "shop_corpus.jsonl").read_text().splitlines()]
    rows[0]["goal"] = "<script>alert('goal')</script> & co"
    rows[0]["task"] = "evil <task>"  # its own family, so the report draws this trajectory
    rows[0]["steps"][0]["action"] = "search[<img src=x onerror=alert(1)>]"
    path = tmp_path / "evil.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    usage = CorpusUsage.build(tree, read_corpus([path]))
    html = build_report(tree, usage, max_trajectories=12)
    assert "<script>alert" not in html and "<img src=x" not in html
    assert "&lt;script&gt;alert(&#x27;goal&#x27;)&lt;/script&gt; &amp; co" in html
    assert "search[&lt;img src=x onerror=alert(1)&gt;]" in html and "evil &lt;task&gt;" in html
    page = _parse(html)
    assert page.errors == [] and page.external == []


def test_report_of_a_released_tree_without_corpus(shared_dir):
    tree = XTree.load(shared_dir / "reference" / "xtree-site" / "trees" / "webarena.json")
    html = build_report(tree)
    page = _parse(html)
    assert page.table_rows == [n.id for n in tree.nodes] and len(tree.nodes) == 256
    assert page.errors == [] and "trajectories" not in page.ids


def test_cli_report_plot_cards_are_deterministic(tmp_path):
    tree, corpus = str(DATA / "shop_tree.json"), str(DATA / "shop_corpus.jsonl")
    for k in (1, 2):
        assert main(["report", tree, "--corpus", corpus, "-o", str(tmp_path / f"r{k}.html")]) == 0
    assert (tmp_path / "r1.html").read_bytes() == (tmp_path / "r2.html").read_bytes()
    assert (
        main(["cards", tree, "--corpus", corpus, "--domain", "webshop", "-o", str(tmp_path / "bank.json")])
        == 0
    )
    bank = json.loads((tmp_path / "bank.json").read_text())
    assert set(bank["cards"]) == {"general", "color", "size", "generic"}
    assert main(["report", str(tmp_path / "missing.json"), "-o", str(tmp_path / "x.html")]) == 1
    pytest.importorskip("matplotlib", reason="xtree plot needs matplotlib (extra 'render')")
    for k in (1, 2):
        assert (
            main(["plot", tree, "--corpus", corpus, "--trajectories", "1", "-o", str(tmp_path / f"p{k}")])
            == 0
        )
    names = sorted(p.name for p in (tmp_path / "p1").iterdir())
    assert names == [
        "depth_histogram.png",
        "hierarchy.png",
        "length_histogram.png",
        "success_vs_base.png",
        "tiling_0.png",
    ]
    for name in names:
        a, b = (tmp_path / "p1" / name).read_bytes(), (tmp_path / "p2" / name).read_bytes()
        assert a[:8] == b"\x89PNG\r\n\x1a\n" and a == b


def _chromium(args: list[str], profile: str, timeout: int = 90) -> subprocess.CompletedProcess[str]:
    flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-quic",
        "--no-first-run",
        f"--user-data-dir={profile}",
    ]
    return subprocess.run(
        [CHROMIUM, *flags, *args], capture_output=True, text=True, timeout=timeout, check=False
    )


@pytest.mark.browser
@pytest.mark.skipif(CHROMIUM is None, reason="Debian chromium (/usr/bin/chromium) is not installed")
def test_report_runs_in_headless_chromium(tmp_path):
    tree = XTree.load(DATA / "sw_tree.json")
    usage = CorpusUsage.build(tree, read_corpus([DATA / "sw_corpus.jsonl"]))
    page = tmp_path / "report.html"
    page.write_text(build_report(tree, usage, gaps=find_gaps(tree, usage)), encoding="utf-8")
    with tempfile.TemporaryDirectory() as profile:
        dom = _chromium(["--virtual-time-budget=3000", "--dump-dom", page.as_uri()], profile).stdout
    assert 'data-xtree-ready="1"' in dom, "the report's script did not run to its end"
    assert 'data-xtree-error="' not in dom
    assert f'<span id="js-node-count">{len(tree.nodes)}</span>' in dom  # the script counted every row
    shot = tmp_path / "shot.png"
    with tempfile.TemporaryDirectory() as profile:
        _chromium(["--window-size=1200,1600", f"--screenshot={shot}", page.as_uri()], profile)
    assert shot.is_file(), "chromium wrote no screenshot"
    image = pytest.importorskip("matplotlib.image", reason="reading the screenshot needs matplotlib")
    pixels = image.imread(str(shot))
    assert pixels.shape[0] >= 1000 and pixels.shape[1] >= 1000
    assert float(pixels[..., :3].std()) > 0.05  # not a blank page
    assert float(pixels[..., :3].mean()) > 0.6  # a light page, text and charts on it


@pytest.mark.parametrize("command", ["report", "plot", "cards"])
def test_bad_input_is_one_error_line(tmp_path, capsys, command):
    """Missing, binary, non-gzip or malformed inputs, an unknown domain, an unwritable output: exit 1, one line."""
    tree, corpus = str(DATA / "sw_tree.json"), str(DATA / "sw_corpus.jsonl")
    (tmp_path / "bin.json").write_bytes(b"\xff\xfe\x00")
    (tmp_path / "fake.jsonl.gz").write_bytes(b"not gzip")
    (tmp_path / "lines.jsonl").write_text('{"id": "a", "success": true, "steps": []}\n{oops\n')
    (tmp_path / "file").write_text("")
    out = str(tmp_path / "out")
    cases = [  # (argv after the command, text the message must hold)
        ([str(tmp_path / "missing.json"), "-o", out], "missing.json"),
        ([str(tmp_path / "bin.json"), "-o", out], "bin.json:1: not UTF-8"),
        ([tree, "--corpus", str(tmp_path / "fake.jsonl.gz"), "-o", out], "fake.jsonl.gz: cannot read"),
        ([tree, "--corpus", str(tmp_path / "lines.jsonl"), "-o", out], "lines.jsonl:2"),
        ([tree, "--corpus", corpus, "--domain", "nosuch", "-o", out], "unknown domain 'nosuch'"),
        ([tree, "--domain", "nosuch", "-o", out], "unknown domain 'nosuch'"),
        ([tree, "--corpus", corpus, "-o", str(tmp_path / "file" / "x")], "cannot write"),
    ]
    if command == "plot":
        pytest.importorskip("matplotlib", reason="xtree plot needs matplotlib (extra 'render')")
    for argv, expected in cases:
        assert main([command, *argv]) == 1, argv
        err = capsys.readouterr().err
        assert err.startswith(f"xtree {command}: error: ") and err.count("\n") == 1, err
        assert expected in err, (expected, err)
    assert not Path(out).exists()


def test_cli_report_says_the_file_size_in_bytes(tmp_path, capsys):
    """The report is UTF-8 with non-ASCII text (λ, →): the printed size is the file's, not its characters."""
    tree, corpus = str(DATA / "shop_tree.json"), str(DATA / "shop_corpus.jsonl")
    out = tmp_path / "r.html"
    assert main(["report", tree, "--corpus", corpus, "-o", str(out)]) == 0
    said = capsys.readouterr().out
    size = out.stat().st_size
    assert len(out.read_text(encoding="utf-8")) < size  # the page has multi-byte characters
    assert f"({size:,} bytes," in said
