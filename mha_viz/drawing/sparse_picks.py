"""A sparse-attention layer's picks on a head heatmap (issue 89): an open square on each cell whose key the layer's
indexer kept for that query (DeepSeek-V3.2, GLM-5: `metrics.sparse_selection`). The picks are the layer's, shared by
its heads; a picked key may still get almost no weight, and every unpicked one gets none."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

PICK_COLOUR = "#E69F00"  # orange: apart from the heatmap's blues and greens
NAME = "key the indexer picked"
CAPTION = ("Orange squares: the keys this layer's indexer picked for each query (its softmax runs over those alone; "
           "the picks are the layer's, shared by its heads). Model facts says how much of the dense softmax they hold.")


def with_picks(fig: go.Figure, picked: np.ndarray) -> go.Figure:
    """A copy of `fig` (a `heads.head_heatmap` with every cell drawn, tokens on both axes) with the picks (m, m)
    bool of the tokens it shows marked (the page says what the marks are: CAPTION; the heatmap's colour bar keeps
    the right side)."""
    labels = np.asarray(fig.data[0].x)
    queries, keys = np.nonzero(picked)
    out = go.Figure(fig)
    size = max(4, min(18, 600 // max(len(labels), 1)))
    out.add_trace(go.Scatter(x=labels[keys], y=labels[queries], mode="markers", name=NAME, showlegend=False,
                             hoverinfo="skip", marker=dict(symbol="square-open", size=size, color=PICK_COLOUR,
                                                           line=dict(width=1.5, color=PICK_COLOUR))))
    return out


FOCUS_CAPTION = ("Orange squares: in each sparse layer, the positions its indexer picked for this focus (attends to: "
                 "the keys the token in focus kept; is attended by: the queries that kept it). The picks are the "
                 "layer's, shared by its heads.")
LINES_CAPTION = ("Orange rings: the keys this sparse layer's indexer picked for the query in focus (its softmax runs "
                 "over those alone, so its lines reach no other key).")


def with_focus_picks(fig: go.Figure, rows: dict[int, np.ndarray], heads: int) -> go.Figure:
    """A copy of a Token focus grid (a row a head, layer by layer; a column a position, every position drawn) with,
    in each layer of `rows` (the run's layer row -> bool (m,): the positions its indexer picked for the focus), an
    open square on those positions of every head of the layer."""
    xs, ys = np.asarray(fig.data[0].x), np.asarray(fig.data[0].y)
    x, y = [], []
    for layer, picked in rows.items():
        cols = np.flatnonzero(picked)
        for head in range(heads):
            x += list(xs[cols])
            y += [ys[layer * heads + head]] * len(cols)
    out = go.Figure(fig)
    if x:
        size = max(4, min(14, 600 // max(len(xs), 1)))
        out.add_trace(go.Scatter(x=x, y=y, mode="markers", name=NAME, showlegend=False, hoverinfo="skip",
                                 marker=dict(symbol="square-open", size=size, color=PICK_COLOUR,
                                             line=dict(width=1.5, color=PICK_COLOUR))))
    return out


def with_line_picks(fig: go.Figure, picked: np.ndarray) -> go.Figure:
    """A copy of a line view with a ring round each key marker whose position
    (the markers' `customdata` [side, position]) is in `picked` (bool over the text's positions)."""
    out = go.Figure(fig)
    for trace in list(out.data):
        if trace.name != "key tokens" or trace.customdata is None:
            continue
        at = [k for k, (_side, t) in enumerate(trace.customdata) if 0 <= int(t) < len(picked) and picked[int(t)]]
        out.add_trace(go.Scatter(x=[trace.x[k] for k in at], y=[trace.y[k] for k in at], mode="markers",
                                 name=NAME, showlegend=False, hoverinfo="skip",
                                 marker=dict(symbol="circle-open", size=16, color=PICK_COLOUR,
                                             line=dict(width=2, color=PICK_COLOUR))))
    return out
