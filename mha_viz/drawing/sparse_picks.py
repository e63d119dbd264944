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
