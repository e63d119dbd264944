"""Every head on any two measures: a scatter of a head table (`mha_viz.head_table`, or a corpus' table of
means), one measure on x, another on y and a third (or the layer, or the pattern class) as the colour.
One point a head, in the table's order (layer-major), so that a click's or a lasso's point indices name the
heads (`picked_heads`). Plain functions over the table; nothing here knows Streamlit.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from mha_viz.drawing.style import PATTERN_COLOURS, colorbar, margin, plot_title
from mha_viz.metrics.measures import METRICS

LAYER, PATTERN = "layer", "pattern"  # colours that are not a measure
DEFAULT_X, DEFAULT_Y = "entropy", "prev_token_score"  # the axes a page opens on
COLOURS = (LAYER, PATTERN, *METRICS)  # every colour a table can offer (`measures_of` says which measures it has)


def measures_of(table: pd.DataFrame) -> list[str]:
    """The head measures `table` holds a value of (a column of `metrics.METRICS` not wholly NaN), in the
    catalogue's order: what the scatter's axes and colour can show."""
    return [c for c in METRICS if c in table.columns and not table[c].isna().all()]


def _label(column: str) -> str:
    return METRICS[column].label if column in METRICS else column


def _check(table: pd.DataFrame, x: str, y: str, colour: str) -> None:
    shown = measures_of(table)
    for axis, column in (("x", x), ("y", y)):
        if column not in shown:
            raise ValueError(f"{column!r} is not a measure of this table ({axis}); choose from {', '.join(shown)}")
    if colour not in shown + [LAYER] + ([PATTERN] if PATTERN in table.columns else []):
        raise ValueError(f"{colour!r} cannot colour the heads; choose {LAYER!r}, {PATTERN!r} or a measure")


def measure_scatter(table: pd.DataFrame, x: str, y: str, colour: str = LAYER, *, about: str = "") -> go.Figure:
    """Every head of `table` (one row per layer and head) at (`x`, `y`), two of its measures, coloured by
    `colour`: a third measure (a colour bar), LAYER (the model's layer number) or PATTERN (the head's class,
    the legend of `style.PATTERN_COLOURS`). Hover names the layer, the head and the three values. A head
    without a value of x or y (NaN) is left out of the drawing but keeps its point index. about: what the values
    are, after the title (e.g. "means over 300 documents"). ValueError for a column the table does not hold."""
    _check(table, x, y, colour)
    layers, heads = table["layer"].to_numpy(dtype=int), table["head"].to_numpy(dtype=int)
    xs, ys = table[x].to_numpy(dtype=np.float64), table[y].to_numpy(dtype=np.float64)
    kinds = (table[PATTERN].astype(str).str.split(":").str[0].to_numpy() if PATTERN in table.columns
             else np.array(["?"] * len(table)))
    if colour == PATTERN:
        marker = dict(size=9, color=[PATTERN_COLOURS.get(k, "#000000") for k in kinds])
        third = table[PATTERN].astype(str).to_numpy()
    else:
        values = layers if colour == LAYER else table[colour].to_numpy(dtype=np.float64)
        marker = dict(size=9, color=values, colorscale="Viridis", showscale=True, colorbar=colorbar(_label(colour)))
        third = np.array([f"{v:.4g}" for v in values])
    hover = [f"layer {layer}, head {h}<br>{_label(x)}: {a:.4g}<br>{_label(y)}: {b:.4g}"
             + ("" if colour == LAYER else f"<br>{_label(colour)}: {c}")
             for layer, h, a, b, c in zip(layers, heads, xs, ys, third)]
    traces = [go.Scatter(x=xs, y=ys, mode="markers", marker=marker, text=hover, showlegend=False,
                         hovertemplate="%{text}<extra>click to open</extra>")]
    if colour == PATTERN:  # legend entries only, after the data trace
        traces += [go.Scatter(x=[None], y=[None], mode="markers", name=kind, marker=dict(size=9, color=shade))
                   for kind, shade in PATTERN_COLOURS.items() if kind in kinds]
    return go.Figure(traces, layout=dict(  # the layout given whole (docs/architecture.md, *Adding a figure*)
        title=plot_title(f"Every head: {_label(y)} against {_label(x)}, coloured by {_label(colour)}"
                         + (f" ({about})" if about else "")),
        xaxis=dict(title=dict(text=_label(x)), zeroline=False), yaxis=dict(title=dict(text=_label(y)), zeroline=False),
        width=760, height=560, margin=margin()))


def picked_heads(points: list[dict]) -> list[int]:
    """The table rows (layer-major head indices) of the points a click, a box or a lasso picked on
    `measure_scatter`'s data trace (the legend's traces are not heads), in order, each once."""
    rows = []
    for p in points or []:
        if p.get("curve_number", 0) != 0:
            continue
        idx = p.get("point_index", p.get("pointIndex", p.get("point_number")))
        if idx is not None and int(idx) not in rows:
            rows.append(int(idx))
    return rows
