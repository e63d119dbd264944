"""Every head on two measures (Head metrics) in a real browser: a click on a head opens it in the head view, and
a lasso drawn around every head picks them; its button opens the first six side by side on Compare heads."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.e2e

TEXT = "The keys to the old cabinet are missing. They were here."
XY = "el => { const t = el.querySelector('.js-plotly-plot')._fullData[0]; return [t.x, t.y]; }"
PLOT_AREA = """el => {
    const gd = el.querySelector('.js-plotly-plot');
    const fl = gd._fullLayout, box = gd.getBoundingClientRect();
    return [box.left + fl._size.l, box.top + fl._size.t, fl._size.w, fl._size.h];
}"""


def _scatter(app):
    app.wait_until(lambda: app.titled("Every head:") is not None, True, timeout_s=60)
    chart = app.titled("Every head:")
    chart.scroll_into_view_if_needed()
    return chart


def _titles(app) -> list[str]:
    return [app.chart_title(c) for c in range(app.charts().count())]


def test_a_click_opens_the_head_and_a_lasso_compares_heads(shared_app):
    app = shared_app
    if not app.model_title().startswith("all-MiniLM"):
        app.choose_model("minilm")
    app.set_text(TEXT)
    app.goto("Head metrics")
    chart = _scatter(app)
    xs, ys = chart.evaluate(XY)
    span_x, span_y = max(xs) - min(xs), max(ys) - min(ys)

    def room(i):  # how far the nearest other head is, in units of the axes' spans
        return min(((xs[i] - xs[j]) / span_x) ** 2 + ((ys[i] - ys[j]) / span_y) ** 2 for j in range(len(xs)) if j != i)
    far = max(range(len(xs)), key=room)  # the loneliest head: a click there hits it alone
    layer, head = divmod(far, 12)
    x, y = app.point(chart, far, curve=0)
    app.rerun(lambda: app.page.mouse.click(x, y))
    assert app.wait_until(lambda: app.heading(), "Head view", timeout_s=60) == "Head view", app.heading()
    want = f"Layer {layer}, head {head}"
    assert app.wait_until(lambda: any(want in t for t in _titles(app)), True, timeout_s=60), (_titles(app), want)

    app.goto("Head metrics")
    chart = _scatter(app)
    left, top, width, height = chart.evaluate(PLOT_AREA)
    corners = [(left + 2, top + 2), (left + width - 2, top + 2), (left + width - 2, top + height - 2),
               (left + 2, top + height - 2), (left + 2, top + 2)]

    def lasso():  # Lasso Select, then a path around the whole plot area: every head
        chart.hover()
        chart.locator(".modebar-btn[data-title='Lasso Select']").click()
        app.page.mouse.move(*corners[0])
        app.page.mouse.down()
        for corner in corners[1:]:
            app.page.mouse.move(*corner, steps=8)
        app.page.mouse.up()
    app.rerun(lasso)
    button = app.page.get_by_role("button", name="Compare the first 6 of these heads")
    main = app.page.locator("[data-testid=stMain]")
    assert app.wait_until(lambda: button.count(), 1, timeout_s=60) == 1, main.inner_text()
    app.rerun(lambda: button.click())
    assert app.wait_until(lambda: app.heading(), "Compare heads", timeout_s=60) == "Compare heads", app.heading()
    wanted = [f"Layer 0, head {h}" for h in range(6)]  # the first six points: layer 0's heads 0 … 5
    assert app.wait_until(lambda: [any(w in t for t in _titles(app)) for w in wanted], [True] * 6,
                          timeout_s=60), _titles(app)
    app.assert_clean()
