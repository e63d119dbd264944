"""The *Head similarity* page: how alike the heads are (JS, CKA, weights), as a matrix, a map and
against a random-initialisation baseline."""

from __future__ import annotations

import numpy as np
import streamlit as st

from mha_viz import ModelLoadError, metrics
from mha_viz.budget.seconds import duration
from mha_viz.drawing import metrics as metric_figures
from mha_viz.drawing import style as figure_style
from mha_viz.features.similarity import controls as similarity_keys
from mha_viz.features.similarity.cost import BASELINE_X, js_seconds, similarity_seconds
from mha_viz.ui.kit import analysis, charts, keys, session
from mha_viz.ui.kit.cost_prompt import ASK_ABOVE_S, SAY_ABOVE_S, accepted, read_note
from mha_viz.ui.kit.text import plain
from mha_viz.ui.shell import view_helpers

BASELINE_AUTO_S = 2.0  # the baseline is on by default when it takes less than this


def similarity_page() -> None:
    cur = view_helpers.start("similarity")
    if cur is None:
        return
    run, model = cur.run, cur.model
    options = view_helpers.kind_options(run, model)
    missing = [metrics.SIMILARITIES[k].label + f" ({analysis.available(k, run, model)})"
               for k in metrics.SIMILARITIES if k not in options]
    js_cost = js_seconds(run)
    if session.get(similarity_keys.SIM_KIND) not in options:  # first visit: JS unless it would be slow
        session.put(similarity_keys.SIM_KIND, "js" if js_cost < 3 else "cosine")
    cols = st.columns([3, 2, 2])
    kind = cols[0].selectbox("Compare heads by", list(options), key=similarity_keys.SIM_KIND, persist_state=keys.KEEP,
                             format_func=options.get)
    order_by = cols[1].radio("Order", ["by layer", "clustered"], key=similarity_keys.SIM_ORDER, persist_state=keys.KEEP,
                             horizontal=True)
    color_by = cols[2].radio("Colour the map by", ["layer", "pattern"], key=similarity_keys.MAP_COLOUR,
                             persist_state=keys.KEEP, horizontal=True)
    measure = metrics.SIMILARITIES[kind]
    view_helpers.explain_measure(measure)
    if run.num_kv_heads != run.num_heads and kind in ("ov", "cka", "residual", "seed_r"):
        st.caption(f"Grouped-query attention: the {run.num_heads // run.num_kv_heads} query heads of a group "
                   "share W_K and W_V, which raises these similarities between them (their W_V is the "
                   "same); QK cosine and the pattern measures (JS, cosine) separate them by what they "
                   "attend to.")
    if missing:
        st.caption("Not available for this model: " + "; ".join(missing) + ".")
    seconds = similarity_seconds(run, kind)
    said = (f"Comparing every pair of the {run.num_layers * run.num_heads} heads by {measure.label} at {run.n} "
            f"tokens reads every head's probabilities{read_note(run)}.")
    if not accepted(("similarity", cur.key, kind), seconds, said, similarity_keys.SIM_START):
        return
    if SAY_ABOVE_S <= seconds < ASK_ABOVE_S:  # not asked first, but said (issue 90: 32 s went unannounced)
        st.caption(f"{said} It takes about {duration(seconds)} on 2 CPU cores"
                   f"{' (a logarithm for every entry of every pair)' if kind == 'js' else ''}; the result is kept "
                   "for this text.")
    sim = analysis.similarity(cur.key, kind, run, model)
    dis = metrics.as_dissimilarity(sim, kind)
    order = analysis.cluster_order(cur.key, kind, dis) if order_by == "clustered" else None
    charts.show(charts.cached("sim_matrix", (cur.key, kind, order_by), lambda: metric_figures.similarity_figure(
        sim, kind, run, order=order)), key=similarity_keys.SIM_MATRIX)
    labels = metric_figures.head_labels(run.layer_ids, run.num_heads)
    st.download_button("Download this matrix (CSV)", lambda: matrix_csv(sim, labels), key=similarity_keys.DL_SIM,
                       on_click="ignore",
                       file_name=f"{figure_style.safe_filename(run.model_name)}-{kind}.csv", mime="text/csv")

    st.subheader("Map of heads")
    st.caption("Metric MDS of the dissimilarities above (Clark et al. 2019 use JS): heads close together "
               "behave alike. Click a point to open that head.")
    table = analysis.head_table(cur.key, run, model)
    xy = analysis.head_map_points(cur.key, kind, dis)
    charts.show(charts.cached("head_map", (cur.key, kind, color_by), lambda: metric_figures.map_figure(
        xy, kind, run, patterns=table["pattern"].tolist(), color_by=color_by)),
                    key=similarity_keys.HEAD_MAP,
                    on_select=lambda: view_helpers.open_clicked_head(similarity_keys.HEAD_MAP,
                                                                     lambda p, _r: metric_figures.map_pick(p)),
                    selection_mode="points", width="content")

    st.subheader("Diversity per layer")
    st.caption("D = 1/(h(h−1)) · Σ_{i≠j} (1 − |s_ij|): 0 = all heads alike, 1 = mutually orthogonal. "
               "Grey: the same architecture at random initialisation on the same text, the baseline "
               "that gives the number its meaning." + (" JS is turned into a similarity as 1 − JS/ln 2."
                                                       if kind == "js" else ""))
    base_seconds = BASELINE_X * js_cost  # measured: a random-init model's heads, made and compared
    session.setdefault(similarity_keys.DIV_BASELINE, base_seconds < BASELINE_AUTO_S)  # a long input opens sooner
    base = None
    if st.toggle("Compute the random-initialisation baseline", key=similarity_keys.DIV_BASELINE,
                 persist_state=keys.KEEP):
        try:
            base = metrics.as_similarity(analysis.baseline_similarity(cur.key, kind, run, model, cur.seq2seq), kind)
        except ModelLoadError as exc:  # a model spread over devices has no baseline
            st.info(plain(str(exc)), icon=":material/info:")
    else:
        st.caption(f"Off by default when it would take over {BASELINE_AUTO_S:.0f} s: the baseline builds the "
                   f"model at random initialisation, runs it on the text and compares its heads (about "
                   f"{base_seconds:.0f} s on 2 CPU cores here; kept for this text once computed).")
    div = metrics.diversity_table(metrics.as_similarity(sim, kind), base, run.num_layers, run.num_heads,
                                  layer_ids=run.layer_ids)
    charts.show(charts.cached("div_chart", (cur.key, kind, base is not None),
                              lambda: metric_figures.diversity_figure(div)), key=similarity_keys.DIV_CHART)
    st.dataframe(div, hide_index=True, key=similarity_keys.DIV_TABLE)


def matrix_csv(sim: np.ndarray, labels: list[str]) -> bytes:
    """The heads × heads matrix with a header row and a first column of head labels."""
    return ("head," + ",".join(labels) + "\n" + "\n".join(
        labels[i] + "," + ",".join(f"{x:.6g}" for x in row) for i, row in enumerate(sim))).encode()
