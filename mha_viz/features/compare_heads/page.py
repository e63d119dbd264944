"""The *Compare heads* page: any heads of the run side by side, with their measures and how alike
each pair is."""

from __future__ import annotations

import numpy as np
import streamlit as st

from mha_viz import metrics
from mha_viz.drawing import metrics as metric_figures
from mha_viz.export import shared_controls
from mha_viz.features.compare_heads import controls as compare_heads_keys
from mha_viz.ui.kit import analysis, boxes, charts, keys, session
from mha_viz.ui.shell import view_helpers
from mha_viz.views import detail

RESCALE_ABOVE = 64  # tokens: longer texts spread attention thin, and heads open rescaled


def compare_heads_page() -> None:
    cur = view_helpers.start("compare_heads")
    if cur is None:
        return
    run, model = cur.run, cur.model
    labels = metric_figures.head_labels(run.layer_ids, run.num_heads)
    default = [labels[0], labels[-1]]
    chosen = session.get(shared_controls.COMPARE_HEADS, default)
    session.settle(shared_controls.COMPARE_HEADS, [h for h in chosen if h in labels] or default)
    picked = st.multiselect("Heads to compare (any layers)", labels, key=shared_controls.COMPARE_HEADS,
                            max_selections=6)
    if len(picked) < 2:
        st.info("Pick two or more heads.", icon=":material/edit:")
        return
    idx = [labels.index(h) for h in picked]
    session.setdefault(compare_heads_keys.COMPARE_RESCALE, run.n > RESCALE_ABOVE)
    rescale = st.toggle("Rescale each head to its own maximum", key=compare_heads_keys.COMPARE_RESCALE,
                        persist_state=keys.KEEP,
                        help="Off: every head on 0..1, so heads compare by colour. On: each head on 0..its "
                             "largest weight, so that spread-out heads of long texts are not nearly white "
                             f"(on by default past {RESCALE_ABOVE} tokens).")
    blocks = run.n > detail.MAX_FULL_TOKENS  # every token of a long text: n² cells a head to send and to see
    if blocks:
        st.caption(f"{run.n:,} tokens: each head is shown whole in blocks (each block's largest weight); the Head "
                   "view opens a window of tokens at full resolution.")
    for start_at in range(0, len(picked), 2):  # two heatmaps a row, read left to right
        for col, label, g in zip(st.columns(2), picked[start_at:start_at + 2], idx[start_at:start_at + 2]):
            layer, head = divmod(g, run.num_heads)
            fig = (view_helpers.head_pooled if blocks else view_helpers.head_heatmap)(cur, layer, head, rescale)
            charts.show(fig, key=f"{compare_heads_keys.CMP_HEATMAP_PREFIX}{label}", where=col)
    table = analysis.head_rows(cur.key, tuple(idx), run, model)  # the picked heads' rows alone: not every head's
    st.subheader("Their metrics")
    st.dataframe(table, hide_index=True, key=compare_heads_keys.CMP_TABLE,
                 column_config=view_helpers.number_format(table))
    if run.is_dense:
        st.subheader("Pairwise comparisons")
        _pairs(cur, picked, idx)
        return
    box = boxes.lazy_box(st, "Pairwise comparisons", compare_heads_keys.PAIRS_OPEN, compare_heads_keys.PAIRS_WAS_OPEN)
    if box.open:  # a long run: built only while open
        with box:
            _pairs(cur, picked, idx)


def _pairs(cur, picked: list[str], idx: list[int]) -> None:
    """How alike each pair of the picked heads is, by every comparison the run allows. On a long run a box open
    only when asked: their patterns are read a block of rows at a time for it (SmolLM2 at 8,192 tokens: 4 s for two
    heads, where the heads themselves are drawn in under 1 s)."""
    run, model = cur.run, cur.model
    rows = []
    kinds = view_helpers.kind_options(run, model)
    sims = _picked_similarity(cur.key, tuple(idx), tuple(kinds), run, model)
    for a in range(len(idx)):
        for b in range(a + 1, len(idx)):
            rows.append({"heads": f"{picked[a]} · {picked[b]}",
                         **{kinds[k]: round(float(s[a, b]), 4) for k, s in sims.items()}})
    st.dataframe(rows, hide_index=True, key=compare_heads_keys.CMP_PAIRS)
    st.caption(" · ".join(f"{m.label}: {m.formula}" for k, m in metrics.SIMILARITIES.items() if k in kinds))


@st.cache_resource(show_spinner=False, max_entries=32)
def _picked_similarity(key, heads: tuple[int, ...], kinds: tuple[str, ...], _run, _model) -> dict[str, np.ndarray]:
    """Each similarity `kinds` among the `heads` (flat indices) of the run `key` names: only the
    picked heads, since the whole-model matrices (JS above all) may take seconds."""
    sub, sub_weights = metrics.select_heads(_run, list(heads), analysis.weights(_model))
    return {k: metrics.head_similarity(sub, k, weights=sub_weights) for k in kinds}
