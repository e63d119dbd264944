"""Figures of what heads do for a prediction (`mha_viz.prediction`): the layers × heads grids of direct
logit attribution and of the restored fraction on a diverging scale centred at 0, one head's
restored fraction by position, and the tokens one head's write promotes and suppresses."""

from __future__ import annotations

import html

import numpy as np
import plotly.graph_objects as go

from .metrics import metric_grid
from .style import axis_labels, margin, plot_title

POSITIVE, NEGATIVE = "#b2182b", "#2166ac"  # the ends of the grids' scale (RdBu_r): helps, hurts


def dla_grid(per_head: np.ndarray, answer: str, wrong: str, layer_ids: list[int] | None = None) -> go.Figure:
    """Each head's direct logit attribution: what its write adds to logit(answer) − logit(wrong)."""
    return metric_grid(per_head, diverging=True, layer_ids=layer_ids, title=html.escape(
        f"Direct logit attribution to {answer!r} − {wrong!r}", quote=False))


def restored_grid(restored: np.ndarray, layer_ids: list[int] | None = None) -> go.Figure:
    """Each head's restored fraction: 1 when its clean output alone brings the metric back."""
    return metric_grid(restored, diverging=True, layer_ids=layer_ids,
                       title="Restored fraction (patching one head)")


def position_bars(values: np.ndarray, tokens: list[str], title: str) -> go.Figure:
    """One head's restored fraction when patched at one position only, a bar per position."""
    v = np.asarray(values, dtype=float)
    fig = go.Figure(go.Bar(x=list(range(len(v))), y=v, marker_color=[POSITIVE if x >= 0 else NEGATIVE for x in v],
                           customdata=axis_labels(tokens), hovertemplate="%{customdata}: %{y:.3f}<extra></extra>"))
    fig.update_layout(title=plot_title(title), height=320, margin=margin(t=60), bargap=0.15,
                      xaxis=dict(tickmode="array", tickvals=list(range(len(v))), ticktext=axis_labels(tokens),
                                 tickangle=-60, title=dict(text="patched position")),
                      yaxis=dict(title=dict(text="restored fraction"), zeroline=True, zerolinecolor="#888"))
    return fig


def token_bars(promoted: list[tuple[str, float]], suppressed: list[tuple[str, float]], title: str) -> go.Figure:
    """The tokens one head's write promotes most (right) and suppresses most (left): a logit lens
    of that write."""
    rows = list(reversed(suppressed)) + list(reversed(promoted))  # suppressed at the bottom, strongest outward
    names = axis_labels([t for t, _ in rows])
    values = [v for _, v in rows]
    labels = [f"{i}" for i in range(len(rows))]  # a distinct category each: a token may be in both lists
    fig = go.Figure(go.Bar(y=labels, x=values, orientation="h", customdata=names,
                           marker_color=[POSITIVE if v >= 0 else NEGATIVE for v in values],
                           hovertemplate="%{customdata}: %{x:.3f}<extra></extra>"))
    fig.update_layout(title=plot_title(title), height=int(120 + 22 * len(rows)), margin=margin(t=60),
                      yaxis=dict(tickmode="array", tickvals=labels, ticktext=names),
                      xaxis=dict(title=dict(text="logit change (frozen final norm)"), zeroline=True,
                                 zerolinecolor="#888"))
    return fig
