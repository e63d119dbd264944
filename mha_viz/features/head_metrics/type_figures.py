"""The head types of a run as a layers × heads grid: each head's pattern class (`mha_viz.metrics.classify`,
the head table's `pattern` column) in one categorical colour a class, with a legend of the classes
present and each cell's hover naming its head and its full label ("diagonal:prev"). Nothing here
knows Streamlit."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from mha_viz.corpus.accumulate import pattern_class
from mha_viz.drawing.metrics import layer_numbers
from mha_viz.drawing.style import PATTERN_COLOURS, margin, more_lines_px, run_title, top_title
from mha_viz.metrics.head_stats import head_table

TITLE = "Head types: each head's pattern class"
OTHER = "#7f7f7f"  # a class outside PATTERN_COLOURS (none today): grey, still named in the legend


def table_types(table: pd.DataFrame, run) -> go.Figure:
    """A run's head table (`mha_viz.metrics.head_table`) as its grid of head types, titled for the
    run (`run_title`: what the attentions hold when they are not the weights)."""
    return head_type_grid(table, run.layer_ids, title=run_title(run, TITLE))


def head_type_grid(patterns, layer_ids: list[int] | None = None, *,
                   title: str = TITLE) -> go.Figure:
    """The (layers, heads) pattern labels `patterns` (or a head table with layer, head and pattern
    columns, layer-major) as a grid of categorical colours, one a class (`PATTERN_COLOURS`), a
    legend entry for each class present. The heatmap's z is each class's index in the legend's
    order; one invisible marker a cell, layer-major (curve 1), carries the hover and makes a click
    select that head (`heads.grid_pick`), as on `metric_grid`. layer_ids: the model's layer number
    of each row (default 0, 1, …; a table's own layer column when `patterns` is one)."""
    if isinstance(patterns, pd.DataFrame):
        table = patterns.sort_values(["layer", "head"])
        L, H = table["layer"].nunique(), table["head"].nunique()
        layer_ids = layer_ids if layer_ids is not None else list(dict.fromkeys(int(x) for x in table["layer"]))
        labels = table["pattern"].astype(str).to_numpy().reshape(L, H)
    else:
        labels = np.asarray(patterns, dtype=object).astype(str)
        L, H = labels.shape
    names = layer_numbers(L if layer_ids is None else layer_ids)
    classes = np.vectorize(pattern_class, otypes=[object])(labels)
    present = [c for c in PATTERN_COLOURS if (classes == c).any()]
    present += sorted(set(classes.ravel()) - set(PATTERN_COLOURS))
    codes = np.vectorize(present.index, otypes=[float])(classes)
    k = len(present)
    colour = {c: PATTERN_COLOURS.get(c, OTHER) for c in present}
    scale = [[pos, colour[c]] for i, c in enumerate(present) for pos in (i / k, (i + 1) / k)]
    heads, layers = np.meshgrid(np.arange(H), np.arange(L))
    traces = [go.Heatmap(z=codes, x=list(range(H)), y=list(range(L)), zmin=-0.5, zmax=k - 0.5,
                         colorscale=scale, showscale=False, hoverinfo="skip", xgap=1, ygap=1), go.Scatter(
        x=heads.ravel(), y=layers.ravel(), mode="markers", showlegend=False,
        marker=dict(symbol="square", size=30, color="rgba(0,0,0,0)"),
        text=[f"layer {names[row]}, head {h}: {labels[row, h]}" for row, h in zip(layers.ravel(), heads.ravel())],
        customdata=classes.ravel(), hovertemplate="%{text}<extra>%{customdata} · click to open</extra>")]
    # the legend: one entry a class present, in PATTERN_COLOURS' order
    traces += [go.Scatter(x=[None], y=[None], mode="markers", name=c, hoverinfo="skip",
                          marker=dict(symbol="square", size=12, color=colour[c])) for c in present]
    return go.Figure(traces, layout=dict(  # the layout given whole (docs/architecture.md, *Adding a figure*)
        title=top_title(title),
        xaxis=dict(title=dict(text="head"), tickmode="linear", dtick=1, side="top", showgrid=False,
                   zeroline=False, range=[-0.5, H - 0.5]),
        yaxis=dict(title=dict(text="layer"), tickmode="array", tickvals=list(range(L)), ticktext=names,
                   range=[L - 0.5, -0.5], showgrid=False, zeroline=False),
        legend=dict(title=dict(text="type"), orientation="v", x=1.02, y=1, yanchor="top"),
        width=min(1240, 320 + 40 * H), height=min(1400, 150 + 34 * L) + more_lines_px(title),
        margin=margin(t=95 + more_lines_px(title)),  # a title's further lines above the top axis (`more_lines_px`)
        dragmode=False, plot_bgcolor="white"))


def head_types(run, *, table: pd.DataFrame | None = None, weights = None) -> go.Figure:
    """Every head's type, as the head metrics page draws it: a layers × heads grid of the pattern
    classes (`mha_viz.metrics.classify`: broad, diagonal, vertical, block, sink, mixed, heterogeneous),
    one colour a class with a legend, each cell's hover naming its full label ("diagonal:prev").
    table: `mha_viz.metrics.head_table(run)` when it is computed already; weights as `metric_grid`'s."""
    table = head_table(run, weights) if table is None else table
    return table_types(table, run)
