"""The *Head metrics* page: every head's measures (`mha_viz.metrics`) as a grid, on any two measures
(`head_scatter_view`) and as a table."""

from __future__ import annotations

import streamlit as st

import mha_viz
from mha_viz import metrics
from mha_viz.drawing import chat_roles as role_figures
from mha_viz.drawing import metrics as metric_figures
from mha_viz.drawing import style as figure_style
from mha_viz.features.head_metrics import controls as head_metrics_keys
from mha_viz.features.head_metrics import type_figures
from mha_viz.metrics import role_mass
from mha_viz.ui.kit import analysis, charts, head_scatter_view, keys, other_layers, seq2seq_views
from mha_viz.ui.kit.analysis_key import AnalysisKey
from mha_viz.ui.kit.text import plain
from mha_viz.ui.shell import notebook_button, view_helpers

# --- chat_roles_view: Head metrics' chat section (issue 88): on a chat (the sidebar's *Input*: Chat), where each
# head looks while the model answers: its share of the assistant's attention on the system's words, the user's, the
# assistant's and the template's own tokens (`mha_viz.metrics.role_mass`), as a head map (the system prompt against
# the question; a click opens the head) and a table.

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
    fig = charts.cached("role_map", (cur.key, cur.chat.text), lambda: role_figures.role_map(table))
    charts.show(fig, key=head_metrics_keys.ROLE_MAP, selection_mode="points",
                on_select=lambda: view_helpers.open_clicked_head(head_metrics_keys.ROLE_MAP, _index))
    st.dataframe(table.sort_values("system", ascending=False, kind="stable"), hide_index=True,
                 key=head_metrics_keys.ROLE_TABLE, column_config=view_helpers.number_format(table))


def _index(points, run):
    """The flat head index a click on the head map picked (its point index: the table is layer-major)."""
    index = points[0].get("point_index") if points else None
    return None if index is None else int(index)


# its scatter of every head on two measures, under its own keys
SCATTER = head_scatter_view.ScatterKeys(head_metrics_keys.SCATTER_X, head_metrics_keys.SCATTER_Y,
                                        head_metrics_keys.SCATTER_COLOUR, head_metrics_keys.SCATTER_CHART,
                                        head_metrics_keys.SCATTER_PICKED, head_metrics_keys.SCATTER_COMPARE)

PATTERN_RULES = (
    f"Pattern classes (conventions after Clark et al. 2019 and Kovaleva et al. 2019, rules applied in "
    f"order, later ones win), read **beyond the sink**: the first token and a learned sink left out, each row "
    f"renormalised (the *sink* column says how much was left out). **heterogeneous** by default; **broad** if "
    f"normalized entropy > {metrics.BROAD_NORM_ENTROPY}; **diagonal** if self, prev or next > "
    f"{metrics.DIAGONAL_MASS}; **vertical** if sep + punct > {metrics.VERTICAL_MASS}; **block** (two-segment "
    f"inputs) if every row keeps > {metrics.BLOCK_MASS} of its mass in its own segment; **sink** if the sink "
    f"holds > {metrics.SINK_MASS} of the attention and the head is broad or heterogeneous beyond it; "
    f"**mixed:a+b** for a heterogeneous head whose two largest shares of its whole attention (sink, self, prev, "
    f"next, sep, punct, duplicate, induction) hold ≥ {metrics.MIXED_MASS}, the smaller ≥ {metrics.MIXED_PART}."
)


def head_metrics_page() -> None:
    cur = view_helpers.start("head_metrics", cross=True)
    if cur is None:
        return
    if seq2seq_views.is_cross(cur.run):
        return seq2seq_views.cross_metrics_view(cur, head_metrics_keys.CROSS_METRIC_CHOICE)
    run, model = cur.run, cur.model
    table = analysis.head_table(cur.key, run, model)
    st.caption(f"Computed {plain(run.hidden.label)} (sidebar, *Hide tokens*): the first, [SEP] and other "
               "token masses refer to the tokens shown." if run.hidden is not None else
               "Computed over every token (the sidebar's *Hide tokens* computes them with the sink or the special "
               "tokens excluded).")
    names = [c for c in metrics.METRICS if c in table.columns and not table[c].isna().all()]
    if "copying" in table.columns and table["copying"].isna().all():  # no unembedding, or not computed yet
        st.caption(f"No copying scores for {plain(run.model_name)}: they need a linear unembedding (a decoder's LM "
                   "head, an encoder's masked-LM head), and for a large model the *Head composition* page computes "
                   "them first.")
    choice = st.selectbox("Metric", names, key=head_metrics_keys.METRIC_CHOICE, persist_state=keys.KEEP,
                          format_func=lambda c: metrics.METRICS[c].label)
    view_helpers.explain_measure(metrics.METRICS[choice])
    notebook_button.record(metric=choice)
    fig = charts.cached("metric_grid", (cur.key, choice), lambda: metric_figures.table_grid(table, choice, run))
    grid_key = head_metrics_keys.METRIC_GRID
    charts.show(fig, key=grid_key, selection_mode="points", width="content",
                on_select=lambda: view_helpers.open_clicked_head(grid_key, view_helpers.grid_index))
    st.caption("Click a cell to open that head in the head view.")
    if not set(metrics.needing("outputs")) & set(table.columns):  # the catalogue says which measures need z
        st.info("Importance (output norms) needs each head's output, which " + (
            "this model's architecture does not expose to mha-viz." if run.is_dense else
            f"an analysis of {run.n} tokens does not keep (it keeps each layer's input and recomputes the rows a "
            "view draws): lower the token limit in the sidebar to see it."), icon=":material/info:")
    st.markdown(PATTERN_RULES)
    types = charts.cached("head_types", (cur.key,), lambda: type_figures.head_types(run, table=table))
    types_key = head_metrics_keys.METRIC_TYPES
    charts.show(types, key=types_key, name="head-types", selection_mode="points", width="content",
                on_select=lambda: view_helpers.open_clicked_head(types_key, view_helpers.grid_index))
    counts = table["pattern"].str.split(":").str[0].value_counts()
    st.caption("Heads per class: " + ", ".join(f"{k} {v}" for k, v in counts.items()))
    head_scatter_view.section(table, SCATTER, record=notebook_button.record, cache_key=cur.key)
    st.dataframe(table, hide_index=True, key=head_metrics_keys.HEAD_TABLE_DF,
                 column_config=view_helpers.number_format(table))
    st.download_button("Download the head table (CSV)", lambda: table.to_csv(index=False).encode(), on_click="ignore",
                       file_name=f"{figure_style.safe_filename(run.model_name)}-head-table.csv", mime="text/csv",
                       key=head_metrics_keys.DL_TABLE)
    with st.expander(f"The 10 heads highest on {metrics.METRICS[choice].label}"):
        top = table.sort_values(choice, ascending=False, kind="stable").head(10)
        st.dataframe(top[["layer", "head", choice, "pattern"]], hide_index=True, width="content")
    chat_section(cur)
    other_layers.other_layers_measures(cur)
