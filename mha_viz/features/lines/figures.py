"""The line view (BertViz's head view, drawn by Plotly): query tokens in a column on the left,
key tokens on the right, a line from query i to key j whose opacity is the weight a[i, j]; any
set of one layer's heads, each in its own colour.

The lines are layout shapes, not traces: one SVG path per head and opacity bucket
("M0,i L2,j" a line, about 12 bytes), which plotly.js draws straight from the path string.
A scatter trace with thousands of NaN-separated segments costs plotly.js about 0.3 ms a segment
(seconds for 15,000 lines, measured), and scattergl, drawn in software where the browser has no
GPU, costs more still. At most `max_lines` lines (the strongest) are drawn. Each head's legend
entry is a trace with no points whose legend group holds the head's shapes: a click on it hides
or shows them. Token markers carry `customdata` [side, token] so that a click on one selects it
(`line_pick`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import plotly.colors
import plotly.graph_objects as go

from mha_viz.drawing.style import axis_labels, margin, plot_title, run_title

if TYPE_CHECKING:
    from mha_viz.capture.run import AttentionRun

QUERY, KEY = "query", "key"
SIDES = (QUERY, KEY)
BUCKETS = 8  # opacity levels; one shape per head and level
MAX_LINES = 15_000  # at most this many lines drawn (the strongest): ~180 KB of path text
MAX_TOKENS = 128  # past this many tokens a side the view draws a window of them (`first_window`)
HEAD_COLORS = plotly.colors.qualitative.Dark24  # a qualitative palette, cycled past 24 heads
X_QUERY, X_KEY = 0, 2  # the columns of the query and key markers (x of the data)
ROW_PX = 18  # the chart's height per token


def head_color(head: int) -> str:
    """The colour of head `head` (the same on every layer, in the chips and the lines)."""
    return HEAD_COLORS[head % len(HEAD_COLORS)]


def bucket_opacity(level: int, buckets: int = BUCKETS) -> float:
    """The opacity of the lines in level 0..buckets-1 (weights in (level/b, (level+1)/b]): the
    level's middle weight, so a line looks about as strong as its weight."""
    return (level + 0.5) / buckets


def visible_lines(a: np.ndarray, *, threshold: float = 0.0,
                  focus: tuple[str, int] | None = None) -> np.ndarray:
    """Which lines of the weights `a` (heads, n, n) are drawn: weight ≥ threshold and > 0
    (a causal model's masked pairs are never lines); with `focus` = (side, i), only the lines
    from query i ("query") or to key i ("key")."""
    keep = (a >= threshold) & (a > 0)
    if focus is not None:
        side, i = focus
        only = np.zeros_like(keep)
        if side == QUERY:
            only[:, i, :] = True
        else:
            only[:, :, i] = True
        keep &= only
    return keep


def segments_path(rows: np.ndarray, cols: np.ndarray) -> str:
    """An SVG path in data coordinates: a segment (X_QUERY, row) → (X_KEY, col) per pair."""
    return "".join(f"M{X_QUERY},{i}L{X_KEY},{j}" for i, j in zip(rows.tolist(), cols.tolist()))


def path_segments(path: str) -> list[tuple[int, int]]:
    """(row, col) of each segment of `segments_path` (its inverse); ValueError for another path."""
    out = []
    for seg in path.split("M")[1:]:
        (x0, i), (x1, j) = (p.split(",") for p in seg.split("L"))
        if (int(x0), int(x1)) != (X_QUERY, X_KEY):
            raise ValueError(f"not a query-to-key segment: M{seg}")
        out.append((int(i), int(j)))
    return out


def _line_shapes(heads: list[int], hh, ii, jj, level, buckets: int) -> list[dict]:
    """One path shape per head and opacity level that has lines, in the head's legend group;
    `name` says which head and level, for readers of the figure (tests, the e2e probe)."""
    shapes = []
    for pos, head in enumerate(heads):
        mine = hh == pos
        for lvl in range(buckets):
            sel = mine & (level == lvl)
            if not sel.any():
                continue
            shapes.append(dict(
                type="path", xref="x", yref="y", path=segments_path(ii[sel], jj[sel]), layer="below",
                line=dict(color=head_color(head), width=1.5), opacity=bucket_opacity(lvl, buckets),
                legendgroup=f"H{head}", showlegend=False, name=f"H{head} L{lvl} {int(sel.sum())}"))
    return shapes


def shape_lines(shape) -> tuple[int, int, int]:
    """(head, level, lines) of a line shape of `line_figure`, from its name."""
    head, lvl, lines = shape["name"].split()
    return int(head[1:]), int(lvl[1:]), int(lines)


def _token_traces(labels: dict[str, list[str]], start: int, local: tuple[str, int] | None) -> list[dict]:
    """The two columns of token markers (labels by side), each marker carrying [side, token]."""
    traces = []
    for side, x, textpos in ((QUERY, X_QUERY, "middle left"), (KEY, X_KEY, "middle right")):
        n = len(labels[side])
        focused = local is not None and local[0] == side
        size = [12 if focused and t == local[1] else 8 for t in range(n)]
        colour = ["#d62728" if focused and t == local[1] else "#555555" for t in range(n)]
        traces.append(dict(
            type="scatter", x=[x] * n, y=list(range(n)), mode="markers+text",
            text=labels[side], textposition=textpos, name=f"{side} tokens", showlegend=False,
            marker=dict(size=size, color=colour, symbol="circle"),
            # plain lists, not an array: plotly.js decodes a 2-D typed array into typed rows, which
            # a selection event would send as {"0": side, "1": token}
            customdata=[[SIDES.index(side), t] for t in range(start, start + n)],
            hovertemplate=f"{side} %{{customdata[1]}}: %{{text}}<extra>click: only its lines</extra>"))
    return traces


def sides(run) -> tuple[list[str], list[str], str]:
    """(query tokens, key tokens, the layer's name prefix) of a run: an `AttentionRun` (the same
    tokens on both sides) or an encoder–decoder's cross-attention (target left, source right)."""
    if hasattr(run, "key_tokens"):
        return list(run.query_tokens), list(run.key_tokens), "Cross-attention, decoder layer"
    return list(run.tokens), list(run.tokens), "Layer"


def _window_rows(run, layer: int, heads: list[int], start: int, stop: int) -> np.ndarray:
    """(len(heads), stop − start, keys): the query rows start … stop − 1 of `heads`, every key. An
    `AttentionRun` reads those rows only (`layer_rows`: one projection of a long run's layer); a
    cross-attention holds its array."""
    if hasattr(run, "layer_rows"):
        rows = run.layer_rows(layer, start, stop)
        return rows if heads == list(range(run.num_heads)) else rows[heads]
    return run.attentions[layer][heads][:, start:stop]


def line_figure(run, layer: int, heads: list[int] | None = None, *, threshold: float = 0.0,
                focus: tuple[str, int] | None = None, window: tuple[int, int] | None = None,
                max_lines: int = MAX_LINES, buckets: int = BUCKETS) -> go.Figure:
    """The line view of row `layer` of the run for `heads` (default: all): an `AttentionRun`, or
    a `seq2seq.CrossAttention` (target tokens on the left, source tokens on the right).

    threshold: lines below this weight are hidden. focus: (side, token) — only the lines from
    that query or to that key (token is a position in the text). window: (start, stop) — only
    tokens start..stop-1 on both sides. At most `max_lines` lines, the strongest, are drawn;
    the title says when some were left out. `fig.layout.meta` holds the counts drawn.
    """
    heads = list(range(run.num_heads)) if heads is None else [int(h) for h in heads]
    q_tokens, k_tokens, prefix = sides(run)
    longest = max(len(q_tokens), len(k_tokens))
    start, stop = (0, longest) if window is None else (max(0, window[0]), min(longest, window[1]))
    q_stop, k_stop = min(stop, len(q_tokens)), min(stop, len(k_tokens))
    n = stop - start
    a = _window_rows(run, layer, heads, start, q_stop)[:, :, start:k_stop] if heads and q_stop > start else \
        np.zeros((0, max(0, q_stop - start), max(0, k_stop - start)), np.float32)
    local = None
    if focus is not None and start <= focus[1] < stop:
        local = (focus[0], focus[1] - start)
    keep = visible_lines(a, threshold=threshold, focus=local)
    hh, ii, jj = np.nonzero(keep)
    w = a[hh, ii, jj]
    total = len(w)
    if total > max_lines:  # the strongest max_lines lines
        top = np.argpartition(-w, max_lines - 1)[:max_lines]
        top.sort()
        hh, ii, jj, w = hh[top], ii[top], jj[top], w[top]
    level = np.clip(np.ceil(w * buckets).astype(int) - 1, 0, buckets - 1)
    legend = [dict(  # a head's legend entry (drawn even when the head has no line left)
        type="scatter", x=[None], y=[None], mode="lines", line=dict(color=head_color(h), width=3),
        name=f"H{h}", legendgroup=f"H{h}", hoverinfo="skip") for h in heads]
    title = f"{prefix} {run.layer_ids[layer]}: {len(heads)} head{'s' if len(heads) != 1 else ''}"
    if window is not None:
        title += f", tokens {start}–{stop - 1} of {longest}"
    if focus is not None:
        title += f", only the lines {'from query' if focus[0] == QUERY else 'to key'} {focus[1]}"
    if total > len(w):
        title += f" · the strongest {len(w):,} of {total:,} lines (raise the threshold to see the rest)"
    layout = dict(
        title=plot_title(run_title(run, title)), shapes=_line_shapes(heads, hh, ii, jj, level, buckets),
        xaxis=dict(range=[-1.8, 3.8], visible=False, fixedrange=True),
        yaxis=dict(range=[n - 0.5, -0.5], visible=False, fixedrange=True),
        height=int(max(300, ROW_PX * n + 90) + 24 * (1 + len(heads) // 12)), margin=margin(t=60, b=10),
        plot_bgcolor="white", dragmode=False, clickmode="event+select", hovermode="closest",
        # below the tokens, heads side by side: every head shows, however many (a column on the
        # right scrolled past ten)
        legend=dict(title=dict(text="heads"), orientation="h", yanchor="top", y=0, x=0, xanchor="left"),
        meta=dict(lines=int(len(w)), total=int(total), tokens=n, start=start),
    )
    labels = {QUERY: axis_labels(q_tokens[start:q_stop]), KEY: axis_labels(k_tokens[start:k_stop])}
    return go.Figure(data=legend + _token_traces(labels, start, local), layout=layout)


def first_window(run) -> tuple[int, int] | None:
    """(0, MAX_TOKENS) when a side of the run holds more tokens than the view draws, else None."""
    q_tokens, k_tokens, _ = sides(run)
    return (0, MAX_TOKENS) if max(len(q_tokens), len(k_tokens)) > MAX_TOKENS else None


def drawn_lines(fig: go.Figure) -> int:
    """How many lines a `line_figure` draws (what its payload holds)."""
    return int(fig.layout.meta["lines"])


def line_pick(points: list[dict]) -> tuple[str, int] | None:
    """(side, token) of the first clicked token marker of `line_figure`, from a selection event."""
    for p in points or []:
        data = p.get("customdata")
        if isinstance(data, dict):  # a typed row, serialised by index
            data = [data.get("0"), data.get("1")]
        if isinstance(data, (list, tuple)) and len(data) == 2 and None not in data:
            side, token = int(data[0]), int(data[1])
            if side in (0, 1):
                return SIDES[side], token
    return None


def lines(run: AttentionRun, layer: int = 0, heads: list[int] | None = None, *, threshold: float = 0.0,
          token: int | None = None, side: str = "query", window: tuple[int, int] | None = None) -> go.Figure:
    """The line view (BertViz's head view): queries on the left, keys on the right, a line per
    weight whose opacity is the weight, each of `heads` (default: all) of row `layer` in its colour.

    threshold: lines weaker than this are hidden. token: only the lines from that query
    (side="query") or to that key (side="key"). window: (start, stop), the tokens drawn on both
    sides; by default the first 128 when the text is longer.
    """
    if side not in SIDES:
        raise ValueError(f"side {side!r}: choose {' or '.join(map(repr, SIDES))}")
    return line_figure(run, layer, heads, threshold=threshold,
                                    focus=None if token is None else (side, int(token)),
                                    window=first_window(run) if window is None else window)
