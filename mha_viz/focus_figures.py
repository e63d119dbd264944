"""Figures of token focus (`focus`): every head's row (or column) for one token as one row of a
heatmap, layers separated by lines, and the summaries over heads and over layers.

Plain functions from a `focus.Focus` to a `go.Figure`; nothing here knows Streamlit.
"""

from __future__ import annotations

import html

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .figure_style import COLORSCALE, axis_labels, colorbar, margin, plot_title, scale_top
from .focus import TO, Focus, Summary

MAX_TICK_LABELS = 160  # above this many positions, the token axis is unlabelled (hover still names them)


def head_row_labels(layer_ids: list[int], num_heads: int) -> list[str]:
    """'L3 H5' for every (layer row, head), layer by layer: the grid's row labels."""
    return [f"L{layer} H{h}" for layer in layer_ids for h in range(num_heads)]


def _what(f: Focus, direction: str) -> str:
    unit = "word" if f.words else "token"
    name = f"{unit} {f.index} ({html.escape(f.labels[f.index], quote=False)})"  # titles render HTML
    return f"what {name} attends to" if direction == TO else f"what attends to {name}"


def focus_grid(f: Focus, direction: str, layer_ids: list[int], *, rescale: bool = False) -> go.Figure:
    """Layers × heads rows of bars as one heatmap: row (layer, head) is that head's attention
    from the focused position over every position (or to it from every position); lines
    separate the layers; the focused position is framed."""
    v = f.values(direction)
    layers, heads, m = v.shape
    z = v.reshape(layers * heads, m)
    xs = axis_labels(f.labels)
    ys = head_row_labels(layer_ids, heads)
    hover = ("%{y}: " + ("→ %{x}" if direction == TO else "%{x} →") + " %{z:.3f}<extra></extra>")
    fig = go.Figure(go.Heatmap(z=z, x=xs, y=ys, zmin=0.0, zmax=scale_top(z, rescale), colorscale=COLORSCALE,
                               colorbar=colorbar("weight"), hovertemplate=hover,
                               xgap=1 if m <= 48 else 0, ygap=0))
    for layer in range(1, layers):
        fig.add_shape(type="line", x0=-0.5, x1=m - 0.5, y0=layer * heads - 0.5, y1=layer * heads - 0.5,
                      line=dict(color="black", width=1))
    fig.add_shape(type="rect", x0=f.index - 0.5, x1=f.index + 0.5, y0=-0.5, y1=layers * heads - 0.5,
                  line=dict(color="#d62728", width=1))
    key_side = "key" if direction == TO else "query"
    fig.update_layout(
        title=plot_title(f"Every head: {_what(f, direction)}" + (" (rescaled to max)" if rescale else "")),
        xaxis=dict(title=dict(text=f"{key_side} {'word' if f.words else 'token'}"), type="category",
                   tickangle=-60, showticklabels=m <= MAX_TICK_LABELS),
        yaxis=dict(title=dict(text="layer, head"), type="category", autorange="reversed",
                   showticklabels=layers * heads <= 120),
        height=int(min(1400, max(320, 12 * layers * heads + 160))), margin=margin(),
    )
    return fig


def focus_summary(f: Focus, direction: str, s: Summary, layer_ids: list[int]) -> go.Figure:
    """Mean and max over heads (one row per layer) and over layers (one row per head)."""
    xs = axis_labels(f.labels)
    layers, heads = s.head_max.shape
    fig = make_subplots(rows=2, cols=2, vertical_spacing=0.18, horizontal_spacing=0.08,
                        row_heights=[layers, heads],
                        subplot_titles=("mean over heads", "max over heads",
                                        "mean over layers", "max over layers"))
    layer_labels = [f"L{layer}" for layer in layer_ids]
    head_labels = [f"H{h}" for h in range(heads)]
    panels = ((s.mean_over_heads, layer_labels, 1, 1), (s.max_over_heads, layer_labels, 1, 2),
              (s.mean_over_layers, head_labels, 2, 1), (s.max_over_layers, head_labels, 2, 2))
    for z, ys, row, col in panels:
        fig.add_trace(go.Heatmap(z=z, x=xs, y=ys, zmin=0.0, zmax=1.0, colorscale=COLORSCALE,
                                 colorbar=colorbar("weight"), showscale=row == 1 and col == 1,
                                 hovertemplate="%{y}, %{x}: %{z:.3f}<extra></extra>"), row=row, col=col)
    m = len(xs)
    fig.update_xaxes(type="category", tickangle=-60, showticklabels=m <= MAX_TICK_LABELS // 2)
    fig.update_yaxes(type="category", autorange="reversed")
    fig.update_layout(title=plot_title(f"Summaries: {_what(f, direction)}"), margin=margin(t=60),
                      height=int(min(1100, max(420, 14 * (layers + heads) + 300))))
    return fig


def head_max_map(s: Summary, layer_ids: list[int], direction: str) -> go.Figure:
    """Layers × heads: each head's largest weight in this direction (excluding the token itself),
    the strongest head marked."""
    layers, heads = s.head_max.shape
    z = np.where(np.isfinite(s.head_max), s.head_max, 0.0)
    fig = go.Figure(go.Heatmap(z=z, x=[f"H{h}" for h in range(heads)], y=[f"L{layer}" for layer in layer_ids],
                               zmin=0.0, zmax=1.0, colorscale=COLORSCALE, colorbar=colorbar("max"),
                               hovertemplate="%{y} %{x}: %{z:.3f}<extra></extra>", xgap=1, ygap=1))
    fig.add_shape(type="rect", x0=s.top_head - 0.5, x1=s.top_head + 0.5,
                  y0=s.top_layer - 0.5, y1=s.top_layer + 0.5,
                  line=dict(color="#d62728", width=2))
    fig.update_layout(title=plot_title(f"Largest weight per head ({direction})"), margin=margin(),
                      xaxis=dict(type="category"), yaxis=dict(type="category", autorange="reversed"),
                      height=int(min(700, max(260, 22 * layers + 120))))
    return fig
