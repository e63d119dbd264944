"""Plotly figures of attention: one head at a level of detail and the layers × heads overview.

Plain functions from an `AttentionRun` to a `go.Figure`; nothing here knows Streamlit. Colours,
titles and token labels come from `style`.
"""

from __future__ import annotations

import base64
import html
import io
from functools import lru_cache

import numpy as np
import plotly.graph_objects as go

from mha_viz.capture.run import AttentionRun
from mha_viz.drawing.chat_roles import on_level
from mha_viz.drawing.style import (
    COLORSCALE,
    axis_labels,
    colorbar,
    margin,
    plot_title,
    run_title,
    scale_top,
    token_map_layout,
)
from mha_viz.views import detail, head_reads
from mha_viz.views.thumbnails import thumbnails
from mha_viz_models.attention.heads import kv_head


def _square_heatmap(z: np.ndarray, labels: list[str], *, title: str, zmax: float,
                    hovertemplate: str, customdata=None, axis_titles=("key (attended to)", "query (attending)"),
                    show_labels: bool = True) -> go.Figure:
    """An attention-like square matrix with the same labels on both axes (already escaped)."""
    n = len(labels)
    return go.Figure(go.Heatmap(
        z=z, x=labels, y=labels, zmin=0.0, zmax=zmax, colorscale=COLORSCALE, customdata=customdata,
        colorbar=colorbar("weight"), hovertemplate=hovertemplate,
        xgap=1 if n <= 48 else 0, ygap=1 if n <= 48 else 0,
    ), layout=dict(title=plot_title(title), **token_map_layout(n, *axis_titles, show_labels=show_labels),
                   margin=margin()))  # the layout given whole (docs/architecture.md, *Adding a figure*)


def _head_title(run: AttentionRun, layer: int, head: int) -> str:
    groups = run.kv_heads(layer)  # a layer's own count (Gemma 4's global layers share fewer)
    kv = f", KV head {kv_head(head, run.num_heads, groups)}" if groups != run.num_heads else ""
    return run_title(run, f"Layer {run.layer_ids[layer]}, head {head}{kv}")  # the model's layer number of row `layer`


CLICKABLE_TOKENS = 96  # a head heatmap this small gets a marker a cell, which a click selects (`cell_pick`)


def head_heatmap(run: AttentionRun, layer: int, head: int, *, rescale: bool = False,
                 window: tuple[int, int] | None = None, rows=None, cols=None, clickable: bool = False) -> go.Figure:
    """One head's probabilities: queries on rows (top to bottom), keys on columns, at full
    resolution; `window` = (start, stop) keeps tokens start..stop-1 on both axes; `rows` and
    `cols` (token positions) keep only those queries and those keys (`detail.subset`). Only the rows drawn
    are read (`head_reads`: a long run recomputes them), over the keys drawn. `clickable` (up to
    CLICKABLE_TOKENS shown): a transparent marker on each cell, read back by `cell_pick`.

    The colour scale spans 0..1, or 0..the shown part's maximum when `rescale` is set.
    """
    if rows is not None or cols is not None:
        return head_subset(run, layer, head, range(run.n) if rows is None else rows,
                           range(run.n) if cols is None else cols, rescale=rescale)
    labels = axis_labels(run.tokens)
    title = _head_title(run, layer, head)
    start, stop = 0, run.n
    if window is not None:
        start, stop = max(0, window[0]), min(run.n, window[1])
        labels = labels[start:stop]
        title += f", tokens {start}–{stop - 1} of {run.n}"
    a = head_reads.window(run, layer, head, start, stop)  # only the rows drawn, over the keys drawn
    zmax = scale_top(a, rescale)
    title += " (rescaled to max)" if rescale else ""
    if len(labels) > detail.FULL_DETAIL_TOKENS:
        first = 0 if window is None else start
        return _head_image(a, run.tokens[first:first + len(labels)], title=title, zmax=zmax, offset=first)
    fig = _square_heatmap(a, labels, title=title, zmax=zmax,
                          hovertemplate="%{y} → %{x}: %{z:.3f}<extra></extra>")
    if clickable and len(labels) <= CLICKABLE_TOKENS:
        n = len(labels)
        queries, keys = np.divmod(np.arange(n * n), n)
        fig.add_trace(go.Scatter(
            x=np.asarray(labels)[keys], y=np.asarray(labels)[queries], mode="markers", showlegend=False,
            marker=dict(symbol="square", size=max(4, min(18, 600 // max(n, 1))), color="rgba(0,0,0,0)"),
            customdata=a.ravel(), hovertemplate="%{y} → %{x}: %{customdata:.3f}<extra>click: why here?</extra>"))
    return fig


def cell_pick(points: list[dict], n: int, offset: int = 0) -> tuple[int, int] | None:
    """(query, key) positions of the first clicked cell marker of a clickable `head_heatmap` showing n tokens
    from position `offset` on, from a selection event's points; None when none is one."""
    for p in points or []:
        if p.get("curve_number", 1) != 1:
            continue
        idx = p.get("point_index", p.get("pointIndex", p.get("point_number")))
        if idx is not None and 0 <= int(idx) < n * n:
            i, j = divmod(int(idx), n)
            return i + offset, j + offset
    return None


def head_subset(run: AttentionRun, layer: int, head: int, rows, cols, *, rescale: bool = False) -> go.Figure:
    """The queries `rows` over the keys `cols` of one head, every cell, labelled by their tokens
    (labels made unique over the whole text, so a repeated token stays one row)."""
    rows, cols = list(rows), list(cols)
    a = head_reads.cells(run, layer, head, rows, cols)
    labels = axis_labels(run.tokens)
    zmax = scale_top(a, rescale)
    title = (f"{_head_title(run, layer, head)}, {len(rows)} queries × {len(cols)} keys of {run.n}"
             + (" (rescaled to max)" if rescale else ""))
    layout = token_map_layout(len(rows), "key (attended to)", "query (attending)")
    layout["xaxis"]["showticklabels"] = len(cols) <= 160
    return go.Figure(go.Heatmap(
        z=a, x=[labels[j] for j in cols], y=[labels[i] for i in rows], zmin=0.0, zmax=zmax,
        colorscale=COLORSCALE, colorbar=colorbar("weight"),
        hovertemplate="%{y} → %{x}: %{z:.3f}<extra></extra>",
        xgap=1 if len(cols) <= 48 else 0, ygap=1 if len(rows) <= 48 else 0,
    ), layout=dict(title=plot_title(title), **layout, margin=margin()))


def _head_image(a: np.ndarray, tokens: list[str], *, title: str, zmax: float, blocks: int = 128,
                offset: int = 0) -> go.Figure:
    """One head (or a window of it) as a `matrix_image`, queries down, keys across."""
    return matrix_image(a, tokens, title=title, zmax=zmax, blocks=blocks, offset=offset)


IMAGE_MAX = 2048  # pixels a side of a matrix's image (`matrix_image`)


def matrix_image(a: np.ndarray, tokens: list[str], *, title: str, zmax: float, blocks: int = 128,
                 offset: int = 0, x_title: str = "key (attended to)", y_title: str = "query (attending)",
                 rows: str = "queries", cols: str = "keys", more: str = "open a token window for exact cells",
                 scale_title: str | None = "weight") -> go.Figure:
    """Every cell of a long (n, n) token matrix as one pixel of a palette PNG (a few hundred KB
    at n = 512, where n² float32 numbers would be 1.4 MB), under an invisible grid of at most
    blocks × blocks cells whose hover gives the block's token range, max and mean. `offset`:
    the position in the text of the first row and column (a window), for labels and hover;
    `rows`, `cols` name the rows and the columns in the hover, `more` ends it, `scale_title`
    titles the colour bar. Past IMAGE_MAX cells a side (a words level of 6,000 words) the image is max-pooled
    to IMAGE_MAX pixels a side, each pixel its cells' largest: a screen shows no more, and the PNG of every
    cell took most of a click."""
    n = a.shape[0]
    top, mean, edges = detail.pooled(a, blocks)
    centers = (edges[:-1] + edges[1:] - 1) / 2
    shown = detail.max_pool(a, IMAGE_MAX) if n > IMAGE_MAX else a
    dx = n / shown.shape[0]  # cells a pixel: the image spans the same n positions either way
    step = max(1, n // 24)
    ticks = list(range(0, n, step))
    ticktext = [f"{offset + i}: {html.escape(tokens[i][:12], quote=False)}" for i in ticks]
    ticks = [offset + i for i in ticks]
    side = 900
    return go.Figure([go.Image(source=png_data_uri(shown / zmax), x0=offset - 0.5 + dx / 2, dx=dx,
                               y0=offset - 0.5 + dx / 2, dy=dx, hoverinfo="skip"), go.Heatmap(
        z=top, x=centers + offset, y=centers + offset, customdata=mean, zmin=0.0, zmax=zmax,
        colorscale=COLORSCALE, opacity=0, colorbar=colorbar(scale_title),  # pixel i is text position offset + i
        hovertemplate=f"{rows} near %{{y:.0f}}, {cols} near %{{x:.0f}}<br>block max %{{z:.3f}} · mean "
                      f"%{{customdata:.4f}}<extra>{more}</extra>",
    )], layout=dict(
        title=plot_title(title + (f" · {n} × {n} pixels" if n <= IMAGE_MAX else f" · {n} × {n} cells in "
                                  f"{shown.shape[0]} × {shown.shape[0]} pixels, each its cells' largest")),
        xaxis=dict(title=dict(text=x_title), tickvals=ticks, ticktext=ticktext, tickangle=-60,
                   range=[offset - 0.5, offset + n - 0.5], showgrid=False, zeroline=False),
        yaxis=dict(title=dict(text=y_title), tickvals=ticks, ticktext=ticktext,
                   range=[offset + n - 0.5, offset - 0.5], showgrid=False, zeroline=False, scaleanchor="x"),
        height=side, margin=margin(), plot_bgcolor="white",
    ))


def token_image(matrix: np.ndarray, tokens: list[str], *, title: str, zmax: float | None = None) -> go.Figure:
    """A long token-by-token matrix (rollout, flow), colours up to `zmax` (default its maximum), as a
    `matrix_image` (as a long head is drawn): `metrics.token_matrix`'s n² floats would be
    1.4 MB at n = 512. Hover: blocks of tokens, their max and mean."""
    m = np.asarray(matrix, dtype=np.float32)
    top = float(max(m.max(), 1e-12)) if zmax is None else float(zmax)
    return matrix_image(m, tokens, title=title, zmax=top, x_title="input token",
                        y_title="token at this layer", rows="tokens", cols="input tokens", more="",
                        scale_title=None)


POOLED_SIZE = 128  # the block view's blocks a side at most


def head_pooled(run: AttentionRun, layer: int, head: int, *, size: int = POOLED_SIZE,
                rescale: bool = False) -> go.Figure:
    """The whole head downsampled to at most size × size blocks: colour = the block's maximum
    (a single strong cell stays visible), hover = token ranges, max and mean. Where every block is one token (n at
    most `size`), the axes name them ("3: cat"); wider blocks are named by hover alone."""
    edges = detail.block_edges(run.n, size)
    top, mean = run.pooled_head(layer, head, edges)  # streamed: never the head's n × n at once
    labels = axis_labels([detail.range_label(run.tokens, a, b) for a, b in zip(edges[:-1], edges[1:])])
    zmax = scale_top(top, rescale)
    title = f"{_head_title(run, layer, head)}: all {run.n} tokens in {len(labels)} × {len(labels)} blocks (block max)"
    return _square_heatmap(top, labels, title=title, zmax=zmax, customdata=mean, show_labels=len(labels) == run.n,
                           hovertemplate="queries %{y}<br>keys %{x}<br>max %{z:.3f} · mean %{customdata:.4f}"
                                         "<extra></extra>")


def head_words(run: AttentionRun, layer: int, head: int, *, rescale: bool = False) -> go.Figure:
    """Word-to-word attention: pieces merged (sum over a word's keys, mean over its queries)."""
    w = head_reads.word_level(run, layer, head)
    words = detail.word_labels(run.tokens, run.word_ids)
    zmax = scale_top(w, rescale)
    title = f"{_head_title(run, layer, head)}, by word ({len(words)} words)"
    if len(words) > detail.FULL_DETAIL_TOKENS:
        return _head_image(w, words, title=title, zmax=zmax)
    return _square_heatmap(w, axis_labels(words), title=title,
                           zmax=zmax, hovertemplate="%{y} → %{x}: %{z:.3f}<extra></extra>",
                           axis_titles=("key word", "query word"))


TOKENS, BLOCKS, WORDS = "tokens", "blocks", "words"  # the levels of detail of one head


def default_level(n: int) -> str:
    """The level a head of n tokens opens on: every token up to `detail.FULL_DETAIL_TOKENS`, else
    blocks (every token of every pair would be n² cells to send and to see)."""
    return TOKENS if n <= detail.FULL_DETAIL_TOKENS else BLOCKS


def head_figure(run: AttentionRun, layer: int, head: int, *, level: str | None = None, rescale: bool = False,
                window: tuple[int, int] | None = None, roles: tuple | None = None) -> go.Figure:
    """One head at a level of detail: TOKENS (`head_heatmap`, `window` = (start, stop) keeping
    those tokens), BLOCKS (`head_pooled`) or WORDS (`head_words`); None: `default_level`. roles: a chat's (role,
    template) of the run's tokens (`ChatText.aligned`), drawn along both axes at that level (`chat_roles.on_level`)."""
    if level is None:
        level = TOKENS if window is not None else default_level(run.n)
    if level == TOKENS:
        fig = head_heatmap(run, layer, head, rescale=rescale, window=window)
    elif level == BLOCKS:
        fig = head_pooled(run, layer, head, rescale=rescale)
    elif level == WORDS:
        fig = head_words(run, layer, head, rescale=rescale)
    else:
        raise ValueError(f"level {level!r}: choose {TOKENS!r}, {BLOCKS!r} or {WORDS!r}")
    if roles is None:
        return fig
    return on_level(fig, *roles, level, window=window, edges=detail.block_edges(run.n, POOLED_SIZE),
                               groups=detail.word_groups(run.word_ids))


@lru_cache(maxsize=1)
def _palette() -> np.ndarray:
    """256 RGB colours: COLORSCALE sampled at 255 levels, then white for background."""
    stops = np.array([p for p, _ in COLORSCALE])
    rgb = np.array([[int(c[i:i + 2], 16) for i in (1, 3, 5)] for _, c in COLORSCALE], dtype=np.float32)
    levels = np.linspace(0, 1, 255)
    pal = np.stack([np.interp(levels, stops, rgb[:, k]) for k in range(3)], axis=-1)
    out = np.vstack([np.round(pal), [[255, 255, 255]]]).astype(np.uint8)
    out.setflags(write=False)  # shared by every call
    return out


def quantize(values: np.ndarray) -> np.ndarray:
    """Values in [0, 1] to palette indices 0..254; NaN (background) to 255."""
    idx = np.round(np.clip(np.nan_to_num(values, nan=0.0), 0, 1) * 254).astype(np.uint8)
    idx[np.isnan(values)] = 255
    return idx


def colorize(values: np.ndarray) -> np.ndarray:
    """Map values in [0, 1] (NaN = background, white) to uint8 RGB through COLORSCALE."""
    return _palette()[quantize(values)]


def png_data_uri(values: np.ndarray, palette: np.ndarray | None = None) -> str:
    """An (h, w) array of values in [0, 1] (NaN = white) as a palette PNG data URI: one byte
    a pixel before compression. palette: 256 RGB colours, the last the background (default COLORSCALE's)."""
    from PIL import Image  # heavy, needed by the PNG views only (preloaded once by the app)

    img = Image.fromarray(quantize(values), mode="P")
    img.putpalette((_palette() if palette is None else palette).ravel().tolist())
    buf = io.BytesIO()
    # level 3: MiniLM's layers × heads grid (236 × 476) in 1.1 ms and 25.8 KB, against 3.3 ms and 25.0 KB at level 6
    # (a class of 300 makes one a student); optimize=True: 12 % smaller, 12× slower
    img.save(buf, format="PNG", compress_level=3)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def grid_canvas(run: AttentionRun, *, thumb: int = 48, rescale: bool = True) -> tuple[np.ndarray, int, int]:
    """All heads tiled in one (L·(t+gap), H·(t+gap)) array (NaN between tiles).

    Each head is max-pooled to at most `thumb` cells a side (a single strong cell stays
    visible), short inputs are enlarged by repeating cells, and with `rescale` each tile is
    divided by its own maximum so weak heads still show their shape. Returns the canvas, the
    tile size t and the gap.
    """
    return tile_canvas(thumbnails(run, thumb), thumb=thumb, rescale=rescale)


def tile_canvas(pooled: np.ndarray, *, thumb: int = 48, rescale: bool = True) -> tuple[np.ndarray, int, int]:
    """`grid_canvas` from thumbnails already pooled to at most thumb × thumb: (L, H, s, s)."""
    L, H = pooled.shape[:2]
    if rescale:
        pooled = pooled / np.maximum(pooled.max(axis=(-2, -1), keepdims=True), 1e-12)
    rep = max(1, thumb // pooled.shape[-1])
    pooled = pooled.repeat(rep, axis=-2).repeat(rep, axis=-1)  # (L, H, t, t)
    t = pooled.shape[-1]
    gap = max(2, t // 8)
    canvas = np.full((L * (t + gap) - gap, H * (t + gap) - gap), np.nan, dtype=np.float32)
    for layer in range(L):
        for head in range(H):
            r, c = layer * (t + gap), head * (t + gap)
            canvas[r:r + t, c:c + t] = pooled[layer, head]
    return canvas, t, gap


def model_grid(run: AttentionRun, *, thumb: int = 48, rescale: bool = True) -> go.Figure:
    """All layers × heads as small heatmaps (layer rows, head columns), sent as one PNG.

    One invisible marker per head carries the hover text and makes a click select that head
    (see `grid_pick`); the payload grows with layers × heads, not with n².
    """
    return grid_figure(thumbnails(run, thumb), thumb=thumb, rescale=rescale,
                       layer_ids=run.layer_ids, title=run_title(run, "Every head") if run.lens else None)


def grid_figure(pooled: np.ndarray, *, thumb: int = 48, rescale: bool = True, clickable: bool = True,
                layer_ids: list[int] | None = None, title: str | None = None) -> go.Figure:
    """`model_grid` from thumbnails already pooled (L, H, s, s), e.g. by `capture.overview`.
    layer_ids: the model's layer number of each row (default 0, 1, …); title: none by default."""
    L, H = pooled.shape[:2]
    names = list(range(L)) if layer_ids is None else [int(layer) for layer in layer_ids]
    canvas, t, gap = tile_canvas(pooled, thumb=thumb, rescale=rescale)
    centers = np.arange(max(L, H)) * (t + gap) + (t - 1) / 2
    heads, layers = np.meshgrid(np.arange(H), np.arange(L))
    cell_px = 52
    box = margin(l=40, t=70 if title else 30)
    return go.Figure([go.Image(source=png_data_uri(canvas), hoverinfo="skip"), go.Scatter(
        x=centers[heads.ravel()], y=centers[layers.ravel()], mode="markers",
        marker=dict(symbol="square", size=cell_px - 4, color="rgba(0,0,0,0)"),
        customdata=np.stack([np.asarray(names)[layers.ravel()], heads.ravel()], axis=1),
        hovertemplate="layer %{customdata[0]}, head %{customdata[1]}<extra>"
                      + ("click to open" if clickable else "") + "</extra>",
        showlegend=False,
    )], layout=dict(
        xaxis=dict(tickvals=centers[:H].tolist(), ticktext=[f"H{h}" for h in range(H)], side="top",
                   showgrid=False, zeroline=False, range=[-0.5, canvas.shape[1] - 0.5]),
        yaxis=dict(tickvals=centers[:L].tolist(), ticktext=[f"L{layer}" for layer in names],
                   showgrid=False, zeroline=False, range=[canvas.shape[0] - 0.5, -0.5]),
        # the plot keeps cell_px a head: a click's marker (cell_px - 4 wide) then never overlaps its
        # neighbour's, whose point Plotly would pick on a tie
        width=max(box["l"] + box["r"] + H * cell_px, 560 if title else 0), height=box["t"] + box["b"] + L * cell_px,
        margin=box, plot_bgcolor="white", dragmode=False,
        title=plot_title(title) if title else None,
    ))


def grid_pick(points: list[dict], num_heads: int, curve: int = 1) -> tuple[int, int] | None:
    """(layer, head) of the first clicked marker of `model_grid` (its markers are curve 1), or of
    any chart whose curve `curve` has one point a head, from a selection event.

    Markers are laid out layer-major, so a marker's point index is layer * num_heads + head.
    """
    for p in points or []:
        if p.get("curve_number", curve) != curve:
            continue  # the image trace, not a marker
        idx = p.get("point_index", p.get("pointIndex", p.get("point_number")))
        if idx is not None:
            return divmod(int(idx), num_heads)
    return None
