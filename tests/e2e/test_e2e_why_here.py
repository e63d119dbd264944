"""The Head view's *Why here?* in a real browser: a click on a cell of the head's heatmap splits that cell's
score, and the terms chart names that query and that key."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.e2e

TEXT = "The cat sat on the mat because the cat was tired."
CELLS = "el => el.querySelector('.js-plotly-plot')._fullData[0].x.length"


def test_a_click_on_a_cell_splits_its_score(shared_app):
    app = shared_app
    if not app.model_title().startswith("all-MiniLM"):
        app.choose_model("minilm")
    app.set_text(TEXT)
    app.goto("Head view")
    assert app.heading() == "Head view"
    heat = app.charts().nth(0)
    heat.scroll_into_view_if_needed()
    n = heat.evaluate(CELLS)
    query, key = 6, 2  # "mat" and "cat" ([CLS] first)
    x, y = app.point(heat, query * n + key)  # the cell markers, query-major: i · n + j
    app.rerun(lambda: app.page.mouse.click(x, y))
    found = app.wait_until(lambda: any(f"query {query} " in app.chart_title(c) and f"key {key} " in app.chart_title(c)
                                       for c in range(1, app.charts().count())), True, timeout_s=60)
    assert found, [app.chart_title(c) for c in range(app.charts().count())]
    body = app.page.locator("section.main, [data-testid='stMain']").first.inner_text()
    assert "relative error" in body and "Σ terms" in " ".join(app.chart_title(c) for c in range(app.charts().count()))
    app.assert_clean()


def test_a_click_on_a_composition_cell_opens_both_heads(shared_app):
    """Head composition on toy-induction: a click on a cell of the K-composition heatmap opens Compare heads
    with the two heads of that cell (Chromium hands the point's data as Plotly.js does, not as a list)."""
    app = shared_app
    app.choose_model("toy-induction")
    app.set_text("q w e r t y u i q w e r t y u i")
    app.goto("Head composition")
    assert app.heading() == "Head composition"
    app.click(app.page.get_by_text("K: into its keys", exact=True))
    heat = app.charts().nth(0)
    heat.scroll_into_view_if_needed()
    pair = heat.evaluate("el => { const t = el.querySelector('.js-plotly-plot')._fullData[1]; "
                         "return [t.y[0], t.x[0]]; }")  # the strongest shown cell: earlier head, later head
    x, y = app.point(heat, 0)
    app.rerun(lambda: app.page.mouse.click(x, y))
    assert app.wait_until(lambda: app.heading(), "Compare heads", timeout_s=60) == "Compare heads", app.heading()
    want = [f"Layer {label[1:].split('H')[0]}, head {label.split('H')[1]}" for label in pair]

    def titles():
        return [app.chart_title(c) for c in range(min(2, app.charts().count()))]
    assert app.wait_until(lambda: [any(w in t for t in titles()) for w in want], [True, True]), (titles(), want)
    app.choose_model("minilm")
    app.assert_clean()
