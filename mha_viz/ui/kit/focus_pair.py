"""Heads found from two tokens: Token focus's key picker beside the token in focus (also set by a click
on a cell of its grids), every head ranked by the weight the token in focus puts on the key
(`mha_viz.views.token_pair`), the top heads as bars whose click (or the button) opens one in the Head
view; and the Head view's button that opens Token focus on the query and key of a cell there."""

from __future__ import annotations

import streamlit as st

from mha_viz.drawing import focus as focus_figures
from mha_viz.export import shared_controls
from mha_viz.ui.kit import charts, keys, session, shared_head, why_here
from mha_viz.ui.kit.text import plain
from mha_viz.views import focus, token_pair

TOKENS, WORDS = "tokens", "words"  # Token focus's levels (`shared_controls.FOCUS_LEVEL`)
TOP = 10  # the heads the bars show


def pick_key(labels: list[str], default: int, where) -> int:
    """The key the token in focus looks at: a select box of `i: label` in `where`. Until the user picks
    one (here, by a click on a grid, or from the Head view) it is `default`, the token the one in focus
    puts the most weight on, and follows the token in focus; once picked it stays while the text has it."""
    current = session.get(shared_controls.FOCUS_KEY)
    valid = isinstance(current, int) and 0 <= current < len(labels)
    if not valid or current == session.get(keys.FOCUS_KEY_AUTO):
        session.settle(shared_controls.FOCUS_KEY, default)
        session.put(keys.FOCUS_KEY_AUTO, default)
    return where.selectbox("…looks at (key)", list(range(len(labels))), key=shared_controls.FOCUS_KEY,
                           persist_state=keys.KEEP, format_func=lambda i: f"{i}: {labels[i]}", on_change=_picked,
                           help="Every head is ranked by the weight the token in focus puts on this one. A click on "
                                "a cell of a grid below picks its tokens too.")


def _picked(key: int | None = None) -> None:
    """The user chose the key (`key`, when not by the select box): it no longer follows the token in focus."""
    session.pop(keys.FOCUS_KEY_AUTO)
    if key is not None:
        session.put(shared_controls.FOCUS_KEY, int(key))


def _name(f: focus.Focus, i: int) -> str:
    return f"{i}: {f.labels[i]}"


def head_name(layer_ids, row: int, head: int) -> str:
    """'L3 H1': the model's layer number of run row `row`, and the head (as the grids' rows read)."""
    return f"L{layer_ids[row]} H{head}"


def ranking(cur, f: focus.Focus, key: int) -> None:
    """The heads where the token in focus looks at `key` most: bars of the top TOP, a click opens one,
    and a button opens the strongest; a causal model's later key gets a message instead."""
    run, query = cur.run, f.index
    st.subheader(f"Which heads look from {plain(_name(f, query))} to {plain(_name(f, key))}?")
    if run.is_causal and key > query:
        st.info(f"{plain(run.model_name)} is causal: a {'word' if f.words else 'token'} attends only to itself and "
                f"earlier ones, so {plain(_name(f, query))} puts no weight on {plain(_name(f, key))} in any head. "
                "Pick a key at or before the token in focus.", icon=":material/info:")
        return
    ranked = token_pair.rank_heads(f.attends_to[..., key])  # query's rows: f's
    top = ranked[:TOP]
    st.caption(f"All {len(ranked)} heads ranked by the weight {plain(_name(f, query))} puts on "
               f"{plain(_name(f, key))}" + (" (words: mean over the query's pieces, sum over the key's)" if f.words
                                            else "") + ". Click a bar to open that head in the Head view.")
    fig = charts.cached("focus_ranked", (cur.key, query, key, f.words),
                        lambda: focus_figures.ranked_heads(top, run.layer_ids, query=_name(f, query),
                                                           key=_name(f, key), total=len(ranked), lens=f.lens))
    charts.show(fig, key=keys.FOCUS_RANKED, selection_mode="points", on_select=lambda: _on_bar(top))
    best = top[0]
    st.button(f"Open {head_name(run.layer_ids, best.layer, best.head)} in the Head view", key=keys.FOCUS_OPEN_TOP,
              type="primary", on_click=shared_head.open_head, args=(best.layer, best.head))


def _on_bar(top: list[token_pair.HeadWeight]) -> None:
    picked = charts.clicked(keys.FOCUS_RANKED, focus_figures.ranked_pick)
    if picked is not None and picked < len(top):
        shared_head.open_head(top[picked].layer, top[picked].head)


def on_grid_cell(widget: str, direction: str, index: int, m: int) -> None:
    """A focus grid's on_select: a cell of *attends to* makes its column the key; a cell of *attended
    by* (its column a query that looks at the token in focus) puts that query in focus and the token
    that was in focus as the key."""
    picked = charts.clicked(widget, lambda points: focus_figures.grid_pick(points, m))
    if picked is None or not 0 <= picked[1] < m:
        return
    if direction == focus.TO:
        _picked(picked[1])
    else:
        session.put(shared_controls.FOCUS_TOKEN, picked[1])
        _picked(index)


def open_pair(query: int, key: int) -> None:
    """Open Token focus on these two token positions of the sidebar's run (the token level)."""
    session.put(shared_controls.FOCUS_LEVEL, TOKENS)
    session.put(shared_controls.FOCUS_TOKEN, int(query))
    _picked(key)
    session.put(keys.GOTO, "focus")


def find_heads_button(run) -> None:
    """The Head view's button: which heads look from *Why here?*'s query (a clicked cell's) to its key,
    on Token focus."""
    where = why_here.positions(run)
    query, key = session.get(shared_controls.WHY_QUERY, where[-1]), session.get(shared_controls.WHY_KEY, where[0])
    if query not in where or key not in where:
        return
    q, k = where.index(query), where.index(key)
    st.button(f"Which heads look from “{plain(run.tokens[q])}” to “{plain(run.tokens[k])}”?",
              key=keys.HEAD_FIND_HEADS, on_click=open_pair, args=(q, k), icon=":material/manage_search:",
              help="Token focus with this query in focus and this key chosen: every head ranked by that weight. "
                   "Click a cell of the heatmap (or pick a query and a key under *Why here?*) to change the pair.")
