"""Figures of each head's examples over a corpus (`mha_viz.corpus.head_examples`): a document's tokens
with the head's attention from one query drawn on them, the score histogram, the distance
histogram, the top tokens, and the head finder (every head on two corpus metrics)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from mha_viz.corpus.examples import TOP_ROWS
from mha_viz.drawing.style import PATTERN_COLOURS, axis_labels, margin, plot_title


def strongest_query(pattern: np.ndarray) -> int:
    """The query row that holds the pattern's largest weight past row and column 0 (a fallback where
    the score's own row, `HeadExamples.query`, is not known)."""
    p = np.asarray(pattern, dtype=np.float64).copy()
    p[:1] = 0
    p[:, :1] = 0
    return int(np.unravel_index(int(np.argmax(p)), p.shape)[0])


WINDOW = 128  # tokens of a long document drawn: 8 rows of 16 around the query, each row 30 px high
ROW_PX, FONT_PX = 30, 12  # a row's height and its tokens' font: the same, readable size at any length


def document_window(n: int, query: int, per_row: int = 16, window: int | None = WINDOW) -> tuple[int, int]:
    """(start, stop): the tokens of an n-token document that `document_figure` draws: all of them up to
    `window` tokens; beyond, whole rows of `per_row` around the query's row (centred where the document
    allows), `window` tokens at most (None: every token)."""
    if window is None or n <= window:
        return 0, n
    rows, total = max(1, window // per_row), -(-n // per_row)
    first = max(0, min(query // per_row - (rows - 1) // 2, total - rows))
    return first * per_row, min(n, (first + rows) * per_row)


def document_figure(tokens: list[str], pattern: np.ndarray, title: str, *, query: int | None = None,
                    per_row: int = 16, window: int | None = WINDOW) -> go.Figure:
    """The document's tokens in rows of `per_row`, each key shaded by the weight query `query` (the
    score's row, `HeadExamples.query`; default: the strongest) gives it, relative to that row's
    largest, the query framed. A document longer than `window` tokens is drawn at the same size, cut
    to the rows around the query (`document_window`), the title saying which tokens. Token texts go
    through Plotly's labels (`axis_labels`), never raw HTML."""
    q = strongest_query(pattern) if query is None else int(query)
    n = len(tokens)
    weights = np.zeros(n)
    row = np.asarray(pattern[q], dtype=np.float64)
    weights[:min(n, row.size)] = row[:n]
    start, stop = document_window(n, q, per_row, window)
    shown = stop - start
    rows = max(1, -(-shown // per_row))
    z = np.full(rows * per_row, np.nan)
    z[:shown] = weights[start:stop] / (weights.max() or 1.0)
    text = np.full(rows * per_row, "", dtype=object)
    text[:shown] = axis_labels(tokens)[start:stop]
    custom = np.full(rows * per_row, np.nan)
    custom[:shown] = weights[start:stop]
    if shown < n:
        title = f"{title} · tokens {start}–{stop - 1} of {n}, around the query"
    fig = go.Figure(go.Heatmap(z=z.reshape(rows, per_row), text=text.reshape(rows, per_row),
                               customdata=custom.reshape(rows, per_row), texttemplate="%{text}",
                               textfont=dict(size=FONT_PX),
                               colorscale=[[0, "#ffffff"], [1, "#d62728"]], zmin=0, zmax=1, showscale=False,
                               xgap=2, ygap=2, hovertemplate="%{text}: %{customdata:.3f}<extra></extra>"))
    fig.add_trace(go.Scatter(x=[(q - start) % per_row], y=[(q - start) // per_row], mode="markers", hoverinfo="skip",
                             showlegend=False,
                             marker=dict(symbol="square-open", size=ROW_PX, color="#1f77b4", line=dict(width=2))))
    box = margin()  # the plot keeps ROW_PX a row (+20) whatever the title and toolbar take above it
    fig.update_layout(title=plot_title(title), height=box["t"] + box["b"] + 20 + ROW_PX * rows, margin=box,
                      xaxis=dict(visible=False, range=[-0.5, per_row - 0.5]),
                      yaxis=dict(visible=False, autorange="reversed"), plot_bgcolor="white")
    return fig


def score_histogram(edges: np.ndarray, counts: np.ndarray, title: str) -> go.Figure:
    centres = (edges[:-1] + edges[1:]) / 2
    fig = go.Figure(go.Bar(x=centres, y=counts, width=np.diff(edges), marker_color="#4c78a8",
                           hovertemplate="score %{x:.2f}: %{y} documents<extra></extra>"))
    fig.update_layout(title=plot_title(title), height=300, margin=margin(t=60), bargap=0,
                      xaxis=dict(title=dict(text=f"score (mean of the {TOP_ROWS} strongest rows' largest weight)"),
                                 range=[0, 1]),
                      yaxis=dict(title=dict(text="documents")))
    return fig


def distance_histogram(labels: list[str], mass: np.ndarray, title: str) -> go.Figure:
    last = int(np.max(np.nonzero(mass)[0])) + 1 if np.any(mass) else 2
    share = mass[:last] / max(float(mass.sum()), 1e-300)
    fig = go.Figure(go.Bar(x=labels[:last], y=share, marker_color="#72b7b2",
                           hovertemplate="|query − key| %{x}: %{y:.1%} of the attention<extra></extra>"))
    fig.update_layout(title=plot_title(title), height=300, margin=margin(t=60),
                      xaxis=dict(title=dict(text="|query − key| (tokens)"), type="category"),
                      yaxis=dict(title=dict(text="share of the attention"), tickformat=".0%"))
    return fig


def token_bars(pairs: list[tuple[str, float]], title: str) -> go.Figure:
    names = axis_labels([t for t, _ in pairs][::-1])
    labels = [str(i) for i in range(len(pairs))]
    fig = go.Figure(go.Bar(y=labels, x=[v for _, v in pairs][::-1], orientation="h", customdata=names,
                           marker_color="#9467bd", hovertemplate="%{customdata}: %{x:.2f}<extra></extra>"))
    fig.update_layout(title=plot_title(title), height=int(120 + 18 * len(pairs)), margin=margin(t=60),
                      yaxis=dict(tickmode="array", tickvals=labels, ticktext=names),
                      xaxis=dict(title=dict(text="attention mass over the corpus")))
    return fig


def head_finder(table: pd.DataFrame, x: str, y: str, *, x_label: str, y_label: str) -> go.Figure:
    """Every head a point on two corpus metrics, coloured by its pattern class; point i is row i of
    `table` (layer-major), so a click's point index names the head (`heads.grid_pick(…, curve=0)`)."""
    classes = table["pattern"].astype(str).str.split(":").str[0]
    colours = [PATTERN_COLOURS.get(c, "#7f7f7f") for c in classes]
    names = [f"L{layer}H{h} ({c})" for layer, h, c in zip(table["layer"], table["head"], classes)]
    fig = go.Figure(go.Scatter(x=table[x], y=table[y], mode="markers", text=names,
                               marker=dict(size=9, color=colours, line=dict(width=0.5, color="#333")), showlegend=False,
                               hovertemplate="%{text}: %{x:.3g}, %{y:.3g}<extra>click to open</extra>"))
    for c, colour in PATTERN_COLOURS.items():  # a legend of the classes present
        if (classes == c).any():
            fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=c, marker=dict(size=9, color=colour)))
    fig.update_layout(title=plot_title(f"Head finder: {y_label} against {x_label}"), height=460, margin=margin(t=60),
                      xaxis=dict(title=dict(text=x_label)), yaxis=dict(title=dict(text=y_label)),
                      legend=dict(title=dict(text="pattern")))
    return fig
