"""The *Head view* page: one head's attention at the level of detail the input allows (every
token, a window, blocks, words, or chosen queries and keys), and its links over the whole text
(`head_links_view`: the token strip, the heaviest links, how far they reach, one query's exact row)."""

from __future__ import annotations

import streamlit as st

from mha_viz.capture import memory_columns
from mha_viz.drawing import chat_roles as role_figures
from mha_viz.drawing import heads as head_figures
from mha_viz.drawing import sparse_picks as sparse_figures
from mha_viz.export import shared_controls
from mha_viz.features.head_view import controls as head_view_keys
from mha_viz.features.head_view.links import page as links_page
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
    seq2seq_views,
    session,
    shared_head,
    sparse_picks,
    why_here,
)
from mha_viz.ui.kit.head_detail import BLOCKS, SUBSET, WINDOW, WORDS
from mha_viz.ui.shell import notebook_button, view_helpers
from mha_viz.views import detail, head_reads

# --- subset_views: The head view's "chosen queries and keys" detail: a range (or a pick-list) of query tokens over
# a range (or pick-list) of key tokens (e.g. the second sentence's queries over the first sentence's keys), with
# sentence presets.

MAX_AXIS = detail.FULL_DETAIL_TOKENS  # most tokens on either axis (every cell is sent)
DEFAULT_SPAN = 96
CUSTOM = "custom ranges"
MAX_PRESET_SENTENCES = 8


def presets(tokens: list[str]) -> dict[str, tuple[tuple[int, int], tuple[int, int]]]:
    """{label: (query range, key range)}: all tokens, each sentence over itself, and each
    sentence's queries over the sentence before (and the reverse), for the first sentences."""
    n = len(tokens)
    out = {"all tokens": ((0, n), (0, n))}
    spans = detail.sentence_spans(tokens)[:MAX_PRESET_SENTENCES]
    if len(spans) < 2:
        return out
    for s, span in enumerate(spans, 1):
        out[f"sentence {s} × sentence {s}"] = (span, span)
        if s > 1:
            out[f"sentence {s}'s queries × sentence {s - 1}'s keys"] = (span, spans[s - 2])
            out[f"sentence {s - 1}'s queries × sentence {s}'s keys"] = (spans[s - 2], span)
    return out


def _apply_preset(table: dict) -> None:
    choice = session.get(head_view_keys.SUBSET_PRESET)
    if choice in table:
        queries, keys_ = table[choice]
        session.put_all((head_view_keys.SUBSET_QUERIES, head_view_keys.SUBSET_KEYS), (queries, keys_))
        session.put(head_view_keys.SUBSET_QUERY_LIST, list(range(*queries))[:MAX_AXIS])
        session.put(head_view_keys.SUBSET_KEY_LIST, list(range(*keys_))[:MAX_AXIS])


def _to_custom() -> None:
    session.put(head_view_keys.SUBSET_PRESET, CUSTOM)


def _valid(span, n: int) -> bool:
    return isinstance(span, (tuple, list)) and len(span) == 2 and 0 <= span[0] < span[1] <= n


def _axis(label: str, key: str, n: int) -> list[int]:
    start, stop = st.slider(label, 0, n, key=key, on_change=_to_custom,
                            help="Tokens start..stop−1 (the slider's ends), at full resolution.")
    stop = max(stop, start + 1)
    if stop > n:
        start, stop = n - 1, n
    if stop - start > MAX_AXIS:
        st.caption(f"{label}: the first {MAX_AXIS} of the {stop - start} chosen tokens are shown.")
        stop = start + MAX_AXIS
    return list(range(start, stop))


def _pick(label: str, key: str, tokens: list[str], fallback: list[int]) -> list[int]:
    """A pick-list of `i: token` (at most MAX_AXIS); the positions in text order."""
    n = len(tokens)
    picked = session.get(key)
    if not isinstance(picked, list) or not all(isinstance(i, int) and 0 <= i < n for i in picked):
        session.put(key, fallback)
    picked = st.multiselect(label, list(range(n)), key=key, format_func=lambda i: f"{i}: {tokens[i]}",
                            max_selections=MAX_AXIS, on_change=_to_custom, help="Type to search the tokens.")
    if not picked:
        st.caption(f"{label}: none picked, so the range below is shown.")
        return fallback
    return sorted(picked)


def subset_figure(run, layer: int, head: int, rescale: bool):
    """Draw the preset and the two ranges (or pick-lists); return the heatmap of the chosen
    queries × keys."""
    n = run.n
    this_run = (run.model_name, run.text, n)
    table = presets(run.tokens)
    fresh = session.get(head_view_keys.SUBSET_RUN) != this_run
    session.put(head_view_keys.SUBSET_RUN, this_run)
    default = (0, min(n, DEFAULT_SPAN))
    # a new run starts afresh, unless a link set them
    for key in (head_view_keys.SUBSET_QUERIES, head_view_keys.SUBSET_KEYS):
        if (fresh and not page_controls.just_restored(key)) or not _valid(session.get(key), n):
            session.put(key, default)
    if fresh or session.get(head_view_keys.SUBSET_PRESET) not in (CUSTOM, *table):
        session.put(head_view_keys.SUBSET_PRESET, CUSTOM)
    for key in (head_view_keys.SUBSET_QUERY_LIST, head_view_keys.SUBSET_KEY_LIST):
        if fresh and not page_controls.just_restored(key):
            session.pop(key, None)
    st.selectbox("Preset", [CUSTOM, *table], key=head_view_keys.SUBSET_PRESET, on_change=_apply_preset, args=(table,),
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
        ranges = [list(range(*s))[:MAX_AXIS] if _valid(s, n) else list(range(*default)) for s in spans]
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
    links_page.links_section(cur, layer, head)
    _why_here(cur, layer, head, clickable=shown is not None)
    notebook_button.record(query=session.get(shared_controls.WHY_QUERY), key=session.get(shared_controls.WHY_KEY),
                           second=session.get(shared_controls.WHY_SECOND),
                           whole=bool(session.get(shared_controls.WHY_PATTERN)))
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
    """*Why here?* under the heatmap: open on a run that holds every head; on a long run a box built only while
    open, since each head picked there costs a forward pass up to its layer (1.6 s at layer 3 of SmolLM2 at
    8,192 tokens on 2 cores)."""
    if cur.run.is_dense:
        why_here.why_here(cur, layer, head, clickable=clickable)
        return
    box = boxes.lazy_box(st, "Why here? The score of a query and a key, split into what wrote them",
                         head_view_keys.WHY_OPEN, head_view_keys.WHY_WAS_OPEN)
    if box.open:  # built, computed and sent only while open
        with box:
            why_here.why_here(cur, layer, head, clickable=clickable, heading=False)


def _on_cell(run, shown: tuple[int, int]) -> None:
    """A click on a cell: its query and key in *Why here?*, which opens to show them."""
    why_here.on_cell(run, *shown)
    session.put_all((head_view_keys.WHY_WAS_OPEN, head_view_keys.WHY_OPEN), (True, True))


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
