"""Plotly figures of head metrics and comparisons: a layers × heads metric grid, the
all-heads similarity matrix, the 2-D map of heads, per-layer diversity and token-by-token
matrices (rollout, flow). Plain functions over arrays, and (`table_grid`, `similarity_figure`,
`map_figure`, `token_figure`) the titles and options the app and `mha_viz.figures` draw a run's
metrics with; nothing here knows Streamlit.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from mha_viz.drawing.heads import token_image
from mha_viz.drawing.style import (
    COLORSCALE,
    DIVERGING,
    PATTERN_COLOURS,
    axis_labels,
    colorbar,
    margin,
    more_lines_px,
    peak_ticks,
    plot_title,
    run_title,
    symmetric_bound,
    token_map_layout,
    top_title,
)
from mha_viz.metrics import METRICS, SIMILARITIES
from mha_viz.views import detail


def layer_numbers(layers: int | list[int]) -> list[int]:
    """The model's layer number of each row: `layers` is a count (every layer) or a run's
    `layer_ids` (some layers only)."""
    return list(range(layers)) if isinstance(layers, (int, np.integer)) else [int(layer) for layer in layers]


def head_labels(layers: int | list[int], num_heads: int) -> list[str]:
    """'L{layer}H{head}' for every head, layer-major (index = row * H + head); `layers` as in
    `layer_numbers`."""
    return [f"L{layer}H{h}" for layer in layer_numbers(layers) for h in range(num_heads)]


def metric_grid(values: np.ndarray, *, title: str, patterns: np.ndarray | None = None,
                diverging: bool = False, layer_ids: list[int] | None = None,
                bound: float | None = None, noise: float | None = None) -> go.Figure:
    """A metric as a layers × heads heatmap (layer rows, head columns). One invisible marker a
    cell, laid out layer-major, makes a click select that head (`heads.grid_pick`).
    layer_ids: the model's layer number of each row (default 0, 1, …). bound: a diverging scale
    spans ± this (default: the largest |value|; grids drawn side by side pass one bound).
    noise: the values' floating-point noise, when known: values that all lie within it of each
    other are drawn in one colour, with no colour bar, and the title says so, instead of
    colours stretched over rounding."""
    v = np.asarray(values, dtype=np.float64)
    L, H = v.shape
    names = layer_numbers(L if layer_ids is None else layer_ids)
    heads, layers = np.meshgrid(np.arange(H), np.arange(L))
    finite = v[np.isfinite(v)]
    flat = noise is not None and finite.size > 0 and float(finite.max() - finite.min()) <= noise
    if flat:
        title = f"{title}: all within floating-point noise (≤ {noise:.2g})"
        zmin = float(finite.min())
        zmax, scale = zmin + 1.0, COLORSCALE  # every cell at the bottom of the scale
    elif diverging:
        bound = symmetric_bound(v) if bound is None else float(bound)
        zmin, zmax, scale = -bound, bound, DIVERGING
    else:
        zmin = float(finite.min()) if finite.size else 0.0
        zmax = float(finite.max()) if finite.size else 1.0
        scale = COLORSCALE
    # a one-sided scale tops at the largest value, with a tick there that a note quoting it finds (issue 90)
    bar = colorbar() if flat or diverging else colorbar() | peak_ticks(v)
    text = patterns if patterns is not None else np.full((L, H), "")
    return go.Figure([go.Heatmap(z=v, x=list(range(H)), y=list(range(L)), zmin=zmin, zmax=zmax,
                                 colorscale=scale, colorbar=bar, showscale=not flat, hoverinfo="skip"), go.Scatter(
        x=heads.ravel(), y=layers.ravel(), mode="markers",
        marker=dict(symbol="square", size=30, color="rgba(0,0,0,0)"),
        text=[f"layer {names[row]}, head {h}: {val:.4g} {pat}" for row, h, val, pat in
              zip(layers.ravel(), heads.ravel(), v.ravel(), np.asarray(text).ravel())],
        hovertemplate="%{text}<extra>click to open</extra>", showlegend=False,
    )], layout=dict(  # the title at the top of the figure, above the top axis' title and ticks
        title=top_title(title),
        xaxis=dict(title=dict(text="head"), tickmode="linear", dtick=1, side="top", showgrid=False,
                   zeroline=False, range=[-0.5, H - 0.5]),
        yaxis=dict(title=dict(text="layer"), tickmode="array", tickvals=list(range(L)), ticktext=names,
                   range=[L - 0.5, -0.5], showgrid=False, zeroline=False),
        width=min(1100, 180 + 40 * H), height=min(1400, 150 + 34 * L) + more_lines_px(title),
        margin=margin(t=95 + more_lines_px(title)), dragmode=False, plot_bgcolor="white",
    ))


LABELLED_HEADS = 96  # a similarity matrix labels every head up to this many; beyond, its layers or every k-th head


def similarity_ticks(labels: list[str], num_heads: int, ordered: bool) -> dict:
    """The tick labels of a similarity matrix's axes (`labels`: its heads in the matrix's order): every head up to
    LABELLED_HEADS; beyond, in layer order, each layer at its middle head ("L12" at L12H4 of 9 heads, between its
    boundary lines), and in another order every k-th head, at most LABELLED_HEADS of them (hover names every cell)."""
    if len(labels) <= LABELLED_HEADS:
        return dict(tickmode="array", tickvals=labels)
    if not ordered:
        middles = labels[num_heads // 2::num_heads]
        return dict(tickmode="array", tickvals=middles, ticktext=[lab.rsplit("H", 1)[0] for lab in middles])
    return dict(tickmode="array", tickvals=labels[::-(-len(labels) // LABELLED_HEADS)])


def similarity_matrix(matrix: np.ndarray, layers: int | list[int], num_heads: int, *, title: str,
                      order: np.ndarray | None = None, divergence: bool = False,
                      signed: bool = False, scale_title: str | None = None) -> go.Figure:
    """The (L·H, L·H) comparison of every pair of heads. In layer order, lines mark the layer
    boundaries; with `order` (e.g. clustered) rows and columns follow it. Dark = alike: a
    divergence uses the reversed scale. `scale_title` names the colour bar."""
    m = np.asarray(matrix, dtype=np.float64)
    labels = np.array(head_labels(layers, num_heads))
    num_layers = len(layer_numbers(layers))
    idx = np.arange(m.shape[0]) if order is None else np.asarray(order)
    m, labels = m[np.ix_(idx, idx)], labels[idx]
    if signed:
        zmin, zmax, scale = -1.0, 1.0, DIVERGING
    else:
        finite = m[np.isfinite(m)]
        zmin, zmax = (0.0, float(finite.max()) if finite.size else 1.0) if divergence else (0.0, 1.0)
        scale = COLORSCALE
    shapes = []
    if order is None and num_layers > 1:  # one list, set once: add_shape re-validates every earlier shape
        n = m.shape[0]
        line = dict(color="black", width=1)
        for b in range(1, num_layers):
            pos = b * num_heads - 0.5
            shapes += [dict(type="line", x0=pos, x1=pos, y0=-0.5, y1=n - 0.5, line=line),
                       dict(type="line", y0=pos, y1=pos, x0=-0.5, x1=n - 0.5, line=line)]
    ticks = dict(similarity_ticks(labels.tolist(), num_heads, order is not None), tickfont=dict(size=9))
    return go.Figure(go.Heatmap(  # float32: half the bytes of float64, far below the 4 decimals shown
        z=m.astype(np.float32), x=labels.tolist(), y=labels.tolist(), zmin=zmin, zmax=zmax, colorscale=scale,
        reversescale=divergence, colorbar=colorbar(scale_title),
        hovertemplate="%{y} vs %{x}: %{z:.4f}<extra></extra>",
    ), layout=dict(
        title=plot_title(title),
        xaxis=dict(type="category", tickangle=-90, side="bottom", **ticks),
        yaxis=dict(type="category", autorange="reversed", **ticks),
        height=760, margin=margin(), shapes=shapes,
    ))


def points_map(xy: np.ndarray, num_heads: int, *, color_by: str = "layer",
               patterns: list[str] | None = None, title: str = "", layer_ids: list[int] | None = None) -> go.Figure:
    """Every head as a point of a 2-D map (e.g. MDS of a dissimilarity), coloured by layer or
    by pattern class. Points are one trace, layer-major, so a click gives the head index.
    layer_ids: the model's layer number of each row (default 0, 1, …)."""
    xy = np.asarray(xy)
    N = xy.shape[0]
    rows, heads = np.divmod(np.arange(N), num_heads)
    layers = np.asarray(layer_numbers(N // num_heads if layer_ids is None else layer_ids))[rows]
    kinds = [p.split(":")[0] for p in patterns] if patterns is not None else ["?"] * N
    hover = [f"layer {layer}, head {h}" + (f" · {p}" if patterns is not None else "")
             for layer, h, p in zip(layers, heads, patterns or kinds)]
    if color_by == "pattern" and patterns is not None:
        marker = dict(size=10, color=[PATTERN_COLOURS.get(k, "#000000") for k in kinds])
    else:
        marker = dict(size=10, color=layers, colorscale="Viridis", showscale=True,
                      colorbar=colorbar("layer"))
    traces = [go.Scatter(x=xy[:, 0], y=xy[:, 1], mode="markers", marker=marker, text=hover,
                         hovertemplate="%{text}<extra>click to open</extra>", showlegend=False)]
    if color_by == "pattern" and patterns is not None:
        traces += [go.Scatter(x=[None], y=[None], mode="markers", name=kind, marker=dict(size=10, color=colour))
                   for kind, colour in PATTERN_COLOURS.items() if kind in kinds]  # legend entries only, after the data
    # equal axis scales: distances on the map mean the same in every direction
    return go.Figure(traces, layout=dict(
        title=plot_title(title), width=720, height=600, margin=margin(),
        xaxis=dict(zeroline=False, showticklabels=False, title=dict(text="MDS 1")),
        yaxis=dict(zeroline=False, showticklabels=False, scaleanchor="x", title=dict(text="MDS 2"))))


def map_pick(points: list[dict]) -> int | None:
    """The head index (layer * H + head) of the first clicked point of `points_map` (`figures.head_map`)."""
    for p in points or []:
        if p.get("curve_number", 0) == 0:
            idx = p.get("point_index", p.get("pointIndex", p.get("point_number")))
            if idx is not None:
                return int(idx)
    return None


VALUED_BARS = 12  # a diversity chart writes each bar's value up to this many layers; beyond, hover tells


def diversity_figure(table) -> go.Figure:
    """Per-layer diversity D beside its random-initialisation baseline (`metrics.diversity_table`), each bar's value
    written up to VALUED_BARS layers (beyond, Plotly would shrink it to a few pixels), the legend at the figure's foot
    under the turned layer labels (at the plot's foot it covered them)."""
    bars = dict(texttemplate="%{y:.3f}", textposition="outside", cliponaxis=False) \
        if len(table["heads"]) <= VALUED_BARS else {}
    traces = [go.Bar(x=table["heads"], y=table["D"], name="this model", marker_color="#2171b5", **bars)]
    if "D_random_init" in table:
        traces.append(go.Bar(x=table["heads"], y=table["D_random_init"], name="random initialisation",
                             marker_color="#737373", **bars))
    return go.Figure(traces, layout=dict(barmode="group", yaxis=dict(title=dict(text="diversity D"), range=[0, 1.05]),
                                         height=380, margin=margin(t=30),
                                         legend=dict(orientation="h", yref="container", y=0, yanchor="bottom")))


def token_matrix(matrix: np.ndarray, tokens: list[str], *, title: str, zmax: float | None = None,
                 row_title: str = "token at this layer", col_title: str = "input token") -> go.Figure:
    """An n × n token-by-token matrix (rollout, flow) with the tokens as labels."""
    m = np.asarray(matrix, dtype=np.float32)
    labels = axis_labels(tokens)
    n = len(tokens)
    return go.Figure(go.Heatmap(
        z=m, x=labels, y=labels, zmin=0.0, zmax=zmax if zmax is not None else float(max(m.max(), 1e-12)),
        colorscale=COLORSCALE, colorbar=colorbar(),
        hovertemplate="%{y} ← %{x}: %{z:.3f}<extra></extra>",
    ), layout=dict(title=plot_title(title), **token_map_layout(n, col_title, row_title), margin=margin()))


def table_grid(table: pd.DataFrame, metric: str, run) -> go.Figure:
    """Column `metric` of a run's head table (`mha_viz.metrics.head_table`) as its layers × heads
    grid, each cell's hover naming the head's pattern class. ValueError for a column the table
    does not hold."""
    if metric not in table.columns or metric not in METRICS:
        raise ValueError(f"{metric!r} is not a head metric of this table; choose from "
                         f"{', '.join(c for c in METRICS if c in table.columns)}")
    shape = (run.num_layers, run.num_heads)
    return metric_grid(table[metric].to_numpy().reshape(shape),
                       title=run_title(run, f"{METRICS[metric].label}, every head"),
                       patterns=table["pattern"].to_numpy().reshape(shape), layer_ids=run.layer_ids)


SIGNED = ("qk", "ov", "residual")  # similarity kinds that run from -1 to 1

# each similarity's colour bar: what it is, and which end means alike (a divergence is high for unlike heads)
SCALE_TITLES = {"js": "JS divergence<br>high: unlike", "cosine": "cosine<br>high: alike", "cka": "CKA<br>high: alike",
                "residual": "r<br>high: alike", "seed_r": "R<br>high: overlap", "qk": "cosine<br>high: alike",
                "ov": "cosine<br>high: alike"}


def similarity_figure(matrix: np.ndarray, kind: str, run, *, order: np.ndarray | None = None) -> go.Figure:
    """A run's `metrics.head_similarity(run, kind)` as the every-pair matrix, in layer order or
    (`order`, e.g. `metrics.cluster_order`) clustered."""
    heads = run.num_layers * run.num_heads
    return similarity_matrix(matrix, run.layer_ids, run.num_heads, order=order, divergence=kind == "js",
                             signed=kind in SIGNED, title=f"{SIMILARITIES[kind].label}, {heads} heads "
                             f"({'by layer' if order is None else 'clustered'})", scale_title=SCALE_TITLES[kind])


def map_figure(xy: np.ndarray, kind: str, run, *, patterns: list[str], color_by: str = "layer") -> go.Figure:
    """The heads of a run placed by `xy` (MDS of the `kind` dissimilarity), coloured by layer or
    by pattern class (`patterns`: the head table's, layer-major)."""
    return points_map(xy, run.num_heads, color_by=color_by, patterns=patterns, layer_ids=run.layer_ids,
                    title=f"Heads placed by {SIMILARITIES[kind].label}, coloured by {color_by}")


ACROSS_LAYERS = {  # the title of each token-by-token matrix across layers
    "rollout": "Rollout to layer {layer}",
    "rollout through one head": "Layer {layer}, head {head}, rolled out to the input",
    "flow": "Flow to layer {layer}",
}


BULK = 0.99  # `bulk_top`'s quantile
BULK_SAMPLE = 1 << 20  # values read for it, evenly spaced


def bulk_top(matrix: np.ndarray) -> float:
    """The BULK quantile of a matrix's values (of at most BULK_SAMPLE of them, evenly spaced): a colour scale's top
    that shows the bulk of a long rollout, whose few largest cells (the first token's column) would leave every
    other cell pale; those saturate."""
    flat = np.asarray(matrix, dtype=np.float32).ravel()
    sample = flat[::max(1, flat.size // BULK_SAMPLE)]
    return float(max(np.quantile(sample, BULK), 1e-12)) if sample.size else 1.0


def token_figure(matrix: np.ndarray, tokens: list[str], *, title: str, zmax: float | None = None) -> go.Figure:
    """An n × n token matrix (rollout, flow): every cell a heatmap cell, or past
    `detail.FULL_DETAIL_TOKENS` tokens a pixel of an image; colours up to `zmax` (default its maximum)."""
    if len(tokens) <= detail.FULL_DETAIL_TOKENS:
        return token_matrix(matrix, tokens, title=title, zmax=zmax)
    return token_image(matrix, tokens, title=title, zmax=zmax)
