"""Every head on any two measures (the Head metrics and Corpus pages): a measure on x, one on y and a third
(or the layer, or the pattern class) as the colour, drawn by `drawing/scatter.measure_scatter`. A click on
a head opens it in the head view; a box or a lasso picks heads, and a button compares them (up to six) on
*Compare heads*. Only heads of layers the sidebar's run holds can open or be compared."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import streamlit as st

from mha_viz.drawing import scatter
from mha_viz.export import shared_controls
from mha_viz.metrics import METRICS
from mha_viz.ui.kit import charts, keys, session, shared_head

COMPARED_AT_MOST = 6  # Compare heads' own limit


@dataclass(frozen=True)
class ScatterKeys:
    """The widget and session keys of one page's scatter."""
    x: str
    y: str
    colour: str
    chart: str
    picked: str
    compare: str


def _name(column: str) -> str:
    return METRICS[column].label if column in METRICS else {scatter.LAYER: "layer",
                                                            scatter.PATTERN: "pattern class"}[column]


def _run_layers() -> list[int]:
    """The model layer numbers the sidebar's run holds, by row ([] before there is one)."""
    run = getattr(session.get(keys.CURRENT), "run", None)
    return [] if run is None else [int(layer) for layer in run.layer_ids]


def _labels(table: pd.DataFrame, rows: list[int]) -> list[str]:
    """'L{layer}H{head}' of table rows, as Compare heads names its heads."""
    return [f"L{int(table['layer'].iloc[r])}H{int(table['head'].iloc[r])}" for r in rows]


def _on_select(table: pd.DataFrame, names: ScatterKeys) -> None:
    """A click opens its head in the head view; a box or a lasso keeps the heads it picked."""
    rows = charts.clicked(names.chart, scatter.picked_heads)
    event = (session.get(names.chart) or {}).get("selection") or {}
    if rows is None:
        return
    if event.get("box") or event.get("lasso"):
        session.put(names.picked, _labels(table, rows))
        return
    session.put(names.picked, [])
    if len(rows) == 1:
        layer, head = int(table["layer"].iloc[rows[0]]), int(table["head"].iloc[rows[0]])
        held = _run_layers()
        if layer in held:
            shared_head.open_head(held.index(layer), head)


def _on_compare(labels: list[str]) -> None:
    session.put(shared_controls.COMPARE_HEADS, labels[:COMPARED_AT_MOST])
    session.put(keys.GOTO, "compare_heads")


def section(table: pd.DataFrame, names: ScatterKeys, *, about: str = "", record=None, cache_key=None) -> None:
    """The scatter of `table`'s heads (one row per layer and head; a run's head table or a corpus' means),
    with its three choices, under a subheader. about: what the values are (e.g. "means over 300 documents").
    record(scatter_x=…, scatter_y=…, scatter_colour=…): where the page's notebook keeps the choices. cache_key:
    what names the table (an AnalysisKey, a CorpusKey): the figure is then made once per server (`charts.cached`)."""
    measures = scatter.measures_of(table)
    if len(measures) < 2:
        return
    st.subheader("Every head on two measures")
    left, middle, right = st.columns(3)
    for key, first, fallback in ((names.x, scatter.DEFAULT_X, measures[0]), (names.y, scatter.DEFAULT_Y, measures[1])):
        if session.get(key) not in measures:  # a model whose table lacks the last choice: the default
            session.put(key, first if first in measures else fallback)
    x = left.selectbox("x", measures, key=names.x, persist_state=keys.KEEP, format_func=_name)
    y = middle.selectbox("y", measures, key=names.y, persist_state=keys.KEEP, format_func=_name)
    colours = [scatter.LAYER] + ([scatter.PATTERN] if scatter.PATTERN in table.columns else []) + measures
    if session.get(names.colour) not in colours:
        session.put(names.colour, scatter.LAYER)
    colour = right.selectbox("Colour", colours, key=names.colour, persist_state=keys.KEEP, format_func=_name)
    if record is not None:
        record(scatter_x=x, scatter_y=y, scatter_colour=colour)
    build = lambda: scatter.measure_scatter(table, x, y, colour, about=about)  # noqa: E731
    fig = build() if cache_key is None else charts.cached("head_scatter", (cache_key, names.chart, x, y, colour), build)
    charts.show(fig, key=names.chart, name=f"heads-{x}-{y}", on_select=lambda: _on_select(table, names),
                selection_mode=("points", "box", "lasso"))
    held = set(_run_layers())  # heads of this table, in layers the run holds
    here = {label for label, layer in zip(_labels(table, list(range(len(table)))), table["layer"]) if layer in held}
    picked = [label for label in session.get(names.picked) or [] if label in here]
    st.caption("Click a head to open it in the head view. To compare heads, pick *Box Select* or *Lasso Select* "
               "above the chart and draw around them (double-click clears the selection)."
               + (f" Picked: {', '.join(picked)}." if picked else ""))
    if len(picked) >= 2:
        more = len(picked) > COMPARED_AT_MOST
        st.button(f"Compare {'the first ' if more else ''}{min(len(picked), COMPARED_AT_MOST)} of these heads"
                  if more else f"Compare these {len(picked)} heads", key=names.compare, icon=":material/compare:",
                  on_click=_on_compare, args=(picked,),
                  help=f"Opens them side by side on *Compare heads* (at most {COMPARED_AT_MOST}).")
