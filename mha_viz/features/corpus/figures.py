"""Figures of head statistics over a corpus (`mha_viz.corpus.CorpusStats`): a metric's mean over
the documents with its spread, the head-type map from the majority classes, and one sentence
against the corpus average. Plain functions over the stats' table; nothing here knows Streamlit.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from mha_viz.drawing.metrics import layer_numbers, metric_grid
from mha_viz.drawing.style import (
    DIVERGING,
    PATTERN_COLOURS,
    colorbar,
    margin,
    more_lines_px,
    plot_title,
    symmetric_bound,
    top_title,
)


def _grid(table: pd.DataFrame, column: str) -> np.ndarray:
    """A column of a one-row-per-(layer, head) table as an (L, H) array (layer-major rows)."""
    L, H = table["layer"].nunique(), table["head"].nunique()
    return table[column].to_numpy(dtype=np.float64).reshape(L, H)


def _layers(table: pd.DataFrame) -> list[int]:
    return [int(layer) for layer in dict.fromkeys(table["layer"])]


def mean_grid(table: pd.DataFrame, metric: str, *, label: str | None = None) -> go.Figure:
    """`metric`'s mean over the documents, every head; hover adds ± its standard deviation and
    the head's majority pattern. A click selects the head, as on the Head metrics page."""
    mean, std = _grid(table, metric), _grid(table, f"{metric}_std")
    patterns = np.array([f"± {s:.3g} · {p}" for s, p in zip(std.ravel(), table["pattern"])]).reshape(mean.shape)
    return metric_grid(mean, title=f"{label or metric}: mean over {int(table['n_docs'].iloc[0])} documents",
                       patterns=patterns, layer_ids=_layers(table))


def spread_grid(table: pd.DataFrame, metric: str, *, label: str | None = None) -> go.Figure:
    """`metric`'s standard deviation over the documents: where a head is consistent, and where
    one sentence says little about it."""
    return metric_grid(_grid(table, f"{metric}_std"), title=f"{label or metric}: spread (sd over documents)",
                       layer_ids=_layers(table))


def pattern_map(table: pd.DataFrame) -> go.Figure:
    """Each head's majority pattern class over the corpus, one colour a class (the legend)."""
    classes = list(PATTERN_COLOURS)
    names = table["pattern"].str.split(":").str[0].to_numpy()
    codes = np.array([classes.index(c) if c in classes else 0 for c in names], dtype=float)
    L, H = table["layer"].nunique(), table["head"].nunique()
    layers = _layers(table)
    k = len(classes)
    scale = [[pos, PATTERN_COLOURS[c]] for i, c in enumerate(classes) for pos in (i / k, (i + 1) / k)]
    fig = go.Figure(go.Heatmap(
        z=codes.reshape(L, H), x=list(range(H)), y=list(range(L)), zmin=-0.5, zmax=k - 0.5, colorscale=scale,
        text=names.reshape(L, H), hovertemplate="layer %{customdata}, head %{x}: %{text}<extra></extra>",
        customdata=np.repeat(np.array(layers)[:, None], H, axis=1),
        colorbar=colorbar() | dict(tickvals=list(range(k)), ticktext=classes)))
    title = "Head types: each head's most frequent pattern class"  # two lines: `more_lines_px` above the top axis
    fig.update_layout(
        title=top_title(title),
        xaxis=dict(title=dict(text="head"), tickmode="linear", dtick=1, side="top"),
        yaxis=dict(title=dict(text="layer"), autorange="reversed", tickvals=list(range(L)),
                   ticktext=[str(layer) for layer in layer_numbers(layers)]),
        width=min(1100, 260 + 40 * H), height=min(1400, 150 + 34 * L) + more_lines_px(title),
        margin=margin(t=85 + more_lines_px(title)))
    return fig


def versus(table: pd.DataFrame, sentence: pd.DataFrame, metric: str, *, label: str | None = None) -> go.Figure:
    """This sentence's value of `metric` (y) against the corpus mean (x, ± one sd) for every head;
    on the diagonal the sentence is typical, far from it the head behaves unusually here."""
    merged = table.merge(sentence[["layer", "head", metric]], on=["layer", "head"], suffixes=("", "_here"))
    x, y, sd = merged[metric], merged[f"{metric}_here"], merged[f"{metric}_std"]
    lo, hi = float(min(x.min(), y.min())), float(max(x.max(), y.max()))
    names = [f"L{layer}H{h}" for layer, h in zip(merged["layer"], merged["head"])]
    fig = go.Figure(go.Scatter(
        x=x, y=y, mode="markers", error_x=dict(type="data", array=sd, thickness=1, color="#9ecae1"),
        marker=dict(color=merged["layer"], colorscale="Viridis", size=8, colorbar=colorbar("layer")),
        text=names, hovertemplate="%{text}: corpus %{x:.3g}, this sentence %{y:.3g}<extra></extra>"))
    fig.add_trace(go.Scatter(x=[lo, hi], y=[lo, hi], mode="lines", line=dict(color="#737373", dash="dash"),
                             hoverinfo="skip", showlegend=False))
    fig.update_layout(title=plot_title(f"{label or metric}: this sentence against the corpus"), showlegend=False,
                      xaxis=dict(title=dict(text="corpus mean (± 1 sd)")),
                      yaxis=dict(title=dict(text="this sentence")), height=480, margin=margin())
    return fig


def deviation(table: pd.DataFrame, sentence: pd.DataFrame, metric: str) -> np.ndarray:
    """(L, H): (this sentence − corpus mean) / corpus sd per head; 0 where the sd is 0."""
    merged = table.merge(sentence[["layer", "head", metric]], on=["layer", "head"], suffixes=("", "_here"))
    diff = (merged[f"{metric}_here"] - merged[metric]).to_numpy(dtype=np.float64)
    sd = merged[f"{metric}_std"].to_numpy(dtype=np.float64)
    z = np.divide(diff, sd, out=np.zeros_like(diff), where=sd > 0)
    return z.reshape(table["layer"].nunique(), table["head"].nunique())


def deviation_grid(table: pd.DataFrame, sentence: pd.DataFrame, metric: str, *, label: str | None = None) -> go.Figure:
    """`deviation` as a layers × heads grid on a diverging scale (red: higher here than usual)."""
    z = deviation(table, sentence, metric)
    fig = metric_grid(z, title=f"{label or metric}: this sentence − corpus mean, in sd", diverging=True,
                      layer_ids=_layers(table))
    bound = symmetric_bound(z)
    fig.update_traces(selector=dict(type="heatmap"), zmin=-bound, zmax=bound, colorscale=DIVERGING)
    return fig
