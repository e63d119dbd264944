"""Figures of one head's queries and keys: the neuron view (q_i, k_j, their product, the score,
the softmax row) and the query/key map (AttentionViz)."""

from __future__ import annotations

import html

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from mha_viz.drawing.style import (
    NOTE_ROW_PX,
    axis_labels,
    margin,
    plot_title,
    swatch_bars,
    title_room,
    top_title,
)
from mha_viz.views.qk import Neuron, QKMap, strongest_keys

Q_COLOR, K_COLOR, PICK_COLOR = "#2171b5", "#e6550d", "#d62728"
PLUS_COLOR, MINUS_COLOR, OTHER_KEYS_COLOR = "#31a354", "#756bb1", "#9ecae1"  # a term > 0, < 0; keys not picked
SHAPE_COLOR = "#888"  # the map's legend: a shape only (the points' colour is their position, on the colour bar)


def _tok(t: str) -> str:
    return html.escape(str(t), quote=False)


def neuron_figure(nv: Neuron) -> go.Figure:
    """Three panels: q_i and k_j as d_k bars side by side; q_i ⊙ k_j as bars (their sum is the
    score, annotated with ÷ √d_k); the softmax over query i's row, key j highlighted."""
    d_k = len(nv.q)
    dims = np.arange(d_k)
    rope = "after RoPE (rotary positions applied)" if nv.rope else "no RoPE in this model"
    i, j = nv.start + nv.i, nv.start + nv.j  # positions in the text
    title = (f"Layer {nv.layer} head {nv.head}: query {i} ({_tok(nv.tokens[nv.i])}) · key {j} "
             f"({_tok(nv.tokens[nv.j])}) — q, k {rope}")
    fig = make_subplots(rows=3, cols=1, vertical_spacing=0.17, subplot_titles=(  # room: ticks, axis title, next title
        f"q_i and k_j ({d_k} dimensions)",
        f"q_i ⊙ k_j: sum = score = {nv.score:.4g}; × {nv.scale:.4g} (÷ √d_k) = {nv.scaled:.4g}",
        f"softmax over row {i}: key {j} gets {nv.prob:.4g}"
        + (" (masked: a later token)" if nv.masked else "")))
    fig.add_trace(go.Bar(x=dims, y=nv.q, name=f"q_{nv.i}", marker_color=Q_COLOR,
                         hovertemplate="dim %{x}: q = %{y:.4g}<extra></extra>"), row=1, col=1)
    fig.add_trace(go.Bar(x=dims, y=nv.k, name=f"k_{nv.j}", marker_color=K_COLOR,
                         hovertemplate="dim %{x}: k = %{y:.4g}<extra></extra>"), row=1, col=1)
    colors = np.where(nv.product >= 0, PLUS_COLOR, MINUS_COLOR)
    fig.add_trace(go.Bar(x=dims, y=nv.product, name="q ⊙ k", marker_color=colors.tolist(), offsetgroup="product",
                         showlegend=False, hovertemplate="dim %{x}: q·k term = %{y:.4g}<extra></extra>"), row=2, col=1)
    for swatch in swatch_bars([("q ⊙ k > 0", PLUS_COLOR), ("q ⊙ k < 0", MINUS_COLOR)], "product"):
        fig.add_trace(swatch, row=2, col=1)
    n = len(nv.row_probs)
    labels = axis_labels(nv.tokens)
    bar_colors = [PICK_COLOR if t == nv.j else OTHER_KEYS_COLOR for t in range(n)]
    shown = np.where(np.isfinite(nv.row_scaled), nv.row_scaled, np.nan)
    fig.add_trace(go.Bar(x=labels, y=nv.row_probs, name="softmax", marker_color=bar_colors, offsetgroup="softmax",
                         showlegend=False, customdata=np.stack([np.arange(n), shown], axis=1),
                         hovertemplate="key %{customdata[0]} %{x}: scaled score %{customdata[1]:.4g}, "
                                       "probability %{y:.4g}<extra></extra>"), row=3, col=1)
    for swatch in swatch_bars([(f"key {j}", PICK_COLOR), ("the other keys", OTHER_KEYS_COLOR)], "softmax"):
        fig.add_trace(swatch, row=3, col=1)
    fig.update_xaxes(title_text="dimension", row=1, col=1)
    fig.update_xaxes(title_text="dimension", row=2, col=1)
    fig.update_xaxes(type="category", tickangle=-60, showticklabels=n <= 80, row=3, col=1)
    fig.update_yaxes(title_text="probability", range=[0, 1], row=3, col=1)
    fig.update_layout(title=top_title(title), barmode="group", height=820,
                      margin=margin(t=title_room(title, NOTE_ROW_PX)),
                      legend=dict(orientation="h", y=1.02, x=1, xanchor="right", yanchor="bottom"))
    return fig


def qk_map_figure(m: QKMap, tokens: list[str], *, probs: np.ndarray | None = None,
                  selected_query: int | None = None, top_k: int = 3) -> go.Figure:
    """Queries (circles) and keys (diamonds) in the 2-D map, coloured by position; hover shows
    the token. `selected_query` (needs `probs`, the head's (n, n) attention): that query is ringed
    and joined by lines to its `top_k` strongest keys, which are ringed too, line width ∝ weight.
    Trace 0 holds the queries (point index = position): a click on it selects that query."""
    nq, nk = len(m.queries), len(m.keys)
    labels = [_tok(t) for t in tokens]
    cmax = max(nq, nk, 2) - 1
    common = dict(mode="markers", marker=dict(colorscale="Viridis", cmin=0, cmax=cmax, size=10,
                                              line=dict(width=0.5, color="white")))
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=m.queries[:, 0], y=m.queries[:, 1], name="queries", **common,
                             customdata=np.stack([np.arange(nq), labels[:nq]], axis=1) if nq else None,
                             hovertemplate="query %{customdata[0]}: %{customdata[1]}<extra></extra>"))
    fig.data[0].marker.update(color=np.arange(nq), symbol="circle",
                              colorbar=dict(title=dict(text="position"), thickness=12))
    fig.add_trace(go.Scatter(x=m.keys[:, 0], y=m.keys[:, 1], name="keys", **common,
                             customdata=np.stack([np.arange(nk), labels[:nk]], axis=1) if nk else None,
                             hovertemplate="key %{customdata[0]}: %{customdata[1]}<extra></extra>"))
    fig.data[1].marker.update(color=np.arange(nk), symbol="diamond")
    if selected_query is not None and probs is not None and 0 <= selected_query < nq:
        a = selected_query
        row = np.asarray(probs)[a]
        best = strongest_keys(row, top_k)
        qx, qy = m.queries[a]
        for b in best:
            fig.add_trace(go.Scatter(
                x=[qx, m.keys[b, 0]], y=[qy, m.keys[b, 1]], mode="lines", showlegend=False,
                line=dict(color=PICK_COLOR, width=1 + 6 * float(row[b])), hoverinfo="skip"))
        fig.add_trace(go.Scatter(
            x=[qx] + [m.keys[b, 0] for b in best], y=[qy] + [m.keys[b, 1] for b in best], mode="markers",
            name=f"query {a} and its top {len(best)} keys",
            marker=dict(size=20, symbol="circle-open", color=PICK_COLOR, line=dict(width=2)),
            customdata=[f"query {a}: {labels[a]}"]
            + [f"key {b}: {labels[b]}, weight {row[b]:.3f}" for b in best],
            hovertemplate="%{customdata}<extra></extra>"))
    for name, symbol in (("queries", "circle"), ("keys", "diamond")):  # the legend's shapes, their colour the bar's
        fig.data[0 if name == "queries" else 1].showlegend = False
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=name, hoverinfo="skip",
                                 marker=dict(symbol=symbol, size=10, color=SHAPE_COLOR)))
    how = "PCA" if m.method == "pca" else "t-SNE"
    if m.explained:
        how += f" ({100 * m.explained[0]:.0f}% + {100 * m.explained[1]:.0f}% of the variance)"
    if m.translated:
        how += ", keys translated and scaled"
    fig.update_layout(title=plot_title(f"Queries (●) and keys (◆) of one head, {how}"), height=560,
                      margin=margin(t=60), legend=dict(orientation="h", y=-0.08),
                      xaxis=dict(zeroline=False), yaxis=dict(zeroline=False, scaleanchor="x", scaleratio=1),
                      clickmode="event+select")
    return fig


def picked_query(points: list[dict]) -> int | None:
    """The query a map click selected (a point of trace 0), or None."""
    for p in points or []:
        if p.get("curve_number") == 0 and p.get("point_index") is not None:
            return int(p["point_index"])
    return None
