"""Figures of a circuit of heads (`mha_viz.circuits`): the graph of its strongest edges (layers left to
right: the embedding, each layer's heads and MLP, the logits; width by size, colour by sign, a marker
on each edge to hover and click), the faithfulness curve over the number of edges kept,
and the scatter of estimated against real path patching."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from mha_viz.drawing.style import PLOT_WIDTH_PX, margin, plot_title

NEEDED, AGAINST = "#c0392b", "#2e6fba"  # red: the clean prediction needs the edge (corrupting it lowers m); blue: not
WIDTHS = (1.0, 2.0, 3.5, 5.5, 8.0)  # line widths, by |score| as a share of the largest drawn
_HEAD = re.compile(r"L(\d+)(H|KV)(\d+)(?:\.([qkv]))?$")
_MLP = re.compile(r"L(\d+) MLP$")
INPUT_DY = {"q": 0.22, "k": 0.0, "v": -0.22}  # where each input of a head meets it
ALONG = {"q": 0.38, "k": 0.5, "v": 0.62}  # where on its edge each input's marker sits: one sender's edges into
# the q, k and v of one head run all but together, so their markers stand apart along them
MIDPOINTS = "edges"  # the name of the clickable trace
MAX_LABELS = 40  # nodes named on the graph; beyond, on hover
LABEL_CHAR_PX, LABEL_HIGH_PX, NODE_PX = 6.2, 14.0, 14.0  # a 10-px label's character and line; a node's marker
PLACES = ("top center", "bottom center", "middle right", "middle left")  # where a label may go, in this order
# the plot's width the labels are placed for: narrower than the main area's (PLOT_WIDTH_PX), so that labels placed
# apart stay apart where the graph is drawn narrower (a wider sidebar, a smaller window). Placed for 700 px, three
# circuits of SmolLM2's shape drawn 520 px wide had labels that met in two; for 560 px, in one; for 490, in none
LABELS_AT_PX = 0.7 * PLOT_WIDTH_PX
_SAME = dict(marker=dict(opacity=1), textfont=dict(color="#222"))  # a click selects an edge: nothing fades


def colour_of(score: float) -> str:
    """Red where corrupting the edge lowers m (the clean prediction needs it), blue where it raises m."""
    return NEEDED if score < 0 else AGAINST


def _place(name: str, heads: int, kv: int, parallel: bool) -> tuple[float, float]:
    """(x, y) of a node or a receiver's input: the embedding at x = 0, layer l's heads at 3l + 1 (head 0 on
    top), its KV heads just left of them, its MLP below at 3l + 2 (3l + 1 when parallel), the logits last."""
    mid = (heads - 1) / 2
    if name == "embed":
        return 0.0, mid
    if (m := _MLP.match(name)) is not None:
        layer = int(m.group(1))
        return 3 * layer + (1.0 if parallel else 2.0), -1.5
    if (m := _HEAD.match(name)) is not None:
        layer, kind, index, read = int(m.group(1)), m.group(2), int(m.group(3)), m.group(4)
        x = 3 * layer + 1.0
        if kind == "KV":  # the query heads it serves share it: drawn beside their middle
            group = heads // kv
            y = heads - 1 - (index * group + (group - 1) / 2)
            return x - 0.55, y + (0.12 if read == "k" else -0.12)
        y = heads - 1 - index
        return (x - 0.18, y + INPUT_DY[read]) if read else (x, y)
    raise ValueError(f"not a node of a circuit: {name!r}")


def logits_place(layers: int, heads: int) -> tuple[float, float]:
    return 3 * layers + 1.0, (heads - 1) / 2


def _where(name: str, layers: int, heads: int, kv: int, parallel: bool) -> tuple[float, float]:
    return logits_place(layers, heads) if name == "logits" else _place(name, heads, kv, parallel)


def _label_box(x: float, y: float, text: str, place: str) -> tuple[float, float, float, float]:
    """The box (pixels: left, bottom, right, top; y up) of `text` set at `place` beside a node at (x, y)."""
    w, h, gap = LABEL_CHAR_PX * len(text), LABEL_HIGH_PX, NODE_PX / 2
    if place == "top center":
        return x - w / 2, y + gap, x + w / 2, y + gap + h
    if place == "bottom center":
        return x - w / 2, y - gap - h, x + w / 2, y - gap
    if place == "middle right":
        return x + gap, y - h / 2, x + gap + w, y + h / 2
    return x - gap - w, y - h / 2, x - gap, y + h / 2


def label_places(names: list[str], xy: list[tuple[float, float]], order: list[int], *, bounds: tuple,
                 dots: list[tuple[float, float]] = ()) -> list:
    """Where each node's label goes (a PLACES entry, or None: named on hover only), in pixels: the nodes in
    `order` (the most important first) each take the first place where the label stays inside `bounds`
    (left, bottom, right, top) and meets no label placed before it, no node's marker and none of `dots`
    (the edges' markers, drawn over the labels)."""
    half = NODE_PX / 2
    taken = [(x - half, y - half, x + half, y + half) for x, y in [*xy, *dots]]
    out: list[str | None] = [None] * len(names)
    for i in order:
        for place in PLACES:
            box = _label_box(*xy[i], names[i], place)
            inside = bounds[0] <= box[0] and box[2] <= bounds[2] and bounds[1] <= box[1] and box[3] <= bounds[3]
            if inside and not any(box[0] < b[2] and b[0] < box[2] and box[1] < b[3] and b[1] < box[3] for b in taken):
                taken.append(box)
                out[i] = place
                break
    return out


def _node(receiver: str) -> str:
    """The node a receiver belongs to: "L5H1.q" → "L5H1", "L5KV0.k" → "L5KV0"."""
    return receiver.split(".")[0]


def graph_figure(top: pd.DataFrame, layers: int, heads: int, kv_heads: int, *, parallel: bool = False,
                 title: str = "", picked: int | None = None, scored: str = "(estimate)") -> go.Figure:
    """The edges of `top` (sender, receiver, input, score; the strongest first) as a graph. Nodes with no
    edge drawn are hidden; edge `picked` (an index into `top`) is outlined in black. The last trace holds a
    marker on each edge (its middle; a head's q, k and v inputs at ALONG), in `top`'s order (`edge_pick` reads
    a click on it). Node labels go where they meet nothing (`label_places`); the rest are named on hover. `scored`:
    what an edge's score is, after its value on hover ("(estimate)"; a task's "(mean over 20 pairs)")."""
    fig = go.Figure()
    scores = top["score"].to_numpy(dtype=float)
    largest = float(np.abs(scores).max()) if len(scores) else 1.0
    places = [(_where(s, layers, heads, kv_heads, parallel), _where(r, layers, heads, kv_heads, parallel))
              for s, r in zip(top["sender"], top["receiver"])]
    bins = np.minimum((np.abs(scores) / (largest or 1.0) * len(WIDTHS)).astype(int), len(WIDTHS) - 1)
    for needed, colour in ((True, NEEDED), (False, AGAINST)):
        for b, width in enumerate(WIDTHS):
            rows = [i for i in range(len(scores)) if bins[i] == b and (scores[i] < 0) == needed]
            if not rows:
                continue
            xs, ys = [], []
            for i in rows:
                (x0, y0), (x1, y1) = places[i]
                xs += [x0, x1, None]
                ys += [y0, y1, None]
            fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", line=dict(color=colour, width=width), opacity=0.7,
                                     hoverinfo="skip", showlegend=False))
    used = set(top["sender"]) | {_node(r) for r in top["receiver"]}
    names = [n for n in _all_nodes(layers, heads, kv_heads) if n in used]
    node_xy = [_where(n, layers, heads, kv_heads, parallel) for n in names]
    height = max(420, 46 * (heads + 3))
    # the axes' ranges, wide enough for the end nodes' labels, and their pixels (a full-width chart)
    span = 3 * layers + 1.0
    pad = 0.6 + (LABEL_CHAR_PX * 3.5 + NODE_PX) * (span + 1.2) / (PLOT_WIDTH_PX - 2 * LABEL_CHAR_PX * 3.5)
    x_range, y_range = [-pad, span + pad], [-2.4, heads - 1 + 0.9]
    x_px = LABELS_AT_PX / (x_range[1] - x_range[0])
    y_px = (height - margin()["t"] - 60) / (y_range[1] - y_range[0])  # 60: the layer axis under the plot
    weight = {n: 0.0 for n in names} | {"embed": np.inf, "logits": np.inf}
    for sender, receiver, v in zip(top["sender"], top["receiver"], np.abs(scores)):
        weight[sender] += v
        weight[_node(receiver)] += v
    order = sorted(range(len(names)), key=lambda i: -weight[names[i]])[:MAX_LABELS]
    along = [ALONG.get(r.rpartition(".")[2] if "." in r else "", 0.5) for r in top["receiver"]]
    mids = [(x0 + t * (x1 - x0), y0 + t * (y1 - y0)) for t, ((x0, y0), (x1, y1)) in zip(along, places)]
    spots = label_places(names, [(x * x_px, y * y_px) for x, y in node_xy], order,
                         bounds=(x_range[0] * x_px, y_range[0] * y_px, x_range[1] * x_px, y_range[1] * y_px),
                         dots=[(x * x_px, y * y_px) for x, y in mids])
    fig.add_trace(go.Scatter(
        x=[p[0] for p in node_xy], y=[p[1] for p in node_xy], mode="markers+text",
        text=[n if at else "" for n, at in zip(names, spots)],  # a label with no room: on hover only
        textposition=[at or "top center" for at in spots],
        textfont=dict(size=10, color="#222"), hovertext=names, hoverinfo="text",
        showlegend=False, selected=_SAME, unselected=_SAME,
        marker=dict(size=[9 if "KV" in n else 14 for n in names], color="#f7f7f7", line=dict(color="#444", width=1.5),
                    symbol=["diamond" if "KV" in n else ("square" if n in ("embed", "logits") or "MLP" in n
                                                         else "circle") for n in names])))
    if picked is not None and 0 <= picked < len(places):
        (x0, y0), (x1, y1) = places[picked]
        fig.add_trace(go.Scatter(x=[x0, x1], y=[y0, y1], mode="lines", hoverinfo="skip", showlegend=False,
                                 line=dict(color="black", width=WIDTHS[bins[picked]] + 3), opacity=0.45))
    fig.add_trace(go.Scatter(
        x=[m[0] for m in mids], y=[m[1] for m in mids], mode="markers", name=MIDPOINTS, showlegend=False,
        selected=dict(marker=dict(size=14, opacity=1)), unselected=_SAME,
        marker=dict(size=9, color=[colour_of(v) for v in scores], line=dict(color="white", width=1)),
        hovertext=[f"{s} → {r} — corrupted, it would move m by {v:+.4g} {scored}" for s, r, v in
                   zip(top["sender"], top["receiver"], scores)],
        hoverinfo="text"))
    shown_layers = sorted({int(m.group(1)) for n in names if (m := re.match(r"L(\d+)", n))})
    fig.update_layout(title=plot_title(title), height=height, margin=margin(l=20),
                      xaxis=dict(tickvals=[3 * layer + 1 for layer in shown_layers], showgrid=False, zeroline=False,
                                 range=x_range,
                                 ticktext=[str(layer) for layer in shown_layers], tickangle=0,
                                 title=dict(text="layer", standoff=4)),
                      yaxis=dict(visible=False, range=y_range), clickmode="event+select", dragmode=False,
                      plot_bgcolor="white")
    return fig


def _all_nodes(layers: int, heads: int, kv_heads: int) -> list[str]:
    """Every node name in drawing order (KV heads only where grouped-query attention has them)."""
    names = ["embed"]
    for layer in range(layers):
        names += [f"L{layer}H{h}" for h in range(heads)]
        if kv_heads != heads:
            names += [f"L{layer}KV{g}" for g in range(kv_heads)]
        names.append(f"L{layer} MLP")
    return names + ["logits"]


def edge_pick(points: list[dict], curve: int) -> int | None:
    """The index (in the drawn order) of the first clicked edge marker of `graph_figure`, whose marker
    trace is number `curve`; None when the click was elsewhere."""
    for p in points or []:
        if p.get("curve_number") != curve:
            continue
        index = p.get("point_index", p.get("point_number"))
        if index is not None:
            return int(index)
    return None


def curve_figure(curve: pd.DataFrame, total: int, *, chosen: int | None = None, real: float | None = None,
                 method: str = "") -> go.Figure:
    """Faithfulness (1: the clean run's m, 0: the corrupted run's) of the circuit of the top k edges, over k
    (log axis), with the chosen k's value when it was run."""
    fig = go.Figure()
    shown = curve[curve["k"] > 0]
    fig.add_trace(go.Scatter(x=shown["k"], y=shown["faithfulness"], mode="lines+markers", name="top k edges",
                             hovertemplate="k = %{x}<br>faithfulness %{y:.3f}<extra></extra>"))
    if chosen is not None and real is not None:
        fig.add_trace(go.Scatter(x=[max(chosen, 1)], y=[real], mode="markers", name=f"k = {chosen} (the graph's)",
                                 marker=dict(size=13, symbol="star", color=NEEDED),
                                 hovertemplate="k = %{x}<br>faithfulness %{y:.3f}<extra></extra>"))
    fig.add_hline(y=1.0, line=dict(dash="dot", color="#888"))
    fig.add_hline(y=0.0, line=dict(dash="dot", color="#888"))
    fig.update_layout(title=plot_title(f"Faithfulness of the top k edges ({method.upper()}) of {total:,}"),
                      xaxis=dict(type="log", dtick=1, title="k, edges kept (by |score|)"),
                      yaxis=dict(title="faithfulness"), height=360,
                      margin=margin(), legend=dict(orientation="h", y=-0.25))
    return fig


def band_figure(curve: pd.DataFrame, total: int, *, level: float, pairs: int, method: str = "") -> go.Figure:
    """A circuit's faithfulness over a task (`tasks.faithfulness_set`'s curve: k, mean, low, high): the mean over the
    pairs of the circuit of the top k edges, over k (log axis), with its bootstrap interval as a band."""
    shown = curve[curve["k"] > 0]
    k, band = shown["k"].tolist(), f"{100 * level:g} % interval"
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=k + k[::-1], y=shown["high"].tolist() + shown["low"].tolist()[::-1], fill="toself",
                             fillcolor="rgba(178,24,43,0.18)", line=dict(width=0), name=band, hoverinfo="skip"))
    fig.add_trace(go.Scatter(x=k, y=shown["mean"], mode="lines+markers", name=f"mean over {pairs} pairs",
                             line=dict(color=NEEDED), customdata=np.stack([shown["low"], shown["high"]], axis=1),
                             hovertemplate="k = %{x}<br>faithfulness %{y:.3f} [%{customdata[0]:.3f}, "
                                           "%{customdata[1]:.3f}]<extra></extra>"))
    fig.add_hline(y=1.0, line=dict(dash="dot", color="#888"))
    fig.add_hline(y=0.0, line=dict(dash="dot", color="#888"))
    fig.update_layout(title=plot_title(f"Faithfulness of the top k edges ({method.upper()}) of {total:,}, over the "
                                       "task"),
                      xaxis=dict(type="log", dtick=1, title="k, edges kept (by |mean score|)"),
                      yaxis=dict(title="faithfulness"), height=360, margin=margin(),
                      legend=dict(orientation="h", y=-0.25))
    return fig


def real_scatter(estimate: np.ndarray, real: np.ndarray, labels: list[str], pearson: float) -> go.Figure:
    """Estimated against real path patching of some edges, with the diagonal."""
    e, r = np.asarray(estimate, dtype=float), np.asarray(real, dtype=float)
    bound = float(max(np.abs(e).max(initial=0), np.abs(r).max(initial=0), 1e-9)) * 1.08
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=[-bound, bound], y=[-bound, bound], mode="lines", line=dict(dash="dot", color="#888"),
                             hoverinfo="skip", showlegend=False))
    fig.add_trace(go.Scatter(x=e, y=r, mode="markers", text=labels, showlegend=False,
                             marker=dict(size=9, color=[colour_of(v) for v in r]),
                             hovertemplate="%{text}<br>estimate %{x:+.4g}<br>real %{y:+.4g}<extra></extra>"))
    corr = f"Pearson r = {pearson:.3f}" if np.isfinite(pearson) else "Pearson r undefined (a constant side)"
    fig.update_layout(title=plot_title(f"Estimate against real path patching, {len(e)} edges: {corr}"),
                      xaxis=dict(title="estimated change in m"), yaxis=dict(title="real change in m"),
                      height=400, margin=margin())
    return fig
