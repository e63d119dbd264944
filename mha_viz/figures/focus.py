"""Figures of token focus (`focus`): every head's row (or column) for one token as one row of a
heatmap, layers separated by lines, and the summaries over heads and over layers.

Plain functions from a `focus.Focus` to a `go.Figure`; nothing here knows Streamlit.
"""

from __future__ import annotations

import html

import numpy as np
import plotly.graph_objects as go

from mha_viz.figures.style import (
    COLORSCALE,
    NOTE_ROW_PX,
    PLOT_WIDTH_PX,
    TICK_CHAR_PX,
    axis_labels,
    colorbar,
    margin,
    plot_title,
    run_title,
    scale_top,
    title_room,
    top_title,
)
from mha_viz.views.focus import TO, Focus, Summary

MAX_TICK_LABELS = 160  # above this many positions, the token axis is unlabelled (hover still names them)


def head_row_labels(layer_ids: list[int], num_heads: int) -> list[str]:
    """'L3 H5' for every (layer row, head), layer by layer: the grid's row labels."""
    return [f"L{layer} H{h}" for layer in layer_ids for h in range(num_heads)]


def _what(f: Focus, direction: str) -> str:
    unit = "word" if f.words else "token"
    name = f"{unit} {f.index} ({html.escape(f.labels[f.index], quote=False)})"  # titles render HTML
    return f"what {name} attends to" if direction == TO else f"what attends to {name}"


def focus_grid(f: Focus, direction: str, layer_ids: list[int], *, rescale: bool = False,
               what: str | None = None, x_title: str | None = None) -> go.Figure:
    """Layers × heads rows of bars as one heatmap: row (layer, head) is that head's attention
    from the focused position over every position (or to it from every position); lines
    separate the layers; the focused position is framed. `what` and `x_title` (cross-attention,
    whose focused token is on the other side: nothing framed) replace the title's subject and
    the x axis's title."""
    v = f.values(direction)
    layers, heads, m = v.shape
    z = v.reshape(layers * heads, m)
    xs = axis_labels(f.labels)
    ys = head_row_labels(layer_ids, heads)
    hover = ("%{y}: " + ("→ %{x}" if direction == TO else "%{x} →") + " %{z:.3f}<extra></extra>")
    fig = go.Figure(go.Heatmap(z=z, x=xs, y=ys, zmin=0.0, zmax=scale_top(z, rescale), colorscale=COLORSCALE,
                               colorbar=colorbar("weight"), hovertemplate=hover,
                               xgap=1 if m <= 48 else 0, ygap=0))
    # every shape in one list: add_shape re-validates all earlier shapes on each call
    shapes = [_line(-0.5, m - 0.5, b * heads - 0.5, b * heads - 0.5) for b in range(1, layers)]
    if what is None:
        shapes.append(dict(type="rect", x0=f.index - 0.5, x1=f.index + 0.5, y0=-0.5, y1=layers * heads - 0.5,
                           line=dict(color="#d62728", width=1)))
    key_side = "key" if direction == TO else "query"
    fig.update_layout(
        title=plot_title(run_title(
            f, f"Every head: {what or _what(f, direction)}" + (" (rescaled to max)" if rescale else ""))),
        xaxis=dict(title=dict(text=x_title or f"{key_side} {'word' if f.words else 'token'}"), type="category",
                   tickangle=-60, showticklabels=m <= MAX_TICK_LABELS),
        yaxis=dict(title=dict(text="layer, head"), type="category", autorange="reversed",
                   showticklabels=layers * heads <= 120),
        height=int(min(1400, max(320, 12 * layers * heads + 160))), margin=margin(), shapes=shapes,
    )
    return fig


def _line(x0: float, x1: float, y0: float, y1: float) -> dict:
    """A thin black line in data coordinates (a boundary between layers)."""
    return dict(type="line", x0=x0, x1=x1, y0=y0, y1=y1, line=dict(color="black", width=1))


SUMMARY_PANELS = ("mean over heads", "max over heads", "mean over layers", "max over layers")
COLUMN_GAP_PX = 80  # between the two columns of panels: the right column's row labels (L23, H11) and a gap


def focus_summary(f: Focus, direction: str, s: Summary, layer_ids: list[int]) -> go.Figure:
    """Mean and max over heads (one row per layer) and over layers (one row per head): four
    heatmaps on a 2 × 2 grid of axes, rows as tall as their number of rows."""
    xs = axis_labels(f.labels)
    layers, heads = s.head_max.shape
    layer_labels = [f"L{layer}" for layer in layer_ids]
    head_labels = [f"H{h}" for h in range(heads)]
    panels = (s.mean_over_heads, s.max_over_heads, s.mean_over_layers, s.max_over_layers)
    m = len(xs)
    labelled = m <= MAX_TICK_LABELS // 2
    title = run_title(f, f"Summaries: {_what(f, direction)}")
    height, top_px = int(min(1100, max(420, 14 * (layers + heads) + 300))), title_room(title, NOTE_ROW_PX)
    # the gaps in pixels, as fractions of the plotting area: between the rows, the top row's token labels
    # (turned 60°: sin 60° of their length) and the bottom row's titles; between the columns, row labels
    under = (0.87 * TICK_CHAR_PX * max(map(len, f.labels), default=0) + 14) if labelled else 0
    v_gap = min(0.45, (under + NOTE_ROW_PX + 8) / max(1, height - top_px - margin()["t"] - 10))
    h_gap = min(0.25, COLUMN_GAP_PX / PLOT_WIDTH_PX)
    # the axes' domains (what make_subplots would compute, at a fraction of its cost)
    width = (1 - h_gap) / 2
    top = (1 - v_gap) * layers / (layers + heads)
    cols = ([0.0, width], [1 - width, 1.0])
    rows = ([1 - top, 1.0], [0.0, 1 - v_gap - top])
    traces, axes, titles = [], {}, []
    for k, (z, name) in enumerate(zip(panels, SUMMARY_PANELS)):
        row, col = divmod(k, 2)
        suffix = "" if k == 0 else str(k + 1)
        traces.append(go.Heatmap(z=z, x=xs, y=layer_labels if row == 0 else head_labels, xaxis=f"x{suffix}",
                                 yaxis=f"y{suffix}", zmin=0.0, zmax=1.0, colorscale=COLORSCALE,
                                 colorbar=colorbar("weight"), showscale=k == 0,
                                 hovertemplate="%{y}, %{x}: %{z:.3f}<extra></extra>"))
        axes[f"xaxis{suffix}"] = dict(domain=cols[col], anchor=f"y{suffix}", type="category", tickangle=-60,
                                      showticklabels=labelled)
        axes[f"yaxis{suffix}"] = dict(domain=rows[row], anchor=f"x{suffix}", type="category",
                                      autorange="reversed")
        titles.append(dict(text=name, x=sum(cols[col]) / 2, y=rows[row][1], xref="paper", yref="paper",
                           xanchor="center", yanchor="bottom", showarrow=False, font=dict(size=13)))
    fig = go.Figure(traces)
    fig.update_layout(title=top_title(title), margin=margin(t=top_px), height=height, annotations=titles, **axes)
    return fig


def head_max_map(s: Summary, layer_ids: list[int], direction: str) -> go.Figure:
    """Layers × heads: each head's largest weight in this direction (excluding the token itself),
    the strongest head marked."""
    layers, heads = s.head_max.shape
    z = np.where(np.isfinite(s.head_max), s.head_max, 0.0)
    fig = go.Figure(go.Heatmap(z=z, x=[f"H{h}" for h in range(heads)], y=[f"L{layer}" for layer in layer_ids],
                               zmin=0.0, zmax=1.0, colorscale=COLORSCALE, colorbar=colorbar("max"),
                               hovertemplate="%{y} %{x}: %{z:.3f}<extra></extra>", xgap=1, ygap=1))
    top = dict(type="rect", x0=s.top_head - 0.5, x1=s.top_head + 0.5, y0=s.top_layer - 0.5,
               y1=s.top_layer + 0.5, line=dict(color="#d62728", width=2))
    fig.update_layout(shapes=[top], title=plot_title(f"Largest weight per head ({direction})"),
                      margin=margin(),
                      xaxis=dict(type="category"), yaxis=dict(type="category", autorange="reversed"),
                      height=int(min(700, max(260, 22 * layers + 120))))
    return fig
