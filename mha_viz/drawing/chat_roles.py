"""A chat's roles along a head heatmap's axes (issue 88): a band over the keys and one beside the queries, coloured by
each token's role (system, user, assistant: `mha_viz.text.chat`), the template's own tokens (role headers, turn ends)
in the same colour, paler. The bands sit outside the cells, above the map and on its right (the colour bar moves
further right); a legend names the colours."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from mha_viz.text.chat import ROLES

ROLE_COLOURS = {"system": "#CC79A7", "user": "#0072B2", "assistant": "#009E73"}  # Okabe–Ito: apart from the map
TEMPLATE_OPACITY = 0.35
BAND = 0.025  # the bands' width, as a share of the plot
MARKERS = ("Tokens coloured by their role in the chat: system pink, user blue, assistant green (the template's own "
           "tokens, role headers and turn ends, paler).")
CAPTION = ("Bands along the axes: each token's role in the chat (the template's own tokens, role headers and turn "
           "ends, paler).")


def segments(role: np.ndarray, template: np.ndarray) -> list[tuple[int, int, int, bool]]:
    """The runs of tokens of one role and one kind (words or the template's): (first, stop, role, template)."""
    found: list[tuple[int, int, int, bool]] = []
    start = 0
    for t in range(1, len(role) + 1):
        if t == len(role) or role[t] != role[start] or template[t] != template[start]:
            found.append((start, t, int(role[start]), bool(template[start])))
            start = t
    return found


def _legend(out: go.Figure, role: np.ndarray) -> None:
    """A legend entry for each role the tokens hold, above the plot on the right."""
    present = set(np.asarray(role).tolist())
    for name in ROLES:
        if ROLES.index(name) in present:
            out.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=name, showlegend=True, hoverinfo="skip",
                                     marker=dict(symbol="square", size=12, color=ROLE_COLOURS[name])))
    # under the colour bar, clear of the title and of Plotly's buttons above the plot
    out.update_layout(legend=dict(orientation="v", yanchor="bottom", y=0.0, xanchor="left", x=1.04))


def with_roles(fig: go.Figure, role: np.ndarray, template: np.ndarray, *, queries: bool = True,
               edges: np.ndarray | None = None) -> go.Figure:
    """A copy of `fig` (a `heads.head_heatmap` with every token drawn, the same m tokens on both axes: cells, or the
    pixels of a long text's image, whose axes count text positions from the window's first; with `queries` False,
    any map whose x axis is those m tokens: Token focus' grid) with the roles (m,) of those tokens as a band above
    the keys and, with `queries`, one right of the queries. edges: where each cell along the axes starts, in
    tokens, and where the last ends (`detail.block_edges`), when a cell holds several tokens (the block view): each
    token then takes its share of its cell, so a block that mixes roles shows each role over its share."""
    place = (lambda p: float(p)) if edges is None else (
        lambda p: float(np.interp(p, edges, np.arange(len(edges), dtype=float))))
    out = go.Figure(fig)
    shapes = list(out.layout.shapes or ())
    # a category axis places token k at k; an image's numeric axis at its text position (its range starts there)
    at = 0.0 if out.layout.xaxis.type == "category" or out.layout.xaxis.range is None else \
        float(out.layout.xaxis.range[0]) + 0.5
    for first, stop, who, own in segments(np.asarray(role), np.asarray(template)):
        first, stop = place(first) + at, place(stop) + at
        style = dict(type="rect", fillcolor=ROLE_COLOURS[ROLES[who]], opacity=TEMPLATE_OPACITY if own else 1.0,
                     line=dict(width=0), layer="above")
        shapes.append(dict(xref="x", yref="paper", x0=first - 0.5, x1=stop - 0.5, y0=1.005, y1=1.005 + BAND, **style))
        if queries:
            shapes.append(dict(xref="paper", yref="y", x0=1.005, x1=1.005 + BAND, y0=first - 0.5, y1=stop - 0.5,
                               **style))
    out.update_layout(shapes=shapes)  # one list: add_shape re-validates every earlier shape on each call
    _legend(out, role)
    out.update_traces(selector=dict(type="heatmap"), colorbar=dict(x=1.06 if queries else 1.02, len=0.7, y=1.0,
                                                                   yanchor="top"))
    return out


def on_level(fig: go.Figure, role: np.ndarray, template: np.ndarray, level: str, *,
             window: tuple[int, int] | None = None, edges: np.ndarray | None = None,
             groups: list[np.ndarray] | None = None) -> go.Figure:
    """`with_roles` of a head's figure at its level: "tokens" (the window's, start … stop − 1, else every token),
    "blocks" (cells of several tokens: `edges`) or "words" (`groups`, each word's tokens: `by_word`)."""
    if level == "words":
        return with_roles(fig, *by_word(role, template, groups))
    if level == "blocks":
        return with_roles(fig, role, template, edges=edges)
    start, stop = window or (0, len(role))
    return with_roles(fig, role[start:stop], template[start:stop])


def by_word(role: np.ndarray, template: np.ndarray, groups: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Each word's role and whether it is the template's (`detail.word_groups`: each word's token positions): its
    first token's role, and the template's where all its tokens are (the word view's axes)."""
    role, template = np.asarray(role), np.asarray(template, bool)
    return (np.array([role[g[0]] for g in groups], dtype=role.dtype),
            np.array([bool(template[g].all()) for g in groups], dtype=bool))


def with_role_markers(fig: go.Figure, role: np.ndarray, template: np.ndarray) -> go.Figure:
    """A copy of a line view (markers whose `customdata` is [side, position]) with each token's marker in its
    role's colour (the template's paler; a focused token's marker keeps its own red); `role` and `template` are
    the run's tokens', indexed by the markers' positions."""
    out = go.Figure(fig)
    for trace in out.data:
        if not str(trace.name or "").endswith(" tokens") or trace.customdata is None:
            continue
        colours = list(trace.marker.color)
        for k, (_side, t) in enumerate(trace.customdata):
            if colours[k] == "#555555":
                colours[k] = _rgba(ROLE_COLOURS[ROLES[int(role[int(t)])]], TEMPLATE_OPACITY if template[int(t)] else 1)
        trace.marker.color = colours
    return out  # its legend is the heads': the page's caption names the colours (MARKERS)


def _rgba(colour: str, alpha: float) -> str:
    r, g, b = (int(colour[i:i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r},{g},{b},{alpha:g})"


def role_map(table, *, title: str = "While answering: the system prompt against the question") -> go.Figure:
    """Every head of a `metrics.role_mass` table as a point: its share of the assistant's attention on the system's
    words (x) against the user's (y), coloured by layer; one point a head in the table's order (layer-major), so a
    click's point index names the head."""
    fig = go.Figure(go.Scatter(
        x=table["system"], y=table["user"], mode="markers",
        marker=dict(size=9, color=table["layer"], colorscale="Viridis", showscale=True,
                    colorbar=dict(title=dict(text="layer"))),
        customdata=np.stack([table["layer"], table["head"], table["template"]], 1),
        hovertemplate=("layer %{customdata[0]}, head %{customdata[1]}<br>system %{x:.3f} · user %{y:.3f} · "
                       "template %{customdata[2]:.3f}<extra></extra>")))
    fig.update_layout(title=dict(text=title), xaxis=dict(title=dict(text="share on the system's words"),
                                                         rangemode="tozero"),
                      yaxis=dict(title=dict(text="share on the user's words"), rangemode="tozero"), height=460)
    return fig
