"""The Corpus page in a real browser: toy-induction over the bundled sample (statistics, head types,
importance), and a long job on smollm2 that *Cancel* stops mid-way, with a notice and no error."""

from __future__ import annotations

import re
import urllib.parse

import pytest

from .conftest import RUN_TIMEOUT_S, open_link

pytestmark = pytest.mark.e2e


def _open(browser, server: str, name: str, **params):
    return open_link(browser, server, name, "/corpus?" + urllib.parse.urlencode(params),
                     ready="[data-testid=stMain] h1:has-text('Corpus')")


def _compute(ui):
    return ui.page.get_by_role("button", name=re.compile(r"^Compute over"))


def test_toy_induction_over_the_sample(browser, server):
    ui = _open(browser, server, "corpus-toy", model="toy-induction", text="a b c a b c")
    try:
        if _compute(ui).count():  # not computed yet by an earlier run of the suite on this server
            ui.click(_compute(ui))
        ui.page.get_by_text(re.compile(r"documents/s\)|documents, \d")).first.wait_for(timeout=RUN_TIMEOUT_S * 1000)
        ui.wait_idle()
        assert ui.charts().count() >= 5  # mean, spread, head types, importance, this sentence (2)
        titles = [ui.chart_title(i) for i in range(ui.charts().count())]
        assert any("Head types" in t for t in titles) and any("importance" in t for t in titles)
        ui.assert_clean()
        ui.shot("toy")
    finally:
        ui.close()


def test_cancel_stops_a_long_job(browser, server):
    ui = _open(browser, server, "corpus-cancel", model="smollm2", text="The cat sat on the mat.")
    try:
        # results are kept by (model, documents, tokens, …): a token count nobody uses is never kept
        ui.choose("Tokens per document", "61", scope="[data-testid=stMain]")
        assert _compute(ui).count() == 1, "smollm2 at 61 tokens was computed before: it should never be kept"
        _compute(ui).click()
        ui.page.get_by_text(re.compile(r"documents/s · about")).first.wait_for(timeout=RUN_TIMEOUT_S * 1000)
        ui.rerun(ui.page.get_by_role("button", name="Cancel").click)
        ui.wait_until(lambda: any("cancelled" in a for a in ui.alerts("Warning")), True, timeout_s=60)
        assert _compute(ui).count() == 1  # nothing kept: the button is back
        ui.assert_clean()
    finally:
        ui.close()


POINTS = """(el) => {
    const gd = el.querySelector('.js-plotly-plot');
    const fl = gd._fullLayout, box = gd.getBoundingClientRect(), d = gd._fullData[0];
    return Array.from(d.x).map((x, i) => [box.left + fl._size.l + fl.xaxis.l2p(x),
                                         box.top + fl._size.t + fl.yaxis.l2p(d.y[i])]);
}"""


def test_head_examples_and_the_finder_after_a_corpus(browser, server):
    """The corpus job keeps each head's examples; the Head examples page draws them, and a click on
    the head finder opens the head under the pointer."""
    ui = _open(browser, server, "corpus-examples", model="toy-induction", text="a b c a b c")
    try:
        if _compute(ui).count():
            ui.click(_compute(ui))
        ui.page.get_by_text(re.compile(r"documents/s\)|documents, \d")).first.wait_for(timeout=RUN_TIMEOUT_S * 1000)
        ui.wait_idle()
        ui.goto("Head examples")
        ui.page.locator(".gtitle", has_text=re.compile(r"^Document \d+ · score")).first.wait_for(timeout=60_000)
        finder = next(ui.charts().nth(i) for i in range(ui.charts().count())
                      if ui.chart_title(i).startswith("Head finder"))
        finder.scroll_into_view_if_needed()
        heads = 4  # toy-induction: 2 layers × 4 heads
        points = finder.evaluate(POINTS)  # each head's point on the screen, layer-major
        x, y = points[heads + 2]  # layer 1, head 2
        ui.rerun(lambda: ui.page.mouse.click(x, y))
        layer = ui.page.locator("[data-testid=stMain] input[role=combobox][aria-label='Layer']")
        head = ui.page.locator("[data-testid=stMain] input[role=combobox][aria-label='Head']")
        # the head under the pointer: this one, or one drawn within a few pixels of it
        under = {divmod(i, heads) for i, (px, py) in enumerate(points) if abs(px - x) <= 6 and abs(py - y) <= 6}
        assert ui.wait_until(lambda: (int(layer.input_value()), int(head.input_value())) in under, True)
        ui.wait_idle()
        assert any(ui.chart_title(i).startswith("Document ") for i in range(ui.charts().count()))
        ui.assert_clean()
        ui.shot("head-examples")
        document = next(ui.charts().nth(i) for i in range(ui.charts().count())
                        if ui.chart_title(i).startswith("Document "))
        document.scroll_into_view_if_needed()
        ui.shot("head-examples-document")
    finally:
        ui.close()
