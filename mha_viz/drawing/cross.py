"""Figures of an encoder–decoder's cross-attention (`seq2seq.CrossAttention`): rectangular, the
target's tokens (queries) down, the source's tokens (keys) across. Plain functions over arrays;
nothing here knows Streamlit."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import torch

from mha_viz.drawing.heads import grid_figure
from mha_viz.drawing.style import COLORSCALE, axis_labels, colorbar, margin, plot_title, scale_top

X_TITLE, Y_TITLE = "source token (key, attended to)", "target token (query, attending)"


def thumbnails(attentions: np.ndarray, thumb: int = 48) -> np.ndarray:
    """(L, H, n_q, n_k) -> (L, H, thumb, thumb): each side max-pooled down to `thumb` cells when
    longer (a single strong cell stays visible), then stretched by repeating cells, so that every
    head is a square tile of the model view's grid."""
    a = torch.from_numpy(np.ascontiguousarray(attentions, dtype=np.float32))
    L, H, n_q, n_k = a.shape
    x = a.reshape(L * H, 1, n_q, n_k)
    x = torch.nn.functional.adaptive_max_pool2d(x, (min(n_q, thumb), min(n_k, thumb)))
    x = torch.nn.functional.interpolate(x, size=(thumb, thumb), mode="nearest")
    return x.reshape(L, H, thumb, thumb).numpy()


def cross_grid(cross, *, thumb: int = 48, rescale: bool = True) -> go.Figure:
    """Every decoder layer × head of the cross-attention as thumbnails (clickable like the model
    view's grid: `figures.grid_pick`)."""
    return grid_figure(thumbnails(cross.attentions, thumb), thumb=thumb, rescale=rescale)


def cross_heatmap(cross, layer: int, head: int, *, rescale: bool = False) -> go.Figure:
    """One head's cross-attention, every cell: target tokens on rows, source tokens on columns."""
    a = cross.head(layer, head)
    zmax = scale_top(a, rescale)
    n_q, n_k = a.shape
    title = f"Cross-attention, decoder layer {layer}, head {head}" + (" (rescaled to max)" if rescale else "")
    return go.Figure(go.Heatmap(
        z=a, x=axis_labels(cross.key_tokens), y=axis_labels(cross.query_tokens), zmin=0.0, zmax=zmax,
        colorscale=COLORSCALE, colorbar=colorbar("weight"), xgap=1 if n_k <= 48 else 0, ygap=1 if n_q <= 48 else 0,
        hovertemplate="%{y} → %{x}: %{z:.3f}<extra></extra>",
    ), layout=dict(
        title=plot_title(title), margin=margin(), height=int(min(900, max(320, 22 * n_q + 160))),
        xaxis=dict(title=dict(text=X_TITLE), side="bottom", tickangle=-60, type="category",
                   showticklabels=n_k <= 160),
        yaxis=dict(title=dict(text=Y_TITLE), autorange="reversed", type="category", showticklabels=n_q <= 160),
    ))
