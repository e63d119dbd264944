"""Token focus: pick one token (or word) and see, in every head at once, what it attends to and
what attends to it, with (on demand) the mean and max over heads and over layers and the
strongest head. Figures are made once per server for what they show (`charts.cached`).

Reads the run the sidebar computed; the arrays come from `mha_viz.views.focus`, the figures from
`mha_viz.drawing.focus`.
"""

from __future__ import annotations

import dataclasses

import streamlit as st

from mha_viz.drawing import chat_roles as role_figures
from mha_viz.drawing import focus as focus_figures
from mha_viz.drawing import sparse_picks as sparse_figures
from mha_viz.export import shared_controls
from mha_viz.features.focus import controls as focus_keys
from mha_viz.ui.kit import charts, focus_pair, keys, seq2seq_views, session, sparse_picks
from mha_viz.ui.kit.focus_pair import TOKENS, WORDS
from mha_viz.ui.kit.text import plain
from mha_viz.ui.shell import view_helpers
from mha_viz.views import detail, focus, token_pair

BOTH = "both"
SHOW = (BOTH, focus.TO, focus.BY)


def _pick_position(labels: list[str], causal: bool, where) -> int:
    """The token strip: a select box of `i: token` in `where`, kept valid when the text changes (a new text opens on
    `focus_keys.opening_position`)."""
    m = len(labels)
    current = session.get(shared_controls.FOCUS_TOKEN)
    if not isinstance(current, int) or not 0 <= current < m:
        session.put(shared_controls.FOCUS_TOKEN, focus_keys.opening_position(causal, m))
    return where.selectbox("Token in focus (query)", list(range(m)), key=shared_controls.FOCUS_TOKEN,
                           persist_state=keys.KEEP,
                           format_func=lambda i: f"{i}: {labels[i]}",
                           help="Type to search. Its row (what it attends to) and its column (what attends "
                                "to it) are shown for every head.")


def focus_page() -> None:
    """The page (its controls keep their values across page switches: persist_state)."""
    cur = view_helpers.start("focus", cross=True)
    if cur is None:
        return
    if seq2seq_views.is_cross(cur.run):
        return seq2seq_views.cross_focus_view(cur, focus_keys.CROSS_FOCUS_SIDE, focus_keys.CROSS_FOCUS_TOKEN,
                                                    focus_keys.CROSS_FOCUS_RESCALE)
    run = cur.run
    cols = st.columns([2, 3, 2])
    level = cols[0].radio("Level", (TOKENS, WORDS), key=shared_controls.FOCUS_LEVEL, persist_state=keys.KEEP,
                          horizontal=True,
                          help="Words: pieces merged as in the head view (sum over a key word's pieces, "
                               "mean over a query word's pieces).")
    show = cols[1].radio("Show", SHOW, key=focus_keys.FOCUS_SHOW, persist_state=keys.KEEP, horizontal=True)
    rescale = cols[2].toggle("Rescale to the largest weight", key=focus_keys.FOCUS_RESCALE, persist_state=keys.KEEP)
    with_summaries = cols[2].toggle("Summaries", key=focus_keys.FOCUS_SUMMARIES, persist_state=keys.KEEP,
                                    help="Under each grid: the mean and max over heads and over layers, and "
                                         "each head's largest weight with the strongest head framed.")
    words = level == WORDS
    labels = detail.word_labels(run.tokens, run.word_ids) if words else list(run.tokens)
    picks = st.columns(2)
    index = _pick_position(labels, run.is_causal, picks[0])
    f, summaries = _focus(cur.key, index, words, run)  # summaries: {direction: Summary}
    key = focus_pair.pick_key(labels, summaries[focus.TO].top_position, picks[1])
    focus_pair.ranking(cur, f, key)
    unit = "word" if words else "token"
    causal = " Causal model: a token attends only to itself and earlier tokens." if run.is_causal else ""
    st.caption(f"{plain(run.model_name)}: {run.num_layers} layers × {run.num_heads} heads, "
               f"{len(labels)} {unit}s. One row per head (layer by layer, lines between layers); "
               f"the {unit} in focus is framed. Click a cell to rank the heads by it.{causal}")
    for direction in (focus.TO, focus.BY):
        if show not in (BOTH, direction):
            continue
        st.subheader(f"What it {'attends to' if direction == focus.TO else 'is attended by'}")
        s = summaries[direction]
        if direction == focus.BY and not f.by_exact:
            _kept_note(run, f)
        what = (cur.key, index, words, direction)  # everything the figures are drawn from
        grid = charts.cached("focus_grid", what + (rescale,),
                             lambda: focus_figures.focus_grid(f, direction, run.layer_ids, rescale=rescale,
                                                              clickable=True))
        told = cur.chat.aligned(run) if cur.chat is not None and not words and len(labels) == run.n else None
        if told is not None and grid.data[0].x is not None and len(grid.data[0].x) == run.n:  # a chat: roles on x
            grid = charts.cached("focus_roles", what + (rescale, cur.chat.text),
                                 lambda g=grid: role_figures.with_roles(g, *told, queries=False))
        picks = _picks(cur, index, direction) if not words and len(grid.data[0].x or ()) == run.n else {}
        if picks:  # a sparse model: its indexed layers' picks for the focus, on every head of the layer
            grid = charts.cached("focus_picks", what + (rescale, cur.chat.text if told is not None else None),
                                 lambda g=grid: sparse_figures.with_focus_picks(g, picks, run.num_heads))
            st.caption(sparse_figures.FOCUS_CAPTION)
        widget = f"{focus_keys.FOCUS_GRID_PREFIX}{direction}"
        charts.show(grid, key=widget, selection_mode="points",
                    on_select=lambda w=widget, d=direction: focus_pair.on_grid_cell(w, d, index, len(labels)))
        _strongest(run, f, direction, s, key)
        if not with_summaries:
            continue
        charts.show(charts.cached("focus_summary", what,
                                  lambda: focus_figures.focus_summary(f, direction, s, run.layer_ids)),
                    key=f"{focus_keys.FOCUS_SUMMARY_PREFIX}{direction}")
        heads = charts.cached("focus_heads", what,
                              lambda: focus_figures.head_max_map(s, run.layer_ids, direction))
        charts.show(heads, key=f"{focus_keys.FOCUS_HEADS_PREFIX}{direction}")


def _picks(cur, index: int, direction: str) -> dict:
    """{layer row: bool (n,)}: in each indexed layer, the keys the token `index` kept (TO) or the queries that kept
    it (BY); {} for a model without sparse layers, with tokens hidden, or with picks past the capture budget."""
    every = sparse_picks.run_picks(cur)
    found = {}
    for layer, number in enumerate(cur.run.layer_ids if every is not None else ()):
        picked = every.layer(number)
        if picked is not None:
            found[layer] = picked.rows(index, index + 1)[0] if direction == focus.TO else picked.column(index)
    return found


@st.cache_resource(show_spinner=False, max_entries=32)
def _focus(key, index: int, words: bool, _run) -> tuple[focus.Focus, dict[str, focus.Summary]]:
    """The Focus of position `index` of the run `key` names and the Summary of each direction (the
    position itself left out of the strongest weight), made once per server: the words level
    reads the whole run (a long run: a row a layer, and the strongest head's column), and a second visit
    should not."""
    f = focus.focus(_run, index, words=words)
    # copies, not views: a view would keep the run's whole (layers, heads, n, n) array in the cache
    f = dataclasses.replace(f, attends_to=f.attends_to.copy(), attended_by=f.attended_by.copy())
    return f, {d: focus.summarize(f.values(d), exclude=index) for d in focus.DIRECTIONS}


def _strongest(run, f: focus.Focus, direction: str, s: focus.Summary, key: int) -> None:
    """One sentence: which head attends most to / from the focused position (itself left out), the
    first head of the ranking of that pair (`token_pair.rank_heads` of the focus's own weights), named as the
    grids name heads; under *attends to*, the first head of the chosen pair's ranking too when its key is another."""
    def name(i: int) -> str:
        return f"{i}: {plain(f.labels[i])}"
    if len(f.labels) == 1:
        st.caption(f"A single {'word' if f.words else 'token'}: it can only attend to itself.")
        return
    query, target = (f.index, s.top_position) if direction == focus.TO else (s.top_position, f.index)
    best = token_pair.rank_heads(f.values(direction)[..., s.top_position], 1)[0]  # the weights read already
    text = (f"Strongest: {focus_pair.head_name(run.layer_ids, best.layer, best.head)}, where {name(query)} puts "
            f"{best.weight:.3f} of its attention on {name(target)} ({name(f.index)} itself left out).")
    if direction == focus.TO and key != s.top_position and not (run.is_causal and key > f.index):
        chosen = token_pair.rank_heads(f.attends_to[..., key], 1)[0]
        text += (f" On {name(key)}: {focus_pair.head_name(run.layer_ids, chosen.layer, chosen.head)}, "
                 f"{chosen.weight:.3f}, the first of the ranking above.")
    st.caption(text)


def _kept_note(run, f: focus.Focus) -> None:
    """Why a long run's *attended by* grid is its scan's kept keys, and which head's column is exact."""
    scan = run.summary
    layer, head = f.exact_head
    st.caption(f"At {run.n} tokens every head's column would mean recomputing every row of every head (a whole "
               f"scan), so this grid shows, for each query, its weight on the {'word' if f.words else 'token'} in "
               f"focus only where that is one of the query's {scan.top_k} heaviest keys of at least "
               f"{scan.min_weight:g} (its exact weight); smaller weights count as 0. The row of "
               f"{focus_pair.head_name(run.layer_ids, layer, head)}, the strongest, is exact (every query).")
