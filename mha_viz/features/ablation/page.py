"""The ablation view: switch heads off live and see what changes (loss, top-5 predictions or the
sentence embedding), head importance and the pruning curve."""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
import streamlit as st

import mha_viz
from mha_viz.drawing import metrics as metric_figures
from mha_viz.drawing import pruning as pruning_figures
from mha_viz.features.ablation import controls as ablation_keys
from mha_viz.features.ablation.controls import OTHER_SENTENCE
from mha_viz.interventions import ablation, ablation_outcome
from mha_viz.text import loss_inputs
from mha_viz.ui.kit import analysis, boxes, charts, heads_off, keys, resources, session
from mha_viz.ui.kit.text import plain
from mha_viz.ui.shell import notebook_button
from mha_viz.ui.shell.view_helpers import start

HEAD_COLUMN_PX, HEADS_INDEX_PX = 56, 64  # "H11" and its header's padding (46 px read "H1"); "layer"
# a text this long says that each change runs the model again (issue 90: switching a layer off on SmolLM2 at 3,169
# tokens took 11.5 s on 2 quiet cores, unannounced), with the time its last pass took once one was measured
RERUN_NOTE_TOKENS = 1024
RERUN_NOTE_S = 2.0

# what the page's first figure shows where it is not the loss itself: an embedding model's cosine (its importance below
# reads the loss, 1 − that cosine)
MEASURED = {loss_inputs.EMBEDDING: "the cosine between the sentence embedding with these heads off and with every head "
                                   "on (1: unchanged)"}


def ablation_page() -> None:
    cur = start("ablation", forward=True, hybrid_note=False)  # says it its own way, below
    if cur is None:
        return
    model = cur.model
    if not model.attention_modules:
        st.info(f"The heads of this model cannot be switched off: {model.unread}.", icon=":material/info:")
        return
    kind = loss_inputs.loss_kind(model)
    on = heads_off.grid(cur.key.model, (model.num_layers, model.num_heads))
    intro = st.empty()  # said again once the outcomes below are in: the time of the pass they took

    def say() -> None:
        intro.caption("Untick a head to switch it off (its output z is multiplied by ξ = 0 before W_O), then see "
                      f"what changes. Measured: {MEASURED.get(kind, loss_inputs.LOSS_LABELS[kind])}.{_rerun_note(cur)}")
    say()
    if model.other_layers:  # a hybrid
        st.caption(f"{model.name} is a hybrid: only its softmax-attention layers "
                   f"({', '.join(map(str, model.layer_ids))}) have heads to switch off; its other token mixers "
                   "always run.")
    grid = pd.DataFrame(on, index=[f"L{layer}" for layer in model.layer_ids],
                        columns=[f"H{h}" for h in range(model.num_heads)])
    # narrow columns: at 1366 × 768 "small" (75 px) ran a 12-head grid past the main area's right edge
    edited = st.data_editor(grid, key=f"{ablation_keys.HEADS_GRID_PREFIX}{session.get(keys.HEADS_VERSION, 0)}",
                            width="content", column_config={
                                "_index": st.column_config.TextColumn("layer", width=HEADS_INDEX_PX),
                                **{c: st.column_config.CheckboxColumn(c, width=HEAD_COLUMN_PX) for c in grid.columns}})
    on = edited.to_numpy(dtype=bool)
    session.need(keys.HEADS_ON)[cur.key.model] = on
    cols = st.columns([1, 2, 2])
    cols[0].button("All on", key=ablation_keys.HEADS_ALL_ON,
                   on_click=lambda: heads_off.set_grid(cur.key.model, np.ones_like(on)))
    cols[1].selectbox("Layer", list(range(model.num_layers)), key=ablation_keys.HEADS_LAYER_PICK,
                      label_visibility="collapsed", format_func=lambda row: f"layer {model.layer_ids[row]}")
    cols[2].button("Switch off this whole layer", key=ablation_keys.HEADS_LAYER_OFF,
                   on_click=_switch_off_layer, args=(cur.key.model, on))
    mode = st.radio("Switched-off heads are", ["zeroed (ξ = 0)", "replaced by their mean output on this text"],
                    key=ablation_keys.ABLATE_MODE, persist_state=keys.KEEP, horizontal=True)
    mean_ablation = mode.startswith("replaced")
    off = int((~on).sum())
    st.markdown(f"**{off} of {on.size} heads off.**")
    _effects(cur, kind, on, mean_ablation)
    say()
    notebook_button.record(keep=on.tolist(), mean_ablation=mean_ablation, kind=kind,
                           other=session.get(ablation_keys.ABLATION_OTHER))
    _importance_and_pruning(cur, kind, mean_ablation)


def _rerun_note(cur) -> str:
    """What each change costs on a long text: the model run again over its tokens, and how long the last pass with
    heads off took on it (once one took RERUN_NOTE_S or more)."""
    last = session.get(ablation_keys.RERUN_SECONDS, {}).get(cur.key)
    took = f"; the last one took {last:.0f} s" if last is not None and last >= RERUN_NOTE_S else ""
    n = cur.run.n if cur.run is not None else 0
    if n < RERUN_NOTE_TOKENS and not took:
        return ""
    return f" Each change runs {plain(cur.model.name)} over this text's {n:,} tokens again{took}."


def _timed_outcomes(cur, key, on: np.ndarray, mean_ablation: bool):
    """`analysis.outcomes`, its time kept for `_rerun_note` when it ran a pass with heads off (not a cached one)."""
    start = time.perf_counter()
    found = resources.one_at_a_time(lambda: analysis.outcomes(key, on, mean_ablation, cur.model, cur.run))
    seconds = time.perf_counter() - start
    if not on.all() and seconds >= RERUN_NOTE_S and key == cur.key:
        session.setdefault(ablation_keys.RERUN_SECONDS, {})[cur.key] = seconds
    return found


def _switch_off_layer(model_key, on: np.ndarray) -> None:
    """The button's callback: the layer is read at the click, so that a pick made in the same
    rerun counts."""
    out = on.copy()
    out[session.need(ablation_keys.HEADS_LAYER_PICK)] = False
    heads_off.set_grid(model_key, out)


def _effects(cur, kind: str, on: np.ndarray, mean_ablation: bool) -> None:
    model = cur.model
    if kind == loss_inputs.EMBEDDING:
        _embedding_effects(cur, on, mean_ablation)
        return
    try:
        base, off = _timed_outcomes(cur, cur.key, on, mean_ablation)
    except mha_viz.InputError as exc:  # e.g. a decoder's loss on a one-token text
        st.error(plain(str(exc)), icon=":material/warning:")
        return
    moved = f"{off.loss - base.loss:+.4f}"
    unmoved = float(moved) == 0  # every head on, or no change to 4 decimals: no arrow ("↑ +0.0000" read as a rise)
    st.metric(loss_inputs.LOSS_LABELS[kind].split(" (")[0], f"{off.loss:.4f}", delta="±0.0000" if unmoved else moved,
              delta_color="off" if unmoved else "inverse", delta_arrow="off" if unmoved else "auto",
              help=loss_inputs.LOSS_LABELS[kind])
    preds = ablation_outcome.prediction_pairs(base, off)
    if not preds and kind == loss_inputs.MASKED_LM:
        st.info(f"Type {plain(model.tokenizer.mask_token)} in the sentence where the model should fill "
                "in a word to see its top-5 guesses before and after.", icon=":material/edit:")
    for p in preds:
        st.markdown(f"**Top 5: {plain(p.position)}**")
        st.table(pd.DataFrame({  # five rows: static, no grid to load and draw
            "every head on": [f"{plain(t)}  ({q:.1%})" for t, q in p.before],  # its cells are Markdown
            "with the heads off": [f"{plain(t)}  ({q:.1%})" for t, q in p.after]}), hide_index=True)


def _embedding_effects(cur, on: np.ndarray, mean_ablation: bool) -> None:
    session.start_at(ablation_keys.ABLATION_OTHER, OTHER_SENTENCE)
    other = st.text_input("A second sentence to compare with", key=ablation_keys.ABLATION_OTHER,
                          persist_state=keys.KEEP)
    try:
        pairs = [tuple(o.embedding for o in _timed_outcomes(cur, key, on, mean_ablation))
                 for key in [cur.key] + ([cur.key.with_text(other)] if other and other.strip() else [])]
    except mha_viz.InputError as exc:
        st.error(plain(str(exc)), icon=":material/warning:")
        return
    change = ablation_outcome.compare_embeddings(*pairs)
    cols = st.columns(3)
    cols[0].metric("cosine: sentence embedding, heads off vs on", f"{change['cosine to unablated']:.4f}")
    if "similarity before" in change:
        # labels short enough for a third of the page: the long form in their help
        cols[1].metric("cosine to sentence 2, heads on", f"{change['similarity before']:.4f}",
                       help="Cosine between this sentence's embedding and the second sentence's, every head on.")
        cols[2].metric("… with the heads off", f"{change['similarity after']:.4f}",
                       delta=f"{change['similarity after'] - change['similarity before']:+.4f}",
                       help="The same cosine with the heads switched off in both sentences.")


def _importance_and_pruning(cur, kind: str, mean_ablation: bool) -> None:
    """*Which heads matter*, in a box built only while open (the page's other half: its controls cost the switch to
    this page each time): open as it was left, and opened for the importance asked for on this text or another
    source than this text chosen (a lesson's step, a link)."""
    if (session.get(ablation_keys.IMP_SOURCE, ablation_keys.THIS_TEXT) != ablation_keys.THIS_TEXT
            or cur.key.with_text(cur.run.text) in session.get(ablation_keys.IMPORTANCE_DONE, set())):
        session.put(ablation_keys.IMP_WAS_OPEN, True)
    box = boxes.lazy_box(st, "Which heads matter: each head's importance, and the pruning curve",
                         ablation_keys.IMP_OPEN, ablation_keys.IMP_WAS_OPEN)
    if box.open:
        with box:
            _importance_box(cur, kind, mean_ablation)


def _importance_box(cur, kind: str, mean_ablation: bool) -> None:
    model = cur.model
    source = st.radio("Score the heads on", [ablation_keys.THIS_TEXT, ablation_keys.SAMPLE],
                      key=ablation_keys.IMP_SOURCE,
                      persist_state=keys.KEEP,
                      horizontal=True)
    text = cur.run.text if source == ablation_keys.THIS_TEXT else ablation.SAMPLE_PARAGRAPH
    how = ("the change in 1 − cosine when each head alone is switched off (this model has no LM head, so the "
           "gradient at ξ = 1 is zero)" if kind == loss_inputs.EMBEDDING else
           "Michel et al.'s gradient importance: Σ_t |⟨z_{h,t}, ∂L/∂z_{h,t}⟩| / n, each layer's row divided by its "
           "L2 norm")
    st.caption(f"Importance: {how}.")
    key = cur.key.with_text(text)
    try:  # planned once: read and priced before its button, a gradient pass that would not fit refused here
        plan = ablation.plan_importance(model, text, max_tokens=key.cap)
    except mha_viz.InputError as exc:
        st.warning(plain(str(exc)), icon=":material/memory:")
        return
    if st.button("Compute head importance",
                 key=ablation_keys.IMP_GO) or key in session.get(ablation_keys.IMPORTANCE_DONE, set()):
        session.setdefault(ablation_keys.IMPORTANCE_DONE, set()).add(key)
        try:
            imp = resources.one_at_a_time(lambda: analysis.gradient_importance(key, model, plan))
        except mha_viz.InputError as exc:  # e.g. a gradient pass over the memory budget: refused with its cost
            st.error(plain(str(exc)), icon=":material/warning:")
            return
        notebook_button.record(importance=source)
        charts.show(charts.cached("importance", key, lambda: metric_figures.metric_grid(
            imp, title="Head importance (per-layer L2-normalised)")), key=ablation_keys.IMP_GRID)
        csv = pd.DataFrame(imp, columns=[f"H{h}" for h in range(imp.shape[1])]).rename_axis("layer").to_csv()
        st.download_button("Download importance (CSV)", csv.encode(), file_name="head-importance.csv",
                           mime="text/csv", key=ablation_keys.DL_IMP)
        session.start_at(ablation_keys.IMP_K, 0, lambda k: 0 <= int(k) < imp.size)
        k = st.slider("Switch off the k least important heads", 0, imp.size - 1, key=ablation_keys.IMP_K)
        if k and st.button(f"Switch off these {k} heads above", key=ablation_keys.IMP_APPLY):
            on = np.ones(imp.size, dtype=bool)
            on[np.argsort(imp.ravel())[:k]] = False
            heads_off.set_grid(cur.key.model, on.reshape(imp.shape))
            st.rerun()
        seconds = _pruning_seconds(model, len(text.split()))
        if st.button(f"Pruning curve (about {seconds:.0f} s: 6 orders × {len(ablation.PRUNE_FRACTIONS)} steps)",
                     key=ablation_keys.PRUNE_GO) or key in session.get(ablation_keys.PRUNING_DONE, set()):
            session.setdefault(ablation_keys.PRUNING_DONE, set()).add(key)
            curve, why = resources.attempt(lambda: analysis.pruning(key, mean_ablation, model),
                                           what="The pruning curve",
                                           out_of_memory="The pruning curve needs more memory than is free: use "
                                                         "a shorter text.")
            if curve is None:
                st.error(plain(why), icon=":material/warning:")
                return
            notebook_button.record(pruning=True)
            charts.show(charts.cached("pruning", (key, mean_ablation), lambda: pruning_figures.pruning_figure(
                ablation.PRUNE_FRACTIONS, curve["importance order"], curve["random mean"], curve["random sd"],
                loss_label=loss_inputs.LOSS_LABELS[kind].split(" (")[0])), key=ablation_keys.PRUNE_FIG)
            st.download_button("Download the pruning curve (CSV)", curve.to_csv(index=False).encode(),
                               file_name="pruning-curve.csv", mime="text/csv", key=ablation_keys.DL_PRUNE)


def _pruning_seconds(model, words: int) -> float:
    """Measured on 2 CPU cores: one order of SmolLM2's 10-step curve over the bundled paragraph
    (about 90 words) takes 3.1 s, about 0.07 s a forward pass per 20 words."""
    return 60 * model.num_layers / 30 * max(1.0, words / 20) * 0.07 * (model.d_model / 576) ** 2 + 1
