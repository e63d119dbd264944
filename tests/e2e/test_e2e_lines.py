"""The line view in a real browser: a click on a token marker focuses it, and the lines the chart
draws (read from the plotly div's layout shapes and from their SVG paths) change to that token's
lines."""

from __future__ import annotations

import pytest

from mha_viz.features.lines import figures as line_figures

pytestmark = pytest.mark.e2e

TEXT = "Dogs chase cats in the park."

# lines drawn by the chart: the figure's own count (data) and the segments of its SVG paths
DRAWN = """el => {
    const gd = el.querySelector('.js-plotly-plot');
    const data = ((gd.layout || {}).shapes || []).filter(s => s.type === 'path')
        .reduce((s, p) => s + Number(p.name.split(' ')[2]), 0);
    const svg = Array.from(gd.querySelectorAll('g.shapelayer path'))
        .reduce((s, p) => s + ((p.getAttribute('d') || '').match(/M/g) || []).length, 0);
    return [data, svg];
}"""
# lines of one head (the shapes of its legend group)
HEAD_LINES = """(el, group) => {
    const gd = el.querySelector('.js-plotly-plot');
    return (gd.layout.shapes || []).filter(s => s.legendgroup === group)
        .reduce((s, p) => s + Number(p.name.split(' ')[2]), 0);
}"""
# the screen position of the point (x, y) of the chart (a token marker: x = its column, y = its row)
MARKER = """(el, [x, y]) => {
    const gd = el.querySelector('.js-plotly-plot');
    const fl = gd._fullLayout, box = gd.getBoundingClientRect();
    return [box.left + fl._size.l + fl.xaxis.l2p(x), box.top + fl._size.t + fl.yaxis.l2p(y)];
}"""


def test_clicking_a_token_keeps_only_its_lines(shared_app):
    app = shared_app
    if not app.model_title().startswith("all-MiniLM"):
        app.choose_model("minilm")
    app.set_text(TEXT)
    app.goto("Line view")
    assert app.heading() == "Line view"
    chart = app.charts().first
    chart.scroll_into_view_if_needed()
    before = chart.evaluate(DRAWN)
    assert before[0] > 0 and before[1] == before[0], before  # every line is one SVG segment

    x, y = chart.evaluate(MARKER, [line_figures.X_KEY, 3])  # key token 3
    app.rerun(lambda: app.page.mouse.click(x, y))
    focused = app.wait_until(lambda: app.charts().first.evaluate(DRAWN)[0] < before[0], True)
    assert focused, "a click on a key token did not change the lines drawn"
    after = app.charts().first.evaluate(DRAWN)
    assert 0 < after[0] < before[0] and after[1] == after[0], (before, after)
    assert "to key 3" in app.chart_title()
    assert app.page.locator("[data-testid=stMain] input[role=combobox][aria-label*='Focus token']"
                            ).input_value().startswith("3:")
    app.click(app.page.get_by_role("button", name="Clear focus"))
    assert app.wait_until(lambda: app.charts().first.evaluate(DRAWN)[0], before[0]) == before[0]

    # a click on head 0's legend entry hides its lines, in the browser alone
    head0 = app.charts().first.evaluate(HEAD_LINES, "H0")
    assert 0 < head0 < before[0]
    app.charts().first.locator("g.legend g.traces").first.click()
    hidden = app.wait_until(lambda: app.charts().first.evaluate(DRAWN)[1], before[0] - head0)
    assert hidden == before[0] - head0, (before, head0, hidden)
    app.assert_clean()
