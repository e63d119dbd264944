"""Heads found from two tokens in a real browser (issue 54): on Token focus, a click on the cell of "animal"
in the row of "it" ranks every head by that weight, a click on the first bar opens that head on the Head
view; and Token focus's axes, as Chromium draws them at 1280 and 1366 wide, label every head and every
token of the sentence, no two labels of an axis meeting."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.model]
TEXT = "The animal didn't cross the street because it was too tired."
# each tick label of a chart's axes as drawn: [axis class (xtick, x2tick, ytick…), text, left, top, right, bottom]
TICK_BOXES = """el => Array.from(el.querySelectorAll('.cartesianlayer g[class$="tick"] > text')).filter(
    t => t.textContent.trim()).map(t => { const r = t.getBoundingClientRect();
        return [t.parentNode.getAttribute('class'), t.textContent, r.left, r.top, r.right, r.bottom]; })"""
# the screen position of the middle of bar `index` of a horizontal bar chart
BAR_MIDDLE = """(el, index) => {
    const gd = el.querySelector('.js-plotly-plot'), fl = gd._fullLayout, box = gd.getBoundingClientRect();
    const t = gd._fullData[0];
    return [box.left + fl._size.l + fl.xaxis.l2p(t.x[index] / 2),
            box.top + fl._size.t + fl.yaxis.l2p(fl.yaxis.d2l(t.y[index]))];
}"""


def _ticks(chart) -> dict[str, list]:
    """Each axis's tick labels as drawn: {axis class: [(text, box), …]}."""
    out: dict[str, list] = {}
    for axis, text, *box in chart.evaluate(TICK_BOXES):
        out.setdefault(axis, []).append((text.split("\u200b", 1)[0], box))
    return out


def _apart(labels: list, along: int) -> list[str]:
    """The labels that meet the next one along the axis (`along`: 0 for x, by where each ends at its tick,
    its box's right edge: labels turned 60° overlap as rectangles, and a line of 12-px text needs 14 px across
    them; 1 for y, by their boxes)."""
    found = []
    if along == 1:
        ordered = sorted(labels, key=lambda item: item[1][1])
        found = [f"{a!r} meets {b!r}" for (a, p), (b, q) in zip(ordered, ordered[1:]) if q[1] < p[3] - 1]
    else:
        ends = sorted((box[2], text) for text, box in labels)
        found = [f"{a!r} and {b!r} {x2 - x1:.1f} px apart" for (x1, a), (x2, b) in zip(ends, ends[1:])
                 if x2 - x1 < 14]
    return found


def test_it_to_animal_in_one_click_and_every_label_on_the_axes(shared_app):
    app = shared_app
    if not app.model_title().startswith("all-MiniLM"):
        app.choose_model("minilm")
    app.set_text(TEXT)
    tokens = ["[CLS]", "the", "animal", "didn", "'", "t", "cross", "the", "street", "because", "it", "was", "too",
              "tired", ".", "[SEP]"]
    heads = [f"L{layer} H{h}" for layer in range(6) for h in range(12)]
    for width in (1280, 1366):
        app.page.set_viewport_size({"width": width, "height": 800})
        app.goto("Token focus")
        grid = app.titled("Every head: what token")
        if width == 1280:
            app.choose("Token in focus (query)", "10: it")
            _switch_on(app, "Summaries")
            grid = app.titled("Every head: what token 10 (it)")
        grid.scroll_into_view_if_needed()
        drawn = _ticks(grid)
        assert [t for t, _ in sorted(drawn["ytick"], key=lambda item: item[1][1])] == heads
        assert [t for t, _ in sorted(drawn["xtick"], key=lambda item: item[1][0])] == tokens
        assert not _apart(drawn["ytick"], 1) + _apart(drawn["xtick"], 0), width
        summary = app.titled("Summaries: what token 10")
        summary.scroll_into_view_if_needed()
        for axis, labels in _ticks(summary).items():
            if axis.startswith("x"):
                assert sorted(t for t, _ in labels) == sorted(tokens), (width, axis)
            assert not _apart(labels, 0 if axis.startswith("x") else 1), (width, axis)
    # one click on the cell of "animal" in the row of L3 H1: the heads ranked by it → animal
    grid = app.titled("Every head: what token 10 (it)")
    grid.scroll_into_view_if_needed()
    x, y = app.point(grid, (3 * 12 + 1) * len(tokens) + 2)
    app.rerun(lambda: app.page.mouse.click(x, y))
    assert app.wait_until(lambda: app.titled("Heads where 10: it looks at 2: animal") is not None, True, timeout_s=60)
    assert app.chart_title(0).startswith("Heads where 10: it looks at 2: animal")  # above the grids
    bars = app.charts().nth(0)
    assert app.ticks("y", 0)[:2] == ["L3 H1", "L5 H11"]
    bars.scroll_into_view_if_needed()
    x, y = bars.evaluate(BAR_MIDDLE, 1)  # the second bar: L5 H11
    app.rerun(lambda: app.page.mouse.click(x, y))
    assert app.wait_until(lambda: app.heading(), "Head view", timeout_s=60) == "Head view"
    assert app.wait_until(lambda: app.chart_title(0).startswith("Layer 5, head 11"), True), app.chart_title(0)
    app.assert_clean()


def _switch_on(app, label: str) -> None:
    switch = app.page.locator(f"[data-testid=stMain] input[role=switch][aria-label={label!r}]")
    if not switch.is_checked():
        app.click(app.page.locator("[data-testid=stMain] [data-testid=stCheckbox] label").filter(
            has=app.page.locator(f"input[role=switch][aria-label={label!r}]")))
