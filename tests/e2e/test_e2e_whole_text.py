"""The Whole text page in a real browser: the scan runs on request; a click on a head's thumbnail opens
that head's links (the token strip's title names it, the pickers show it), and hovering a query of the
strip shows its kept keys."""

from __future__ import annotations

import re

import pytest

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
LAYER, HEAD, HEADS = 2, 7, 12  # MiniLM: 12 heads a layer


def test_a_click_on_a_thumbnail_opens_that_heads_links(shared_app):
    app = shared_app
    if not app.model_title().startswith("all-MiniLM"):
        app.choose_model("minilm")
    app.set_text(TEXT)
    app.goto("Whole text")
    assert app.heading() == "Whole text"
    app.click(app.page.get_by_role("button", name=re.compile(r"^Scan all \d+ tokens")))
    assert app.wait_until(lambda: app.charts().count() >= 5, True, timeout_s=90), "the scan drew no charts"
    grid = app.charts().nth(1)  # the head map first, then the thumbnails
    grid.scroll_into_view_if_needed()
    x, y = app.point(grid, LAYER * HEADS + HEAD)
    app.rerun(lambda: app.page.mouse.click(x, y))
    title = app.wait_until(lambda: f"Layer {LAYER}, head {HEAD}:" in app.chart_title(2), True)
    assert title, app.chart_title(2)
    strip = app.charts().nth(2)
    strip.scroll_into_view_if_needed()
    bx, by = strip.evaluate(BAR, 20)
    app.page.mouse.move(bx, by)
    hover = app.page.locator(".hoverlayer .hovertext").first
    hover.wait_for(timeout=10_000)
    shown = hover.text_content()  # SVG text: each line of the label a tspan
    assert re.search(r"query 20 ", shown) and "distance" in shown and "rest" in shown, shown
    app.assert_clean()
