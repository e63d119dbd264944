"""Figures of how heads compose, from the weights (`mha_viz.circuits.composition`): one kind's scores as a
heatmap of earlier heads (rows) by later heads (columns), the scores under a threshold left blank, a marker
on each shown cell that a click selects (`pair_pick`)."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from mha_viz.drawing.metrics import head_labels
from mha_viz.drawing.style import COLORSCALE, colorbar, margin, plot_title

NAMES = {"q": "Q-composition", "k": "K-composition", "v": "V-composition"}
MARKERS = 5000  # cells shown up to which each gets a marker that a click selects; past it none (a click on a cell
# without one would snap to a neighbour's)


def composition_figure(scores: np.ndarray, kind: str, *, baseline: float, above: float = 1.0,
                       layer_ids: list[int] | None = None) -> go.Figure:
    """scores (L, H, L, H), NaN where the first head is not earlier; cells under `above` × `baseline` left
    blank. Rows: the earlier head (it writes), columns: the later head (it reads)."""
    L, H = scores.shape[:2]
    flat = np.asarray(scores, dtype=np.float64).reshape(L * H, L * H)
    shown = np.where(flat >= above * baseline, flat, np.nan)
    labels = head_labels(L if layer_ids is None else layer_ids, H)
    finite = flat[np.isfinite(flat)]
    top = float(finite.max()) if finite.size else 1.0
    fig = go.Figure(go.Heatmap(
        z=shown.astype(np.float32), x=labels, y=labels, zmin=0.0, zmax=top, colorscale=COLORSCALE,
        colorbar=colorbar("score"), hovertemplate="%{y} → %{x}: %{z:.4f}<extra></extra>"))
    rows, cols = np.nonzero(np.isfinite(shown))
    if 0 < rows.size <= MARKERS:
        fig.add_trace(go.Scatter(
            x=[labels[c] for c in cols], y=[labels[r] for r in rows], mode="markers", showlegend=False,
            marker=dict(symbol="square", size=max(3, min(14, 700 // (L * H))), color="rgba(0,0,0,0)"),
            customdata=np.stack([rows, cols, shown[rows, cols]], axis=1),
            hovertemplate="%{y} → %{x}: %{customdata[2]:.4f}<extra>click: both heads</extra>"))
    line = dict(color="#bbbbbb", width=1)
    shapes = [s for b in range(1, L) for s in (
        dict(type="line", x0=b * H - 0.5, x1=b * H - 0.5, y0=-0.5, y1=L * H - 0.5, line=line),
        dict(type="line", y0=b * H - 0.5, y1=b * H - 0.5, x0=-0.5, x1=L * H - 0.5, line=line))] if L <= 48 else []
    # every other layer a light band across the matrix (seen where cells are blank), under the heatmap
    band = dict(type="rect", layer="below", line=dict(width=0), fillcolor="rgba(0,0,0,0.045)")
    shapes += [s for b in range(1, L, 2) for s in (
        dict(band, x0=b * H - 0.5, x1=(b + 1) * H - 0.5, y0=-0.5, y1=L * H - 0.5),
        dict(band, y0=b * H - 0.5, y1=(b + 1) * H - 0.5, x0=-0.5, x1=L * H - 0.5))]
    ticks = _ticks(labels, L if layer_ids is None else layer_ids, H)
    fig.update_layout(
        title=plot_title(f"{NAMES[kind]}: how much each earlier head's output feeds each later head's "
                         f"{ {'q': 'queries', 'k': 'keys', 'v': 'values'}[kind]} (random baseline {baseline:.3f}; "
                         f"shown ≥ {above:g} × it)"),
        xaxis=dict(type="category", title="later head (reads)", tickangle=-90, **ticks),
        yaxis=dict(type="category", title="earlier head (writes)", autorange="reversed", **ticks),
        height=760, margin=margin(), shapes=shapes, plot_bgcolor="white",
        hoverdistance=max(2, 350 // (L * H)))  # about half a cell: a click picks the cell under it
    return fig


# the most heads labelled one by one; past it, the most layers labelled: the plot is about 560 px of the figure's 760,
# and a label takes 12 px (issue 90: MiniLM's 72 heads, one label each, overlapped)
PLOT_PX, LABEL_PX = 560, 12
HEAD_TICKS = LAYER_TICKS = PLOT_PX // LABEL_PX


def _ticks(labels: list[str], layers: int | list[int], num_heads: int) -> dict:
    """Each head's label while at most HEAD_TICKS heads; past that, each layer's number ("L12") at the
    middle of its block of heads (every k-th layer past LAYER_TICKS layers)."""
    if len(labels) <= HEAD_TICKS:
        return dict(tickmode="array", tickvals=labels, ticktext=labels)
    ids = list(range(layers)) if isinstance(layers, int) else list(layers)
    step = -(-len(ids) // LAYER_TICKS)
    kept = range(0, len(ids), step)
    return dict(tickmode="array", tickvals=[labels[b * num_heads + num_heads // 2] for b in kept],
                ticktext=[f"L{ids[b]}" for b in kept])


def clickable(scores: np.ndarray, baseline: float, above: float) -> bool:
    """Whether `composition_figure` gives each shown cell a marker (at most MARKERS shown)."""
    flat = np.asarray(scores, dtype=np.float64)
    return 0 < int(np.count_nonzero(np.nan_to_num(flat, nan=-np.inf) >= above * baseline)) <= MARKERS


def pair_pick(points: list[dict], labels: list[str]) -> tuple[int, int] | None:
    """(earlier, later) flat head indices (layer row × heads + head) of the first clicked cell marker of
    `composition_figure`, read from its axes' labels (`labels`: `head_labels` of the figure), or None."""
    index = {label: i for i, label in enumerate(labels)}
    for p in points or []:
        if p.get("curve_number", 1) != 1:
            continue
        earlier, later = index.get(str(p.get("y"))), index.get(str(p.get("x")))
        if earlier is not None and later is not None:
            return earlier, later
    return None


def strongest(scores: np.ndarray, baseline: float, k: int = 15, *, layer_ids: list[int] | None = None,
              above: float = 0.0) -> list[dict]:
    """The k largest scores as rows: earlier head, later head, score, × the baseline; only those at least `above` ×
    the baseline (the threshold the chart shows: the table listed rows under it)."""
    L, H = scores.shape[:2]
    flat = np.nan_to_num(np.asarray(scores, dtype=np.float64).reshape(L * H, L * H), nan=-np.inf)
    labels = head_labels(L if layer_ids is None else layer_ids, H)
    order = np.argsort(-flat, axis=None, kind="stable")[:k]
    rows = []
    for idx in order:
        a, b = divmod(int(idx), L * H)
        if not np.isfinite(flat[a, b]) or baseline > 0 and flat[a, b] < above * baseline:
            break
        rows.append({"earlier head": labels[a], "later head": labels[b], "score": round(float(flat[a, b]), 4),
                     "× baseline": round(float(flat[a, b] / baseline), 2) if baseline > 0 else None})
    return rows
