"""Figures of one token in every head (`views.focus`), shared by Token focus, the Head view's pair of tokens and an
encoder–decoder's steps and cross-attention: every head's row (or column) for one token as one row of a heatmap,
layers separated by lines, the summaries over heads and over layers, and every head ranked by one pair's weight.

Plain functions from a `focus.Focus` to a `go.Figure`; nothing here knows Streamlit.
"""

from __future__ import annotations

import html

import numpy as np
import plotly.graph_objects as go

from mha_viz.drawing.style import (
    COLORSCALE,
    NOTE_ROW_PX,
    PLOT_WIDTH_PX,
    TICK_CHAR_PX,
    TICK_LINE_PX,
    TURNED_PX,
    axis_labels,
    colorbar,
    margin,
    plot_title,
    run_title,
    scale_top,
    spaced_ticks,
    tick_step,
    title_room,
    top_title,
    turned_room,
)
from mha_viz.views import detail
from mha_viz.views.focus import TO, Focus, Summary
from mha_viz.views.token_pair import HeadWeight

GRID_LABELLED_PX = 1600  # the most px a grid's rows take with every head labelled (100 heads of TICK_LINE_PX)
GRID_MOST_PX = 3200  # the tallest grid: past it (over 400 heads) fewer than every other head is labelled
# the plotting areas at 1280 px wide, measured in Chromium: a grid's (less its row labels and colour bar), the
# summaries' two columns together
WIDE_PX, SUMMARY_WIDE_PX = 640, 690
CLICKABLE_CELLS = 12_000  # a focus grid of at most this many cells gets a marker a cell, which a click selects
# past this many positions a grid's columns are blocks of positions, each the blocks' largest weight: more columns
# than the plotting area's pixels (WIDE_PX) draw nothing more, and at 8,192 tokens a grid of SmolLM2's 270 heads was
# 2.2 million cells, 12 MB a chart to send and draw
MOST_COLUMNS = WIDE_PX


def column_blocks(values: np.ndarray, labels: list[str]) -> tuple[np.ndarray, list[str], np.ndarray | None]:
    """A grid's (rows, m) values and m position labels as drawn: as they are up to MOST_COLUMNS positions; else
    (rows, blocks) of each block's largest weight, a label per block ("120–132: the cat sat…") and the blocks'
    edges (block b covers positions edges[b]:edges[b + 1])."""
    m = values.shape[-1]
    if m <= MOST_COLUMNS:
        return values, axis_labels(labels), None
    edges = detail.block_edges(m, MOST_COLUMNS)
    top = np.maximum.reduceat(values, edges[:-1], axis=-1)
    return top, [detail.range_label(labels, a, b, width=16) for a, b in zip(edges[:-1], edges[1:])], edges


def head_row_labels(layer_ids: list[int], num_heads: int) -> list[str]:
    """'L3 H5' for every (layer row, head), layer by layer: the grid's row labels."""
    return [f"L{layer} H{h}" for layer in layer_ids for h in range(num_heads)]


def _what(f: Focus, direction: str) -> str:
    unit = "word" if f.words else "token"
    name = f"{unit} {f.index} ({html.escape(f.labels[f.index], quote=False)})"  # titles render HTML
    return f"what {name} attends to" if direction == TO else f"what attends to {name}"


def row_px(rows: int) -> float:
    """The px of a head's row in a focus grid of `rows` heads: TICK_LINE_PX, each head labelled, up to
    GRID_LABELLED_PX; then half of it, every other head labelled; past GRID_MOST_PX, what it leaves."""
    if rows * TICK_LINE_PX <= GRID_LABELLED_PX:
        return float(TICK_LINE_PX)
    return min(max(TICK_LINE_PX / 2, GRID_LABELLED_PX / rows), GRID_MOST_PX / rows)


def focus_grid(f: Focus, direction: str, layer_ids: list[int], *, rescale: bool = False,
               what: str | None = None, x_title: str | None = None, clickable: bool = False) -> go.Figure:
    """Layers × heads rows of bars as one heatmap: row (layer, head) is that head's attention
    from the focused position over every position (or to it from every position); lines
    separate the layers; the focused position is framed. `what` and `x_title` (cross-attention,
    whose focused token is on the other side: nothing framed) replace the title's subject and
    the x axis's title. Every head and every position is labelled where the labels fit (the rows
    are made TICK_LINE_PX tall up to GRID_LABELLED_PX; the columns get WIDE_PX), else every
    other one. `clickable` (up to CLICKABLE_CELLS cells): a transparent marker on each cell, read
    back by `grid_pick`."""
    v = f.values(direction)
    layers, heads, _ = v.shape
    z, xs, edges = column_blocks(v.reshape(layers * heads, -1), f.labels)
    m = len(xs)
    ys = head_row_labels(layer_ids, heads)
    weight = " %{z:.3f}" if edges is None else " largest %{z:.3f}"
    hover = ("%{y}: " + ("→ %{x}" if direction == TO else "%{x} →") + weight + "<extra></extra>")
    markers = clickable and z.size <= CLICKABLE_CELLS and edges is None  # a block is no one position to pick
    fig = go.Figure(go.Heatmap(z=z, x=xs, y=ys, zmin=0.0, zmax=scale_top(z, rescale), colorscale=COLORSCALE,
                               colorbar=colorbar("weight"), hovertemplate=hover, hoverinfo="skip" if markers else None,
                               xgap=1 if m <= 48 else 0, ygap=0))
    rows = layers * heads
    each = row_px(rows)
    if markers:
        r, c = np.divmod(np.arange(z.size), m)
        fig.add_trace(go.Scatter(
            x=np.asarray(xs)[c], y=np.asarray(ys)[r], mode="markers", showlegend=False, customdata=z.ravel(),
            marker=dict(symbol="square", size=max(4, min(16, int(each), WIDE_PX // max(m, 1) - 2)),
                        color="rgba(0,0,0,0)"),
            hovertemplate=hover.replace("%{z", "%{customdata").replace("<extra></extra>",
                                                                      "<extra>click: find the heads</extra>")))
    # every shape in one list: add_shape re-validates all earlier shapes on each call
    shapes = [_line(-0.5, m - 0.5, b * heads - 0.5, b * heads - 0.5) for b in range(1, layers)]
    if what is None:
        at = f.index if edges is None else int(np.searchsorted(edges, f.index, side="right")) - 1
        shapes.append(dict(type="rect", x0=at - 0.5, x1=at + 0.5, y0=-0.5, y1=layers * heads - 0.5,
                           line=dict(color="#d62728", width=1)))
    key_side = ("key" if direction == TO else "query") + " " + ("word" if f.words else "token")
    widths = sorted({int(w) for w in np.diff(edges)}) if edges is not None else []
    blocks = "" if edges is None else (f" (each column the largest weight of {widths[0]}"
                                       + (f"–{widths[-1]}" if len(widths) > 1 else "") + " positions)")
    title = run_title(f, f"Every head: {what or _what(f, direction)}" + (" (rescaled to max)" if rescale else "")
                      + blocks)
    x_ticks = spaced_ticks(xs, tick_step(m, WIDE_PX, TURNED_PX))
    box = margin(t=title_room(title), b=turned_room(x_ticks["tickvals"]) + 50)  # the app's font: 7 px more
    fig.update_layout(
        title=top_title(title),  # at the top, the margin its lines need: a wrapped title never meets the plot
        # ranges set: the cell markers would pad Plotly's autorange, and the rows would lose their pixels
        xaxis=dict(title=dict(text=x_title or key_side + ("" if edges is None else "s")),
                   type="category",
                   tickangle=-60, range=[-0.5, m - 0.5], **x_ticks),
        yaxis=dict(title=dict(text="layer, head"), type="category", range=[rows - 0.5, -0.5],
                   **spaced_ticks(ys, tick_step(rows, rows * each))),
        height=int(box["t"] + box["b"] + max(rows * each, 120)), margin=box, shapes=shapes,
    )
    return fig


def grid_pick(points: list[dict], m: int) -> tuple[int, int] | None:
    """(grid row: layer row × heads + head, position) of the first clicked cell marker of a clickable
    `focus_grid` over `m` positions, from a selection event's points; None when none is one."""
    for p in points or []:
        if p.get("curve_number", 1) != 1:
            continue
        idx = p.get("point_index", p.get("pointIndex", p.get("point_number")))
        if idx is not None and int(idx) >= 0:
            return divmod(int(idx), m)
    return None


def _line(x0: float, x1: float, y0: float, y1: float) -> dict:
    """A thin black line in data coordinates (a boundary between layers)."""
    return dict(type="line", x0=x0, x1=x1, y0=y0, y1=y1, line=dict(color="black", width=1))


SUMMARY_PANELS = ("mean over heads", "max over heads", "mean over layers", "max over layers")
COLUMN_GAP_PX = 80  # between the two columns of panels: the right column's row labels (L23, H11) and a gap


SUMMARY_LABELLED_PX = 1000  # the most px the summaries' rows take with every layer and head labelled


def focus_summary(f: Focus, direction: str, s: Summary, layer_ids: list[int]) -> go.Figure:
    """Mean and max over heads (one row per layer) and over layers (one row per head): four
    heatmaps on a 2 × 2 grid of axes, rows as tall as their number of rows. Every layer, head and
    position is labelled where the labels fit (a row TICK_LINE_PX tall while the rows take at most
    SUMMARY_LABELLED_PX; a panel about half of SUMMARY_WIDE_PX wide), else every other one."""
    xs = axis_labels(f.labels)
    layers, heads = s.head_max.shape
    layer_labels = [f"L{layer}" for layer in layer_ids]
    head_labels = [f"H{h}" for h in range(heads)]
    panels = (s.mean_over_heads, s.max_over_heads, s.mean_over_layers, s.max_over_layers)
    m = len(xs)
    title = run_title(f, f"Summaries: {_what(f, direction)}")
    top_px = title_room(title, NOTE_ROW_PX)
    # between the columns, the right column's row labels (L23, H11) and a gap
    h_gap = min(0.25, COLUMN_GAP_PX / PLOT_WIDTH_PX)
    width = (1 - h_gap) / 2
    x_ticks = spaced_ticks(xs, tick_step(m, width * SUMMARY_WIDE_PX, TURNED_PX))
    under = turned_room(x_ticks["tickvals"])
    each = min(float(TICK_LINE_PX), max(TICK_LINE_PX / 2, SUMMARY_LABELLED_PX / (layers + heads)))
    # in pixels: the rows, and between them the top row's token labels and the bottom row's titles
    gap_px = under + NOTE_ROW_PX + 8
    area = (layers + heads) * each + gap_px
    box = margin(t=top_px, b=under + 20)
    v_gap = gap_px / area
    # the axes' domains (what make_subplots would compute, at a fraction of its cost)
    top = (1 - v_gap) * layers / (layers + heads)
    cols = ([0.0, width], [1 - width, 1.0])
    rows = ([1 - top, 1.0], [0.0, 1 - v_gap - top])
    traces, axes, titles = [], {}, []
    for k, (z, name) in enumerate(zip(panels, SUMMARY_PANELS)):
        row, col = divmod(k, 2)
        suffix = "" if k == 0 else str(k + 1)
        ys = layer_labels if row == 0 else head_labels
        traces.append(go.Heatmap(z=z, x=xs, y=ys, xaxis=f"x{suffix}",
                                 yaxis=f"y{suffix}", zmin=0.0, zmax=1.0, colorscale=COLORSCALE,
                                 colorbar=colorbar("weight"), showscale=k == 0,
                                 hovertemplate="%{y}, %{x}: %{z:.3f}<extra></extra>"))
        axes[f"xaxis{suffix}"] = dict(domain=cols[col], anchor=f"y{suffix}", type="category", tickangle=-60,
                                      **x_ticks)
        axes[f"yaxis{suffix}"] = dict(domain=rows[row], anchor=f"x{suffix}", type="category",
                                      autorange="reversed", **spaced_ticks(ys, tick_step(len(ys), len(ys) * each)))
        titles.append(dict(text=name, x=sum(cols[col]) / 2, y=rows[row][1], xref="paper", yref="paper",
                           xanchor="center", yanchor="bottom", showarrow=False, font=dict(size=13)))
    fig = go.Figure(traces)
    fig.update_layout(title=top_title(title), margin=box, height=int(box["t"] + box["b"] + area),
                      annotations=titles, **axes)
    return fig


MAP_ROW_PX = 22  # a layer's row of the largest-weight map


def head_max_map(s: Summary, layer_ids: list[int], direction: str) -> go.Figure:
    """Layers × heads: each head's largest weight in this direction (excluding the token itself),
    the strongest head marked; every layer and head labelled where they fit (full width)."""
    layers, heads = s.head_max.shape
    z = np.where(np.isfinite(s.head_max), s.head_max, 0.0)
    xs, ys = [f"H{h}" for h in range(heads)], [f"L{layer}" for layer in layer_ids]
    fig = go.Figure(go.Heatmap(z=z, x=xs, y=ys,
                               zmin=0.0, zmax=1.0, colorscale=COLORSCALE, colorbar=colorbar("max"),
                               hovertemplate="%{y} %{x}: %{z:.3f}<extra></extra>", xgap=1, ygap=1))
    top = dict(type="rect", x0=s.top_head - 0.5, x1=s.top_head + 0.5, y0=s.top_layer - 0.5,
               y1=s.top_layer + 0.5, line=dict(color="#d62728", width=2))
    title = f"Largest weight per head ({direction})"
    plot = max(MAP_ROW_PX * 3, min(1200, MAP_ROW_PX * layers))
    box = margin(t=title_room(title), b=40)
    wide = TICK_CHAR_PX * len(xs[-1]) + 8  # a head's label, flat
    fig.update_layout(shapes=[top], title=plot_title(title), margin=box,
                      xaxis=dict(type="category", **spaced_ticks(xs, tick_step(heads, WIDE_PX, wide))),
                      yaxis=dict(type="category", autorange="reversed", **spaced_ticks(ys, tick_step(layers, plot))),
                      height=int(box["t"] + box["b"] + plot))
    return fig


RANKED_BAR_PX = 26  # a head's bar in the ranking


def ranked_heads(ranked: list[HeadWeight], layer_ids: list[int], *, query: str, key: str, total: int,
                 lens: str = "") -> go.Figure:
    """The top of a ranking of heads (`mha_viz.views.token_pair.heads_from_tokens`) as horizontal
    bars, the strongest on top, each labelled "L3 H1" (the model's layer) and its weight; `query`,
    `key`: the two positions' labels ("10: it"), `total`: the heads ranked; `lens`: what the weights
    are when not attention weights. A click on a bar is read by `ranked_pick`."""
    names = [f"L{layer_ids[r.layer]} H{r.head}" for r in ranked]
    weights = np.array([r.weight for r in ranked], dtype=np.float64)
    q, k = html.escape(query, quote=False), html.escape(key, quote=False)  # titles render HTML
    title = f"Heads where {q} looks at {k}: the top {len(ranked)} of {total}" + (f" · {lens}" if lens else "")
    fig = go.Figure(go.Bar(x=weights, y=names, orientation="h", marker_color="#2171b5",
                           text=[f"{w:.3f}" for w in weights], textposition="outside", cliponaxis=False,
                           hovertemplate="%{y}: %{x:.3f}<extra>click to open in the Head view</extra>"))
    box = margin(t=title_room(title), b=50, r=60)
    fig.update_layout(
        title=top_title(title), margin=box, height=int(box["t"] + box["b"] + RANKED_BAR_PX * max(len(ranked), 3)),
        xaxis=dict(title=dict(text=f"weight {q} puts on {k}"), range=[0, max(1e-6, float(weights.max(initial=0)))
                                                                          * 1.18], zeroline=False),
        yaxis=dict(type="category", autorange="reversed", **spaced_ticks(names)), bargap=0.25,
    )
    return fig


def ranked_pick(points: list[dict]) -> int | None:
    """The rank (0: the strongest) of the first clicked bar of `ranked_heads`, or None."""
    for p in points or []:
        if p.get("curve_number", 0) != 0:
            continue
        idx = p.get("point_index", p.get("pointIndex", p.get("point_number")))
        if idx is not None and int(idx) >= 0:
            return int(idx)
    return None
