"""The *Head examples* page: what makes one head fire across a corpus (`mha_viz.corpus.head_examples`,
computed with the Corpus page's statistics): its top documents and samples from every score
decile with its attention drawn on their tokens, its score and distance histograms, the tokens
that carry its attention, and the head finder, every head on any two corpus metrics."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from mha_viz import metrics
from mha_viz.corpus.examples import MIN_KEYS, TOP_ROWS
from mha_viz.corpus.store import statistics_store
from mha_viz.drawing import heads as head_figures
from mha_viz.features.examples import controls as examples_keys
from mha_viz.features.examples import figures as example_figures
from mha_viz.text.wording import plural
from mha_viz.ui.kit import charts, keys, session, shared_head
from mha_viz.ui.kit.text import plain
from mha_viz.ui.shell import view_helpers

RANKINGS = {"top_mean": "mean of the top document scores", "max_activation": "best document score"}


def _stats(key):
    """The corpus statistics with examples under `key` (`view_helpers.corpus_key`: this session's, else this
    server's latest where it is not public), or None."""
    if key is None:
        return None
    stats = statistics_store().get(key)  # the Corpus page's, by its CorpusKey
    return stats if stats is not None and stats.examples is not None else None


def finder_table(stats) -> pd.DataFrame:
    """The corpus head table with the examples' rankings and the importance, one row a head (layer-major)."""
    table = stats.table.sort_values(["layer", "head"]).reset_index(drop=True)
    L, H = stats.num_layers, stats.num_heads
    table["top_mean"] = stats.examples.ranking("top_mean").ravel()
    table["max_activation"] = stats.examples.ranking("max").ravel()
    if stats.importance is not None:
        table["importance"] = np.asarray(stats.importance).reshape(L * H)
    return table


def _label(column: str) -> str:
    if column in RANKINGS:
        return RANKINGS[column]
    if column == "importance":
        return "corpus importance"
    return metrics.METRICS[column].label if column in metrics.METRICS else column


def _on_finder(layer_ids: list[int], num_heads: int) -> None:
    picked = charts.clicked(examples_keys.EXAMPLES_FINDER, lambda points: head_figures.grid_pick(points, num_heads,
                                                                                                 curve=0))
    if picked is not None and picked[0] < len(layer_ids):
        shared_head.choose_head_in(layer_ids, *picked)


def examples_page() -> None:
    cur = view_helpers.start_on_model("examples",
                                      "This page uses the sidebar's model: fix the message above first.")
    if cur is None:
        return
    key = view_helpers.corpus_key(cur)
    stats = _stats(key)
    if stats is None:
        st.info(f"No corpus has been run for {plain(cur.model.name)} here yet. Run one on the "
                "**Corpus** page (the bundled sample, a file or a dataset): each head's examples are kept with the "
                "statistics, and this page shows them.", icon=":material/library_books:")
        if st.button("Open the Corpus page", key=examples_keys.EXAMPLES_TO_CORPUS):
            session.put(keys.GOTO, "corpus")
            st.rerun()
        return
    ex = stats.examples
    L, H = ex.shape
    theirs = session.get(keys.CORPUS_LAST) != key  # another tab's run
    st.caption(("The last corpus run on this server for this model (not from this tab): " if theirs else "")
               + f"{stats.n_docs:,} documents of {stats.n_tokens:,} tokens. A document's score for a head is the mean "
               f"of its {TOP_ROWS} strongest query rows, a row's strength its largest attention weight. The first "
               f"query row and key column are left out (the first token's sink would otherwise win every time), and "
               f"so are rows that see fewer than {MIN_KEYS} keys beyond it (the second token, seeing only itself, "
               "would win by construction).")
    table = finder_table(stats)
    ids = list(cur.model.layer_ids)[:L]  # the examples' rows: the model's attention layers
    _finder(table, ids, H)
    cols = st.columns([1, 1, 4])
    layer, head = shared_head.pick_head(ids, H, examples_keys.EXAMPLES_LAYER, examples_keys.EXAMPLES_HEAD,
                                        where=cols[:2])
    row = table.iloc[layer * H + head]
    cols[2].caption(f"Layer {layer}, head {head}: pattern {row['pattern']}; best score {row['max_activation']:.3f}, "
                    f"mean of the top scores {row['top_mean']:.3f}.")
    _documents(ex, layer, head)
    left, right = st.columns(2)
    edges, counts = ex.histogram(layer, head)
    charts.show(example_figures.score_histogram(edges, counts, f"Layer {layer}, head {head}: scores over the corpus"),
                key=examples_keys.EXAMPLES_SCORES, where=left, name="head-scores")
    labels, mass = ex.distances(layer, head)
    charts.show(example_figures.distance_histogram(labels, mass, f"Layer {layer}, head {head}: how far it looks"),
                key=examples_keys.EXAMPLES_DISTANCES, where=right, name="head-distances")
    left, right = st.columns(2)
    for side, where, what in (("query", left, "query tokens that give"), ("key", right, "key tokens that receive")):
        pairs = ex.top_tokens(layer, head, side, k=20)
        if pairs:
            charts.show(example_figures.token_bars(pairs, f"The {what} the most attention"),
                        key=f"{examples_keys.EXAMPLES_TOKENS_PREFIX}{side}_tokens", where=where,
                        name=f"head-{side}-tokens")


def _finder(table: pd.DataFrame, layer_ids: list[int], num_heads: int) -> None:
    st.subheader("Head finder")
    columns = [c for c in ("top_mean", "max_activation", "importance") if c in table.columns]
    columns += [c for c in metrics.METRICS if c in table.columns]
    cols = st.columns(3)
    for key, default in ((examples_keys.EXAMPLES_X, columns[min(1, len(columns) - 1)]),
                         (examples_keys.EXAMPLES_Y, columns[0]), (examples_keys.EXAMPLES_RANK, columns[0])):
        session.start_at(key, default, lambda picked: picked in columns)
    x = cols[0].selectbox("Across", columns, key=examples_keys.EXAMPLES_X, format_func=_label, persist_state=keys.KEEP)
    y = cols[1].selectbox("Up", columns, key=examples_keys.EXAMPLES_Y, format_func=_label, persist_state=keys.KEEP)
    rank = cols[2].selectbox("Rank the heads by", columns, key=examples_keys.EXAMPLES_RANK, format_func=_label,
                             persist_state=keys.KEEP)
    charts.show(example_figures.head_finder(table, x, y, x_label=_label(x), y_label=_label(y)),
                key=examples_keys.EXAMPLES_FINDER, on_select=lambda: _on_finder(layer_ids, num_heads),
                selection_mode="points", name="head-finder")
    by = [rank] + [c for c in RANKINGS if c != rank]  # ties (a saturated best score) go to the mean of the top scores
    ranked = table.sort_values(by, ascending=False, kind="stable")[["layer", "head", "pattern", rank]].head(10)
    st.caption(f"The 10 heads with the highest {_label(rank)}: "
               + ", ".join(f"L{int(r.layer)}H{int(r.head)} ({getattr(r, rank):.3g})" for r in ranked.itertuples())
               + ". Click a point to open its head.")


def _documents(ex, layer: int, head: int) -> None:
    st.subheader("Top documents")
    st.caption("Each key shaded by the weight the framed query gives it (the query where the score was found); "
               f"hover a token for its weight. A document over {example_figures.WINDOW} tokens shows the "
               f"{example_figures.WINDOW} around that query.")
    for rank, (doc, score) in enumerate(ex.top(layer, head)):
        _document(ex, doc, score, layer, head, f"examples_top_{rank}")
    st.subheader("Samples from every decile")
    st.caption("The highest scores first: the deciles from the top down, each one's samples by score.")
    for d, kept in reversed(list(enumerate(ex.deciles(layer, head)))):
        if not kept:
            continue
        with st.expander(f"Scores {d / 10:.1f}–{(d + 1) / 10:.1f}: {plural(len(kept), 'document')}"):
            for i, (doc, score) in enumerate(kept):
                _document(ex, doc, score, layer, head, f"examples_decile_{d}_{i}")


def _document(ex, doc: int, score: float, layer: int, head: int, key: str) -> None:
    fig = example_figures.document_figure(ex.tokens(doc), ex.pattern(doc, layer, head),
                                          f"Document {doc} · score {score:.3f}", query=ex.query(doc, layer, head))
    charts.show(fig, key=key, name=f"head-{layer}-{head}-document-{doc}")
