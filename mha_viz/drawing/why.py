"""Figures of why a head looks where it looks (`mha_viz.circuits.QKTerms`): the terms of a score
as a heatmap of the largest query parts by the largest key parts (the rest folded into "other"), and
each side's parts as bars."""

from __future__ import annotations

import html

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from mha_viz.circuits.score_terms import QKTerms
from mha_viz.drawing.style import DIVERGING, NOTE_ROW_PX, margin, plot_title, title_room, top_title


def _what(t: QKTerms) -> str:
    if t.pattern:
        return f"Layer {t.layer}, head {t.head}: what drives its pattern (terms weighted by its attention)"
    tok = [html.escape(str(x), quote=False) for x in t.tokens]
    what = f"Layer {t.layer}, head {t.head}: query {t.query} ({tok[t.query]}) · key {t.key} ({tok[t.key]})"
    if t.other_key >= 0:
        what += f" minus key {t.other_key} ({tok[t.other_key]})"
    return what


def terms_heatmap(t: QKTerms, k: int = 15, *, title: str | None = None) -> go.Figure:
    """The k largest query parts (rows) by the k largest key parts (columns), "other" holding the rest, so
    the cells still sum to the score; a diverging scale centred on 0."""
    rows, cols, m = t.top(k)
    top = float(np.abs(m).max()) or 1.0
    text = np.vectorize(lambda v: f"{v:+.2f}")(m) if m.size <= 400 else None
    return go.Figure(go.Heatmap(
        z=m, x=cols, y=rows, zmin=-top, zmax=top, colorscale=DIVERGING, text=text,
        texttemplate="%{text}" if text is not None else None, textfont={"size": 9},
        colorbar={"title": {"text": "term"}},
        hovertemplate="query part %{y} · key part %{x}: %{z:+.4f}<extra></extra>"), layout=dict(
        title=plot_title(title or f"{_what(t)} — {'difference' if t.other_key >= 0 else 'score'} {t.score:+.3f} = "
                                  "Σ terms"), margin=margin(),
        xaxis={"title": "key-side part (what wrote the key)", "type": "category", "side": "bottom"},
        yaxis={"title": "query-side part<br>(what wrote the query)", "type": "category", "autorange": "reversed"},
        height=max(360, 26 * len(rows) + 160)))


def terms_bars(t: QKTerms, k: int = 15) -> go.Figure:
    """Two bar charts side by side: each query part's row sum and each key part's column sum (the k largest
    by size): how much the score changes when that part's write is taken out of that side."""
    fig = make_subplots(rows=1, cols=2, subplot_titles=("query side: Σ over key parts",
                                                        "key side: Σ over query parts"), horizontal_spacing=0.25)
    for note in fig.layout.annotations:  # the subplots' titles under the figure's, not on it
        note.update(y=1.0, yanchor="bottom", font={"size": 12})
    for col, (names, totals) in enumerate(((t.query_parts, t.query_totals()), (t.key_parts, t.key_totals())), 1):
        order = np.argsort(-np.abs(totals), kind="stable")[:k][::-1]
        values = totals[order]
        fig.add_trace(go.Bar(x=values, y=[names[i] for i in order], orientation="h",
                             marker_color=["#b2182b" if v > 0 else "#2166ac" for v in values],
                             hovertemplate="%{y}: %{x:+.4f}<extra></extra>", showlegend=False), row=1, col=col)
    title = f"{_what(t)}: each part's share of the score"  # at the top, the subplots' titles under it
    fig.update_layout(title=top_title(title), margin=margin(t=title_room(title, NOTE_ROW_PX)),
                      height=max(320, 22 * min(k, max(len(t.query_parts), len(t.key_parts))) + 140))
    fig.update_yaxes(type="category")
    return fig
