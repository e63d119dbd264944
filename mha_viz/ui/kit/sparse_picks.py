"""Model facts' section for a sparse-attention model (DeepSeek-V3.2, GLM-5: `indexed_attention`, issue 89): per head
of each indexed layer, how much of the dense softmax the indexer's picks hold and how many of them are the dense
softmax's own heaviest (`metrics.sparse_selection`), on the text on screen. One forward more, each indexed layer
called a second time with every key picked; computed once a text and cap for every session."""

from __future__ import annotations

import streamlit as st

import mha_viz
from mha_viz.budget import capture_budget, plan
from mha_viz.metrics.indexer_picks import (
    LayerPicks,
    Picks,
    SparseSelection,
    has_sparse_layers,
    longest_fitting,
    need_bytes,
    picks_bytes,
    sparse_picks,
    sparse_selection,
)
from mha_viz.ui.kit import keys, plans, resources
from mha_viz.ui.kit.analysis_key import AnalysisKey

NOTE = ("Each indexed layer's indexer picks a few keys for every query, and its softmax runs over those alone. "
        "**kept mass**: the share of the dense softmax (the same layer with every key it may see) that the picks "
        "hold, the mean over the rows; **overlap**: how many of the picks are among the dense softmax's own heaviest "
        "as many keys, the mean over the rows (1: the indexer picked what the head would have read most). A row "
        "that sees no more keys than the indexer picks keeps all (1 and 1).")


@st.cache_resource(show_spinner="Measuring the indexer's picks against the dense softmax…", max_entries=8)
def _selection(key: AnalysisKey, _model) -> SparseSelection:
    """key: the text's (its cap). Holds one of the server's analysis slots (call through `one_at_a_time`)."""
    planned = plan.forward_plan(_model, key.text, key.cap,
                                lambda: sparse_selection(_model, key.text, max_tokens=key.cap))
    with mha_viz.text.session_cap(key.cap):
        return plans.run_admitted(planned)


def _selected(cur, *, say: bool) -> SparseSelection | None:
    """The selection of the text on screen (cached), or None: a model without indexed layers, or one whose picks
    would not fit the capture budget (`say`: a notice naming the length that fits)."""
    model = cur.model
    if model is None or not has_sparse_layers(model):
        return None
    n = (cur.full_run or cur.run).n
    need = need_bytes(model, n)
    if not capture_budget.fits(need):
        if say:
            st.info(f"Measuring the picks over this text's {n:,} tokens would hold "
                    f"{capture_budget.over_budget(need)}: lower the token limit to {longest_fitting(model, n):,} "
                    "tokens in the sidebar to see them.", icon=":material/info:")
        return None
    text_key = cur.key.with_text(cur.key.text)
    return resources.one_at_a_time(lambda: _selection(text_key, model))


def sparse_picks_section(cur) -> None:
    """The section, for a model with indexed layers (nothing without); past the capture budget, the length that
    fits."""
    if cur.model is None or not has_sparse_layers(cur.model):
        return
    st.subheader("Sparse attention: what the indexer keeps")
    found = _selected(cur, say=True)
    if found is None:
        return
    table = found.table()
    by_layer = table.groupby("layer")[["kept_mass", "overlap"]].agg(["mean", "min"])
    by_layer.columns = [f"{name} ({how} over heads)" for name, how in by_layer.columns]
    st.dataframe(by_layer.reset_index().round(4), hide_index=True, key=keys.SPARSE_LAYERS)
    st.caption(NOTE)
    with st.expander("Every head"):
        st.dataframe(table.round(4), hide_index=True, key=keys.SPARSE_HEADS)


@st.cache_resource(show_spinner="Reading the indexer's picks…", max_entries=4)
def _picks(key: AnalysisKey, _model) -> Picks:
    """key: the text's (its cap). One forward that keeps the picks alone (n × k a layer: any length the run has);
    holds one of the server's analysis slots (call through `one_at_a_time`)."""
    planned = plan.forward_plan(_model, key.text, key.cap, lambda: sparse_picks(_model, key.text, max_tokens=key.cap))
    with mha_viz.text.session_cap(key.cap):
        return plans.run_admitted(planned)


def run_picks(cur) -> Picks | None:
    """Every indexed layer's picks for the text on screen, or None: a model without indexed layers, tokens hidden, or
    picks past the capture budget."""
    model = cur.model
    if model is None or not has_sparse_layers(model) or cur.run.hidden is not None:
        return None
    if not capture_budget.fits(picks_bytes(model, cur.run.n)):  # past the capture budget: no marks
        return None
    text_key = cur.key.with_text(cur.key.text)
    found = resources.one_at_a_time(lambda: _picks(text_key, model))
    return found if found.n == cur.run.n else None


def layer_picks(cur, layer: int) -> LayerPicks | None:
    """The picks of the run's layer `layer` (its row in the run) for the text on screen (`LayerPicks.rows`,
    `.column`), or None: as `run_picks`, or a layer that is not indexed."""
    found = run_picks(cur)
    return None if found is None else found.layer(cur.run.layer_ids[layer])
