"""Plotly figures of a `Comparison`: the layers × heads grid of how much each head changed, one
head of both runs side by side with their difference, and each metric's spread over relative
depth for models of different shapes. Plain functions; nothing here knows Streamlit.
"""

from __future__ import annotations

import html

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from mha_viz.drawing.metrics import metric_grid
from mha_viz.drawing.style import (
    COLORSCALE,
    DIVERGING,
    PLOT_WIDTH_PX,
    TICK_CHAR_PX,
    TICK_LINE_PX,
    TURNED_PX,
    axis_labels,
    margin,
    marked_ticks,
    plot_title,
    scale_top,
    symmetric_bound,
    tick_step,
)
from mha_viz.views import detail
from mha_viz.views.comparison import Comparison, numeric_columns, rounding_noise

POOL_ABOVE = 128  # side by side: larger matrices are shown as at most this many blocks a side
LABELS_UP_TO = 64  # tick labels on the side-by-side panels up to this many rows
RUN_COLOURS = {"A": "#0072B2", "B": "#D55E00"}  # Okabe–Ito blue and vermillion
CHANGE_LABEL = {"tokens": "JS divergence of token rows (nats)", "words": "JS divergence of word rows (nats)",
                "metrics": "mean |difference| of the 0–1 head metrics"}
BASIS_LABEL = {"tokens": "token by token", "words": "word by word", "metrics": "each run's own tokens"}


def run_name(cmp: Comparison, which: str) -> str:
    """'A: model-name' with the model name HTML-escaped (a hub id or folder is user text)."""
    run = cmp.run_a if which == "A" else cmp.run_b
    return f"{which}: {html.escape(run.model_name, quote=False)}"


def change_grid(cmp: Comparison) -> go.Figure:
    """`cmp.change` as a layers × heads heatmap (rows labelled with run A's layer numbers), the
    hover giving each head's pattern class in A and in B; one flat colour, said in the title, when
    every change lies within rounding (`Comparison.noise`). Raises ValueError when the shapes differ."""
    if cmp.change is None:
        raise ValueError("the runs have different numbers of layers or heads: there is no per-head change; "
                         "compare them by depth (depth_distributions)")
    table_a, table_b = cmp.tables
    patterns = np.array([f"· {a} → {b}" for a, b in zip(table_a["pattern"], table_b["pattern"])])
    title = CHANGE_LABEL[cmp.kind][0].upper() + CHANGE_LABEL[cmp.kind][1:]  # short: the grid can be 300 px wide
    return metric_grid(cmp.change, title=title, patterns=patterns.reshape(cmp.change.shape),
                       layer_ids=cmp.run_a.layer_ids, noise=cmp.noise)


def _shown(matrix: np.ndarray, labels: list[str], *, signed: bool = False):
    """(z, escaped labels) of one panel: the matrix itself, or above POOL_ABOVE rows its block
    max (for a signed matrix the value of largest magnitude in each block, so a single strong
    change of either sign stays visible), labelled by token ranges."""
    m = np.asarray(matrix, dtype=np.float32)
    if m.shape[0] <= POOL_ABOVE:
        return m, axis_labels(labels)
    top, _, edges = detail.pooled(m, POOL_ABOVE)
    if signed:
        low = -detail.pooled(-m, POOL_ABOVE)[0]
        top = np.where(top >= -low, top, low)
    names = [detail.range_label(labels, a, b) for a, b in zip(edges[:-1], edges[1:])]
    return top, axis_labels(names)


GAP_PX = 40  # between a panel and the next one's tick labels


def side_by_side(cmp: Comparison, layer: int, head: int, *, rescale: bool = False) -> go.Figure:
    """One head of both runs on the comparison's basis: A | B | B − A (the difference on a
    diverging scale symmetric around 0), or A | B when there is no difference ("metrics").
    Matrices over POOL_ABOVE rows are downsampled (`_shown`). A and B share one colour scale,
    0..1 or 0..their maximum with `rescale`; a difference within rounding spans ± 1, and says so."""
    a, b, diff, labels_a, labels_b = cmp.pair(layer, head)
    diff = None if diff is None else -diff  # B − A, as the table's *_diff columns (pair gives A − B)
    panels = [(*_shown(a, labels_a), run_name(cmp, "A")), (*_shown(b, labels_b), run_name(cmp, "B"))]
    # a difference no larger than rounding: drawn on the whole ± 1 (flat), named so, not stretched over the noise
    noise = rounding_noise("metrics", cmp.run_a.precision, cmp.run_b.precision)  # r: a probability's rounding
    flat = diff is not None and symmetric_bound(np.asarray(diff, np.float64)) <= noise
    if diff is not None:
        panels.append((*_shown(diff, labels_a, signed=True),
                       f"B − A, within floating-point noise (≤ {noise:.2g})" if flat else "B − A"))
    zmax = scale_top(np.concatenate([panels[0][0].ravel(), panels[1][0].ravel()]), rescale)
    # panel names go under the panels: subplot titles would sit where the figure's title sits
    unit = "word" if cmp.kind == "words" else "token"
    longest = max((len(label) for _, labels, _ in panels[1:] for label in labels), default=0)
    gap = GAP_PX + (TICK_CHAR_PX * longest if max(len(p[1]) for p in panels) <= LABELS_UP_TO else 0)
    spacing = min(0.2, gap / PLOT_WIDTH_PX)
    fig = make_subplots(rows=1, cols=len(panels), horizontal_spacing=spacing)
    n = max(len(p[1]) for p in panels)
    height = int(min(720, max(380, 12 * n + 200)))
    # where not every label fits, the tokens that differ between A and B keep theirs (Plotly, thinning its own,
    # dropped every other one: in a minimal pair of 16 tokens both changed words unlabelled)
    changed = ([i for i, (x, y) in enumerate(zip(labels_a, labels_b)) if x != y]
               if cmp.kind != "metrics" and len(labels_a) == len(labels_b) == len(panels[0][1]) else [])
    wide = PLOT_WIDTH_PX * (1 - spacing * (len(panels) - 1)) / len(panels)
    for col, (z, labels, name) in enumerate(panels, start=1):
        signed = col == 3
        fig.add_trace(go.Heatmap(
            z=z, x=labels, y=labels, coloraxis="coloraxis2" if signed else "coloraxis",
            hovertemplate=f"%{{y}} → %{{x}}: %{{z:.3f}}<extra>{name}</extra>",
        ), row=1, col=col)
        show = len(labels) <= LABELS_UP_TO
        x_ticks = marked_ticks(labels, changed, tick_step(len(labels), wide, TURNED_PX)) if show else {}
        y_ticks = marked_ticks(labels, changed, tick_step(len(labels), height - 200, TICK_LINE_PX)) if show else {}
        fig.update_xaxes(type="category", showticklabels=show, tickangle=-60,
                         title=dict(text=f"<b>{name}</b> · key {unit}"), row=1, col=col, **x_ticks)
        fig.update_yaxes(type="category", showticklabels=show, autorange="reversed",
                         title=dict(text=f"query {unit}" if col == 1 else ""), row=1, col=col, **y_ticks)
    bar = dict(thickness=12, len=0.45 if diff is not None else 0.9, yanchor="top")
    layout = dict(coloraxis=dict(colorscale=COLORSCALE, cmin=0.0, cmax=zmax,
                                 colorbar=dict(bar, title=dict(text="weight"), y=1.0)))
    if diff is not None:
        bound = 1.0 if flat else symmetric_bound(panels[2][0]) or 1.0  # all zeros: any symmetric range will do
        layout["coloraxis2"] = dict(colorscale=DIVERGING, cmin=-bound, cmax=bound, cmid=0.0,
                                    colorbar=dict(bar, title=dict(text="B − A"), y=0.48))
    row_a = cmp.run_a.layer_ids[layer]
    row_b = cmp.run_b.layer_ids[layer] if layer < cmp.run_b.num_layers else row_a
    where = f"layer {row_a}" if row_a == row_b else f"layer {row_a} (A) / {row_b} (B)"
    basis = BASIS_LABEL[cmp.kind]
    fig.update_layout(title=plot_title(f"{where.capitalize()}, head {head}: {basis}"
                                       + (" (rescaled to max)" if rescale else "")),
                      height=height, margin=margin(), **layout)
    return fig


def bin_names(bins: int) -> list[str]:
    """'0.00–0.20', … for `bins` equal bins of 0..1."""
    return [f"{i / bins:.2f}–{(i + 1) / bins:.2f}" for i in range(bins)]


def depth_bins(relative_depth: np.ndarray, bins: int) -> list[str]:
    """Label of each value's bin among `bins` equal bins of 0..1 (an edge starts its bin; 1 is in
    the last). The bin is counted from depth × bins, not looked up among rounded edges:
    linspace's 0.6000000000000001 put a layer at depth 0.6 in the bin below."""
    idx = np.clip(np.floor(np.asarray(relative_depth, dtype=np.float64) * bins + 1e-9).astype(int), 0, bins - 1)
    names = bin_names(bins)
    return [names[i] for i in idx]


def depth_distributions(cmp: Comparison, metric: str, *, bins: int = 5) -> go.Figure:
    """Box plots (every head a point) of `metric` over `bins` bins of relative depth, run A and
    run B side by side in each bin: how models of different shapes compare layer for layer."""
    depth = cmp.depth
    choices = numeric_columns(depth.drop(columns=["relative_depth"]))
    if metric not in choices:
        raise ValueError(f"unknown metric {metric!r}; choose one of {', '.join(choices)}")
    order = bin_names(bins)
    fig = go.Figure()
    for which in ("A", "B"):
        part = depth[depth["run"] == which]
        fig.add_trace(go.Box(
            x=depth_bins(part["relative_depth"].to_numpy(), bins), y=part[metric].to_numpy(),
            name=run_name(cmp, which), marker_color=RUN_COLOURS[which],
            boxpoints="all", jitter=0.4, pointpos=0,
            text=[f"layer {layer}, head {h}" for layer, h in zip(part["layer"], part["head"])],
            hovertemplate="%{text}: %{y:.4g}<extra>%{fullData.name}</extra>",
        ))
    fig.update_layout(
        title=plot_title(f"{html.escape(metric, quote=False)} by relative depth (layer / (layers − 1))"),
        boxmode="group", height=420, margin=margin(), legend=dict(orientation="h"),
        xaxis=dict(title=dict(text="relative depth"), type="category", categoryorder="array",
                   categoryarray=order),
        yaxis=dict(title=dict(text=html.escape(metric, quote=False))),
    )
    return fig


def compare(cmp: Comparison, layer: int | None = None, head: int | None = None, *, metric: str = "entropy",
            rescale: bool = False) -> go.Figure:
    """A comparison of two runs (`mha_viz.compare(run_a, run_b)`), as the Compare page draws it:
    how much each head changed, a layers × heads grid; with `layer` and `head`, that head of both
    runs side by side with B − A. When the two models differ in shape (no head pairs with
    another), the spread of `metric` over the heads of each relative depth instead."""
    if cmp.change is None:
        return depth_distributions(cmp, metric)
    if layer is None and head is None:
        return change_grid(cmp)
    return side_by_side(cmp, layer or 0, head or 0, rescale=rescale)
