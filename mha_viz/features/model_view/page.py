"""The *Model view* page: every head of the run at once, as thumbnails on a layers × heads grid
(a click opens one in the head view), and what the lens and the sinks show. A long run's thumbnails are
its scan's (`views.thumbnails`), over every token the sidebar's limit keeps."""

from __future__ import annotations

import logging

import numpy as np
import streamlit as st

from mha_viz.drawing import heads as head_figures
from mha_viz.drawing import metrics as metric_figures
from mha_viz.drawing import style as figure_style
from mha_viz.features.model_view import controls as model_view_keys
from mha_viz.ui.kit import analysis, charts, keys, memory_view, other_layers, seq2seq_views, session, shared_head
from mha_viz.ui.kit.text import plain
from mha_viz.ui.shell import notebook_button, view_helpers
from mha_viz.views import thumbnails

log = logging.getLogger("mha_viz.ui")


def _on_grid_select() -> None:
    picked = view_helpers.clicked_head(keys.GRID)
    if picked is not None:
        shared_head.open_head(*picked)


FIRST_STEP = (":material/arrow_back: **Start here:** type or paste a sentence in the sidebar's *Sentence* box (on a "
              "phone, open the sidebar with » at the top left), or pick an example under it; then click any head "
              "below to open it.")


def model_view_page() -> None:
    cur = view_helpers.start("model_view", cross=True, lead=FIRST_STEP, hybrid_note=False)  # draws them
    if cur is None:
        return
    if seq2seq_views.is_cross(cur.run):
        return seq2seq_views.cross_model_view(cur, _on_grid_select, model_view_keys.GRID_RESCALE)
    run = cur.run
    layers = (f"layers {', '.join(map(str, run.layer_ids))} of {run.model_layers}" if run.partial
              else f"{run.num_layers} layers")
    st.caption(f"{plain(run.model_name)}: {layers} × {run.num_heads} heads, {run.n} tokens. "
               "Rows are layers, columns heads; each thumbnail is that head's attention "
               "(queries down, keys across). Click a thumbnail to open it in the head view.")
    session.start_at(model_view_keys.GRID_RESCALE, True)
    rescale = st.toggle("Rescale each thumbnail to its own maximum", key=model_view_keys.GRID_RESCALE,
                        persist_state=keys.KEEP)
    notebook_button.record(rescale=rescale)
    fig = charts.cached("model_grid", (cur.key, rescale), lambda: _grid(run, rescale))
    charts.show(fig, key=keys.GRID, on_select=_on_grid_select, selection_mode="points", width="content")
    cols = st.columns([1, 1, 2])
    for key, top in ((model_view_keys.GRID_LAYER, run.num_layers - 1), (model_view_keys.GRID_HEAD, run.num_heads - 1)):
        session.settle(key, min(int(session.get(key, 0)), top))
    cols[0].selectbox("Layer", list(range(run.num_layers)), key=model_view_keys.GRID_LAYER,
                      format_func=lambda row: str(run.layer_ids[row]))  # rows are shown by layer number
    cols[1].number_input("Head", 0, run.num_heads - 1, key=model_view_keys.GRID_HEAD)
    cols[2].button("Open in head view", key=model_view_keys.GRID_OPEN_HEAD, type="primary",
                   on_click=lambda: shared_head.open_head(int(session.need(model_view_keys.GRID_LAYER)),
                                                                  int(session.need(model_view_keys.GRID_HEAD))))
    other_layers.other_layers_section(cur)
    _lens_change(cur)
    _sink_mass(run)
    _learned_sinks(cur)
    memory_view.memory_grid(cur)


def _grid(run, rescale: bool):
    """The thumbnails grid: a long run's from its scan's thumbnails (`views.thumbnails`), every head
    read once when the run was made; a run of contributions titled as such."""
    return head_figures.grid_figure(thumbnails.thumbnails(run), thumb=thumbnails.THUMB, rescale=rescale,
                                    layer_ids=run.layer_ids,
                                    title=figure_style.run_title(run, "Every head") if run.lens else None)


def _lens_change(cur) -> None:
    """With contributions shown (sidebar): how much each head's picture changed, as a grid of the
    JS divergence between its weights and its contributions."""
    run, weights = cur.run, cur.weights_run
    if not run.lens or weights is None:
        return
    st.subheader("How much contributions change each head")
    js = analysis.lens_divergence(cur.key, weights, run)
    fig = charts.cached("lens_js", cur.key, lambda: metric_figures.metric_grid(
        js, title="JS divergence (base 2) between weights and contributions, mean over queries",
        layer_ids=run.layer_ids))
    charts.show(fig, key=model_view_keys.LENS_JS_GRID, width="content")
    layer, head = np.unravel_index(int(js.argmax()), js.shape)
    st.caption(f"0: the head's contributions draw the same picture as its weights; 1: they share nothing. "
               f"Mean over heads {float(js.mean()):.3f}; most changed: layer {run.layer_ids[layer]}, head {head} "
               f"({float(js[layer, head]):.3f}), where the tokens it looks at write little through it.")


def _sink_mass(run) -> None:
    """With tokens hidden (sidebar): how much attention each head gave them, as a layers × heads grid."""
    if run.hidden is None:
        return
    st.subheader("Hidden attention (sink mass)")
    names = ", ".join(dict.fromkeys(run.hidden.removed_tokens))
    fig = metric_figures.metric_grid(run.hidden.mass, title="Attention to the hidden tokens, every head",
                                     layer_ids=run.layer_ids)
    charts.show(fig,
                    key=model_view_keys.SINK_MASS_GRID, width="content")
    st.caption(f"Each cell: the mean over the shown queries of the attention that went to the hidden tokens "
               f"({plain(names)}), before renormalising. 1 means the head looked at nothing else. "
               f"Mean over heads {float(run.hidden.mass.mean()):.3f}; "
               f"highest {float(run.hidden.mass.max()):.3f}.")


def _learned_sinks(cur) -> None:
    """A model with learned sink logits (GPT-OSS): how much of each row each head gave to no token,
    from the run before hiding tokens and before the lens."""
    run = cur.full_run or cur.run
    share = analysis.learned_sink_share(cur.key._replace(hidden=(), lens=""), run)
    if share is None:
        return
    merged = memory_view.merged_with_sink(cur, run)  # a long run of compressed layers: entries not held apart
    st.subheader("Learned sinks" + (" and compressed memory" if merged else ""))
    what = "the learned sink and the compressed memory entries" if merged else "the learned sink"
    charts.show(
        metric_figures.metric_grid(share, title=f"Attention given to {what}, every head", layer_ids=run.layer_ids),
        key=model_view_keys.LEARNED_SINK_GRID,
        width="content",
    )
    missing = ("1 − Σ_j A_ij − Σ_e M_ie (what a row lacks once its tokens j and compressed memory entries e are "
               "counted" if memory_view.held(cur) else "1 − Σ_j A_ij (each row's missing mass")
    st.caption("This model's heads each have a learned sink logit: one more key in the softmax that is no token. "
               f"Each cell: the mean over queries of what {what} took, {missing}; the "
               f"heatmaps show the rest). Mean over heads {float(share.mean()):.3f}; highest {float(share.max()):.3f}."
               + (" This run keeps each row's tokens only (a long run, or one read from a file), so the entries' "
                  "share is counted with the sink's." if merged else ""))
