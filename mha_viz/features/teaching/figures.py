"""Figures of the teaching view: a labelled matrix of any shape, the
figures of every step and demonstration of a walkthrough, a softmax row, the query-head →
KV-head drawing of grouped-query attention. Plain functions over arrays;
nothing here knows Streamlit.

Each figure is built from one dict (`go.Figure(dict(data=..., layout=...))`): Plotly validates
it once, several times faster than adding traces, shapes and layout piece by piece."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import plotly.graph_objects as go

from mha_viz.drawing.style import (
    COLORSCALE,
    DIVERGING,
    axis_labels,
    colorbar,
    margin,
    peak_ticks,
    plot_title,
    symmetric_bound,
)

if TYPE_CHECKING:
    from mha_viz.views.teaching import Walkthrough

MAX_COLUMNS = 48  # wider matrices (d_model 384, 576…) show their first columns and say so


def _figure(data: list[dict], layout: dict) -> go.Figure:
    return go.Figure(dict(data=data, layout=layout))


def matrix(values: np.ndarray, rows: list[str], *, title: str, columns: list[str] | None = None,
           probabilities: bool = False, highlight: tuple[int, int] | None = None,
           max_columns: int = MAX_COLUMNS) -> go.Figure:
    """Any (r, c) matrix with labelled rows (tokens). Probabilities use 0..1 and the sequential
    scale; other values a diverging scale centred on 0; -inf (masked) cells are left blank.
    Past `max_columns` columns only `max_columns` are drawn, the title says which: the first ones, or with
    `highlight` (start, stop), a window around those columns, which are framed (one head's block of the
    concatenation). Columns without labels are dimensions: a numeric axis of their indices, a few ticks (a
    category axis would draw, and the browser measure, one rotated label a column).
    float32 values stay float32 (half the bytes sent to the browser)."""
    v = np.asarray(values)
    if not np.issubdtype(v.dtype, np.floating):
        v = v.astype(np.float64)
    r, c = v.shape
    shown = min(c, max_columns)
    first = 0 if highlight is None else min(max(0, highlight[0] - (shown - (highlight[1] - highlight[0])) // 2),
                                            c - shown)  # the framed block in the middle of the window
    window = slice(first, first + shown)
    cols = axis_labels(columns[window]) if columns is not None else np.arange(first, first + shown)
    part = np.where(np.isneginf(v[:, window]), np.nan, v[:, window])
    if probabilities:
        extra = dict(zmin=0.0, zmax=1.0, colorscale=COLORSCALE)
    else:
        bound = symmetric_bound(part)
        extra = dict(zmin=-bound, zmax=bound, colorscale=DIVERGING)
    heat = dict(type="heatmap", z=part, x=cols, y=axis_labels(rows), colorbar=colorbar(thickness=10),
                hovertemplate=("%{y} · %{x}" if columns is not None else "%{y} · dimension %{x}")
                + ": %{z:.4f}<extra></extra>", **extra)
    more = "" if shown == c else (f" (first {shown} of {c} columns)" if first == 0
                                  else f" (columns {first}–{first + shown - 1} of {c})")
    if columns is None:  # the axis is the columns' own indices (whole ticks only, on a narrow matrix)
        xaxis, origin = dict(type="linear", side="bottom", dtick=1 if shown <= 12 else None), 0
    else:  # a category axis counts from the window's first column
        xaxis, origin = dict(type="category", side="bottom", tickangle=-60, showticklabels=len(cols) <= 64), first
    layout = dict(title=plot_title(title + more), height=int(min(520, max(220, 18 * r + 110))), margin=margin(),
                  xaxis=xaxis, yaxis=dict(type="category", autorange="reversed"))
    if highlight is not None:  # the framed columns in the window (a block wider than the window: the window)
        left, right = max(highlight[0], first), min(highlight[1], first + shown)
        layout["shapes"] = [dict(type="rect", x0=left - origin - 0.5, x1=right - origin - 0.5,
                                 y0=-0.5, y1=r - 0.5, line=dict(color="black", width=2))]
    return _figure([heat], layout)


STEPS = ("X", "Q", "K", "V", "scores", "scaled", "masked", "probs", "z", "concat", "output")


def step_figures(w: Walkthrough, names: tuple[str, ...] = STEPS) -> dict[str, go.Figure]:
    """The matrix of each step of a walkthrough named in `names` (default: every step), by the
    name of its array: X, Q, K, V, scores, scaled, masked (causal models and local windows only:
    left out for an encoder that sees every token), probs, z, concat (this head's block framed),
    output. Only those asked for are built."""
    tok = w.tokens
    start = w.head * w.V.shape[1]
    titles = {"X": "X: one row per token", "Q": "Q", "K": "K", "V": "V", "z": "z = A V",
              "output": "the layer's attention output"}
    square = {"scores": "Q Kᵀ", "scaled": "Q Kᵀ / √d_k", "masked": "masked scores (blank: −∞)",
              "probs": "A: attention probabilities"}
    figs = {}
    for name in names:
        if name in titles:
            figs[name] = matrix(getattr(w, name), tok, title=titles[name])
        elif name in square and (name != "masked" or w.is_causal or w.window is not None):
            values, columns = with_outside(w, name)
            figs[name] = matrix(values, tok, title=square[name], columns=columns, probabilities=name == "probs",
                                max_columns=len(columns))
        elif name == "concat":
            figs[name] = matrix(w.concat, tok, title="every head's z side by side (this head framed)",
                                highlight=(start, start + w.V.shape[1]))
        elif name != "masked":
            raise ValueError(f"no step called {name!r}; the steps are {', '.join(STEPS)}")
    return figs


def with_outside(w: Walkthrough, name: str) -> tuple[np.ndarray, list[str]]:
    """A square step of a walkthrough ("scores", "scaled", "masked" or "probs") and its columns' labels, the keys
    outside its window first as one column (`Walkthrough.outside_*`) when there are any."""
    values, columns = getattr(w, name), list(w.tokens)
    folded = getattr(w, f"outside_{name}")
    if folded is None:
        return values, columns
    return np.column_stack([folded, values]).astype(values.dtype), [w.outside_label] + columns


def probability_maps(maps: dict[str, np.ndarray], tokens: list[str]) -> dict[str, go.Figure]:
    """One token × token probability map per title, by title (the teaching page's demonstrations: masks,
    projections, softmax temperatures)."""
    return {title: matrix(m, tokens, columns=tokens, probabilities=True, title=title) for title, m in maps.items()}


def softmax_bars(scores: np.ndarray, probs: np.ndarray, keys: list[str], *, title: str) -> go.Figure:
    """One query's scaled scores (bars, left axis) and the probabilities softmax makes of them."""
    labels = axis_labels(keys)
    s = np.where(np.isneginf(scores), np.nan, scores)
    p = np.asarray(probs, dtype=np.float64)
    return _figure([
        dict(type="bar", x=labels, y=s, name="scaled score q·k/√d_k", marker=dict(color="#9ecae1"), yaxis="y"),
        dict(type="scatter", x=labels, y=np.asarray(probs), name="softmax probability", mode="lines+markers",
             marker=dict(color="#08306b"), yaxis="y2"),
    ], dict(title=plot_title(title), height=320, margin=margin(), xaxis=dict(type="category", tickangle=-60),
            yaxis=dict(title=dict(text="score")) | peak_ticks(s),
            yaxis2=dict(title=dict(text="probability"), overlaying="y", side="right", range=[0, 1])
            | peak_ticks(p, (0.0, 0.25, 0.5, 0.75, 1.0)),
            legend=dict(orientation="h", y=-0.35)))


def kv_sharing(num_heads: int, num_kv_heads: int, *, highlight: int | None = None) -> go.Figure:
    """Which key/value head each query head reads under grouped- and multi-query attention, query heads (top
    row) joined to the key/value head they read (bottom row): query head i reads KV head i // (H / G); `highlight`,
    a query head whose group is drawn dark."""
    group = num_heads // num_kv_heads
    qx = np.arange(num_heads, dtype=float)
    kx = np.array([(g * group + (group - 1) / 2) for g in range(num_kv_heads)])
    data = []
    for i in range(num_heads):
        g = i // group
        on = highlight is not None and (i == highlight or g == highlight // group)
        data.append(dict(type="scatter", x=[qx[i], kx[g]], y=[1, 0], mode="lines", hoverinfo="skip",
                         showlegend=False, line=dict(color="#08306b" if on else "#bdbdbd", width=3 if on else 1.5)))
    data.append(dict(type="scatter", x=qx, y=np.ones(num_heads), mode="markers+text",
                     text=[f"Q{i}" for i in range(num_heads)], textposition="top center",
                     marker=dict(size=22, color="#6baed6"), showlegend=False,
                     hovertemplate="query head %{text}<extra></extra>"))
    data.append(dict(type="scatter", x=kx, y=np.zeros(num_kv_heads), mode="markers+text",
                     text=[f"K/V{g}" for g in range(num_kv_heads)], textposition="bottom center",
                     marker=dict(size=26, color="#fd8d3c", symbol="square"), showlegend=False,
                     hovertemplate="key/value head %{text}<extra></extra>"))
    return _figure(data, dict(
        title=plot_title(f"{num_heads} query heads share {num_kv_heads} key/value heads ({group} per group)"),
        height=260, margin=margin(b=30), xaxis=dict(visible=False, range=[-1, num_heads]),
        yaxis=dict(visible=False, range=[-0.6, 1.6]), plot_bgcolor="white"))


def softmax_row(w: Walkthrough, row: int) -> go.Figure:
    """One query row of a walkthrough: its scaled scores and the probabilities softmax makes of them."""
    scores, keys = with_outside(w, "masked")
    probs, _ = with_outside(w, "probs")
    return softmax_bars(scores[row], probs[row], keys,
                        title=f"Row {w.start + row} ({w.tokens[row]!s}): scores → probabilities")


def walkthrough(w: Walkthrough, steps: tuple[str, ...] | None = None) -> dict[str, go.Figure]:
    """The matrices of a head's walkthrough (`mha_viz.views.teaching.walkthrough`) by step name: X, Q, K, V,
    scores, scaled, masked (causal or local layers only), probs, z, concat, output; `steps` picks some."""
    return step_figures(w, STEPS if steps is None else tuple(steps))
