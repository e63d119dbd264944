"""Figures of one head's links (`views.head_links`: each query's kept keys, a long run's from its scan, a dense
run's by the same rule): the token strip (each query's heaviest key, its kept keys on hover), the heaviest
links, the histogram of their distances, and one query's exact row over every key at a level of detail
(`exact_row`). Each takes a run, a `Scan` or the head's `HeadLinks`."""

from __future__ import annotations

import html
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from mha_viz.drawing.margins import tall_enough
from mha_viz.drawing.style import colorbar, margin, plot_title
from mha_viz.scan import opening
from mha_viz.scan.row_detail import row_detail
from mha_viz.views.head_links import links as head_links

if TYPE_CHECKING:
    from mha_viz.capture.run import AttentionRun

STRIP = 400  # queries the token strip shows at a time
PLOT_PX = 200  # the plot area's height of the strip and the histogram, whatever their titles and labels take


def log_ticks(top: float) -> tuple[list[int], list[str]]:
    """The ticks of a log axis from 1 to `top`: 1, 2, 5, 10, 20, 50, … written whole (Plotly's own wrote "2" for 20
    after 10: "1 2 3 … 9 10 2")."""
    values = [m * 10**e for e in range(int(np.log10(max(top, 1))) + 1) for m in (1, 2, 5) if m * 10**e <= top]
    return values, [f"{v:,}" for v in values]


def _token(tokens: list[str], i: int) -> str:
    return html.escape(tokens[i][:16], quote=False) if i >= 0 else ""


def token_strip(source, layer: int, head: int, start: int, *, width: int = STRIP) -> go.Figure:
    """Queries start … start + width − 1 as bars: height the query's heaviest kept weight, colour how
    far back that key is; hover: the token and every kept key with its weight and distance."""
    scan = head_links(source, layer, head)
    keys, weights = scan.keys, scan.weights
    stop = min(scan.n, start + width)
    rows = np.arange(start, stop)
    top_key = keys[rows, 0]
    distance = np.where(top_key >= 0, np.abs(rows - top_key), 0).astype(np.float64)
    hover = []
    for i in rows:
        kept = [f"{int(k)} “{_token(scan.tokens, int(k))}” {w:.3f} (distance {abs(int(i) - int(k))})"
                for k, w in zip(keys[i], weights[i]) if k >= 0]
        hover.append(f"query {i} “{_token(scan.tokens, int(i))}”<br>" + ("<br>".join(kept) or "no key ≥ "
                     f"{scan.min_weight:g}") + f"<br>rest {scan.rest[i]:.3f}")
    fig = go.Figure(go.Bar(
        x=rows, y=weights[rows, 0], hovertext=hover, hoverinfo="text",
        # a dark-to-light scale: a previous-token head's distance-1 bars must show on white
        marker=dict(color=distance, colorscale="Viridis", colorbar=colorbar("distance"), cmin=0,
                    cmax=max(float(distance.max()), 1.0)),
    ))
    ticks = rows[:: max(1, len(rows) // 20)]
    fig.update_layout(
        title=plot_title(f"Layer {scan.layer_name}, head {head}: queries {start} … {stop - 1}, "
                         "each one's heaviest key (hover for every kept key)"),
        xaxis=dict(title=dict(text="query"), tickvals=ticks.tolist(),
                   ticktext=[f"{i}: {_token(scan.tokens, int(i))}" for i in ticks], tickangle=-60),
        yaxis=dict(title=dict(text="heaviest weight"), range=[0, 1]),
        margin=margin(), bargap=0.05, plot_bgcolor="white",
    )
    return tall_enough(fig, PLOT_PX)


def query_links(source, layer: int, head: int, query: int) -> pd.DataFrame:
    """One query's kept keys: key position, token, weight, distance (heaviest first)."""
    scan = head_links(source, layer, head)
    keys, weights = scan.keys, scan.weights
    kept = keys[query] >= 0
    k = keys[query][kept]
    return pd.DataFrame({"key": k, "token": [scan.tokens[int(j)] for j in k], "weight": weights[query][kept],
                         "distance": query - k})


def heaviest_links(source, layer: int, head: int, count: int = 20, *, skip_first: bool = False) -> pd.DataFrame:
    """The head's `count` heaviest kept links over the whole text: query, key, their tokens, weight and
    distance (query − key), the lower query first on a tie. skip_first: leave out links to the first token
    (a sink)."""
    scan = head_links(source, layer, head)
    keys, weights = scan.keys, scan.weights
    w = np.where((keys >= 0) & ~((keys == 0) & skip_first), weights, -1.0).ravel()
    count = min(count, int((w > 0).sum()))
    best = np.argsort(-w, kind="stable")[:count]  # (n · top_k: a sort of every kept link is quick)
    q, slot = np.divmod(best, keys.shape[1])
    k = keys[q, slot]
    return pd.DataFrame({"query": q, "query token": [scan.tokens[int(i)] for i in q], "key": k,
                         "key token": [scan.tokens[int(j)] for j in k], "weight": w[best], "distance": q - k})


def distance_histogram(source, layer: int, head: int, *, bins: int = 60) -> go.Figure:
    """How far back (or ahead) the head's kept links reach, weighted by their weights, on a log scale
    of 1 + distance (a link to itself, distance 0, is the first bar)."""
    scan = head_links(source, layer, head)
    keys, weights = scan.keys, scan.weights
    rows = np.broadcast_to(np.arange(scan.n)[:, None], keys.shape)
    kept = keys >= 0
    distance = np.abs(rows[kept] - keys[kept]).astype(np.float64)
    edges = np.unique(np.round(np.geomspace(1, max(scan.n, 2), bins + 1))) - 1  # 0, 1, 2, … up to n − 1
    mass, _ = np.histogram(distance, bins=edges, weights=weights[kept])
    fig = go.Figure(go.Bar(
        x=edges[:-1] + 1, y=mass / scan.n, width=np.diff(edges), offset=0,  # 1 + distance: 0 on a log axis
        hovertemplate="distance %{customdata[0]:.0f} … %{customdata[1]:.0f}: %{y:.4f} of each row on "
                      "average<extra></extra>",
        customdata=np.stack([edges[:-1], edges[1:] - 1], 1), marker=dict(color="#4c78a8"),
    ))
    values, texts = log_ticks(edges[-1] + 1)
    fig.update_layout(
        title=plot_title(f"Layer {scan.layer_name}, head {head}: how far its kept links reach"),
        xaxis=dict(title=dict(text="1 + distance |query − key| (tokens, log scale)"), type="log",
                   range=[0, np.log10(edges[-1] + 1)], tickvals=values, ticktext=texts),
        yaxis=dict(title=dict(text="weight per row")), margin=margin(), plot_bgcolor="white",
    )
    return tall_enough(fig, PLOT_PX)


def row_figure(scan, layer: int, head: int, query: int, detail) -> go.Figure:
    """One query's exact row over keys `detail.starts[0]` … (a `scan.row_detail.RowDetail`): a bar per run of
    neighbouring keys, as high as the heaviest of them (one key a bar when they fit); hover: the keys, the
    heaviest with its token, and the bar's sum."""
    first, last = int(detail.starts[0]), int(detail.stops[-1]) - 1
    per = detail.keys_per_bar
    hover = [f"keys {a} … {b - 1}" if b - a > 1 else f"key {a}" for a, b in zip(detail.starts, detail.stops)]
    fig = go.Figure(go.Bar(
        x=detail.starts, y=detail.peak, width=detail.stops - detail.starts, offset=0,
        customdata=np.stack([detail.peak_key, detail.mass], 1),
        hovertext=[f"{h}<br>heaviest: {int(k)} “{_token(scan.tokens, int(k))}”"
                   for h, k in zip(hover, detail.peak_key)],
        hovertemplate="%{hovertext}, %{y:.4f}<br>sum of the bar %{customdata[1]:.4f}<extra></extra>",
        marker=dict(color="#4c78a8", line=dict(width=0)),
    ))
    if first <= query <= last:  # where the query itself sits (a causal head sees no key after it)
        fig.add_vline(x=query + 0.5, line=dict(color="#e45756", width=1, dash="dot"))
    what = "each key" if per == 1 else f"up to {per} keys a bar, the heaviest of each"
    fig.update_layout(
        title=plot_title(f"Layer {scan.layer_ids[layer]}, head {head}: query {query} “{_token(scan.tokens, query)}”, "
                         f"exact weights on keys {first} … {last} ({what})"),
        xaxis=dict(title=dict(text="key"), range=[first, last + 1]),
        yaxis=dict(title=dict(text="weight"), rangemode="tozero"),
        height=320, margin=margin(), bargap=0, plot_bgcolor="white",
    )
    return fig


def links_strip(run: AttentionRun, layer: int = 0, head: int = 0, start: int = 0) -> go.Figure:
    """The head view's *Links* section's token strip: queries `start` … of one head, each one's heaviest kept
    key (`mha_viz.views.head_links`: a long run's from its scan, a dense run's by the same rule)."""
    return token_strip(head_links(run, layer, head), layer, head, start)


def link_distances(run: AttentionRun, layer: int = 0, head: int = 0) -> go.Figure:
    """How far one head's kept links reach (query − key), as the *Links* section draws it."""
    return distance_histogram(head_links(run, layer, head), layer, head)


def exact_row(run: AttentionRun, layer: int = 0, head: int = 0, query: int | None = None,
              keys: tuple[int, int] | None = None) -> go.Figure:
    """One query's exact row over every key (or keys first … last), as the *Links* section draws it: a bar
    per run of keys where there are more keys than bars, each the heaviest of its run. query: default the
    section's opening one (the last that keeps keys)."""
    if query is None:
        query = opening.opening_query(head_links(run, layer, head), layer, head)
    first, last = keys if keys is not None else (0, run.n - 1)
    detail = row_detail(run.rows(layer, head, query, query + 1)[0], int(first), int(last) + 1)
    return row_figure(run, layer, head, query, detail)
