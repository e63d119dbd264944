"""Charts a person can read (issue 54): on a chart as Chromium draws it, the boxes of its title, axis titles,
tick labels and subplot titles (annotations) intersect neither one another nor a plot area, nor reach past the main
area's sides, and no grid of inputs scrolls a column out of sight (tick labels of one
axis among themselves are left to Plotly, which turns them; an annotation may lie inside a plot, as a label on
a bar does). `both_widths` checks every chart of the page shown, at 1280 and 1366 wide: test_e2e_app's walk
over every page calls it (on MiniLM every page and the states the issue found overlaps in, on SmolLM2 two
pages). `outside` says where an element lies outside the first minute's window (WINDOW: what must be in sight
without scrolling)."""

from __future__ import annotations

from mha_viz.features.ablation.controls import HEADS_GRID_PREFIX
from tests.waiting import wait_until

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


def overlap(a, b) -> bool:
    return a[0] < b[2] - 1 and b[0] < a[2] - 1 and a[1] < b[3] - 1 and b[1] < a[3] - 1


def clashes(boxes: dict) -> list[str]:
    """Every pair of a chart's texts that should not meet and do, and every title, axis title or
    tick label over a plot area."""
    texts, found = boxes["texts"], []
    for i, (kind, text, *at) in enumerate(texts):
        if kind != "note":
            found += [f"{kind} {text!r} over plot {k}" for k, plot in enumerate(boxes["plots"]) if overlap(at, plot)]
        for other_kind, other, *there in texts[i + 1:]:
            apart = kind == other_kind and kind.startswith("tick") or kind == other_kind == "note"
            if not apart and overlap(at, there):
                found.append(f"{kind} {text!r} meets {other_kind} {other!r}")
    return found


# each chart: [its element's width, the width Plotly drew it at]; a chart that fills its element draws at its width
WIDTHS_PROBE = """() => Array.from(document.querySelectorAll('[data-testid=stMain] [data-testid=stPlotlyChart]')).map(
    el => { const svg = el.querySelector('svg.main-svg');
            return [el.getBoundingClientRect().width, svg ? svg.getBoundingClientRect().width : -1]; })"""
FRAMES = "() => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)))"


def resize(app, width: int) -> None:
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


# each table and grid of the main area (Streamlit's data frames and editors): [left, right, the width of what it
# holds, the width it shows, whether it is a grid of inputs]. A table of results may scroll its columns (a head
# table has 30 and more); a grid of inputs (the app's one data editor: Switch heads off's) may not: a column
# scrolled out of sight is a head that cannot be switched
EDITORS = (HEADS_GRID_PREFIX,)
TABLES_PROBE = """editors => Array.from(document.querySelectorAll('[data-testid=stMain] [data-testid=stDataFrame]'))
    .map(el => { const r = el.getBoundingClientRect(), s = el.querySelector('.dvn-scroller');
                 const keyed = (el.closest('[class*="st-key-"]') || {className: ''}).className.toString();
                 return [r.left, r.right, s ? s.scrollWidth : 0, s ? s.clientWidth : 0,
                         editors.some(k => keyed.includes('st-key-' + k))]; })"""


def outside_main(boxes: dict, main: dict) -> list[str]:
    """The plot areas and texts of a chart that reach past the main area's sides (cut off where it ends)."""
    left, right = main["x"] - 1, main["x"] + main["width"] + 1
    found = [f"plot {k} reaches x = {b[0]:.0f}…{b[2]:.0f}" for k, b in enumerate(boxes["plots"])
             if b[0] < left or b[2] > right]
    return found + [f"{kind} {text!r} reaches x = {at[0]:.0f}…{at[2]:.0f}" for kind, text, *at in boxes["texts"]
                    if at[0] < left or at[2] > right]


def check(app, where: str) -> tuple[int, list[str]]:
    """(charts checked, clashes) of every chart on the page as drawn now; a chart's part or a table past the main
    area's sides, or a grid of inputs whose columns scroll out of sight, is one too (issue 90: the Switch heads off
    grid lost its H11 column at 1366 wide)."""
    charts, found = app.charts(), []
    main = app.page.locator(MAIN).bounding_box()
    for i in range(charts.count()):
        chart = charts.nth(i)
        chart.scroll_into_view_if_needed()
        boxes = chart.evaluate(BOXES)
        found += [f"{where}, chart {i} ({app.chart_title(i)[:40]!r}): {c}"
                  for c in clashes(boxes) + outside_main(boxes, main)]
    for k, (left, right, holds, shows, inputs) in enumerate(app.page.evaluate(TABLES_PROBE, list(EDITORS))):
        if left < main["x"] - 1 or right > main["x"] + main["width"] + 1 or inputs and holds > shows + 1:
            found.append(f"{where}, table {k}: x = {left:.0f}…{right:.0f} in a main area to "
                         f"{main['x'] + main['width']:.0f}, {holds} px of columns in {shows} px")
    return charts.count(), found


def both_widths(app, where: str, widths: list[int]) -> tuple[int, list[str]]:
    """(charts checked, clashes) of the page as drawn now at both `widths`: at the window's (the first), then
    with the window resized to the other; `widths` reversed, so the next page starts at the width this one ends."""
    checked, found = 0, []
    for k, width in enumerate(widths):
        if k:
            resize(app, width)
        n, seen = check(app, f"{where} at {width}")
        checked, found = checked + n, found + seen
    widths.reverse()
    return checked, found


WINDOW = {"width": 1366, "height": 768}  # the first minute's window (issue 54): what must be in sight without scrolling


def outside(locator) -> str:
    """'' when the element lies wholly inside the window, else where it is."""
    box = locator.bounding_box()
    if box is None:
        return "not drawn"
    inside = (0 <= box["x"] and box["x"] + box["width"] <= WINDOW["width"]
              and 0 <= box["y"] and box["y"] + box["height"] <= WINDOW["height"])
    return "" if inside else f"at x={box['x']:.0f}, y={box['y']:.0f} ({box['width']:.0f} × {box['height']:.0f})"
