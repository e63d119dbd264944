"""The *Head view* page: one head's attention at the level of detail the input allows (every
token, a window, blocks, words, or chosen queries and keys), and its links over the whole text
(`head_links_view`: the token strip, the heaviest links, how far they reach, one query's exact row)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from mha_viz.capture import memory_columns
from mha_viz.drawing import chat_roles as role_figures
from mha_viz.drawing import heads as head_figures
from mha_viz.drawing import sparse_picks as sparse_figures
from mha_viz.export import shared_controls
from mha_viz.features.head_view import controls as head_view_keys
from mha_viz.features.head_view import links_figures as link_figures
from mha_viz.features.head_view import subset
from mha_viz.scan import opening
from mha_viz.scan.row_detail import BARS, row_detail, top_keys
from mha_viz.text.wording import plural
from mha_viz.ui.kit import (
    analysis,
    boxes,
    charts,
    focus_pair,
    head_detail,
    keys,
    memory_view,
    other_layers,
    page_controls,
    resources,
    seq2seq_views,
    session,
    shared_head,
    sparse_picks,
    why_here,
)
from mha_viz.ui.kit.head_detail import BLOCKS, SUBSET, WINDOW, WORDS
from mha_viz.ui.kit.text import plain
from mha_viz.ui.shell import notebook_button, view_helpers
from mha_viz.views import detail, head_links, head_reads

# --- the chosen queries and keys (their state: `subset`)


def _axis(label: str, key: str, n: int) -> list[int]:
    start, stop = st.slider(label, 0, n, key=key, on_change=subset.to_custom,
                            help="Tokens start..stop−1 (the slider's ends), at full resolution.")
    stop = max(stop, start + 1)
    if stop > n:
        start, stop = n - 1, n
    if stop - start > subset.MAX_AXIS:
        st.caption(f"{label}: the first {subset.MAX_AXIS} of the {stop - start} chosen tokens are shown.")
        stop = start + subset.MAX_AXIS
    return list(range(start, stop))


def _pick(label: str, key: str, tokens: list[str], fallback: list[int]) -> list[int]:
    """A pick-list of `i: token` (at most subset.MAX_AXIS); the positions in text order."""
    n = len(tokens)
    picked = session.get(key)
    if not isinstance(picked, list) or not all(isinstance(i, int) and 0 <= i < n for i in picked):
        session.put(key, fallback)
    picked = st.multiselect(label, list(range(n)), key=key, format_func=lambda i: f"{i}: {tokens[i]}",
                            max_selections=subset.MAX_AXIS, on_change=subset.to_custom,
                            help="Type to search the tokens.")
    if not picked:
        st.caption(f"{label}: none picked, so the range below is shown.")
        return fallback
    return sorted(picked)


def subset_figure(run, layer: int, head: int, rescale: bool):
    """Draw the preset and the two ranges (or pick-lists); return the heatmap of the chosen
    queries × keys."""
    n = run.n
    table, default = subset.prepare(run)
    st.selectbox("Preset", [subset.CUSTOM, *table], key=head_view_keys.SUBSET_PRESET, on_change=subset.apply_preset,
                 args=(table,),
                 help="Sentences end after a token ending in . ! or ?")
    pick = st.toggle("Pick tokens one by one", key=head_view_keys.SUBSET_PICK, persist_state=keys.KEEP,
                     help="Pick-lists of `i: token` on each axis instead of ranges.")
    cols = st.columns(2)
    if not pick:
        with cols[0]:
            rows = _axis("Queries (rows)", head_view_keys.SUBSET_QUERIES, n)
        with cols[1]:
            keep = _axis("Keys (columns)", head_view_keys.SUBSET_KEYS, n)
    else:
        spans = [session.get(k) for k in (head_view_keys.SUBSET_QUERIES, head_view_keys.SUBSET_KEYS)]
        ranges = [list(range(*s))[:subset.MAX_AXIS] if subset.valid(s, n) else list(range(*default)) for s in spans]
        with cols[0]:
            rows = _pick("Queries (rows)", head_view_keys.SUBSET_QUERY_LIST, run.tokens, ranges[0])
        with cols[1]:
            keep = _pick("Keys (columns)", head_view_keys.SUBSET_KEY_LIST, run.tokens, ranges[1])
    return head_figures.head_heatmap(run, layer, head, rescale=rescale, rows=rows, cols=keep)


def head_view_page() -> None:
    cur = view_helpers.start("head_view", cross=True)
    if cur is None:
        return
    if seq2seq_views.is_cross(cur.run):
        return seq2seq_views.cross_head_view(cur, head_view_keys.HEAD_RESCALE)
    run = cur.run
    cols = st.columns([2, 2, 3])
    layer, head = shared_head.pick_head(run.layer_ids, run.num_heads, keys.HEAD_VIEW_LAYER, keys.HEAD_VIEW_HEAD,
                                   where=cols[:2])
    rescale = cols[2].toggle("Rescale colours to this head's maximum", key=head_view_keys.HEAD_RESCALE,
                             persist_state=keys.KEEP,
                             help="Off: the colour scale spans 0..1 for every head, so heads compare. "
                                  "On: it spans 0..this head's largest weight, to see weak patterns.")
    fig, shown = _head_figure(cur, layer, head, rescale)
    if not rescale and (note := faint_note(fig)):
        st.caption(note)
    notebook_button.record(layer=layer, head=head, detail=session.get(keys.HEAD_DETAIL), rescale=rescale,
                           window=session.get(head_view_keys.HEAD_WINDOW))
    if shown is None:
        charts.show(fig, key=keys.HEAD_HEATMAP)
    else:  # every cell a marker: a click asks *Why here?* below (and opens it)
        charts.show(fig, key=keys.HEAD_HEATMAP, selection_mode="points",
                    on_select=lambda: _on_cell(run, shown))
    memory_view.head_entries(cur, layer, head, rescale, _rows_shown(run))
    focus_pair.find_heads_button(run)
    view_helpers.examples_link(cur, layer, head)
    st.caption("Row i: how query token i spreads its attention over the keys (" + _row_sum(cur, layer) + ")."
               + (" Causal model: a token sees only itself and earlier tokens." if run.is_causal else ""))
    strongest = boxes.lazy_box(st, "Strongest key for each query", head_view_keys.STRONGEST_OPEN,
                               head_view_keys.STRONGEST_WAS_OPEN)
    if strongest.open:  # built and sent only while open
        with strongest:
            _strongest(run, layer, head)
    links_section(cur, layer, head)
    _why_here(cur, layer, head, clickable=shown is not None)
    other_layers.other_layers_head(cur)


def _row_sum(cur, layer: int) -> str:
    """What a row of layer `layer` sums to: 1, or 1 less what the head's learned sink (and its layer's compressed
    memory) took."""
    run = cur.full_run or cur.run
    if cur.run.hidden is not None or cur.run.lens or analysis.learned_sink_share(
            cur.key._replace(hidden=(), lens=""), run) is None:
        return "each row sums to 1"
    entries = memory_columns.of(run, layer) is not None or memory_view.merged_with_sink(cur, run)
    return ("each row sums to 1 less what the head's learned sink" + (" and the compressed memory entries"
            if entries else "") + " took")


def _rows_shown(run) -> tuple[int, int]:
    """The query rows the heatmap draws at full detail: its window's, else every row (from the first)."""
    if session.get(keys.HEAD_DETAIL) == WINDOW and session.get(head_view_keys.HEAD_WINDOW) is not None:
        start, stop = session.get(head_view_keys.HEAD_WINDOW)
        return int(start), int(stop)
    return 0, run.n


def _why_here(cur, layer: int, head: int, clickable: bool) -> None:
    """*Why here?* under the heatmap, a box built only while open: each score split there is a forward pass of its
    own (every write into the stream recorded; on a long run up to the head's layer: 1.6 s at layer 3 of SmolLM2 at
    8,192 tokens on 2 cores), which every first visit paid when it was drawn open (a class arriving at once: 63 % of
    the server's busy time). A click on a cell opens it, and so does a link or a lesson step that names its cell."""
    named = [page_controls.just_restored(k) for k in WHY_CONTROLS]  # each flag read once
    if any(named):
        session.put_all((head_view_keys.WHY_WAS_OPEN, head_view_keys.WHY_OPEN), (True, True))
    box = boxes.lazy_box(st, "Why here? The score of a query and a key, split into what wrote them",
                         head_view_keys.WHY_OPEN, head_view_keys.WHY_WAS_OPEN)
    if box.open:  # built, computed and sent only while open (and in the notebook only then)
        with box:
            why_here.why_here(cur, layer, head, clickable=clickable, heading=False)
        notebook_button.record(why=True, query=session.get(shared_controls.WHY_QUERY),
                               key=session.get(shared_controls.WHY_KEY), second=session.get(shared_controls.WHY_SECOND),
                               whole=bool(session.get(shared_controls.WHY_PATTERN)))


WHY_CONTROLS = (shared_controls.WHY_QUERY, shared_controls.WHY_KEY, shared_controls.WHY_SECOND,
                shared_controls.WHY_PATTERN)


def _on_cell(run, shown: tuple[int, int]) -> None:
    """A click on a cell: its query and key in *Why here?*, which opens to show them."""
    why_here.on_cell(run, *shown)
    session.put_all((head_view_keys.WHY_WAS_OPEN, head_view_keys.WHY_OPEN), (True, True))


FAINT = 0.2  # a head's largest weight drawn under this, on the 0..1 scale, is all but white (diffuse rows)


def faint_note(fig) -> str | None:
    """Where every weight `fig` draws on the 0..1 colour scale is under FAINT (the chart looks blank), what to do."""
    drawn = [np.asarray(t.z, dtype=float) for t in fig.data if t.type == "heatmap" and t.z is not None]
    if not drawn or any(t.zmax != 1.0 for t in fig.data if t.type == "heatmap"):  # rescaled, or scaled elsewhere
        return None
    finite = [z[np.isfinite(z)] for z in drawn]
    top = max((float(z.max()) for z in finite if z.size), default=0.0)
    if not 0 < top < FAINT:  # nothing drawn, or nothing but zeros (rescaling would not show more)
        return None
    return (f"This head's largest weight here is {top:.3f}, pale on the 0–1 colour scale: turn on *Rescale colours to "
            "this head's maximum* to see its pattern.")


def _head_figure(cur, layer: int, head: int, rescale: bool):
    """The head at the level of detail the user picked, and (offset, tokens shown) when its cells can be
    clicked (every token, up to `head_figures.CLICKABLE_TOKENS`), else None; long inputs open on the block
    view, since every token of every pair would be n² cells to send and to see."""
    run = cur.run
    options, default = head_detail.detail_options(run.n), head_detail.default_detail(run.n)
    this_run = (run.model_name, run.text, run.n)
    changed = session.get(head_view_keys.DETAIL_RUN) != this_run
    session.put(head_view_keys.DETAIL_RUN, this_run)
    forced = session.get(head_view_keys.DETAIL_FORCED, False)  # blocks chosen by the app, not the user
    changed = changed and not session.pop(keys.DETAIL_LINKED, False)  # a shared link chose it
    if session.get(keys.HEAD_DETAIL) not in options or (changed and (default == BLOCKS or forced)):
        session.put(keys.HEAD_DETAIL, default)  # a new long input opens on the block view, and a
        session.put(head_view_keys.DETAIL_FORCED, default == BLOCKS)  # short one after it on every token
    mode = st.radio("Detail", options, key=keys.HEAD_DETAIL, horizontal=True,
                    on_change=lambda: session.put(head_view_keys.DETAIL_FORCED, False),
                    help="Blocks: the whole matrix downsampled; each block shows its largest weight, so a "
                         "single strong cell stays visible (hover for max and mean). Words: word pieces "
                         "merged (sum over a word's keys, mean over its queries).")
    if mode == WINDOW:
        width = min(run.n, 96)
        session.setdefault(head_view_keys.HEAD_WINDOW, (0, width))
        lo, hi = session.need(head_view_keys.HEAD_WINDOW)
        if hi > run.n or lo >= hi:
            session.put(head_view_keys.HEAD_WINDOW, (0, width))
        start, stop = st.slider("Tokens", 0, run.n, key=head_view_keys.HEAD_WINDOW,
                                help="The tokens shown on both axes, at full resolution.")
        stop = max(stop, start + 1)
        if stop - start > WINDOW_MAX:  # every cell is a pixel: a window of the whole of a long text is n² of them
            stop = start + WINDOW_MAX
            st.caption(f"Window narrowed to its first {WINDOW_MAX:,} tokens: {start}–{stop - 1}. The block view "
                       "shows the whole text.")
        return _clickable(cur, layer, head, rescale, (int(start), int(stop)))
    if mode == SUBSET:
        return subset_figure(run, layer, head, rescale), None
    if mode == BLOCKS:
        return _with_roles(cur, view_helpers.head_pooled(cur, layer, head, rescale), (layer, head, rescale),
                           head_figures.BLOCKS), None
    if mode == WORDS:
        fig = charts.cached("head_words", (cur.key, layer, head, rescale),
                            lambda: head_figures.head_words(run, layer, head, rescale=rescale))
        return _with_roles(cur, fig, (layer, head, rescale), head_figures.WORDS), None
    return _clickable(cur, layer, head, rescale, None)


def _with_roles(cur, fig, shown: tuple, level: str, window: tuple[int, int] | None = None):
    """`fig` (a head at `level`: its tokens, or the `window` of them, its blocks or its words) with a chat's roles
    along its axes, or as it is when the run is no chat."""
    told = cur.chat.aligned(cur.run) if cur.chat is not None else None
    if told is None:
        return fig
    st.caption(role_figures.CAPTION)
    return charts.cached("head_roles", (cur.key, *shown, level, window, cur.chat.text), lambda: role_figures.on_level(
        fig, *told, level, window=window, edges=detail.block_edges(cur.run.n, head_figures.POOLED_SIZE),
        groups=detail.word_groups(cur.run.word_ids)))


def _clickable(cur, layer: int, head: int, rescale: bool, window: tuple[int, int] | None):
    start, stop = window or (0, cur.run.n)
    shown = min(stop, cur.run.n) - start
    fig = view_helpers.head_heatmap(cur, layer, head, rescale, window, clickable=True)
    picked = sparse_picks.layer_picks(cur, layer) if shown <= detail.FULL_DETAIL_TOKENS else None
    if picked is not None:  # a sparse layer: its indexer's picks marked on every cell drawn
        block = picked.rows(start, start + shown)[:, start:start + shown]
        fig = charts.cached("head_picks", (cur.key, layer, head, rescale, window),
                            lambda: sparse_figures.with_picks(fig, block))
        st.caption(sparse_figures.CAPTION)
    fig = _with_roles(cur, fig, (layer, head, rescale), head_figures.TOKENS, (start, start + shown))
    return fig, ((start, shown) if shown <= head_figures.CLICKABLE_TOKENS else None)


WINDOW_MAX = 4 * detail.MAX_FULL_TOKENS  # the widest token window drawn (2,048: about 0.2 s for one head)
TABLE_ROWS = 1000  # the strongest-key table shows at most this many queries (the first)


def _strongest(run, layer: int, head: int) -> None:
    """Each query's heaviest key, for the first TABLE_ROWS queries: only those rows are read."""
    shown = min(run.n, TABLE_ROWS)
    best, weight = head_reads.strongest_keys(run, layer, head, shown)
    if shown < run.n:
        st.caption(f"The first {shown:,} of the {run.n:,} queries.")
    st.dataframe({"query": run.tokens[:shown], "attends most to": [run.tokens[j] for j in best],
                  "weight": [round(float(w), 4) for w in weight]}, hide_index=True)


# --- Links over the whole text: the shared head's kept keys over the text (`views.head_links`: a long run's from its
# scan, a dense run's by the same rule), and one query's exact row over every key at a level of detail.

TOP_KEYS = 10  # the heaviest keys of a row listed exactly


@st.cache_resource(show_spinner=False, max_entries=32)
def _links(key, layer: int, head: int, _run) -> head_links.HeadLinks:
    """The head's links of the run `key` names, made once per server (a dense run's read every row)."""
    return head_links.links(_run, layer, head)


def _query_for(links: head_links.HeadLinks) -> None:
    """The section's query: while nobody has picked one (it is still the one this section chose), the last
    query that keeps keys (`opening.opening_query`), so the table never opens empty; a query picked by the
    user, a link or a lesson stays (within the text)."""
    now, chosen = session.get(head_view_keys.LINKS_QUERY), session.get(head_view_keys.LINKS_QUERY_DEFAULT)
    if now is None or now == chosen or not 0 <= int(now) < links.n:
        query = opening.opening_query(links, links.layer, links.head)
        session.settle(head_view_keys.LINKS_QUERY, query)
        session.put(head_view_keys.LINKS_QUERY_DEFAULT, query)


def links_section(cur, layer: int, head: int) -> None:
    """The section, in an expander under the head's heatmap: computed, drawn and sent only while open."""
    run = cur.run
    box = boxes.lazy_box(st, "Links over the whole text: each query's heaviest keys, how far they reach",
                         keys.LINKS_OPEN, keys.LINKS_WAS_OPEN)
    if not box.open:
        return
    with box:
        links = _links(cur.key, layer, head, run)
        st.caption(f"Each query's {links.top_k} heaviest keys of weight ≥ {links.min_weight:g}"
                   + (" (what the analysis kept of this long text)." if not run.is_dense else ".")
                   + " Hover a bar of the strip for every kept key of its query.")
        # kept from a longer text: the strip's last page at most
        session.settle(head_view_keys.LINKS_STRIP, min(int(session.get(head_view_keys.LINKS_STRIP, 0)),
                                                       max(0, links.n - link_figures.STRIP)))
        _query_for(links)
        start = st.number_input("Token strip from query", 0, links.n - 1, step=link_figures.STRIP,
                                key=head_view_keys.LINKS_STRIP, persist_state=keys.KEEP,
                                help=f"The strip shows {link_figures.STRIP} queries at a time.")
        charts.show(link_figures.token_strip(links, layer, head, int(start)), key=head_view_keys.LINKS_STRIP_CHART,
                    name="token-strip")
        left, right = st.columns(2)
        query = int(left.number_input("Query", 0, links.n - 1, key=head_view_keys.LINKS_QUERY, persist_state=keys.KEEP,
                                      help="Any query of the text: its kept keys, heaviest first."))
        notebook_button.record(links_start=int(start), links_query=query)
        kept = link_figures.query_links(links, layer, head, query)
        elsewhere = max(0.0, float(links.rest[query]))  # (a rounding's −0.000 is 0)
        left.markdown(f"Query {query} “{plain(links.tokens[query])}” keeps {plural(len(kept), 'key')}; "
                      f"{elsewhere:.3f} of its attention is elsewhere.")
        if len(kept):
            left.dataframe(kept, hide_index=True)
        else:  # a user's pick: the section opens on a query that keeps keys
            left.caption(f"No key of this query reaches {links.min_weight:g}: its attention is spread thin. Its "
                         "exact row over every key is below.")
        skip = right.toggle("Leave out links to the first token", key=head_view_keys.LINKS_SKIP_FIRST,
                            persist_state=keys.KEEP, help="Many heads park attention on the first token (a sink).")
        right.markdown("**The heaviest links of the whole text**")
        right.dataframe(link_figures.heaviest_links(links, layer, head, skip_first=skip), hide_index=True)
        charts.show(link_figures.distance_histogram(links, layer, head), key=head_view_keys.LINKS_DISTANCES,
                    name="distances")
        whole_row(run, links, query)


def whole_row(run, links: head_links.HeadLinks, query: int) -> None:
    """Query `query`'s exact row over every key (or the keys the slider keeps), a bar per run of keys."""
    layer, head = links.layer, links.head
    st.markdown(f"**Exact row: query {query} over all {run.n} keys**"
                + ("" if run.is_dense else ", recomputed from what the analysis kept"))
    last = run.n - 1
    shown = session.get(head_view_keys.LINKS_ROW_KEYS)
    if not (isinstance(shown, (tuple, list)) and len(shown) == 2 and 0 <= shown[0] < shown[1] <= last):
        session.settle(head_view_keys.LINKS_ROW_KEYS, (0, last))  # the whole row; a longer text's range is reset
    if last < 1:
        return
    first, final = st.slider("Keys shown (zoom in for every key)", 0, last, key=head_view_keys.LINKS_ROW_KEYS,
                             persist_state=keys.KEEP,
                             help=f"At most {BARS} bars: where more keys are shown, each bar stands for a run of "
                                  "neighbouring keys and shows the heaviest of them.")
    rows, error = resources.attempt(lambda: run.rows(layer, head, query, query + 1), what="Recomputing the row",
                                    out_of_memory="Recomputing this row needs more memory than is free.")
    if error:
        st.error(plain(error), icon=":material/warning:")
        return
    weights = rows[0]
    notebook_button.record(links_keys=[int(first), int(final)])
    detail = row_detail(weights, int(first), int(final) + 1)
    charts.show(link_figures.row_figure(run, layer, head, query, detail), key=head_view_keys.LINKS_ROW_CHART,
                name="exact-row")
    kept = links.weights[query].sum()
    st.caption(f"The whole row sums to {float(weights.sum(dtype=np.float64)):.6f} over its {run.n} keys; the keys "
               f"shown hold {float(detail.mass.sum()):.6f}"
               + (f", in {len(detail.mass)} bars of up to {detail.keys_per_bar} keys" if detail.keys_per_bar > 1
                  else ", each key its own bar")
               + f". The links above are its heaviest keys of weight ≥ {links.min_weight:g} ({float(kept):.3f} of "
               "the row).")
    order, top = top_keys(weights, TOP_KEYS)
    st.markdown(f"**The row's {len(order)} heaviest keys, exactly**")
    st.dataframe(pd.DataFrame({"key": order, "token": [run.tokens[int(k)] for k in order], "weight": top,
                               "distance": query - order}), hide_index=True)
