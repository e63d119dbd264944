"""Figures of the teaching view and of head ablation: a labelled matrix of any shape, a
softmax row, the query-head → KV-head drawing of grouped-query attention, and a pruning
curve. Plain functions over arrays; nothing here knows Streamlit."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from .figure_style import COLORSCALE, DIVERGING, axis_labels, colorbar, margin, plot_title, symmetric_bound

MAX_COLUMNS = 48  # wider matrices (d_model 384, 576…) show their first columns and say so


def matrix(values: np.ndarray, rows: list[str], *, title: str, columns: list[str] | None = None,
           probabilities: bool = False, highlight: tuple[int, int] | None = None) -> go.Figure:
    """Any (r, c) matrix with labelled rows (tokens). Probabilities use 0..1 and the sequential
    scale; other values a diverging scale centred on 0; -inf (masked) cells are left blank.
    Past MAX_COLUMNS columns only the first ones are drawn (the title says how many).
    highlight: (start, stop) columns framed (one head's block of the concatenation)."""
    v = np.asarray(values, dtype=np.float64)
    r, c = v.shape
    shown = min(c, MAX_COLUMNS)
    cols = axis_labels(columns[:shown]) if columns is not None else [str(j) for j in range(shown)]
    part = np.where(np.isneginf(v[:, :shown]), np.nan, v[:, :shown])
    labels = axis_labels(rows)
    if probabilities:
        extra = dict(zmin=0.0, zmax=1.0, colorscale=COLORSCALE)
    else:
        bound = symmetric_bound(part)
        extra = dict(zmin=-bound, zmax=bound, colorscale=DIVERGING)
    fig = go.Figure(go.Heatmap(z=part, x=cols, y=labels, colorbar=colorbar(thickness=10), **extra,
                               hovertemplate="%{y} · %{x}: %{z:.4f}<extra></extra>"))
    if highlight is not None and highlight[0] < shown:
        stop = min(highlight[1], shown) - 0.5
        fig.add_shape(type="rect", x0=highlight[0] - 0.5, x1=stop, y0=-0.5, y1=r - 0.5,
                      line=dict(color="black", width=2))
    more = f" (first {shown} of {c} columns)" if shown < c else ""
    fig.update_layout(title=plot_title(title + more), height=int(min(520, max(220, 18 * r + 110))),
                      margin=margin(),
                      xaxis=dict(type="category", side="bottom", tickangle=-60, showticklabels=len(cols) <= 64),
                      yaxis=dict(type="category", autorange="reversed"))
    return fig


def softmax_row(scores: np.ndarray, probs: np.ndarray, keys: list[str], *, title: str) -> go.Figure:
    """One query's scaled scores (bars, left axis) and the probabilities softmax makes of them."""
    labels = axis_labels(keys)
    s = np.where(np.isneginf(scores), np.nan, scores)
    fig = go.Figure()
    fig.add_trace(go.Bar(x=labels, y=s, name="scaled score q·k/√d_k", marker_color="#9ecae1", yaxis="y"))
    fig.add_trace(go.Scatter(x=labels, y=probs, name="softmax probability", mode="lines+markers",
                             marker=dict(color="#08306b"), yaxis="y2"))
    fig.update_layout(title=plot_title(title), height=320, margin=margin(),
                      xaxis=dict(type="category", tickangle=-60),
                      yaxis=dict(title=dict(text="score")),
                      yaxis2=dict(title=dict(text="probability"), overlaying="y", side="right", range=[0, 1]),
                      legend=dict(orientation="h", y=-0.35))
    return fig


def kv_sharing(num_heads: int, num_kv_heads: int, *, highlight: int | None = None) -> go.Figure:
    """Query heads (top row) joined to the key/value head they read (bottom row): query head i
    reads KV head i // (H / G)."""
    group = num_heads // num_kv_heads
    qx = np.arange(num_heads, dtype=float)
    kx = np.array([(g * group + (group - 1) / 2) for g in range(num_kv_heads)])
    fig = go.Figure()
    for i in range(num_heads):
        g = i // group
        on = highlight is not None and (i == highlight or g == highlight // group)
        fig.add_trace(go.Scatter(x=[qx[i], kx[g]], y=[1, 0], mode="lines", hoverinfo="skip", showlegend=False,
                                 line=dict(color="#08306b" if on else "#bdbdbd", width=3 if on else 1.5)))
    fig.add_trace(go.Scatter(x=qx, y=np.ones(num_heads), mode="markers+text", text=[f"Q{i}" for i in range(num_heads)],
                             textposition="top center", marker=dict(size=22, color="#6baed6"), showlegend=False,
                             hovertemplate="query head %{text}<extra></extra>"))
    fig.add_trace(go.Scatter(x=kx, y=np.zeros(num_kv_heads), mode="markers+text",
                             text=[f"K/V{g}" for g in range(num_kv_heads)], textposition="bottom center",
                             marker=dict(size=26, color="#fd8d3c", symbol="square"), showlegend=False,
                             hovertemplate="key/value head %{text}<extra></extra>"))
    fig.update_layout(title=plot_title(f"{num_heads} query heads share {num_kv_heads} key/value heads "
                                   f"({group} per group)"), height=260, margin=margin(b=30),
                      xaxis=dict(visible=False, range=[-1, num_heads]), yaxis=dict(visible=False, range=[-0.6, 1.6]),
                      plot_bgcolor="white")
    return fig


def pruning_figure(fractions, by_importance, random_mean, random_std, *, loss_label: str) -> go.Figure:
    """Loss against the fraction of heads switched off, in importance order and in random order
    (mean ± one standard deviation over seeds)."""
    f = np.asarray(fractions) * 100
    mean, std = np.asarray(random_mean), np.asarray(random_std)
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=np.r_[f, f[::-1]], y=np.r_[mean + std, (mean - std)[::-1]], fill="toself",
                             fillcolor="rgba(150,150,150,0.25)", line=dict(width=0), hoverinfo="skip",
                             name="random order ± 1 sd"))
    fig.add_trace(go.Scatter(x=f, y=mean, mode="lines+markers", name="random order (mean)", line=dict(color="#737373")))
    fig.add_trace(go.Scatter(x=f, y=by_importance, mode="lines+markers", name="least important first",
                             line=dict(color="#2171b5")))
    fig.update_layout(title=plot_title("Pruning heads"), height=380, margin=margin(),
                      xaxis=dict(title=dict(text="heads switched off (%)")),
                      yaxis=dict(title=dict(text=loss_label)), legend=dict(orientation="h", y=-0.25))
    return fig
