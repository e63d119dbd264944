"""The Head view's *Links* section in a real browser, reached by an old link to the retired Whole text page:
/whole_text with a model and text opens the Head view (its path, its heading, the link's text), and hovering a
query of the section's token strip shows its kept keys."""

from __future__ import annotations

import re
import urllib.parse

import pytest

from .conftest import open_link

pytestmark = pytest.mark.e2e

TEXT = ("The keys to the old wooden cabinet are missing again, said Mary. John looked in the hall, "
        "and the keys to the old wooden cabinet were there. ") * 3
# the screen position of the middle of bar `index` of the chart's first trace
BAR = """(el, index) => {
    const gd = el.querySelector('.js-plotly-plot');
    const fl = gd._fullLayout, box = gd.getBoundingClientRect(), trace = gd._fullData[0];
    return [box.left + fl._size.l + fl.xaxis.l2p(trace.x[index]),
            box.top + fl._size.t + fl.yaxis.l2p(trace.y[index] / 2)];
}"""


def test_an_old_whole_text_link_opens_the_head_views_links(browser, server):
    params = {"model": "minilm", "text": TEXT, "layer": "2", "head": "7"}
    ui = open_link(browser, server, "old-whole-text", "/whole_text?" + urllib.parse.urlencode(params))
    try:
        assert ui.heading() == "Head view"
        assert ui.wait_until(lambda: urllib.parse.urlsplit(ui.page.url).path, "/head_view") == "/head_view"
        assert ui.text_box.input_value() == TEXT
        # the Links section, where the page's parts moved, opens by itself
        strip = ui.wait_until(lambda: ui.titled("Layer 2, head 7: queries 0") is not None, True)
        assert strip, [ui.chart_title(i) for i in range(ui.charts().count())]
        chart = ui.titled("Layer 2, head 7: queries 0")
        chart.scroll_into_view_if_needed()
        bx, by = chart.evaluate(BAR, 20)
        ui.page.mouse.move(bx, by)
        hover = ui.page.locator(".hoverlayer .hovertext").first
        hover.wait_for(timeout=10_000)
        shown = hover.text_content()  # SVG text: each line of the label a tspan
        assert re.search(r"query 20 ", shown) and "distance" in shown and "rest" in shown, shown
        ui.assert_clean()
    finally:
        ui.close()


def test_the_default_pages_own_path_opens_it_at_the_root(browser, server):
    """/model_view, where docs/using.md and every other page's pattern put the Model view, opens it (at the root,
    where Streamlit serves the default page) with the link's text, and Streamlit's "Page not found" never shows."""
    params = {"model": "minilm", "text": "The lighthouse keeper counted every passing ship."}
    ui = open_link(browser, server, "default-path", "/model_view?" + urllib.parse.urlencode(params))
    try:
        assert ui.heading() == "Model view"
        assert ui.wait_until(lambda: urllib.parse.urlsplit(ui.page.url).path, "/") == "/"
        assert ui.text_box.input_value() == params["text"]
        assert not ui.page.get_by_text("Page not found").count()
        ui.assert_clean()
    finally:
        ui.close()
