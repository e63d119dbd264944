"""Head metrics' chat section (issue 88): on a chat (the sidebar's *Input*: Chat), where each head looks while the
model answers: its share of the assistant's attention on the system's words, the user's, the assistant's and the
template's own tokens (`mha_viz.metrics.role_mass`), as a head map (the system prompt against the question; a click
opens the head) and a table."""

from __future__ import annotations

import streamlit as st

import mha_viz
from mha_viz import figures
from mha_viz.features.head_metrics import controls as head_metrics_keys
from mha_viz.metrics import role_mass
from mha_viz.ui.kit import charts
from mha_viz.ui.kit.analysis_key import AnalysisKey
from mha_viz.ui.shell import view_helpers


@st.cache_resource(max_entries=4, show_spinner="Reading where the answer looks…")
def _table(key: AnalysisKey, text: str, _run, _chat):
    """`role_mass` of the run keyed by `key` (its hidden tokens, lens, precision…) and the chat's text, made once
    however many reruns ask."""
    return role_mass(_run, _chat)


def chat_section(cur) -> None:
    """The section, on a chat only; a run that holds none of the assistant's tokens says why."""
    if cur.chat is None:
        return
    st.subheader("Where the answer looks: the chat's roles")
    try:
        table = _table(cur.key, cur.chat.text, cur.run, cur.chat)
    except mha_viz.InputError as exc:
        st.info(str(exc), icon=":material/info:")
        return
    st.caption("Each head's attention from the assistant's tokens (its reply, or the turn the template opens for it: "
               "where the answer starts) to the system's words, the user's, the assistant's and the template's own "
               "tokens (role headers, turn ends), the mean over those rows; the four shares of a head sum to 1. "
               "Heads to the right read the system prompt while answering, heads to the top read the question.")
    fig = charts.cached("role_map", (cur.key, cur.chat.text), lambda: figures.role_map(table))
    charts.show(fig, key=head_metrics_keys.ROLE_MAP, selection_mode="points",
                on_select=lambda: view_helpers.open_clicked_head(head_metrics_keys.ROLE_MAP, _index))
    st.dataframe(table.sort_values("system", ascending=False, kind="stable"), hide_index=True,
                 key=head_metrics_keys.ROLE_TABLE, column_config=view_helpers.number_format(table))


def _index(points, run):
    """The flat head index a click on the head map picked (its point index: the table is layer-major)."""
    index = points[0].get("point_index") if points else None
    return None if index is None else int(index)
