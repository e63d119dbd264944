"""The *Model facts* page: what the loaded model is, as a table; for a hybrid, how much of its token mixing each
kind of layer does on the text on screen; for a sparse-attention model, what its indexer keeps of the dense
softmax."""

from __future__ import annotations

import streamlit as st

from mha_viz.drawing import style as figure_style
from mha_viz.features.model_facts import controls as model_facts_keys
from mha_viz.ui.kit import memory_view, other_layers, sparse_picks
from mha_viz.ui.kit.text import plain
from mha_viz.ui.shell import export_views, view_helpers


def model_facts_page() -> None:
    cur = view_helpers.start("model_facts", hybrid_note=False)  # its facts and shares say which layers are which
    if cur is None or cur.model is None:
        return
    facts = cur.model.facts()
    shown = facts | {k: plain(facts[k]) for k in ("model", "loaded from")}  # user-given names: as typed
    st.table({"fact": list(shown), "value": list(shown.values())})
    st.download_button("Download these facts (CSV)", export_views.table_csv(facts), key=model_facts_keys.DL_FACTS,
                       file_name=figure_style.safe_filename(f"{cur.model.name}-facts") + ".csv", mime="text/csv")
    other_layers.other_layers_shares(cur)
    sparse_picks.sparse_picks_section(cur)
    memory_view.memory_table(cur)
