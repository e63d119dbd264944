"""Every chart of the app goes through `show`: `st.plotly_chart` with Plotly's camera button set to
the download format and size the user picked in the sidebar (*Export*). The download happens in
the browser (Plotly renders the PNG or SVG itself): no server work, no internet."""

from __future__ import annotations

import logging
from typing import Callable, Hashable, TypeVar

import plotly.graph_objects as go
import plotly.io as pio
import streamlit as st

from mha_viz.drawing import margins
from mha_viz.drawing import style as figure_style
from mha_viz.ui.kit import keys, session

log = logging.getLogger("mha_viz.ui")
T = TypeVar("T")

# Streamlit makes its Plotly template the default, and every figure carries it: 3.7 KB of colour placeholders that
# the browser swaps for the theme's (its `theme="streamlit"` styles the fonts, axes and background itself). The app's
# figures are built on a template of only the placeholders they use: the colour way (traces without a colour of
# their own), the layout's colour scales (markers coloured by value) and the scatter markers' line. Each trace type
# whose own template entry is left out names its colours itself (a heatmap its colour scale or colour axis), or is
# not drawn by the app (tests/app/test_app_defaults.py checks every chart of every page). A student's steps cost the
# server 2-5 % less CPU (benchmarks/student_cpu.py, docs/speed.md), and each chart is 2.3 KB smaller; the charts of
# five pages were the same to the pixel in Chromium.
TEMPLATE = "mha_viz"
KEPT = ("scatter",)  # the trace types whose entry of Streamlit's template is kept
if "streamlit" in pio.templates:  # registered when Streamlit's Plotly element is imported (by `import streamlit`)
    _theirs = pio.templates["streamlit"]
    pio.templates[TEMPLATE] = go.layout.Template(
        layout=dict(colorway=_theirs.layout.colorway, colorscale=_theirs.layout.colorscale),
        data={kind: getattr(_theirs.data, kind) for kind in KEPT})
    pio.templates.default = TEMPLATE


def config(name: str) -> dict:
    """The Plotly config of a chart called `name` (its download file name, with the model's)."""
    run = getattr(session.get(keys.CURRENT), "run", None)
    model = run.model_name.rsplit("/", 1)[-1] if run is not None else ""
    return figure_style.download_config(session.get(keys.EXPORT_FORMAT, "png"),
                                        session.get(keys.EXPORT_SIZE, ""),
                                        f"{model}-{name}" if model else name)


def show(fig, *, key: str | None = None, where=None, name: str | None = None, **kwargs):
    """Draw `fig` in `where` (default: the main area) with the download settings; `name` names
    the downloaded file (default: the chart's key). Returns what st.plotly_chart returns."""
    settings = config(name or key or "chart")
    modes = kwargs.get("selection_mode") or ()
    tools = {SELECT_TOOLS[m] for m in ((modes,) if isinstance(modes, str) else modes) if m in SELECT_TOOLS}
    if tools:  # a chart that selects by box or lasso keeps those buttons
        settings["modeBarButtonsToRemove"] = [b for b in settings["modeBarButtonsToRemove"] if b not in tools]
    return (where or st).plotly_chart(fitted(fig), key=key, config=settings, **kwargs)


FITTED = "_mha_viz_fitted"  # the attribute a figure whose margins hold its parts (`margins.fit`) carries


def fitted(fig):
    """`fig` with margins that hold its labels, titles, colour bars and legend (`margins.fit`: the browser draws it
    once, not twice). A figure made for this run is changed in place; a cached one (shared by every session) was
    fitted once when it was made, and is left alone."""
    if not isinstance(fig, go.Figure) or getattr(fig, FITTED, False):
        return fig
    margins.fit(fig)
    setattr(fig, FITTED, True)  # Plotly's figures take attributes whose names start with "_"
    return fig


SELECT_TOOLS = {"box": "select2d", "lasso": "lasso2d"}  # Plotly's toolbar button of each selection mode


FIGURES_KEPT = 128  # figures the server keeps (shared by every session; a figure is read-only once made)


@st.cache_resource(show_spinner=False, max_entries=FIGURES_KEPT)
def _cached_figure(name: str, key, _build: Callable[[], go.Figure]) -> go.Figure:
    return fitted(_build())  # once, before any session shares it


def cached(name: str, key: Hashable, build: Callable[[], go.Figure]) -> go.Figure:
    """The figure `build()` makes, made once per server for (`name`, `key`) and shared by every
    session: `key` must name everything the figure is drawn from (an AnalysisKey, the layer, the
    head, the options), and nobody may change the figure afterwards (`show` does not: Streamlit
    serialises a copy). A second visit to a page then costs the figure's JSON, not its making."""
    return _cached_figure(name, key, build)


def clicked(widget_key: str, read: Callable[[list], T | None]) -> T | None:
    """What a click on the chart drawn under `widget_key` picked (call it from its on_select
    callback): `read(points)` of its selection event's points ([] when nothing is selected), or
    None when the event cannot be read (logged, never a traceback)."""
    try:
        event = session.get(widget_key) or {}
        return read((event.get("selection") or {}).get("points") or [])
    except Exception:  # noqa: BLE001 - a click that cannot be read is ignored, not a traceback
        log.exception("could not read the selection of %s", widget_key)
        return None
