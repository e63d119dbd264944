"""Charts a person can read, in Chromium at 1280 and 1366 wide (issue 54): on every chart of every
page, the boxes of its title, axis titles, tick labels and subplot titles (annotations) intersect
neither one another nor a plot area (tick labels of one axis among themselves are left to Plotly,
which turns them; an annotation may lie inside a plot, as a label on a bar does).

Every page is opened as a new user finds it, on MiniLM, then the states the issue found overlaps in:
*Why here?* (a cell of the Head view clicked) and the Queries and keys neuron view."""

from __future__ import annotations

import pytest

from tests.waiting import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.model]
MAIN = "[data-testid=stMain]"
WIDTHS = (1280, 1366)
HEIGHT = 800
# a chart's boxes in screen pixels, [left, top, right, bottom]: what each subplot draws (its traces,
# within its axes' domain: a heatmap of square cells leaves part of its domain empty), and each text with its
# kind (title, axis: an axis title, tick: a tick label with its axis, note: an annotation)
BOXES = """el => {
    const box = e => { const r = e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; };
    const shown = t => t.textContent.trim() && t.getBoundingClientRect().width > 0;
    const texts = (selector, kind) => Array.from(el.querySelectorAll(selector)).filter(shown).map(
        t => [typeof kind === 'function' ? kind(t) : kind, t.textContent.slice(0, 50), ...box(t)]);
    return {
        plots: Array.from(el.querySelectorAll('.cartesianlayer .overplot > g')).filter(
            g => g.getBoundingClientRect().width > 0).map(g => {  // what each subplot draws, within its domain
            const drawn = box(g), drag = el.querySelector('.draglayer > g.' + g.classList[0] + ' .nsewdrag');
            const domain = drag ? box(drag) : drawn;
            return [Math.max(drawn[0], domain[0]), Math.max(drawn[1], domain[1]),
                    Math.min(drawn[2], domain[2]), Math.min(drawn[3], domain[3])];
        }),
        texts: [].concat(
            texts('.infolayer > .g-gtitle text', 'title'),
            texts('.infolayer > g[class^="g-x"] text, .infolayer > g[class^="g-y"] text', 'axis'),
            texts('.cartesianlayer g[class$="tick"] > text', t => 'tick ' + t.parentNode.getAttribute('class')),
            texts('.infolayer .annotation-text', 'note')),
    };
}"""


def _overlap(a, b) -> bool:
    return a[0] < b[2] - 1 and b[0] < a[2] - 1 and a[1] < b[3] - 1 and b[1] < a[3] - 1


def _clashes(boxes: dict) -> list[str]:
    """Every pair of a chart's texts that should not meet and do, and every title, axis title or
    tick label over a plot area."""
    texts, found = boxes["texts"], []
    for i, (kind, text, *at) in enumerate(texts):
        if kind != "note":
            found += [f"{kind} {text!r} over plot {k}" for k, plot in enumerate(boxes["plots"]) if _overlap(at, plot)]
        for other_kind, other, *there in texts[i + 1:]:
            apart = kind == other_kind and kind.startswith("tick") or kind == other_kind == "note"
            if not apart and _overlap(at, there):
                found.append(f"{kind} {text!r} meets {other_kind} {other!r}")
    return found


# each chart: [its element's width, the width Plotly drew it at]; a chart that fills its element draws at its width
WIDTHS_PROBE = """() => Array.from(document.querySelectorAll('[data-testid=stMain] [data-testid=stPlotlyChart]')).map(
    el => { const svg = el.querySelector('svg.main-svg');
            return [el.getBoundingClientRect().width, svg ? svg.getBoundingClientRect().width : -1]; })"""
FRAMES = "() => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)))"


def _resize(app, width: int) -> None:
    """The window made `width` wide, then until every chart that filled its element's width has been drawn again
    at its element's new width (Plotly redraws on a resize, without a script run)."""
    before = app.page.evaluate(WIDTHS_PROBE)
    app.page.set_viewport_size({"width": width, "height": HEIGHT})

    def redrawn() -> bool:
        now = app.page.evaluate(WIDTHS_PROBE)
        return len(now) == len(before) and all(abs(old_el - old_svg) > 2 or abs(el - svg) <= 2
                                               for (old_el, old_svg), (el, svg) in zip(before, now))
    assert wait_until(redrawn, 60), f"not all charts drawn again at {width} wide: {app.page.evaluate(WIDTHS_PROBE)}"
    app.page.evaluate(FRAMES)
    app.wait_idle()


def _check(app, where: str) -> tuple[int, list[str]]:
    """(charts checked, clashes) of every chart on the page as drawn now."""
    charts, found = app.charts(), []
    for i in range(charts.count()):
        chart = charts.nth(i)
        chart.scroll_into_view_if_needed()
        found += [f"{where}, chart {i} ({app.chart_title(i)[:40]!r}): {c}" for c in _clashes(chart.evaluate(BOXES))]
    return charts.count(), found


def _both_widths(app, where: str, widths: list[int]) -> tuple[int, list[str]]:
    """(charts checked, clashes) of the page as drawn now at both `widths`: at the window's (the first), then
    with the window resized to the other; `widths` reversed, so the next page starts at the width this one ends."""
    checked, found = 0, []
    for k, width in enumerate(widths):
        if k:
            _resize(app, width)
        n, clashes = _check(app, f"{where} at {width}")
        checked, found = checked + n, found + clashes
    widths.reverse()
    return checked, found


def test_no_text_of_any_chart_meets_another_or_a_plot(shared_app):
    app = shared_app
    if not app.model_title().startswith("all-MiniLM"):
        app.choose_model("minilm")
    app.set_text("The animal didn't cross the street because it was too tired.")
    checked, found = 0, []
    app.page.set_viewport_size({"width": WIDTHS[0], "height": HEIGHT})
    widths = list(WIDTHS)
    for title in app.nav_titles():
        app.goto(title)
        n, clashes = _both_widths(app, title, widths)
        checked, found = checked + n, found + clashes
    assert checked >= 40, checked
    assert not found, "\n".join(found)


def _switch_on(app, label: str) -> None:
    switch = app.page.locator(f"{MAIN} input[role=switch][aria-label={label!r}]")
    if not switch.is_checked():  # its label takes the click
        app.click(app.page.locator(f"{MAIN} [data-testid=stCheckbox] label").filter(
            has=app.page.locator(f"input[role=switch][aria-label={label!r}]")))


def test_the_states_the_issue_found_overlaps_in_are_readable(shared_app):
    """Token focus with its summaries, every part of Teaching, and on SmolLM2 (whose *Why here?* bars
    name parts such as "L16 MLP") the Head view and Queries and keys."""
    app = shared_app
    if not app.model_title().startswith("all-MiniLM"):
        app.choose_model("minilm")
    app.set_text("The animal didn't cross the street because it was too tired.")
    checked, found = 0, []
    widths = list(WIDTHS)
    app.page.set_viewport_size({"width": widths[0], "height": HEIGHT})

    def check(where: str) -> None:
        nonlocal checked, found
        n, clashes = _both_widths(app, where, widths)
        checked, found = checked + n, found + clashes
    app.goto("Token focus")
    _switch_on(app, "Summaries")
    check("Token focus with summaries")
    app.goto("Teaching: step by step")
    parts = app.page.locator(f"{MAIN} [data-testid=stButtonGroup] button")
    for i in range(parts.count()):
        app.click(parts.nth(i))
        check(f"Teaching, part {i + 1}")
    app.choose_model("smollm2")
    app.set_text("When Mary and John went to the store, John gave a drink to")
    for title in ("Head view", "Queries and keys"):
        app.goto(title)
        check(f"{title} on SmolLM2")
    assert checked >= 20, checked
    assert not found, "\n".join(found)
