"""Figures of what heads do for a prediction (`mha_viz.interventions.prediction`): the layers × heads grids of direct
logit attribution and of the restored fraction, estimated and real, on a diverging scale centred at
0 (the heads where the two differ circled), the estimate against real patching head by head, one
head's restored fraction by position, one layer's estimate by head and position, and the tokens
one head's write promotes and suppresses."""

from __future__ import annotations

import html

import numpy as np
import plotly.graph_objects as go

from mha_viz.drawing.metrics import head_labels, metric_grid
from mha_viz.drawing.style import (
    DIVERGING,
    axis_labels,
    colorbar,
    margin,
    plot_title,
    swatch_bars,
    symmetric_bound,
)
from mha_viz.interventions.estimate import DISAGREE

POSITIVE, NEGATIVE = "#b2182b", "#2166ac"  # the ends of the grids' scale (RdBu_r): helps, hurts


def dla_grid(per_head: np.ndarray, answer: str, wrong: str, layer_ids: list[int] | None = None,
             label: str = "Direct logit attribution") -> go.Figure:
    """Each head's direct logit attribution: what its write adds to logit(answer) − logit(wrong), titled
    `label` (`DirectLogit.label`: it says where the attribution is linearised through soft-capping)."""
    return metric_grid(per_head, diverging=True, layer_ids=layer_ids, title=html.escape(
        f"{label} to {answer!r} − {wrong!r}", quote=False))


MARK = f"estimate and real differ by more than {DISAGREE}"


def _circled(fig: go.Figure, marked: np.ndarray | None) -> go.Figure:
    """`fig` (a `metric_grid`) with a ring on each cell where `marked` (layers, heads) is True: a
    trace after the grid's click markers, so that a click still opens the head under it."""
    if marked is None or not np.any(marked):
        return fig
    layers, heads = np.nonzero(np.asarray(marked))
    fig.add_trace(go.Scatter(x=heads, y=layers, mode="markers", name=MARK, hoverinfo="skip", showlegend=False,
                             marker=dict(symbol="circle-open", size=16, color="black", line=dict(width=2))))
    return fig


def fraction_bound(*grids: np.ndarray | None) -> float:
    """The largest |value| of the restored-fraction grids given (None skipped): the estimate's and
    the real grid drawn with it on one colour scale, so that one colour means one fraction on both."""
    shown = [np.asarray(g, dtype=np.float64).ravel() for g in grids if g is not None]
    return symmetric_bound(np.concatenate(shown)) if shown else 1.0


def restored_grid(restored: np.ndarray, layer_ids: list[int] | None = None,
                  marked: np.ndarray | None = None, bound: float | None = None) -> go.Figure:
    """Each head's restored fraction: 1 when its clean output alone brings the metric back.
    bound: the colour scale spans ± this (`fraction_bound`; default this grid's largest |value|)."""
    return _circled(metric_grid(restored, diverging=True, layer_ids=layer_ids, bound=bound,
                                title="Restored fraction (patching one head)"), marked)


def estimate_grid(estimated: np.ndarray, layer_ids: list[int] | None = None,
                  marked: np.ndarray | None = None, bound: float | None = None) -> go.Figure:
    """Each head's estimated restored fraction (attribution patching); `bound` as `restored_grid`'s."""
    return _circled(metric_grid(estimated, diverging=True, layer_ids=layer_ids, bound=bound,
                                title="Estimated restored fraction (attribution patching)"), marked)


def agreement_scatter(estimated: np.ndarray, real: np.ndarray, pearson: float, spearman: float,
                      layer_ids: list[int] | None = None, marked: np.ndarray | None = None) -> go.Figure:
    """One point a head: real patching (x) against the estimate (y), the diagonal where they agree,
    the heads `marked` (where they differ by more than DISAGREE) ringed."""
    e, r = np.asarray(estimated, dtype=float), np.asarray(real, dtype=float)
    L, H = e.shape
    names = head_labels(L if layer_ids is None else layer_ids, H)
    lo, hi = float(min(e.min(), r.min(), 0.0)), float(max(e.max(), r.max(), 0.0))
    fig = go.Figure(go.Scatter(x=[lo, hi], y=[lo, hi], mode="lines", line=dict(color="#999", dash="dot"),
                               hoverinfo="skip", name="estimate = real"))
    differ = np.zeros((L, H), dtype=bool) if marked is None else np.asarray(marked)
    fig.add_trace(go.Scatter(x=r.ravel(), y=e.ravel(), mode="markers", text=names, name="a head",
                             marker=dict(size=8, color=np.where(differ.ravel(), POSITIVE, "#4d4d4d"),
                                         symbol=np.where(differ.ravel(), "circle-open", "circle"),
                                         line=dict(width=2)),
                             hovertemplate="%{text}: real %{x:.3f}, estimate %{y:.3f}<extra></extra>"))

    def r_text(v: float) -> str:
        return "undefined" if not np.isfinite(v) else f"{v:.3f}"
    fig.update_layout(title=plot_title(f"Estimate against real patching<br>Pearson r = {r_text(pearson)}, "
                                       f"Spearman ρ = {r_text(spearman)}"),  # two lines: a half-width column
                      height=440, margin=margin(t=80), showlegend=False,
                      xaxis=dict(title=dict(text="restored fraction, patched for real"), zeroline=True),
                      yaxis=dict(title=dict(text="estimated restored fraction"), zeroline=True))
    return fig


def position_grid(values: np.ndarray, tokens: list[str], layer: int) -> go.Figure:
    """One layer's estimate (heads, n): patching head h at position i only, a cell each."""
    v = np.asarray(values, dtype=float)
    H, n = v.shape
    bound = symmetric_bound(v)
    fig = go.Figure(go.Heatmap(z=v, x=list(range(n)), y=list(range(H)), zmin=-bound, zmax=bound,
                               colorscale=DIVERGING, colorbar=colorbar(), customdata=np.tile(
                                   np.asarray(axis_labels(tokens), dtype=object), (H, 1)),
                               hovertemplate="head %{y}, %{customdata} (position %{x}): %{z:.3f}<extra></extra>"))
    fig.update_layout(title=plot_title(f"Layer {layer}: estimated restored fraction by head and patched position"),
                      height=min(900, 160 + 26 * H), margin=margin(t=60),
                      xaxis=dict(tickmode="array", tickvals=list(range(n)), ticktext=axis_labels(tokens),
                                 tickangle=-60, title=dict(text="patched position")),
                      yaxis=dict(title=dict(text="head"), tickmode="linear", dtick=1, autorange="reversed"))
    return fig


def position_bars(values: np.ndarray, tokens: list[str], title: str, estimate: np.ndarray | None = None) -> go.Figure:
    """One head's restored fraction when patched at one position only, a bar per position; with
    `estimate`, the first-order estimate of the same beside it."""
    v = np.asarray(values, dtype=float)
    x, labels = np.arange(len(v)), np.asarray(axis_labels(tokens), dtype=object)
    # the bars in one trace (the same for any values, so precisions compare trace by trace), out of the legend; the
    # legend's swatches are two empty traces in the bars' two colours, in the bars' slot
    fig = go.Figure(go.Bar(x=x, y=v, marker_color=[POSITIVE if y >= 0 else NEGATIVE for y in v], customdata=labels,
                           name="patched for real", showlegend=False, offsetgroup="patched",
                           hovertemplate="%{customdata}: %{y:.3f} patched<extra></extra>"))
    for swatch in swatch_bars([("patched for real: restores", POSITIVE), ("patched for real: works against", NEGATIVE)],
                              "patched"):
        fig.add_trace(swatch)
    if estimate is not None:
        fig.add_trace(go.Bar(x=x, y=np.asarray(estimate, dtype=float), name="estimate", offsetgroup="estimate",
                             marker=dict(color="rgba(0,0,0,0)", line=dict(color="#333", width=1.5)),
                             customdata=labels, hovertemplate="%{customdata}: %{y:.3f} estimated<extra></extra>"))
    fig.update_layout(title=plot_title(title), height=320, margin=margin(t=60), bargap=0.15, barmode="group",
                      showlegend=True, legend=dict(orientation="h", yref="container", y=0, yanchor="bottom"),
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
