"""What every page shares: its start (title, messages, a valid shared head: `shared_head`), opening
a head in the head view or among its corpus examples, reading a click on a layers × heads grid, one
head's heatmap, and the metric pages' explanations, choices and number formats."""

from __future__ import annotations

import logging

import streamlit as st

from mha_viz import catalogue, metrics
from mha_viz.corpus.store import statistics_store
from mha_viz.drawing import heads as head_figures
from mha_viz.ui.kit import analysis, charts, keys, notes, resources, seq2seq_views, session, shared_head
from mha_viz.ui.shell import state

log = logging.getLogger("mha_viz.ui")


def corpus_key(cur):
    """The key of the corpus statistics (with each head's examples) that the Head examples page shows for the
    sidebar's model: those this session last ran or saw on the Corpus page; else, on a server that is not public,
    the most recently used of this server (a second tab's, or a notebook's through the same process); else None. A
    public server never shows one visitor another's: their documents may be an upload of theirs."""
    last = session.get(keys.CORPUS_LAST)  # every corpus job of the page keeps the examples
    if last is not None and last.model == cur.model_key:
        return last
    if resources.settings().public:
        return None
    return statistics_store().latest(lambda key, stats: key.model == cur.model_key and stats.examples is not None)


def examples_link(cur, row: int, head: int, where=None) -> None:
    """A button to this head (the shared one, shown on the page) among its examples across the corpus
    (the Head examples page), once a corpus with examples has been run for the sidebar's model (`corpus_key`)."""
    if corpus_key(cur) is None or cur.run is None:
        return
    layer = cur.run.layer_ids[row]
    if (where or st).button(f"Layer {layer}, head {head} across the corpus", key=keys.EXAMPLES_OPEN,
                            help="Its top documents, samples from every score decile and its histograms, from the "
                                 "corpus run on the Corpus page."):
        shared_head.choose_head(row, head)  # the page opens on it
        session.put(keys.GOTO, "examples")
        st.rerun()


def clicked_head(widget_key: str) -> tuple[int, int] | None:
    """(layer row, head) that a click on a layers × heads grid (`head_figures.grid_pick` layout) of the
    current run selected, read from the chart's selection event; None when there is none or it
    cannot be read (logged, never a traceback)."""
    run = state.current().run
    if run is None:
        return None

    def read(points):
        picked = head_figures.grid_pick(points, run.num_heads)
        return picked if picked is not None and picked[0] < run.num_layers else None
    return charts.clicked(widget_key, read)


def open_clicked_head(widget_key: str, pick) -> None:
    """An on_select callback's body: open in the head view the head that a click on `widget_key`
    picked, `pick(points, run)` giving its flat index (layer row × heads + head) or None."""
    run = state.current().run
    head = charts.clicked(widget_key, lambda points: pick(points, run)) if run is not None else None
    if head is not None and 0 <= head < run.num_layers * run.num_heads:
        shared_head.open_head(*divmod(head, run.num_heads))


def grid_index(points, run):
    """The flat index (layer row × heads + head) a click on a layers × heads grid picked, or None."""
    picked = head_figures.grid_pick(points, run.num_heads)
    return None if picked is None else picked[0] * run.num_heads + picked[1]


def start(page: str, *, cross: bool = False, forward: bool = False, lead: str = "", hybrid_note: bool = True,
          sentence_notes: bool = True):
    """The page's title (its feature's record, `catalogue`: `page` is its id), messages and a valid layer/head
    selection; returns the current state, or None when there is nothing to draw. For an encoder–decoder
    (`seq2seq_views.gate`): `cross`, the page draws cross-attention too; `forward`, the page runs the model
    itself. `lead`: one line under the title, drawn whatever the state (the landing page's first step).
    `hybrid_note`: on a hybrid, say that the page reads its softmax layers only (`notes.hybrid_status`; not
    where the page draws the other layers, or says it its own way). `sentence_notes`: False on a page that reads
    a text of its own, not the sidebar's sentence (`state.show_status`)."""
    st.title(catalogue.feature(page).page_title)
    if lead:
        st.markdown(lead)
    cur = state.current()
    if not state.show_status(cur, sentence_notes=sentence_notes):
        return None
    why = seq2seq_views.gate(cur, cross=cross, forward=forward)
    if why is not None:
        st.info(why, icon=":material/alt_route:")
        return None
    shared_head.keep_head_valid(cur.run.num_layers, cur.run.num_heads)  # a new model may have fewer
    if hybrid_note and cur.model is not None:
        notes.hybrid_status(cur.model)
    if cur.model is not None:
        notes.memory_status(cur.model)
    return cur


def start_on_model(page: str, message: str, *, sentence_notes: bool = True):
    """`start` for a page that runs the sidebar's model itself: None, after `message`, while the
    model has not loaded or the sidebar's inputs are stale."""
    if state.current().stale:  # the last good run is not what this page draws: no word of it, only why not
        st.title(catalogue.feature(page).page_title)
        state.show_status(state.current(), sentence_notes=sentence_notes, stale_note=False)
        st.info(message, icon=":material/info:")
        return None
    cur = start(page, forward=True, sentence_notes=sentence_notes)
    if cur is None:
        return None
    if cur.model is None:
        st.info(message, icon=":material/info:")
        return None
    return cur


def head_heatmap(cur, layer: int, head: int, rescale: bool, window: tuple[int, int] | None = None, *,
                 clickable: bool = False):
    """`head_figures.head_heatmap` of the current run, made once per server (`charts.cached`)."""
    return charts.cached("head_heatmap", (cur.key, layer, head, rescale, window, clickable),
                         lambda: head_figures.head_heatmap(cur.run, layer, head, rescale=rescale, window=window,
                                                           clickable=clickable))


def head_pooled(cur, layer: int, head: int, rescale: bool):
    """`head_figures.head_pooled` of the current run (every token in blocks, streamed), made once per server."""
    return charts.cached("head_pooled", (cur.key, layer, head, rescale),
                         lambda: head_figures.head_pooled(cur.run, layer, head, rescale=rescale))


def explain_measure(measure: metrics.Measure) -> None:
    st.markdown(f"**{measure.label}** · `{measure.formula}`")
    lines = [f"High: {measure.high}."] + ([f"Low: {measure.low}."] if measure.low else [])
    st.caption(" ".join(lines))


def kind_options(run, model) -> dict[str, str]:
    """Similarity kinds this run supports -> label (kinds it does not support are listed apart)."""
    return {k: m.label for k, m in metrics.SIMILARITIES.items() if analysis.available(k, run, model) is None}


def number_format(table) -> dict:
    """Four significant decimals for every float column (tiny values would otherwise show 1e-9)."""
    return {c: st.column_config.NumberColumn(format="%.4f") for c in table.columns
            if table[c].dtype.kind == "f"}
