"""The Model view's section for a hybrid's other token-mixing layers (issue 55): the layers that are not softmax
attention (gated DeltaNet, Mamba, short convolutions…), each as its exact effective attention
(`mha_viz.effective`), one thumbnail a head or channel group, in the model's layer order. Computed once a text
(one more forward pass), admitted by the bytes of its n × n matrices (every layer's held at once while they are
made, then pooled into thumbnails) within the capture budget (MHA_VIZ_MAX_CAPTURE_MB)."""

from __future__ import annotations

import streamlit as st

import mha_viz
from mha_viz import effective, needs
from mha_viz.budget import capture_budget
from mha_viz.effective import NotExact, effective_attention
from mha_viz.figures import effective as effective_figures
from mha_viz.ui import charts, keys, resources
from mha_viz.ui.analysis_key import AnalysisKey
from mha_viz.ui.text import plain


@st.cache_resource(show_spinner=False, max_entries=8)
def _matrices(model_key, _model) -> int:
    """How many n × n matrices the model's effective attention holds (`effective.matrices`: a probe of a few
    tokens, once a model)."""
    return effective.matrices(_model)


@st.cache_resource(show_spinner="Computing the other layers' effective attention…", max_entries=8)
def _thumbnails(key: AnalysisKey, _model) -> effective_figures.EffectiveThumbnails:
    """key: the text's (its cap). Holds one of the server's analysis slots (call through `one_at_a_time`)."""
    with resources.slots().hold(need=needs.forward(_model, needs.tokens(_model, key.text, key.cap))), \
            mha_viz.text.session_cap(key.cap):
        return effective_figures.thumbnails(effective_attention(_model, key.text, max_tokens=key.cap))


def other_layers_section(cur) -> None:
    """The section, for a model with token-mixing layers besides softmax attention (`LoadedModel.other_layers`)."""
    model = cur.model
    other = getattr(model, "other_layers", None)
    if not other:
        return
    st.subheader("The other token-mixing layers")
    kinds = "; ".join(f"{kind.replace('_', ' ')}: layers {', '.join(map(str, numbers))}"
                      for kind, numbers in other.items())
    n = (cur.full_run or cur.run).n
    text_key = cur.key.with_text(cur.key.text)
    try:
        count = _matrices(cur.key.model, model)
        need = effective.need_bytes(count, n)
        if not capture_budget.fits(need):  # every layer's matrices are held at once while computed
            fit = effective.tokens_that_fit(count, capture_budget.capture_budget())
            st.info(f"This model also mixes tokens without softmax ({plain(kinds)}). Their effective attention over "
                    f"this text's {n:,} tokens would hold {capture_budget.over_budget(need)}: lower the token "
                    f"limit to {fit:,} tokens in the sidebar to see it.", icon=":material/info:")
            return
        thumbs = resources.one_at_a_time(lambda: _thumbnails(text_key, model))
    except NotExact as exc:
        st.info(f"{plain(kinds)}: {plain(str(exc))}", icon=":material/info:")
        return
    st.caption(f"Besides the softmax heads above, this model mixes tokens in other layers ({plain(kinds)}). Each "
               "is linear in its values, so it has an exact effective attention: output_t = Σ_s A[t, s] · v_s, "
               "computed from the model's own tensors (docs/effective-attention.md says what each folds in). Its "
               "weights are signed and rows do not sum to 1: blue is negative, red positive, each thumbnail scaled "
               "to its own largest |A| (hover for it).")
    charts.show(charts.cached("effective_grid", text_key, lambda: effective_figures.grid(thumbs)),
                key=keys.EFFECTIVE_GRID, width="content")
    if thumbs.shares:
        kind_of = dict(zip(thumbs.layers, (label.split(":")[0] for label in thumbs.labels)))
        st.dataframe({"layer": list(thumbs.shares),
                      "kind": [kind_of.get(n, "softmax attention") for n in thumbs.shares],
                      "share of the token mixing": [f"{100 * s:.1f} %" for s in thumbs.shares.values()]},
                     hide_index=True, key=keys.EFFECTIVE_SHARES)
        st.caption("How much of the model's token mixing each layer does on this text: its mean output norm "
                   "(mean over tokens of ‖output‖, the softmax layers' after W_O) over the sum of every mixing "
                   "layer's.")
