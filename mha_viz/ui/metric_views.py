"""The metric views: head metrics, head similarity (matrix, map, diversity), comparing heads
across layers, and attention across layers (rollout, flow). They read the current run, ask
`analysis` for cached metrics and draw; a click on a head opens it in the head view."""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd
import streamlit as st

from mha_viz import ModelLoadError, metrics
from mha_viz.figures import heads as head_figures
from mha_viz.figures import metrics as metric_figures
from mha_viz.figures import style as figure_style
from mha_viz.ui import analysis, charts, keys, seq2seq_views, session, state
from mha_viz.ui.views import head_heatmap, open_head, start

log = logging.getLogger("mha_viz.ui")

PATTERN_RULES = (
    f"Pattern classes (conventions after Clark et al. 2019 and Kovaleva et al. 2019, rules applied in "
    f"order, later ones win): **heterogeneous** by default; **broad** if normalized entropy > "
    f"{metrics.BROAD_NORM_ENTROPY}; **diagonal** if self, prev or next > {metrics.DIAGONAL_MASS}; "
    f"**vertical** if first + sep + punct > {metrics.VERTICAL_MASS}; **block** (two-segment inputs) if "
    f"every row keeps > {metrics.BLOCK_MASS} of its mass in its own segment."
)


def _explain(measure: metrics.Measure) -> None:
    st.markdown(f"**{measure.label}** · `{measure.formula}`")
    lines = [f"High: {measure.high}."] + ([f"Low: {measure.low}."] if measure.low else [])
    st.caption(" ".join(lines))


def _on_pick(widget_key: str, pick) -> None:
    """on_select callback factory body: open the head a click selected."""
    try:
        event = session.get(widget_key) or {}
        points = (event.get("selection") or {}).get("points") or []
        run = state.current().run
        head = pick(points, run)
        if head is not None and 0 <= head < run.num_layers * run.num_heads:
            open_head(*divmod(head, run.num_heads))
    except Exception:  # noqa: BLE001 - an unreadable click is ignored, not a traceback
        log.exception("could not read the selection of %s", widget_key)


def _grid_pick(points, run):
    picked = head_figures.grid_pick(points, run.num_heads)
    return None if picked is None else picked[0] * run.num_heads + picked[1]


def _kind_options(run, model) -> dict[str, str]:
    """Similarity kinds this run supports -> label (kinds it does not support are listed apart)."""
    return {k: m.label for k, m in metrics.SIMILARITIES.items() if analysis.available(k, run, model) is None}


def metrics_view() -> None:
    cur = start("Head metrics", cross=True)
    if cur is None:
        return
    if seq2seq_views.is_cross(cur.run):
        return seq2seq_views.cross_metrics_view(cur)
    run, model = cur.run, cur.model
    table = analysis.head_table(cur.key, run, model)
    st.caption(f"Computed {state.plain(run.hidden.label)} (sidebar, *Hide tokens*): the first, [SEP] and other "
               "token masses refer to the tokens shown." if run.hidden is not None else
               "Computed over every token (the sidebar's *Hide tokens* computes them with the sink or the special "
               "tokens excluded).")
    names = [c for c in metrics.METRICS if c in table.columns]
    choice = st.selectbox("Metric", names, key=keys.METRIC_CHOICE, format_func=lambda c: metrics.METRICS[c].label)
    _explain(metrics.METRICS[choice])
    fig = charts.cached("metric_grid", (cur.key, choice), lambda: metric_figures.table_grid(table, choice, run))
    charts.show(fig, key=keys.METRIC_GRID, on_select=lambda: _on_pick("metric_grid", _grid_pick),
                    selection_mode="points", width="content")
    st.caption("Click a cell to open that head in the head view.")
    if "output_norm" not in table.columns:
        st.info("Importance (output norms) needs each head's output, which this model's architecture "
                "does not expose to mha-viz.", icon="ℹ️")
    st.markdown(PATTERN_RULES)
    counts = table["pattern"].str.split(":").str[0].value_counts()
    st.caption("Heads per class: " + ", ".join(f"{k} {v}" for k, v in counts.items()))
    st.dataframe(table, hide_index=True, key=keys.HEAD_TABLE_DF, column_config=_number_format(table))
    st.download_button("Download the head table (CSV)", lambda: table.to_csv(index=False).encode(), on_click="ignore",
                       file_name=f"{figure_style.safe_filename(run.model_name)}-head-table.csv", mime="text/csv", key=keys.DL_TABLE)


def _number_format(table) -> dict:
    """Four significant decimals for every float column (tiny values would otherwise show 1e-9)."""
    return {c: st.column_config.NumberColumn(format="%.4f") for c in table.columns
            if table[c].dtype.kind == "f"}


def _js_seconds(run) -> float:
    """Measured: 144 heads at 512 tokens take about 4 s on 2 CPU cores (half for causal runs)."""
    N = run.num_layers * run.num_heads
    entries = N * N / 2 * run.n * run.n * (0.5 if run.is_causal else 1.0)
    return 4.0 * entries / (144 * 144 / 2 * 512 * 512)


BASELINE_X = 5  # measured: the baseline takes about 5× the JS of the text (model, forward, near-uniform JS)
BASELINE_AUTO_S = 2.0  # the baseline is on by default when it takes less than this


def similarity_view() -> None:
    cur = start("Head similarity")
    if cur is None:
        return
    run, model = cur.run, cur.model
    options = _kind_options(run, model)
    missing = [metrics.SIMILARITIES[k].label + f" ({analysis.available(k, run, model)})"
               for k in metrics.SIMILARITIES if k not in options]
    js_seconds = _js_seconds(run)
    if session.get(keys.SIM_KIND) not in options:  # first visit: JS unless it would be slow
        session.put(keys.SIM_KIND, "js" if js_seconds < 3 else "cosine")
    cols = st.columns([3, 2, 2])
    kind = cols[0].selectbox("Compare heads by", list(options), key=keys.SIM_KIND, format_func=options.get)
    order_by = cols[1].radio("Order", ["by layer", "clustered"], key=keys.SIM_ORDER, horizontal=True)
    color_by = cols[2].radio("Colour the map by", ["layer", "pattern"], key=keys.MAP_COLOUR, horizontal=True)
    measure = metrics.SIMILARITIES[kind]
    _explain(measure)
    if run.num_kv_heads != run.num_heads and kind in ("ov", "cka", "residual", "seed_r"):
        st.caption(f"Grouped-query attention: the {run.num_heads // run.num_kv_heads} query heads of a group "
                   "share W_K and W_V, which raises these similarities between them (their W_V is the "
                   "same); QK cosine and the pattern measures (JS, cosine) separate them by what they "
                   "attend to.")
    if missing:
        st.caption("Not available for this model: " + "; ".join(missing) + ".")
    if kind == "js" and js_seconds >= 3:
        st.caption(f"The JS divergence of {run.num_layers * run.num_heads} heads at {run.n} tokens takes "
                   f"about {js_seconds:.0f} s on 2 CPU cores (a logarithm for every entry of every pair); "
                   "the result is kept for this text.")
    sim = analysis.similarity(cur.key, kind, run, model)
    dis = metrics.as_dissimilarity(sim, kind)
    order = analysis.cluster_order(cur.key, kind, dis) if order_by == "clustered" else None
    charts.show(charts.cached("sim_matrix", (cur.key, kind, order_by), lambda: metric_figures.similarity_figure(
        sim, kind, run, order=order)), key=keys.SIM_MATRIX)
    labels = metric_figures.head_labels(run.layer_ids, run.num_heads)
    st.download_button("Download this matrix (CSV)", lambda: _matrix_csv(sim, labels), key=keys.DL_SIM, on_click="ignore",
                       file_name=f"{figure_style.safe_filename(run.model_name)}-{kind}.csv", mime="text/csv")

    st.subheader("Map of heads")
    st.caption("Metric MDS of the dissimilarities above (Clark et al. 2019 use JS): heads close together "
               "behave alike. Click a point to open that head.")
    table = analysis.head_table(cur.key, run, model)
    xy = analysis.head_map(cur.key, kind, dis)
    charts.show(charts.cached("head_map", (cur.key, kind, color_by), lambda: metric_figures.map_figure(
        xy, kind, run, patterns=table["pattern"].tolist(), color_by=color_by)),
                    key=keys.HEAD_MAP, on_select=lambda: _on_pick("head_map", lambda p, _r: metric_figures.map_pick(p)),
                    selection_mode="points", width="content")

    st.subheader("Diversity per layer")
    st.caption("D = 1/(h(h−1)) · Σ_{i≠j} (1 − |s_ij|): 0 = all heads alike, 1 = mutually orthogonal. "
               "Grey: the same architecture at random initialisation on the same text, the baseline "
               "that gives the number its meaning." + (" JS is turned into a similarity as 1 − JS/ln 2."
                                                       if kind == "js" else ""))
    base_seconds = BASELINE_X * js_seconds  # measured: a random-init model's heads, made and compared
    session.setdefault(keys.DIV_BASELINE, base_seconds < BASELINE_AUTO_S)  # a long input opens sooner
    base = None
    if st.toggle("Compute the random-initialisation baseline", key=keys.DIV_BASELINE):
        try:
            base = metrics.as_similarity(analysis.baseline_similarity(cur.key, kind, run, model), kind)
        except ModelLoadError as exc:  # a model spread over devices has no baseline
            st.info(state.plain(str(exc)), icon="ℹ️")
    else:
        st.caption(f"Off by default when it would take over {BASELINE_AUTO_S:.0f} s: the baseline builds the "
                   f"model at random initialisation, runs it on the text and compares its heads (about "
                   f"{base_seconds:.0f} s on 2 CPU cores here; kept for this text once computed).")
    div = metrics.diversity_table(metrics.as_similarity(sim, kind), base, run.num_layers, run.num_heads,
                                  layer_ids=run.layer_ids)
    charts.show(charts.cached("div_chart", (cur.key, kind, base is not None),
                              lambda: metric_figures.diversity_figure(div)), key=keys.DIV_CHART)
    st.dataframe(div, hide_index=True, key=keys.DIV_TABLE)


RESCALE_ABOVE = 64  # tokens: longer texts spread attention thin, and heads open rescaled


def compare_view() -> None:
    cur = start("Compare heads")
    if cur is None:
        return
    run, model = cur.run, cur.model
    labels = metric_figures.head_labels(run.layer_ids, run.num_heads)
    default = [labels[0], labels[-1]]
    session.settle(keys.COMPARE_HEADS, [h for h in session.get(keys.COMPARE_HEADS, default) if h in labels]
                 or default)
    picked = st.multiselect("Heads to compare (any layers)", labels, key=keys.COMPARE_HEADS, max_selections=6)
    if len(picked) < 2:
        st.info("Pick two or more heads.", icon="✍️")
        return
    idx = [labels.index(h) for h in picked]
    session.setdefault(keys.COMPARE_RESCALE, run.n > RESCALE_ABOVE)
    rescale = st.toggle("Rescale each head to its own maximum", key=keys.COMPARE_RESCALE,
                        help="Off: every head on 0..1, so heads compare by colour. On: each head on 0..its "
                             "largest weight, so that spread-out heads of long texts are not nearly white "
                             f"(on by default past {RESCALE_ABOVE} tokens).")
    for start_at in range(0, len(picked), 2):  # two heatmaps a row, read left to right
        for col, label, g in zip(st.columns(2), picked[start_at:start_at + 2], idx[start_at:start_at + 2]):
            layer, head = divmod(g, run.num_heads)
            charts.show(head_heatmap(cur, layer, head, rescale), key=f"{keys.CMP_HEATMAP_PREFIX}{label}", where=col)
    table = analysis.head_table(cur.key, run, model)
    st.subheader("Their metrics")
    st.dataframe(table.iloc[idx], hide_index=True, key=keys.CMP_TABLE, column_config=_number_format(table))
    st.subheader("Pairwise comparisons")
    rows = []
    kinds = _kind_options(run, model)
    sims = _picked_similarity(cur.key, tuple(idx), tuple(kinds), run, model)
    for a in range(len(idx)):
        for b in range(a + 1, len(idx)):
            rows.append({"heads": f"{picked[a]} · {picked[b]}",
                         **{kinds[k]: round(float(s[a, b]), 4) for k, s in sims.items()}})
    st.dataframe(rows, hide_index=True, key=keys.CMP_PAIRS)
    st.caption(" · ".join(f"{m.label}: {m.formula}" for k, m in metrics.SIMILARITIES.items() if k in kinds))


@st.cache_resource(show_spinner=False, max_entries=32)
def _picked_similarity(key, heads: tuple[int, ...], kinds: tuple[str, ...], _run, _model) -> dict[str, np.ndarray]:
    """Each similarity `kinds` among the `heads` (flat indices) of the run `key` names: only the
    picked heads, since the whole-model matrices (JS above all) may take seconds."""
    sub, sub_weights = metrics.select_heads(_run, list(heads), analysis.weights(_model))
    return {k: metrics.head_similarity(sub, k, weights=sub_weights) for k in kinds}


def layers_view() -> None:
    cur = start("Across layers")
    if cur is None:
        return
    run = cur.run
    if not run.from_first_layer:
        st.info(f"Rollout and flow follow every layer from the first; this capture holds layers "
                f"{', '.join(map(str, run.layer_ids))} of {run.model_layers} only. Capture from layer 0 "
                "(fewer tokens, or layers 0 to k under *Layers to capture* in the sidebar) to see them.",
                icon="ℹ️")
        return
    method = st.radio("Method", ["rollout", "rollout through one head", "flow"], key=keys.LAYERS_METHOD,
                      horizontal=True)
    layer = st.slider("Up to layer", 0, run.num_layers - 1, value=run.num_layers - 1, key=keys.LAYERS_LAYER) \
        if run.num_layers > 1 else 0
    if method == "rollout":
        st.markdown("**Attention rollout** (Abnar & Zuidema 2020) · `Â_l = ½·mean_h A_l + ½·I (rows "
                    "renormalised); R_1 = Â_1, R_l = Â_l R_{l−1}`")
        st.caption("Row i: how much token i after this layer draws on each input token, heads "
                   "averaged and the residual connection counted. High: the token's representation is "
                   "made of that input token; low: it is not.")
        matrix = analysis.rollout(cur.key, run)[layer]
        head = None
    elif method == "rollout through one head":
        head = int(st.number_input("Head", 0, run.num_heads - 1, 0, key=keys.LAYERS_HEAD))
        st.markdown("**Per-head rollout** · `A_{l,h} R_{l−1}`")
        st.caption("What head h of this layer reads, traced back to the input tokens through the layers below.")
        matrix = metrics.rollout_through_head(run, layer, head, rolled=analysis.rollout(cur.key, run))
    else:
        st.markdown("**Attention flow** (Abnar & Zuidema 2020) · max-flow from (layer, token i) to input "
                    "token j, capacities Â_l; rows normalised")
        if run.n > metrics.FLOW_MAX_TOKENS:
            st.warning(f"Flow solves a max-flow problem for every pair of tokens over L·n² edges (cost "
                       f"grows like n⁴), so it is offered for inputs of at most {metrics.FLOW_MAX_TOKENS} "
                       f"tokens; this one has {run.n}. Rollout works at any length.", icon="⏱️")
            return
        # measured on 2 CPU cores: about 5 s for 6 layers at 64 tokens; cost grows like layers · n⁴
        seconds = 5.0 * (layer + 1) / 6 * (run.n / 64) ** 4
        if seconds > 1:
            st.caption(f"This takes about {seconds:.0f} s on 2 CPU cores (a max-flow problem for every "
                       "pair of tokens); the result is kept for this text.")
        matrix = analysis.flow(cur.key, layer, run)
        head = None
    title = metric_figures.ACROSS_LAYERS[method].format(layer=layer, head=head)
    fig = charts.cached("layers_matrix", (cur.key, method, layer, head),
                        lambda: metric_figures.token_figure(matrix, run.tokens, title=title))
    charts.show(fig, key=keys.LAYERS_MATRIX)
    name = f"{figure_style.safe_filename(run.model_name)}-{method.replace(' ', '-')}-L{layer}.csv"
    st.download_button("Download this matrix (CSV)", lambda: _token_csv(matrix, run.tokens), key=keys.DL_LAYERS,
                       on_click="ignore", file_name=name, mime="text/csv")  # the CSV is built on a click only


def _matrix_csv(sim: np.ndarray, labels: list[str]) -> bytes:
    """The heads × heads matrix with a header row and a first column of head labels."""
    return ("head," + ",".join(labels) + "\n" + "\n".join(
        labels[i] + "," + ",".join(f"{x:.6g}" for x in row) for i, row in enumerate(sim))).encode()


def _token_csv(matrix: np.ndarray, tokens: list[str]) -> bytes:
    cols = [f"{i}:{t}" for i, t in enumerate(tokens)]
    return pd.DataFrame(matrix, index=cols, columns=cols).to_csv().encode()
