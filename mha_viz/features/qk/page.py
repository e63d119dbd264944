"""Inside one head: queries and keys. The neuron view (query i against key j, term by term, from
the model's real q and k) and the query/key map (every query and key of the head in 2-D,
AttentionViz); a click on a query in the map picks it as query i."""

from __future__ import annotations

import streamlit as st

from mha_viz.features.qk import controls as qk_keys
from mha_viz.features.qk import figures as qk_figures
from mha_viz.ui.kit import analysis, charts, keys, resources, session, shared_head, walk_window
from mha_viz.ui.kit.text import plain
from mha_viz.ui.shell.view_helpers import start
from mha_viz.views import qk

METHOD_LABELS = {"pca": "PCA", "tsne": "t-SNE"}


def _clamp(key: str, top: int) -> None:
    """Keep a picker's value valid when the model or the text changed (before drawing it)."""
    value = session.get(key)
    if value is not None:
        session.settle(key, max(0, min(int(value), top)))


def _on_map_select() -> None:
    """A click on a query in the map makes it the neuron view's query i."""
    picked = charts.clicked(qk_keys.QK_MAP, qk_figures.picked_query)
    if picked is not None:
        session.put(qk_keys.QK_I, picked)


@st.cache_resource(show_spinner=False, max_entries=32)
def _qk_map(key, layer: int, head: int, method: str, translate: bool, _w) -> qk.QKMap:
    """The query/key map of the walkthrough `_w` of (key, layer, head): t-SNE takes seconds, and a
    click on a query redraws the figure, not the map."""
    return qk.qk_map(_w.Q, _w.K, method=method, translate=translate)


def qk_page() -> None:
    cur = start("qk", forward=True)
    if cur is None:
        return
    run, model = cur.run, cur.model
    if not model.can_recompute:
        st.info(f"Queries and keys are recomputed with mha-viz's own MHA, which cannot compute {model.name}'s "
                f"attention: {model.stand_in or model.unread}. Every other page shows its heads.",
                icon=":material/info:")
        return
    row, head = shared_head.pick_head(run.layer_ids, run.num_heads, qk_keys.QK_LAYER, qk_keys.QK_HEAD)
    layer = run.layer_ids[row]
    full = cur.full_run or run  # the walkthrough reads every token, hidden or not
    first = walk_window.window_start(full.n)  # the same window as the teaching view's
    try:
        w = resources.one_at_a_time(lambda: analysis.walkthrough(cur.key.with_text(cur.key.text), layer, head, first,
                                                                 model, full))
    except ValueError as exc:
        st.info(plain(exc), icon=":material/info:")
        return
    n, tok = w.n, w.tokens
    if full.n > w.n:
        st.caption(walk_window.caption(w, full.n) + " The map shows the window's queries and keys.")
    kv = f", KV head {w.kv_head} (grouped-query attention)" if w.num_kv_heads != w.num_heads else ""
    rope = ("q and k are shown after rotary position embeddings (RoPE) turned them, as the scores use them"
            if w.rope else "this model uses no RoPE: q and k are the projections of the layer's input")
    st.caption(plain(f"{model.name}, layer {layer} head {head}{kv}: {rope}."))

    st.subheader("Neuron view: query i against key j")
    session.setdefault(qk_keys.QK_I, min(n - 1, n // 2))
    session.setdefault(qk_keys.QK_J, 0)
    session.setdefault(qk_keys.QK_TOP, min(3, n))
    for key in (qk_keys.QK_I, qk_keys.QK_J):
        _clamp(key, n - 1)
    session.settle(qk_keys.QK_TOP, max(1, min(int(session.need(qk_keys.QK_TOP)), 10, n)))
    label = lambda t: f"{w.start + t}: {tok[t]}"  # noqa: E731 - one-line format function
    cols = st.columns(2)
    i = cols[0].selectbox("Query token i", list(range(n)), key=qk_keys.QK_I, format_func=label)
    j = cols[1].selectbox("Key token j", list(range(n)), key=qk_keys.QK_J, format_func=label)
    nv = qk.neuron(w, i, j)
    st.latex(r"s_{ij} = q_i \cdot k_j = \sum_{t=1}^{d_k} q_{i,t}\, k_{j,t}, \qquad "
             r"A_{ij} = \operatorname{softmax}_j\!\left(\frac{s_{ij}}{\sqrt{d_k}}\right)")
    masked = " Key j comes after query i: the causal mask hides it (probability 0)." if nv.masked else ""
    st.caption(f"Score {nv.score:.4g}; × {nv.scale:.4g} = {nv.scaled:.4g}; probability {nv.prob:.4g} "
               f"(the head's attention matrix holds {float(w.probs[i, j]):.4g}).{masked}")
    charts.show(charts.cached("qk_neuron", (cur.key, layer, head, w.start, i, j), lambda: qk_figures.neuron_figure(nv)),
                key=qk_keys.QK_NEURON)

    st.subheader("Query/key map")
    st.caption("Every query (●) and key (◆) vector of this head, projected together to 2-D and coloured "
               "by position. Click a query: it becomes query i above, and lines join it to the keys it "
               "attends to most (width ∝ weight).")
    cols = st.columns([1, 2, 1])
    method = cols[0].radio("Projection", qk.METHODS, key=qk_keys.QK_METHOD, persist_state=keys.KEEP,
                           format_func=METHOD_LABELS.get,
                           horizontal=True)
    translate = cols[1].toggle("Translate and scale the keys (AttentionViz)", key=qk_keys.QK_TRANSLATE,
                               persist_state=keys.KEEP,
                               help="Scales queries by α and keys by 1/α so both have the same mean norm, "
                                    "then shifts the keys so their mean equals the queries' mean. Neither "
                                    "step changes any attention weight.")
    top = cols[2].number_input("Strongest keys", 1, max(1, min(10, n)), key=qk_keys.QK_TOP, persist_state=keys.KEEP)
    at = (cur.key, w.start)  # the window's
    fig = charts.cached("qk_map", (*at, layer, head, method, translate, i, int(top)),
                        lambda: qk_figures.qk_map_figure(_qk_map(at, layer, head, method, translate, w), tok,
                                                         probs=w.probs, selected_query=i, top_k=int(top)))
    charts.show(fig, key=qk_keys.QK_MAP, on_select=_on_map_select, selection_mode="points")
