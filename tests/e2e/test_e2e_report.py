"""The HTML report opened from a file in a real browser with the network cut off: plotly.js
unpacks itself, every figure draws, nothing is fetched, no script from the text runs, and a
browser without DecompressionStream gets a sentence instead of blank boxes."""

from __future__ import annotations

import numpy as np
import pytest

from mha_viz.capture.run import AttentionRun
from mha_viz.export import report
from mha_viz.metrics.head_stats import head_table

pytestmark = pytest.mark.e2e

TOKENS = ["[CLS]", "the", "<script>alert(1)</script>", "</script>", "<img src=x onerror=alert(2)>", "cat",
          "&amp;", "sat", "on", "the", "mat", "[SEP]"]
TEXT = "the <script>alert(3)</script> cat </script> sat on the mat"


@pytest.fixture(scope="module")
def report_file(tmp_path_factory):
    rng = np.random.default_rng(0)
    a = rng.random((3, 4, len(TOKENS), len(TOKENS))).astype(np.float32) ** 4
    run = AttentionRun.from_array(a / a.sum(-1, keepdims=True), TOKENS, model_name="synthetic")
    run.text = TEXT
    path = tmp_path_factory.mktemp("report") / "report.html"
    path.write_text(report.html_report(run, heads=[(0, 0), (2, 3)], table=head_table(run)), encoding="utf-8")
    return path


def _open(isolated_browser, path, *, init_script: str | None = None):
    """The report in a fresh context that refuses every request but the file itself; returns the
    page and what it logged: console errors, page errors, dialogs and refused requests."""
    context = isolated_browser.new_context(viewport={"width": 1200, "height": 900})
    seen = {"console": [], "errors": [], "dialogs": [], "refused": []}

    def route(r):
        if r.request.url.startswith("file:"):
            r.continue_()
        else:
            seen["refused"].append(r.request.url)
            r.abort()

    context.route("**/*", route)
    if init_script:
        context.add_init_script(init_script)
    page = context.new_page()
    page.on("console", lambda m: m.type == "error" and seen["console"].append(m.text))
    page.on("pageerror", lambda e: seen["errors"].append(str(e)))
    page.on("dialog", lambda d: (seen["dialogs"].append(d.message), d.dismiss()))
    page.goto(path.as_uri())
    return page, seen


def test_report_draws_offline(isolated_browser, report_file):
    page, seen = _open(isolated_browser, report_file)
    try:
        plots = page.locator("div.plot")
        assert plots.count() == 3  # the overview and two heads
        page.wait_for_function(
            "[...document.querySelectorAll('div.plot')].every(d => d.querySelector('.main-svg'))",
            timeout=30_000)
        assert page.locator("#status").count() == 0  # removed once every figure is drawn
        assert not seen["console"] and not seen["errors"], seen
        assert not seen["dialogs"] and not seen["refused"], seen
        # markup from the text and tokens is shown as text, never made into elements
        assert page.locator("body img, body iframe, [onerror]").count() == 0
        assert page.locator("pre.text").inner_text() == TEXT
        shown = page.locator(".tokens .tok").all_inner_texts()
        assert shown == [f"{i}{tok}" for i, tok in enumerate(TOKENS)]
        assert page.locator("table.metrics tbody tr").count() == 12
    finally:
        page.context.close()


def test_report_without_decompression_stream_says_so(isolated_browser, report_file):
    page, seen = _open(isolated_browser, report_file, init_script="delete window.DecompressionStream;")
    try:
        page.wait_for_function(
            "document.getElementById('status').textContent.includes('DecompressionStream')")
        assert page.locator("div.plot .main-svg").count() == 0
        assert not seen["errors"] and not seen["refused"], seen
    finally:
        page.context.close()
