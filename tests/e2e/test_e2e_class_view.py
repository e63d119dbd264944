"""What a room of students sees, in a real browser: Plotly's toolbar (its modebar) covers no chart
title and no column label, no title runs past its chart's edge (the value-weighted chart in half of
the page included), and the sidebar's model picker shows every model's title whole."""

from __future__ import annotations

import pytest

from mha_viz.interventions import prediction

pytestmark = [pytest.mark.e2e, pytest.mark.model]
MAIN = "[data-testid=stMain]"
LAPTOP = {"width": 1280, "height": 900}  # a classroom's laptop or projector (a half-page chart: ~400 px)
# a chart's boxes in screen pixels: its toolbar, its figure, and each text of its title, axis titles,
# tick labels and annotations, as [left, top, right, bottom]
BOXES = """el => {
    const box = e => { const r = e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; };
    const bar = el.querySelector('.modebar');
    const texts = Array.from(el.querySelectorAll(
        '.gtitle, .g-xtitle text, .g-ytitle text, .xtick text, .x2tick text, .annotation-text'))
        .filter(t => t.textContent.trim() && t.getBoundingClientRect().width > 0)
        .map(t => [t.textContent.slice(0, 60), ...box(t)]);
    return {toolbar: bar ? box(bar) : null, figure: box(el.querySelector('.main-svg')), texts: texts};
}"""
# the text boxes inside each option of the open drop-down: [text, its width, the width it needs]
OPTIONS = """() => Array.from(document.querySelectorAll('[role=option]')).map(o => {
    const cut = Array.from(o.querySelectorAll('*')).concat([o]).map(e => e.scrollWidth - e.clientWidth);
    return [o.textContent, Math.max(...cut)];
})"""


def _overlap(a, b) -> bool:
    return a[0] < b[2] - 1 and b[0] < a[2] - 1 and a[1] < b[3] - 1 and b[1] < a[3] - 1


def _check_charts(app, page: str) -> int:
    """Every chart on the page, collapsed sections opened: its toolbar (shown: the pointer on the chart) clear
    of every text, and its title within the figure. Returns how many charts were checked."""
    collapsed = app.page.locator(f"{MAIN} [data-testid=stExpander] details:not([open]) > summary")
    for _ in range(collapsed.count()):  # a collapsed section's charts too (the Head view's Links and Why here?):
        collapsed.first.click()  # each click (a rerun that fills the box) leaves one fewer collapsed
    charts = app.charts()
    shown = app.wait_until(lambda: all(charts.nth(i).is_visible() for i in range(charts.count())), True)
    assert shown, f"{page}: a chart stays hidden"
    for i in range(charts.count()):
        chart = charts.nth(i)
        chart.scroll_into_view_if_needed()
        chart.hover(position={"x": 5, "y": 5})
        boxes = chart.evaluate(BOXES)
        assert boxes["toolbar"] is not None, f"{page}, chart {i}: no toolbar"
        covered = [t[0] for t in boxes["texts"] if _overlap(boxes["toolbar"], t[1:])]
        assert not covered, f"{page}, chart {i}: the toolbar covers {covered}"
        left, _, right, _ = boxes["figure"]
        cut = [t[0] for t in boxes["texts"] if t[0] and (t[1] < left - 1 or t[3] > right + 1)]
        assert not cut, f"{page}, chart {i} ({left:.0f}–{right:.0f} px): cut {cut}"
    return charts.count()


def test_the_toolbar_covers_no_title_or_label_and_no_title_is_cut(shared_app):
    app = shared_app
    app.page.set_viewport_size(LAPTOP)
    if not app.model_title().startswith("all-MiniLM"):
        app.choose_model("minilm")
    checked = 0
    for page in ("Model view", "Head view", "Head metrics"):
        app.goto(page)
        checked += _check_charts(app, page)
    app.choose_model("toy-induction")
    app.goto("Heads behind a prediction")
    app.choose("Preset", prediction.INDUCTION.name, scope=MAIN)
    app.click(app.page.locator(MAIN).get_by_role("button", name="Find the heads", exact=True))
    app.page.locator(MAIN).get_by_text("value-weighted", exact=False).first.wait_for(timeout=300_000)
    app.wait_idle()
    titles = [app.chart_title(i) for i in range(app.charts().count())]
    assert any("value-weighted" in t for t in titles), titles  # the chart in half of the page is drawn
    checked += _check_charts(app, "Heads behind a prediction")
    assert checked >= 8


def test_the_model_picker_shows_every_title_whole(shared_app):
    app = shared_app
    app.page.set_viewport_size(LAPTOP)
    picker = app.page.locator('[data-testid=stSidebar] input[role=combobox][aria-label="Model"]')
    app.wait_idle()
    picker.click()
    if not app.page.locator("[role=option]").count():
        picker.press("ArrowDown")  # opens the list when the click only focused the box
    app.page.locator("[role=option]").first.wait_for()
    options = app.page.evaluate(OPTIONS)
    app.page.keyboard.press("Escape")
    assert len(options) >= 4, options
    cut = [text for text, overflow in options if overflow > 0]
    assert not cut, f"options cut in the sidebar's picker: {cut}"
