"""The pruning curve, which *Switch heads off* and *Across a corpus* both draw: the loss as heads are switched off in
importance order against random orders (`pruning_figure` over arrays, `pruning_curve` over the table
`mha_viz.pruning_curve` returns). Nothing here knows Streamlit."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import plotly.graph_objects as go

from mha_viz.drawing.style import margin, plot_title

if TYPE_CHECKING:
    import pandas as pd


def pruning_figure(fractions, by_importance, random_mean, random_std, *, loss_label: str) -> go.Figure:
    """Loss against the fraction of heads switched off, in importance order and in random order
    (mean ± one standard deviation over seeds)."""
    f = np.asarray(fractions) * 100
    mean, std = np.asarray(random_mean), np.asarray(random_std)
    return go.Figure(dict(data=[
        dict(type="scatter", x=np.r_[f, f[::-1]], y=np.r_[mean + std, (mean - std)[::-1]], fill="toself",
             fillcolor="rgba(150,150,150,0.25)", line=dict(width=0), hoverinfo="skip", name="random order ± 1 sd"),
        dict(type="scatter", x=f, y=mean, mode="lines+markers", name="random order (mean)", line=dict(color="#737373")),
        dict(type="scatter", x=f, y=np.asarray(by_importance), mode="lines+markers", name="least important first",
             line=dict(color="#2171b5")),
    ], layout=dict(title=plot_title("Pruning heads"), height=380, margin=margin(),
                   xaxis=dict(title=dict(text="heads switched off (%)")), yaxis=dict(title=dict(text=loss_label)),
                   legend=dict(orientation="h", y=-0.25))))


def pruning_curve(curve: pd.DataFrame, *, loss_label: str = "loss") -> go.Figure:
    """A pruning curve: a table with "fraction of heads off", "importance order", "random mean" and "random sd"
    columns, as *Switch heads off* draws it."""
    return pruning_figure(curve["fraction of heads off"], curve["importance order"],
                          curve["random mean"], curve["random sd"], loss_label=loss_label)
