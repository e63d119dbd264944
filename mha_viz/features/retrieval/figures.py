"""The figures of retrieval heads (`mha_viz.tasks.find_retrieval`): every head's score as a layers × heads grid
(a click opens the head), and where one head looked as the model wrote the first needle token it copied: its
attention over the whole prompt, the needle shaded, its heaviest key marked, and the needle's tokens with their
weights below."""

from __future__ import annotations

import html

import numpy as np
import plotly.graph_objects as go

from mha_viz.drawing.metrics import metric_grid
from mha_viz.drawing.style import axis_labels, margin, plot_title

NEEDLE_FILL = "rgba(0, 114, 178, 0.15)"


def retrieval_grid(result, layer_ids: list[int] | None = None, title: str | None = None) -> go.Figure:
    """Every head's retrieval score (`mha_viz.tasks.find_retrieval`'s result, or `retrieval_scores`' table: layer,
    head, score, layer-major) as a layers × heads grid on 0 … 1: the share of the needle's tokens each head copied.
    layer_ids: the model's layer number of each row (`model.layer_ids`; default 0, 1, …)."""
    table = getattr(result, "table", result)
    title = title or "Retrieval score of every head"
    L, H = int(table["layer"].max()) + 1, int(table["head"].max()) + 1
    score = np.full((L, H), np.nan)
    score[table["layer"].to_numpy(int), table["head"].to_numpy(int)] = table["score"].to_numpy(float)
    hover = np.full((L, H), "(the share of the needle's tokens this head copied)")
    fig = metric_grid(score, title=html.escape(title, quote=False), patterns=hover, layer_ids=layer_ids)
    fig.update_layout(height=max(300, fig.layout.height or 0))  # a two-layer model's grid still readable
    fig.update_traces(zmin=0.0, zmax=max(1e-9, float(np.nanmax(score))) if np.isfinite(score).any() else 1.0,
                      selector=dict(type="heatmap"))
    return fig


EDGE = 0.1  # of the axis: a label of a point this near an end is written inward (centred, half of it was cut off)


def label_side(x: int, n: int) -> str:
    """Where a point's label goes at position x of 0 … n − 1: above it, to the right near the start, to the left near
    the end (issue 90: "<|im_start|>" at position 0 was cut at the plot's left edge)."""
    if x < EDGE * n:
        return "top right"
    return "top left" if x > (1 - EDGE) * n else "top center"


def look_figure(look, layer: int, head: int, title: str) -> go.Figure:
    """Head (`layer` index, `head`) of `look` (`tasks.retrieval.Look`): its attention over every prompt position
    at the step that copied `look.copied`, the needle's span shaded, its heaviest key marked (the y axis leaves
    room for its label)."""
    row = np.asarray(look.rows[layer, head], dtype=np.float64)
    start, stop = look.needle
    top = int(np.argmax(row))
    labels = axis_labels(look.tokens)
    fig = go.Figure(go.Scatter(x=np.arange(len(row)), y=row, mode="lines", line=dict(width=1, color="#555555"),
                               customdata=labels, name="attention", showlegend=False,
                               hovertemplate="position %{x} · %{customdata}: %{y:.3f}<extra></extra>"))
    fig.add_vrect(x0=start - 0.5, x1=stop - 0.5, fillcolor=NEEDLE_FILL, line_width=0, layer="below")
    inside = row[start:stop].sum()
    fig.add_trace(go.Scatter(x=[top], y=[row[top]], mode="markers+text", text=[labels[top]],
                             textposition=label_side(top, len(row)),
                             marker=dict(size=9, color="#D55E00"), name="heaviest key", showlegend=False,
                             hovertemplate=f"heaviest key: position {top} · {html.escape(labels[top])}"
                                           ": %{y:.3f}<extra></extra>"))
    fig.update_layout(title=plot_title(f"{title}: {inside:.0%} of its attention on the needle"),
                      xaxis=dict(title=f"prompt position (the needle shaded: {start}–{stop - 1})",
                                 range=[-0.5, len(row) - 0.5]),
                      yaxis=dict(title="attention", range=[0, 1.2 * max(float(row.max()), 1e-6)]), height=360,
                      margin=margin(l=60, b=50))
    return fig


def needle_look(result, layer: int, head: int) -> go.Figure:
    """Where one head (`layer`: its row of the run, `head`) looked as the model wrote the first needle token it
    copied in the last trial of `mha_viz.tasks.find_retrieval`'s result: its attention over every prompt position,
    the needle shaded and its heaviest key marked."""
    look = result.look
    if look is None:
        raise ValueError("The model copied no token of the needle in the last trial: there is no step to draw.")
    return look_figure(look, layer, head, f"Layer {layer}, head {head}")
