"""The figure of a hybrid's other token-mixing layers (issue 55): each layer's exact effective attention
(`mha_viz.effective`), one thumbnail a head or channel group, on a grid beside the softmax heads' own. Effective
weights are signed and rows do not sum to 1, so the thumbnails use a diverging scale centred on 0, each scaled to
its own largest |A| (the hover gives it). Plain functions over arrays; nothing here knows Streamlit."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
import plotly.colors
import plotly.graph_objects as go
import torch

from mha_viz.drawing.heads import png_data_uri
from mha_viz.drawing.style import DIVERGING, margin, plot_title
from mha_viz_models.effective.layer import feed

THUMB = 48  # cells a side of each thumbnail, as the heads' grid


@dataclass(frozen=True)
class EffectiveThumbnails:
    """Each layer's groups pooled to at most THUMB cells a side, sign kept (the cell of largest |A| in each
    block), and each group's largest |A|: what the grid draws, without the n × n matrices."""

    layers: list[int]  # the model's layer number of each row
    labels: list[str]  # what each row is ("gated DeltaNet (delta rule)")
    groups: list[str]  # what a column is in each row ("head", "channel group (mean)")
    pooled: np.ndarray  # (rows, most groups, s, s) float32, NaN where a row has fewer groups
    largest: np.ndarray  # (rows, most groups) float32: each group's largest |A|, NaN where none
    # every token mixer's share of their writes, by (layer number, kind) (`EffectiveAttention.mixing_shares`)
    shares: dict[tuple[int, str], float] = field(default_factory=dict)

    @property
    def kind_of(self) -> dict[int, str]:
        """{layer number: its kind} of the layers drawn (their label up to its colon: "gated DeltaNet")."""
        return {layer: label.split(":")[0] for layer, label in zip(self.layers, self.labels)}

    def kind_shares(self) -> dict[str, float]:
        """{kind: the share of the model's token mixing its mixers do together}, largest first."""
        total: dict[str, float] = {}
        for (_number, kind), share in self.shares.items():
            total[kind] = total.get(kind, 0.0) + share
        return dict(sorted(total.items(), key=lambda item: -item[1]))

    def layers_of(self, kind: str) -> list[int]:
        """The layer numbers whose mixers of `kind` are in `shares`, in the model's order."""
        return [number for number, k in self.shares if k == kind]


class PoolRows:
    """One layer's thumbnails made from blocks of its rows (in any order): each group pooled to at most `size` cells
    a side, each cell the block's value of largest |A| with its sign (the bins of PyTorch's adaptive max-pool, which
    separates into keys then rows), and each group's largest |A|. A block is pooled one group at a time: the
    negated copy its smallest values are pooled from is one group's rows, never the layer's n × n matrices."""

    def __init__(self, groups: int, n: int, size: int = THUMB):
        self.side = side = min(size, n)
        self.starts, self.ends = bins(n, side)
        self.top = np.full((groups, side, side), -np.inf, dtype=np.float32)
        self.bottom = np.full((groups, side, side), np.inf, dtype=np.float32)
        self.largest = np.zeros(groups, dtype=np.float32)

    def add(self, first: int, rows: np.ndarray) -> None:
        """Rows first, first + 1, … of every group: (G, rows, n)."""
        last = first + rows.shape[1]
        for g, block in enumerate(rows):
            x = torch.as_tensor(np.ascontiguousarray(block, dtype=np.float32))[:, None, :]
            top = torch.nn.functional.adaptive_max_pool1d(x, self.side)[:, 0].numpy()  # (rows, side): over keys
            bottom = -torch.nn.functional.adaptive_max_pool1d(-x, self.side)[:, 0].numpy()
            self.largest[g] = max(self.largest[g], top.max(), -bottom.min())
            # only the row bins this block meets: ends after its first row, starts before its end
            for i in range(int(np.searchsorted(self.ends, first, "right")), int(np.searchsorted(self.starts, last))):
                lo, hi = max(int(self.starts[i]), first), min(int(self.ends[i]), last)
                if lo < hi:
                    np.maximum(self.top[g, i], top[lo - first:hi - first].max(axis=0), out=self.top[g, i])
                    np.minimum(self.bottom[g, i], bottom[lo - first:hi - first].min(axis=0), out=self.bottom[g, i])

    def finish(self) -> tuple[np.ndarray, np.ndarray]:
        """((G, side, side) pooled, sign kept; (G,) largest |A|)."""
        return np.where(self.top >= -self.bottom, self.top, self.bottom), self.largest


def bins(n: int, side: int) -> tuple[np.ndarray, np.ndarray]:
    """The [start, end) of each of `side` bins over n rows or keys, as PyTorch's adaptive pooling cuts them (neighbours
    may share an edge cell; every one alone when side = n)."""
    i = np.arange(side)
    return (i * n) // side, -(-(i + 1) * n // side)


def thumbnails(effective) -> EffectiveThumbnails:
    """The thumbnails of an `mha_viz.effective.EffectiveAttention` (its `aggregated` matrix where a layer's is per
    channel: one per channel group)."""
    return stacked([layer_thumbnails(la) for la in effective.layers], effective.mixing_shares())


def layer_thumbnails(layer) -> EffectiveThumbnails:
    """One `EffectiveLayer`'s row of thumbnails (no shares), from its blocks of rows (`EffectiveLayer.blocks`): what
    `stacked` puts together, so that a caller reducing the layers one at a time (`mha_viz.effective.each_reduced`)
    keeps no n × n matrix."""
    pool = PoolRows(layer.shown_groups, layer.n)
    feed(layer, pool)
    return layer_row(layer, *pool.finish())


def layer_row(layer, pooled: np.ndarray, largest: np.ndarray) -> EffectiveThumbnails:
    """One layer's row of thumbnails from its pooled groups and their largest |A| (`PoolRows.finish`)."""
    return EffectiveThumbnails(layers=[layer.layer], labels=[layer.label], groups=[layer.grouping],
                               pooled=pooled[None], largest=largest[None])


def stacked(rows: list[EffectiveThumbnails], shares: dict[tuple[int, str], float]) -> EffectiveThumbnails:
    """The rows of `layer_thumbnails` as one grid's thumbnails, in their order, with `shares`
    (`EffectiveAttention.mixing_shares`): a row with fewer groups than the most is padded with NaN."""
    most = max(r.pooled.shape[1] for r in rows)
    side = rows[0].pooled.shape[-1]
    pooled = np.full((len(rows), most, side, side), np.nan, dtype=np.float32)
    largest = np.full((len(rows), most), np.nan, dtype=np.float32)
    for i, r in enumerate(rows):
        pooled[i, :r.pooled.shape[1]] = r.pooled[0]
        largest[i, :r.largest.shape[1]] = r.largest[0]
    return EffectiveThumbnails(layers=[r.layers[0] for r in rows], labels=[r.labels[0] for r in rows],
                               groups=[r.groups[0] for r in rows], pooled=pooled, largest=largest, shares=shares)


@lru_cache(maxsize=1)
def diverging_palette() -> np.ndarray:
    """256 RGB colours: DIVERGING sampled at 255 levels (−1 … 1 as 0 … 254), then white for background."""
    rgb = plotly.colors.sample_colorscale(DIVERGING, list(np.linspace(0, 1, 255)), colortype="tuple")
    out = np.vstack([np.round(np.array(rgb) * 255), [[255, 255, 255]]]).astype(np.uint8)
    out.setflags(write=False)
    return out


def grid(th: EffectiveThumbnails) -> go.Figure:
    """Rows: the layers in the model's order, labelled with their kind; columns: their heads or channel groups.
    Each thumbnail scaled to its own largest |A| on a diverging scale (blue negative, red positive)."""
    rows, cols = th.pooled.shape[:2]
    t = th.pooled.shape[-1]
    rep = max(1, THUMB // t)
    tiles = th.pooled / np.where(np.isnan(th.largest), 1.0, np.maximum(th.largest, 1e-12))[:, :, None, None]
    tiles = tiles.repeat(rep, axis=-2).repeat(rep, axis=-1)
    t *= rep
    gap = max(2, t // 8)
    canvas = np.full((rows * (t + gap) - gap, cols * (t + gap) - gap), np.nan, dtype=np.float32)
    for r in range(rows):
        for c in range(cols):
            canvas[r * (t + gap):r * (t + gap) + t, c * (t + gap):c * (t + gap) + t] = (tiles[r, c] + 1) / 2
    centers = np.arange(max(rows, cols)) * (t + gap) + (t - 1) / 2
    cc, rr = np.meshgrid(np.arange(cols), np.arange(rows))
    shown = ~np.isnan(th.largest.ravel())
    fig = go.Figure()
    fig.add_trace(go.Image(source=png_data_uri(canvas, diverging_palette()), hoverinfo="skip"))
    fig.add_trace(go.Scatter(
        x=centers[cc.ravel()][shown], y=centers[rr.ravel()][shown], mode="markers",
        marker=dict(symbol="square", size=44, color="rgba(0,0,0,0)"),
        customdata=np.stack([np.asarray(th.layers)[rr.ravel()], cc.ravel(), th.largest.ravel()], axis=1)[shown],
        text=[f"{th.labels[r]}, {th.groups[r]}" for r in rr.ravel()[shown]],
        hovertemplate="layer %{customdata[0]}, group %{customdata[1]}: %{text}<br>largest |A| "
                      "%{customdata[2]:.3g} (the thumbnail spans ± it)<extra></extra>",
        showlegend=False,
    ))
    box = margin(l=150, t=60)
    fig.update_layout(
        title=plot_title("Effective attention, signed (blue < 0 < red)"),
        xaxis=dict(tickvals=centers[:cols].tolist(), ticktext=[f"G{c}" for c in range(cols)], side="bottom",
                   showgrid=False, zeroline=False, range=[-0.5, canvas.shape[1] - 0.5]),
        yaxis=dict(tickvals=centers[:rows].tolist(), ticktext=[f"L{la} · {kind}"
                                                            for la, kind in th.kind_of.items()],
                   showgrid=False, zeroline=False, range=[canvas.shape[0] - 0.5, -0.5]),
        width=max(box["l"] + box["r"] + cols * 52, 600), height=box["t"] + box["b"] + rows * 52,
        margin=box, plot_bgcolor="white", dragmode=False)
    return fig


TICKS_UP_TO = 64  # tokens whose text labels a matrix's axes; past it, their positions
DETAIL_SIDE = 512  # the most cells a side `matrix` draws: past it, each cell a block of tokens (`PoolRows`)


def block_starts(n: int, side: int) -> np.ndarray:
    """The first token of each of `side` blocks over n tokens, as `PoolRows` cuts them (every token when side = n)."""
    return bins(n, side)[0]


def matrix(a: np.ndarray, tokens: list[str], title: str) -> go.Figure:
    """One head or channel group's effective attention, queries down, keys across, on a diverging scale centred on 0
    and spanning ± its largest |A| (weights are signed and rows do not sum to 1). `a`: (s, s) over the n = len(tokens)
    tokens, every cell (s = n) or `PoolRows`' blocks (s < n: each cell the block's value of largest |A|, its sign
    kept). The hover reads the axes: no n² labels are sent (at most TICKS_UP_TO token labels, else positions)."""
    n, side = len(tokens), a.shape[-1]
    span = float(np.abs(a).max()) or 1.0
    pooled = side < n
    if n <= TICKS_UP_TO and not pooled:  # every token's label on the axes, and in the hover
        axis = [f"{i}: {t}" for i, t in enumerate(tokens)]
        where, ticks = "query %{y}<br>key %{x}", dict(type="category", dtick=1)
    else:  # positions: the first token of each cell's block
        axis = block_starts(n, side).tolist()
        where = ("queries from %{y}<br>keys from %{x}<br>(a block's value of largest |A|)" if pooled
                 else "query %{y}<br>key %{x}")
        ticks = {}
    fig = go.Figure(go.Heatmap(z=a, x=axis, y=axis, zmin=-span, zmax=span, zmid=0, colorscale=DIVERGING,
                               hovertemplate=where + "<br>A = %{z:.4g}<extra></extra>", colorbar=dict(title="A"),
                               xgap=0, ygap=0))
    box = margin(l=120, t=60, b=100)
    size = min(900, max(420, 14 * side))
    fig.update_layout(title=plot_title(title), xaxis=dict(title="key", side="bottom", **ticks),
                      yaxis=dict(title="query", autorange="reversed", **ticks),
                      width=size + box["l"] + box["r"], height=size + box["t"] + box["b"], margin=box,
                      plot_bgcolor="white")
    return fig
