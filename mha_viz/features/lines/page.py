"""The line view: BertViz's head view, drawn by `mha_viz.features.lines.figures` — queries on the left,
keys on the right, a line per weight; one layer, any set of its heads in their own colours, a
threshold, and a focus token (click one, or pick it) whose lines alone are drawn. The figure is
made once per server for what it shows (`charts.cached`).
"""

from __future__ import annotations

import streamlit as st

from mha_viz.drawing import chat_roles as role_figures
from mha_viz.drawing import sparse_picks as sparse_figures
from mha_viz.features.lines import controls as lines_keys
from mha_viz.features.lines import figures as line_figures
from mha_viz.ui.kit import charts, keys, seq2seq_views, session, shared_head, sparse_picks
from mha_viz.ui.shell import view_helpers

MAX_TOKENS = line_figures.MAX_TOKENS  # past this many tokens the view draws a window of them
NO_FOCUS = -1
SIDE_LABELS = {line_figures.QUERY: "query (its lines out)", line_figures.KEY: "key (its lines in)"}


def lines_page() -> None:
    """The page (its controls keep their values across page switches: persist_state)."""
    cur = view_helpers.start("lines", cross=True)
    if cur is not None:
        _page(cur)


def _on_pick() -> None:
    """A click on a token marker: focus it (a click on the focused token clears the focus)."""
    picked = charts.clicked(lines_keys.LINE_CHART, line_figures.line_pick)
    if picked is None:
        return
    side, token = picked
    same = session.get(lines_keys.LINE_SIDE) == side and session.get(lines_keys.LINE_TOKEN) == token
    session.put(lines_keys.LINE_SIDE, side)
    session.put(lines_keys.LINE_TOKEN, NO_FOCUS if same else token)


def _clear_focus() -> None:
    session.put(lines_keys.LINE_TOKEN, NO_FOCUS)


def _valid(key: str, options: list, default) -> None:
    """Reset a widget's value that the current run does not offer (another model, a shorter text)."""
    if session.get(key, default) not in options:
        session.put(key, default)


def _window(run) -> tuple[int, int] | None:
    """Past MAX_TOKENS tokens: a range slider over the text, at most MAX_TOKENS wide."""
    queries, keys_, _ = line_figures.sides(run)
    n = max(len(queries), len(keys_))
    if n <= MAX_TOKENS:
        return None
    value = session.get(lines_keys.LINE_WINDOW)
    if not (isinstance(value, (tuple, list)) and len(value) == 2 and 0 <= value[0] < value[1] <= n):
        session.put(lines_keys.LINE_WINDOW, (0, MAX_TOKENS))
    st.info(f"The text has {n} tokens: the line view draws at most {MAX_TOKENS} at a time. "
            "Choose the window of tokens (the same on both sides) below.", icon=":material/select_all:")
    start, stop = st.slider("Token window", 0, n, key=lines_keys.LINE_WINDOW, persist_state=keys.KEEP,
                            help=f"Tokens start … stop − 1 on both sides, at most {MAX_TOKENS}.")
    if stop - start > MAX_TOKENS:
        st.caption(f"Window narrowed to its first {MAX_TOKENS} tokens: {start}–{start + MAX_TOKENS - 1}.")
        stop = start + MAX_TOKENS
    return start, max(stop, start + 1)


def _page(cur) -> None:
    run = cur.run
    layers = list(range(run.num_layers))
    _valid(lines_keys.LINE_LAYER, layers, min(shared_head.chosen_head()[0], run.num_layers - 1))
    heads_all = list(range(run.num_heads))
    chosen = session.get(lines_keys.LINE_HEADS)
    if chosen is None or any(h not in heads_all for h in chosen):
        session.put(lines_keys.LINE_HEADS, heads_all)
    cols = st.columns([1, 3])
    layer = cols[0].selectbox("Layer", layers, key=lines_keys.LINE_LAYER, persist_state=keys.KEEP,
                              format_func=lambda row: str(run.layer_ids[row]))
    heads = cols[1].pills("Heads", heads_all, selection_mode="multi", key=lines_keys.LINE_HEADS,
                          persist_state=keys.KEEP, format_func=lambda h: f"H{h}",
                          help="Each head draws its lines in its own colour (the chart's legend). "
                               "Click the legend to hide a head for a moment.")
    heads = sorted(heads or [])
    threshold = st.slider("Threshold: hide lines weaker than", 0.0, 1.0, step=0.01, key=lines_keys.LINE_THRESHOLD,
                          persist_state=keys.KEEP,
                          help="0 draws every line (the strongest ones when there are too many).")
    window = _window(run)
    queries, keys_, _ = line_figures.sides(run)
    _valid(lines_keys.LINE_SIDE, list(SIDE_LABELS), line_figures.QUERY)
    side = session.get(lines_keys.LINE_SIDE, line_figures.QUERY)
    names = queries if side == line_figures.QUERY else keys_  # the focus token's side
    start, stop = window or (0, len(names))
    tokens = [NO_FOCUS] + list(range(start, min(stop, len(names))))
    _valid(lines_keys.LINE_TOKEN, tokens, NO_FOCUS)
    cols = st.columns([2, 3, 1])
    side = cols[0].radio("Focus on a", list(SIDE_LABELS), key=lines_keys.LINE_SIDE, persist_state=keys.KEEP,
                         horizontal=True, format_func=SIDE_LABELS.get)
    token = cols[1].selectbox("Focus token (or click a token in the chart)", tokens, key=lines_keys.LINE_TOKEN,
                              persist_state=keys.KEEP,
                              format_func=lambda t: "none: every line" if t == NO_FOCUS
                              else f"{t}: {names[t]}")
    cols[2].button("Clear focus", key=lines_keys.LINE_CLEAR, on_click=_clear_focus, disabled=token == NO_FOCUS)
    focus = None if token == NO_FOCUS else (side, int(token))

    if not heads:
        st.info("Pick at least one head above to draw its lines.", icon=":material/touch_app:")
        return
    fig = charts.cached("lines", (cur.key, layer, tuple(heads), threshold, focus, window),
                        lambda: line_figures.line_figure(run, layer, heads, threshold=threshold, focus=focus,
                                                         window=window))
    told = cur.chat.aligned(run) if cur.chat is not None and not seq2seq_views.is_cross(run) else None
    if told is not None:  # a chat: each token's marker in its role's colour
        fig = charts.cached("lines_roles", (cur.key, layer, tuple(heads), threshold, focus, window, cur.chat.text),
                            lambda: role_figures.with_role_markers(fig, *told))
        st.caption(role_figures.MARKERS)
    picked = (sparse_picks.layer_picks(cur, layer) if focus is not None and focus[0] == line_figures.QUERY
              and not seq2seq_views.is_cross(run) else None)
    if picked is not None:  # a sparse layer: the keys the focused query's indexer kept
        fig = charts.cached("lines_picks", (cur.key, layer, tuple(heads), threshold, focus, window, told is not None),
                            lambda f=fig: sparse_figures.with_line_picks(f, picked.rows(focus[1], focus[1] + 1)[0]))
        st.caption(sparse_figures.LINES_CAPTION)
    drawn = line_figures.drawn_lines(fig)
    if drawn == 0:
        st.info(f"No line has a weight of at least {threshold:.2f} in the heads picked"
                + (" for this focus token" if focus else "") + ": lower the threshold.",
                icon=":material/visibility_off:")
    meta = fig.layout.meta
    where = ("Target tokens (queries) on the left, source tokens (keys) on the right" if seq2seq_views.is_cross(run)
             else "Queries (attending) on the left, keys (attended to) on the right")
    st.caption(f"{where}; a line's opacity is "
               f"its weight ({line_figures.BUCKETS} levels), its colour the head's. {drawn:,} lines drawn"
               + (f" (the strongest of {meta['total']:,})" if meta["total"] > drawn else "")
               + ". Click a token to keep only its lines; *Clear focus* shows them all again."
               + (" Causal model: a query sees only itself and earlier keys." if run.is_causal else ""))
    charts.show(fig, key=lines_keys.LINE_CHART, on_select=_on_pick, selection_mode="points")
