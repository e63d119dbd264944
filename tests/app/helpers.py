"""Helpers for the AppTest tier: build and start the app, open one of its pages, read its
charts and tables. Page switching goes through `open_page` only, so a change in how the app
registers its pages is a change here."""

from __future__ import annotations

import functools
import json

import plotly.io as pio
from streamlit.components.v2 import manifest_scanner
from streamlit.testing.v1 import AppTest

from mha_viz.drawing import style as figure_style
from mha_viz.features.generate import controls as generate_keys
from mha_viz.ui.kit import charts as app_charts
from mha_viz.ui.kit import keys
from tests.helpers import HEADINGS, ROOT, decode, shown

__all__ = ["APP", "AppTest", "PAGE_IDS", "app_page_ids", "app_test", "chart_title", "chart_titles", "charts",
           "export_box", "frame", "heatmap_tokens", "lesson_panel", "open_page", "open_with_text", "share_box", "shown",
           "open_box", "start_app", "titled"]

APP = str(ROOT / "app.py")
TIMEOUT = 240  # seconds an AppTest run may take (the first one loads a model)
PAGE_IDS = tuple(HEADINGS)  # the pages' ids, in the order of HEADINGS (tests/helpers.py)

# Each AppTest's first run scans every installed distribution for Streamlit components (Streamlit 1.67's
# AppTest._run: BidiComponentManager.discover_and_register_components): 0.17 s on this environment's 118
# packages, and about 50 s of the app tier's CPU (py-spy, stop 80). What is installed does not change while the
# tests run: the scan is made once a process, its result handed to every AppTest.
if not hasattr(manifest_scanner.scan_component_manifests, "cache_info"):
    manifest_scanner.scan_component_manifests = functools.cache(manifest_scanner.scan_component_manifests)


def app_page_ids() -> list[str]:
    """The ids of the pages the app registers (`mha_viz.ui.shell.navigation.PAGES`), in its order."""
    from mha_viz.ui.shell import navigation as pages
    return [p.id for p in pages.PAGES]


def app_test() -> AppTest:
    """The app under AppTest, not yet run."""
    return AppTest.from_file(APP, default_timeout=TIMEOUT)


def start_app() -> AppTest:
    """The app after its first run (the model view), which raised nothing."""
    at = app_test()
    at.run()
    assert not at.exception, at.exception
    return at


def open_page(at: AppTest, page_id: str) -> AppTest:
    """Switch to the page `page_id` (one of PAGE_IDS) and run it; returns `at`."""
    assert page_id in PAGE_IDS, page_id
    at.session_state[keys.GOTO] = page_id  # as a view asks for a page (shared_head.open_head)
    at.run()
    assert at.title and at.title[0].value == HEADINGS[page_id], (page_id, [t.value for t in at.title])
    return at


def open_box(at: AppTest, key: str, open_: bool = True) -> AppTest:
    """Open (or close) the box of expander key `key` (`ui.boxes.lazy_box`: its content is built only while open),
    as a click on its label does, and run; returns `at`."""
    at.session_state[key] = open_
    at.run()
    assert not at.exception, at.exception
    return at


def export_box(at: AppTest, open_: bool = True) -> AppTest:
    """The sidebar's Export box opened (or closed): `open_box`."""
    return open_box(at, keys.EXPORT_OPEN, open_)


def lesson_panel(at: AppTest) -> AppTest:
    """The sidebar's Lesson panel opened: `open_box`."""
    return open_box(at, keys.LESSON_OPEN)


def share_box(at: AppTest) -> AppTest:
    """The sidebar's Share box opened: `open_box`."""
    return open_box(at, keys.SHARE_OPEN)


def open_with_text(page_id: str, text: str, model: str | None = None) -> AppTest:
    """Start the app, pick `model` (if given), type `text`, open `page_id`: no exception, no error."""
    at = start_app()
    if model:
        at.selectbox(key="model_choice").set_value(model).run()
    at.text_area(key="text").input(text).run()
    open_page(at, page_id)
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    return at


def charts(at: AppTest) -> list[dict]:
    """The plotly figures on the page, as dicts with arrays decoded."""
    return [decode(json.loads(c.proto.spec)) for c in at.get("plotly_chart")]


@functools.cache
def _dropped_entries() -> dict[str, list[dict]]:
    """The trace types' entries of Streamlit's Plotly template that the app's own (`charts.TEMPLATE`) drops."""
    return {kind: entries for kind, entries in pio.templates["streamlit"].to_plotly_json()["data"].items()
            if kind not in app_charts.KEPT}


def left_to_the_template(spec: dict) -> list[str]:
    """What a chart leaves to a part of Streamlit's Plotly template that the app's own (`charts.TEMPLATE`) drops: each
    trace of a type whose entry was dropped must set every property that entry sets (a colour scale also through a
    colour axis that sets one). Named "title: type.property" for each property left unset."""
    dropped = _dropped_entries()
    layout = spec.get("layout", {})
    title = (layout.get("title") or {}).get("text", "?") if isinstance(layout.get("title"), dict) else "?"
    missing = []
    for trace in spec.get("data", []):
        kind = trace.get("type", "scatter")
        for entry in dropped.get(kind, []):
            for name in entry:
                axis = trace.get("coloraxis")
                through_axis = name == "colorscale" and axis and "colorscale" in layout.get(axis, {})
                if name != "type" and name not in trace and not through_axis:
                    missing.append(f"{title}: {kind}.{name}")
    return missing


def heatmap_tokens(at: AppTest) -> list[str]:
    """The token labels on the x axis of the page's first heatmap."""
    spec = next(s for s in charts(at) if s["data"][0]["type"] == "heatmap")
    return [figure_style.label_text(x) for x in spec["data"][0]["x"]]


def frame(at: AppTest, column: str):
    """The first table on the page with this column, a dataframe's or a static table's (neither carries a key)."""
    return next(d.value for d in [*at.dataframe, *at.table] if column in d.value.columns)


def chart_title(chart: dict) -> str:
    """A chart's title read as one line (a long one wraps with <br>: `mha_viz.drawing.style.wrap_title`)."""
    return chart["layout"].get("title", {}).get("text", "").replace("<br>", " ")


def titled(at: AppTest, start: str) -> dict:
    """The first chart whose title, read as one line, starts with `start`."""
    return next(c for c in charts(at) if chart_title(c).startswith(start))


def chart_titles(at: AppTest) -> list[str]:
    """Every chart's title, each read as one line, in page order."""
    return [chart_title(c) for c in charts(at)]


def on_generate(text: str, model: str = "toy-induction"):
    """The Generate page open on `model` with the sidebar's text `text`."""
    at = start_app()
    at.selectbox(key=keys.MODEL_CHOICE).set_value(model).run()
    at.text_area(key=keys.TEXT).input(text).run()
    open_page(at, "generate")
    assert not at.exception, at.exception
    return at


def run_generation(at, new_tokens: int = 3):
    """Press *Generate* for `new_tokens` new tokens."""
    at.number_input(key=generate_keys.GEN_MAX_NEW).set_value(new_tokens).run()
    at.button(key=generate_keys.GEN_GO).click().run()
    assert not at.exception, at.exception
    return at


def generation_figures(at) -> dict[str, dict]:
    """The step's four figures by kind: bars, heads (× context), matrix, lines."""
    specs = charts(at)
    bars = next(s for s in specs if s["data"][0]["type"] == "bar")
    heat = [s for s in specs if s["data"][0]["type"] == "heatmap"]
    heads = next(s for s in heat if str(s["data"][0]["y"][0]).startswith("H"))
    matrix = next(s for s in heat if s is not heads)
    lines = next(s for s in specs if s["data"][0]["type"] == "scatter")
    return {"bars": bars, "heads": heads, "matrix": matrix, "lines": lines}


def open_folder(folder: str, text: str, page: str | None = None) -> AppTest:
    """The app on the model in `folder` (the sidebar's *Other*: a user's folder) and `text`, on the Model view or
    `page`, with no error."""
    from mha_viz.ui.shell.sidebar import OTHER

    at = start_app()
    at.selectbox(key="model_choice").set_value(OTHER).run()
    at.text_input(key="model_other").input(folder).run()
    at.text_area(key="text").input(text).run()
    if page is not None:
        at.session_state[keys.GOTO] = page
        at.run()
    assert not at.exception and not at.error, (at.exception, [e.value for e in at.error])
    return at
