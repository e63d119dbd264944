"""`mha_viz.export.report`: the HTML report fetches nothing, shows hostile tokens and text as text, carries
each figure's JSON and a plotly.js that unpacks to the package's own file."""

from __future__ import annotations

import base64
import gzip
import html
import json
import re
from html.parser import HTMLParser
from importlib import resources

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio
import pytest

from mha_viz.capture.run import AttentionRun
from mha_viz.export import report
from mha_viz.metrics.head_stats import head_table

TOKENS = ["[CLS]", "the", "<script>x</script>", "cat", "</script>", "sat", "&amp;", "on", "the", "\"mat\"",
          "'", "[SEP]"]
TEXT = "the <script>alert(1)</script> cat </script> sat & on the mat"


class Page(HTMLParser):
    """The tags of a page: attributes of each start tag, and the text of each script by id."""

    def __init__(self):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.scripts: dict[str, str] = {}
        self._script = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tags.append((tag, attrs))
        if tag == "script":
            self._script = attrs.get("id", f"anonymous-{len(self.scripts)}")
            self.scripts[self._script] = ""

    def handle_endtag(self, tag):
        if tag == "script":
            self._script = None

    def handle_data(self, data):
        if self._script is not None:
            self.scripts[self._script] += data


def _run() -> AttentionRun:
    rng = np.random.default_rng(0)
    a = rng.random((3, 4, len(TOKENS), len(TOKENS))).astype(np.float32)
    run = AttentionRun.from_array(a / a.sum(-1, keepdims=True), TOKENS, model_name="test/<b>model</b>")
    run.text = TEXT
    run.special_mask = [True] + [False] * 10 + [True]
    return run


@pytest.fixture(scope="module")
def page() -> str:
    run = _run()
    return report.html_report(run, heads=[(0, 0), (2, 3), (0, 0)], table=head_table(run),
                              facts={"layers": 3, "device <cpu>": "cpu"})


@pytest.fixture(scope="module")
def parsed(page) -> Page:
    p = Page()
    p.feed(page)
    p.close()
    return p


def test_no_external_src_or_href(parsed):
    links = [(tag, name, value) for tag, attrs in parsed.tags for name, value in attrs.items()
             if name in ("src", "href") and value and re.match(r"\s*(https?:)?//", value, re.I)]
    assert not links
    assert not [t for t, a in parsed.tags if t in ("link", "iframe", "img")]
    assert all("src" not in attrs for tag, attrs in parsed.tags if tag == "script")


def test_no_url_anywhere_but_inside_the_packed_plotly(page):
    rest = page.replace(report.plotly_js_gzip_b64(), "")
    assert not re.findall(r"https?://", rest)


def test_tokens_and_text_shown_escaped(page):
    for tok in TOKENS:
        assert f"{html.escape(tok)}</span>" in page
    assert f'<pre class="text">{html.escape(TEXT)}</pre>' in page
    assert "<script>x</script>" not in page and "<script>alert(1)" not in page
    assert "<b>model</b>" not in page and "&lt;b&gt;model&lt;/b&gt;" in page
    assert "<dt>device &lt;cpu&gt;</dt>" in page


def test_only_the_reports_own_scripts(parsed):
    kinds = [attrs.get("type") for tag, attrs in parsed.tags if tag == "script"]
    # the overview and two heads (the repeat dropped), the packed plotly.js and the loader
    assert kinds == ["application/json"] * 3 + ["application/octet-stream", None]


def test_every_figure_div_has_its_json(page, parsed):
    divs = [attrs for tag, attrs in parsed.tags if tag == "div" and attrs.get("class") == "plot"]
    assert [d["id"] for d in divs] == ["fig-overview", "fig-head-0", "fig-head-1"]
    for d in divs:
        fig = report.embedded_json(page, d["id"])
        assert parsed.scripts[d["data-figure"]].strip().startswith("{")
        assert fig["data"] and "layout" in fig
    head = report.embedded_json(page, "fig-head-1")
    assert head["layout"]["title"]["text"].startswith("Layer 2, head 3")
    # the axes make room for the token labels (a plain page does not widen narrow margins)
    assert head["layout"]["xaxis"]["automargin"] is True and head["layout"]["yaxis"]["automargin"] is True
    # the tokens made it into the heatmap's axis (HTML-escaped labels, as in the app)
    assert head["data"][0]["x"][2] == html.escape("<script>x</script>", quote=False)
    grid = report.embedded_json(page, "fig-overview")
    assert grid["data"][0]["source"].startswith("data:image/png;base64,")


def test_embedded_json_cannot_close_its_script(parsed):
    blocks = {key: text for key, text in parsed.scripts.items() if key.endswith("-json")}
    assert sorted(blocks) == ["fig-head-0-json", "fig-head-1-json", "fig-overview-json"]
    for key, text in blocks.items():
        # the figures do hold `<`, `>` and `&` (tags in titles, the escaped hostile tokens) ...
        decoded = json.dumps(json.loads(text))
        assert "<" in decoded and ">" in decoded, key
        # ... and none reaches the page as it is
        assert "<" not in text and ">" not in text and "&" not in text, key
    assert "&" in json.dumps(json.loads(blocks["fig-head-1-json"]))


def test_embedded_plotly_unpacks_to_the_package_file(parsed):
    packed = base64.b64decode(parsed.scripts["plotly-gz"].strip())
    js = gzip.decompress(packed)
    assert js == resources.files("plotly").joinpath("package_data", "plotly.min.js").read_bytes()
    assert js.lstrip().startswith(b"/**") and b"plotly.js" in js[:400]
    assert len(packed) < len(js) / 2.5


def test_metrics_table_rounded_and_escaped():
    table = pd.DataFrame({"layer": [0, 1], "score": [0.123456789, float("nan")],
                          "pattern": ["<i>x</i>", "ok"]})
    out = report.table_html(table)
    assert "<td>0.1235</td>" in out and "<td>–</td>" in out
    assert "&lt;i&gt;x&lt;/i&gt;" in out and "<i>" not in out


def test_long_input_pooled_and_bad_head_refused():
    rng = np.random.default_rng(1)
    n = report.POOL_ABOVE + 20
    a = rng.random((1, 2, n, n)).astype(np.float32)
    run = AttentionRun.from_array(a / a.sum(-1, keepdims=True), [f"t{i}" for i in range(n)])
    fig = report.head_figure(run, 0, 1)
    assert "blocks" in fig.layout.title.text and len(fig.data[0].x) <= report.POOL_ABOVE
    with pytest.raises(ValueError, match=r"no head \(1, 0\)"):
        report.html_report(run, heads=[(1, 0)])


def test_without_overview_table_or_heads():
    page = report.html_report(_run(), heads=(), overview=False, title="Only <text>")
    assert 'class="plot"' not in page and "<table" not in page
    assert "<title>Only &lt;text&gt;</title>" in page
    assert report.report_bytes(_run(), heads=()).decode("utf-8").startswith("<!DOCTYPE html>")


def test_the_figures_are_the_same_under_any_default_template(monkeypatch):
    """Built in the app's server, whose default template is Streamlit's colour placeholders (#000001, …: only
    Streamlit's page turns them into colours), a report's figures are those built in a notebook: planted here as a
    default template of such placeholders."""
    def figures(default: str) -> list[dict]:
        monkeypatch.setattr(pio.templates, "default", default)
        page = report.html_report(_run(), heads=[(0, 0), (2, 3)])
        return [report.embedded_json(page, key) for key in ("fig-overview", "fig-head-0", "fig-head-1")]

    placeholders = [f"#{i:06d}" for i in range(1, 11)]
    pio.templates["placeholders"] = go.layout.Template(layout=dict(
        colorway=placeholders, colorscale=dict(sequential=[[0, "#000011"], [1, "#000020"]])))
    try:
        in_a_notebook, in_the_app = figures("plotly"), figures("placeholders")
    finally:
        del pio.templates["placeholders"]
    assert in_the_app == in_a_notebook
    assert in_a_notebook[0]["layout"]["template"]["layout"]["colorway"][0] not in placeholders
    assert not re.findall(r"#0000[0-9]{2}\b", json.dumps(in_the_app))
