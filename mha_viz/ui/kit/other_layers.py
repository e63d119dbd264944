"""A hybrid's other token-mixing layers (issue 55): the layers that are not softmax attention (gated DeltaNet,
Mamba, short convolutions…), each as its exact effective attention (`mha_viz.effective`), in the model's layer
order: the Model view's section draws one thumbnail a head or channel group, the Head metrics' section each group's
measures on |A| (`metrics.effective_measures`), Model facts each kind's share of the token mixing. Computed once a
text for the three (one more forward pass, its softmax layers fused), each layer made from the forward's taps one
layer at a time, by blocks of rows where its kind can (Mamba-2, gated DeltaNet, Kimi Delta Attention, lightning
attention: what it holds grows as n, so these sections open at any length), pooled into thumbnails and measured in
one pass, then let go (`effective.each_reduced`, `effective.summarised`): admitted by what the largest layer holds
(`effective.Held`) within the capture budget (MHA_VIZ_MAX_CAPTURE_MB). The Head view's section draws one layer's
group from a forward that keeps that layer's only, read the same way, every cell up to DETAIL_SIDE tokens and
blocks of tokens past it (`effective.pooled_layer`)."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pandas as pd
import streamlit as st

import mha_viz
from mha_viz import effective
from mha_viz.budget import capture_budget, plan
from mha_viz.drawing import effective as effective_figures
from mha_viz.effective import NotExact
from mha_viz.metrics import EFFECTIVE_MEASURES
from mha_viz.ui.kit import charts, keys, plans, resources
from mha_viz.ui.kit.analysis_key import AnalysisKey
from mha_viz.ui.kit.text import plain


@st.cache_resource(show_spinner=False, max_entries=8)
def _held(model_key, _model) -> effective.Held:
    """What the model's effective layers hold, one at a time (`effective.held`: a probe of a few tokens, once a
    model): the summary's need, read by rows where a layer's kind can, and one layer's view's, whole."""
    return effective.held(_model)


class Summary(NamedTuple):
    """What the pages draw of the other layers, without their n × n matrices."""

    thumbnails: effective_figures.EffectiveThumbnails
    measures: pd.DataFrame  # `metrics.effective_measures`


@st.cache_resource(show_spinner="Computing the other layers' effective attention…", max_entries=8)
def _summary(key: AnalysisKey, _model) -> Summary:
    """key: the text's (its cap). Holds one of the server's analysis slots (call through `one_at_a_time`)."""
    # one layer at a time, by blocks of rows where its kind can: pooled and measured in one pass, then let go
    planned = plan.forward_plan(_model, key.text, key.cap, lambda: effective.each_reduced(
        _model, key.text, effective.summarised, max_tokens=key.cap, by_rows=True))
    with mha_viz.text.session_cap(key.cap):
        run, rows = plans.run_admitted(planned)
        return Summary(effective_figures.stacked([r[0] for r in rows], run.mixing_shares()),
                       pd.concat([r[1] for r in rows], ignore_index=True))


@st.cache_resource(show_spinner="Computing the layer's effective attention…", max_entries=4)
def _layer(key: AnalysisKey, number: int, _model) -> tuple[np.ndarray, str, str, list[str]]:
    """One other layer's every group, at most DETAIL_SIDE cells a side (`effective.pooled_layer`: every cell up to
    that many tokens, else blocks of tokens): ((G, s, s), its label, what a group is, the tokens). Holds one of the
    server's analysis slots (call through `one_at_a_time`); admitted with the summary, whose need is the same layers'
    read the same way (`summary`)."""
    planned = plan.forward_plan(_model, key.text, key.cap, lambda: effective.pooled_layer(
        _model, key.text, number, side=effective_figures.DETAIL_SIDE, max_tokens=key.cap))
    with mha_viz.text.session_cap(key.cap):
        pooled, layer, tokens = plans.run_admitted(planned)
    return pooled, layer.label, layer.grouping, tokens


def _kinds(other: dict) -> str:
    return "; ".join(f"{kind.replace('_', ' ')}: layers {', '.join(map(str, numbers))}"
                     for kind, numbers in other.items())


def summary(cur) -> tuple[str, Summary] | None:
    """(what the other layers are, their summary) for a model with token-mixing layers besides softmax attention
    (`LoadedModel.other_layers`) on the text on screen; None, after a notice where there is one to give, when the
    model has none, or their matrices would not fit the capture budget, or a layer cannot be made exact."""
    model = cur.model
    other = getattr(model, "other_layers", None)
    if not other:
        return None
    kinds = _kinds(other)
    n = (cur.full_run or cur.run).n
    text_key = cur.key.with_text(cur.key.text)
    try:
        held = _held(cur.key.model, model)
        need = held.summary_bytes(n)  # one layer at a time: its blocks of rows, or its matrices where made whole
        if not capture_budget.fits(need):
            fit = held.summary_fit(capture_budget.capture_budget())
            st.info(f"This model also mixes tokens without softmax ({plain(kinds)}). The effective attention of its "
                    f"largest such layer over this text's {n:,} tokens would hold "
                    f"{capture_budget.over_budget(need)}: lower the token "
                    f"limit to {fit:,} tokens in the sidebar to see it.", icon=":material/info:")
            return None
        return kinds, resources.one_at_a_time(lambda: _summary(text_key, model))
    except NotExact as exc:
        st.info(f"{plain(kinds)}: {plain(str(exc))}", icon=":material/info:")
        return None


def _section(cur) -> tuple[str, Summary] | None:
    """A section's heading and `summary`, for a model with other token-mixing layers; None (nothing drawn) without."""
    if not getattr(cur.model, "other_layers", None):
        return None
    st.subheader("The other token-mixing layers")
    return summary(cur)


def other_layers_section(cur) -> None:
    """The Model view's section: every other layer's groups as signed thumbnails, and each mixing layer's share."""
    found = _section(cur)
    if found is None:
        return
    kinds, thumbs = found[0], found[1].thumbnails
    text_key = cur.key.with_text(cur.key.text)
    st.caption(f"Besides the softmax heads above, this model mixes tokens in other layers ({plain(kinds)}). Each "
               "is linear in its values, so it has an exact effective attention: output_t = Σ_s A[t, s] · v_s, "
               "computed from the model's own tensors (docs/effective-attention.md says what each folds in). Its "
               "weights are signed and rows do not sum to 1: blue is negative, red positive, each thumbnail scaled "
               "to its own largest |A| (hover for it).")
    charts.show(charts.cached("effective_grid", text_key, lambda: effective_figures.grid(thumbs)),
                key=keys.EFFECTIVE_GRID, width="content")
    if thumbs.shares:
        st.dataframe({"layer": [number for number, _ in thumbs.shares], "kind": [k for _, k in thumbs.shares],
                      "share of the token mixing": [f"{100 * s:.1f} %" for s in thumbs.shares.values()]},
                     hide_index=True, key=keys.EFFECTIVE_SHARES)
        st.caption("How much of the model's token mixing each layer does on this text: its mean output norm "
                   "(mean over tokens of ‖output‖, the softmax layers' after W_O) over the sum of every mixing "
                   "layer's. A layer that runs attention and another mixer side by side has a row for each.")


MEASURES_NOTE = (
    "Each head or channel group's effective attention A is signed and its rows do not sum to 1, so it is measured "
    "on |A| with each row normalised (P = |A| / Σ|A|): **distance**, the mean |t − s| under P; **previous token** "
    "and **induction**, the head detector's scores on P (the previous token; the token after an earlier copy of "
    "this one); **decay length**, how many keys back hold 1 − 1/e of a row's weight (the e-folding length of a "
    "decay). docs/head-metrics.md defines them.")


def other_layers_measures(cur) -> None:
    """The Head metrics' section: every other layer's groups measured, in the model's layer order, with its kind."""
    found = _section(cur)
    if found is None:
        return
    table = found[1].measures
    st.caption(f"Besides the softmax heads above, this model mixes tokens in other layers ({plain(found[0])}). "
               + MEASURES_NOTE)
    st.dataframe(table.round({name: 4 for name in EFFECTIVE_MEASURES}), hide_index=True,
                 key=keys.EFFECTIVE_MEASURES_DF)


def other_layers_shares(cur) -> None:
    """Model facts' section: how much of the model's token mixing each kind of layer does on the text on screen."""
    found = _section(cur)
    if found is None or not found[1].thumbnails.shares:
        return
    by_kind = found[1].thumbnails.kind_shares()
    thumbs = found[1].thumbnails
    st.dataframe({"kind": list(by_kind), "layers": [", ".join(map(str, thumbs.layers_of(kind))) for kind in by_kind],
                  "share of the token mixing": [f"{100 * s:.1f} %" for s in by_kind.values()]},
                 hide_index=True, key=keys.EFFECTIVE_KINDS)
    st.caption("How much of the model's token mixing each kind of layer does on this text: the sum over its layers "
               "of each layer's mean output norm (mean over tokens of ‖output‖, the softmax layers' after W_O) over "
               "the sum of every mixing layer's. The Model view draws each layer's.")



def other_layers_head(cur) -> None:
    """The Head view's section: one other layer's head or channel group on a diverging scale, every cell up to
    DETAIL_SIDE tokens, else blocks of tokens."""
    found = _section(cur)
    if found is None:
        return
    thumbs = found[1].thumbnails
    labels = thumbs.kind_of
    number = st.selectbox("Layer", thumbs.layers, key=keys.EFFECTIVE_LAYER_PICK, persist_state=keys.KEEP,
                          format_func=lambda n: f"layer {n} · {labels.get(n, '')}")
    text_key = cur.key.with_text(cur.key.text)
    a, label, grouping, tokens = resources.one_at_a_time(lambda: _layer(text_key, int(number), cur.model))
    group = st.number_input(f"Group ({grouping})", 0, a.shape[0] - 1, key=keys.EFFECTIVE_GROUP_PICK,
                            persist_state=keys.KEEP)
    group = min(int(group), a.shape[0] - 1)
    title = f"Layer {number}, group {group}: {label.split(':')[0]}, effective attention (blue < 0 < red)"
    charts.show(charts.cached("effective_head", (text_key, int(number), group),
                              lambda: effective_figures.matrix(a[group], tokens, title)), key=keys.EFFECTIVE_HEAD)
    blocks = a.shape[-1] < len(tokens)
    st.caption(f"{plain(label)}. Row t: output_t = Σ_s A[t, s] · v_s over the keys s; the weights are signed and a "
               "row does not sum to 1 (docs/effective-attention.md says what the matrix folds in)."
               + (f" {len(tokens):,} tokens in {a.shape[-1]} × {a.shape[-1]} cells: each cell is a block of tokens, "
                  "drawn with its value of largest |A| and that value's sign." if blocks else ""))
