"""The Compare page: two sentences on one model (minimal pairs), or one sentence on two models
(fine-tuned against base, our MHA against Hugging Face's; the choices are its controls). Run A is
the sidebar's; the page computes run B the same way (`sidebar.run_to_compare`), compares them
(`mha_viz.compare`) and draws how much each head changed, any head side by side, and the
head-table differences."""

from __future__ import annotations

import logging

import streamlit as st
import torch

import mha_viz
from mha_viz import metrics
from mha_viz.budget import memory
from mha_viz.drawing import style as figure_style
from mha_viz.features.compare import controls as compare_keys
from mha_viz.features.compare import figures as compare_figures
from mha_viz.features.compare.controls import DEFAULT_TEXT_B, MODELS, PAIRS, TEXTS
from mha_viz.features.compare.cost import compare_seconds
from mha_viz.features.compare.plan import plan_compare
from mha_viz.ui.kit import charts, keys, page_controls, plans, resources, session, shared_head
from mha_viz.ui.kit.analysis_key import AnalysisKey
from mha_viz.ui.kit.cost_prompt import accepted, read_note
from mha_viz.ui.kit.text import plain
from mha_viz.ui.shell import export_views, sidebar, view_helpers

TOP = 10  # heads listed as "changed most"
OUT_OF_MEMORY = object()  # what run B is when it ran out of memory
MODES = {TEXTS: "Two sentences, one model", MODELS: "One sentence, two models"}
log = logging.getLogger("mha_viz.ui")


# few entries: a Comparison keeps both runs alive (and, on the words basis, copies without the
# special tokens) after the run cache may have let them go
@st.cache_resource(show_spinner="Comparing every head of the two runs…", max_entries=4)
def comparison(key_a: AnalysisKey, key_b: AnalysisKey, _run_a, _run_b) -> mha_viz.views.Comparison:
    """`mha_viz.compare` of two cached runs, keyed by what each was computed from (in a slot:
    raises Busy when the server is full, like an analysis)."""
    return plans.run_admitted(plan_compare(_run_a, _run_b))


def _texts() -> tuple[str, str]:
    return session.get(keys.TEXT) or "", session.get(compare_keys.CMP_TEXT_B) or ""


def _on_pair() -> None:
    """Set the pair's sentences (the sidebar's and B), keeping the two they replaced for one Undo (`_offer_undo`),
    as Examples and Presets do; one pair over another, unedited, keeps the user's texts."""
    pair = PAIRS.get(session.get(compare_keys.CMP_PAIR))
    if not pair:
        return
    now, held = _texts(), session.get(compare_keys.CMP_UNDO)
    before = held[1] if held is not None and now == held[0] else now
    if before != tuple(pair) and any(t.strip() for t in before):
        session.put(compare_keys.CMP_UNDO, (tuple(pair), before))
    else:
        session.pop(compare_keys.CMP_UNDO)
    sidebar.choose(text=pair[0])
    session.put(compare_keys.CMP_TEXT_B, pair[1])


def _undo() -> None:
    held = session.pop(compare_keys.CMP_UNDO)
    if held is not None:
        session.put_all((keys.TEXT, compare_keys.CMP_TEXT_B, compare_keys.CMP_PAIR), (*held[1], "—"))


def _offer_undo() -> None:
    """While both boxes still hold the pair's sentences, one click puts back the texts it replaced."""
    held = session.get(compare_keys.CMP_UNDO)
    if held is None:
        return
    if _texts() != held[0]:  # edited since: undoing would lose the edit
        session.pop(compare_keys.CMP_UNDO)
        return
    own = held[1][0]
    st.button("Undo: back to your sentences", key=compare_keys.CMP_UNDO_GO, icon=":material/undo:", on_click=_undo,
              help=f"The pair replaced the sidebar's sentence (“{plain(own[:80])}{'…' if len(own) > 80 else ''}”) "
                   "and sentence B.")


def _on_grid() -> None:
    picked = view_helpers.clicked_head(compare_keys.CMP_GRID)  # a row of run A: the sidebar's run
    if picked is not None:
        shared_head.choose_head(*picked)


def _model_b(cur) -> tuple[mha_viz.LoadedModel, bool] | None:
    """Model B from the page's own picker (default: model A with the other attention implementation); a link's
    model B put in the picker first."""
    options = sidebar.model_options()
    if page_controls.just_restored(compare_keys.CMP_B_SPEC):
        spec = session.get(compare_keys.CMP_B_SPEC)
        if not sidebar.put_model(spec, compare_keys.CMP_MODEL_B, compare_keys.CMP_OTHER_B):
            st.warning(f"This server does not offer the link's model B “{plain(spec)}”: model B is the default.",
                       icon=":material/link:")
    a_choice = session.get(keys.MODEL_CHOICE, options[0])
    if session.get(compare_keys.CMP_MODEL_B) not in options:
        session.put(compare_keys.CMP_MODEL_B, a_choice if a_choice in options else options[0])
        session.put(compare_keys.CMP_LOCAL_B, not cur.model_key.local_attention if cur.model_key else False)
    cols = st.columns([3, 2])
    choice = cols[0].selectbox("Model B", options, key=compare_keys.CMP_MODEL_B, persist_state=keys.KEEP,
                               format_func=sidebar.model_title)
    spec = choice
    if choice == sidebar.OTHER:
        spec = cols[0].text_input("Model B: hub id or local folder", key=compare_keys.CMP_OTHER_B,
                                  persist_state=keys.KEEP)
    local = cols[1].toggle("B computes with our MHA", key=compare_keys.CMP_LOCAL_B, persist_state=keys.KEEP,
                           help="The same model with and without our MHA should give the same heads (a "
                                "divergence near 0): a check of our implementation.")
    session.put(compare_keys.CMP_B_SPEC, spec.strip() if (spec or "").strip() else None)  # what a link carries
    if not (spec or "").strip():
        st.info("Type the hub id or folder of model B.", icon=":material/edit:")
        return None
    device = session.get(keys.DEVICE, "auto")
    return resources.load_model(spec, device, local, sidebar.precision()), local


def _run_b(cur):
    """(run B, its key, label A, label B) for the chosen mode, or None with a message drawn."""
    mode = st.radio("Compare", tuple(MODES), key=compare_keys.CMP_MODE, persist_state=keys.KEEP, horizontal=True,
                    format_func=MODES.get)
    local_a = bool(cur.model_key.local_attention) if cur.model_key else False
    if mode == TEXTS:
        st.selectbox("Minimal pairs", ["—"] + list(PAIRS), key=compare_keys.CMP_PAIR, on_change=_on_pair,
                     help="Sets the sidebar's sentence (A) and sentence B.")
        _offer_undo()
        session.setdefault(compare_keys.CMP_TEXT_B, DEFAULT_TEXT_B)
        text_b = st.text_area("Sentence B (sentence A is the sidebar's)", key=compare_keys.CMP_TEXT_B,
                              persist_state=keys.KEEP, height=80)
        if not text_b.strip():
            st.info("Type sentence B to compare it with the sidebar's sentence.", icon=":material/edit:")
            return None
        run_b, key_b = sidebar.run_to_compare(cur.model, text_b, local_a, cur.key.layers)  # A's layers: heads pair up
        return run_b, key_b, "A: the sidebar's sentence", "B: sentence B"
    picked = _model_b(cur)
    if picked is None:
        return None
    model_b, local_b = picked
    same_depth = model_b.num_layers == cur.model.num_layers  # a partial capture of A: the same layers of B
    run_b, key_b = sidebar.run_to_compare(model_b, cur.run.text, local_b, cur.key.layers if same_depth else None)
    impl = {False: "", True: " (our MHA)"}
    return (run_b, key_b, f"A: {cur.run.model_name}{impl[local_a]}", f"B: {model_b.name}{impl[local_b]}")


def compare_page() -> None:
    cur = view_helpers.start("compare", forward=True)
    if cur is None:
        return
    if cur.stale or cur.model is None:
        st.info("Compare works on the sidebar's current text and model: fix the message above first.",
                icon=":material/info:")
        return
    try:
        got = _run_b(cur)
    except (mha_viz.ModelLoadError, mha_viz.InputError) as exc:
        # NaN or infinity: the message says what to do, the log where
        if isinstance(exc, mha_viz.capture.NotFiniteError):
            log.exception("run B not finite")
        st.error(plain(str(exc)), icon=":material/warning:")
        return
    except (MemoryError, torch.OutOfMemoryError):
        log.exception("out of memory: run B")
        got = OUT_OF_MEMORY
    if got is OUT_OF_MEMORY:  # given back here, past the handler, whose frames held the tensors
        memory.free_cache()
        st.error(f"Run B needs more memory than this machine has free. {memory.OUT_OF_MEMORY_ADVICE}",
                 icon=":material/warning:")
        return
    if got is None:
        return
    run_b, key_b, label_a, label_b = got
    seconds = compare_seconds(cur.run, run_b)
    said = (f"Comparing the two runs head by head reads every head's probabilities of both ({cur.run.n} and "
            f"{run_b.n} tokens){read_note(cur.run if not cur.run.is_dense else run_b)}.")
    if not accepted(("compare", cur.key, key_b), seconds, said, compare_keys.CMP_START):
        return
    cmp, why = resources.attempt(lambda: comparison(cur.key, key_b, cur.run, run_b), what="The comparison",
                                 out_of_memory=f"The comparison needs more memory than is free. "
                                               f"{memory.OUT_OF_MEMORY_ADVICE}")
    if cmp is None:
        st.error(plain(why), icon=":material/warning:")
        return
    st.caption(f"{plain(label_a)}: {cur.run.n} tokens, {cur.run.num_layers} × {cur.run.num_heads} heads · "
               f"{plain(label_b)}: {run_b.n} tokens, {run_b.num_layers} × {run_b.num_heads} heads.")
    st.info(plain(cmp.basis), icon=":material/balance:")
    if cmp.precision_note:
        st.warning(cmp.precision_note, icon=":material/tune:")
    if cmp.change is not None:
        _head_by_head(cmp, (cur.key, key_b), label_a, label_b)
    else:
        _by_depth(cmp, (cur.key, key_b))
    _table(cmp)


def _head_by_head(cmp, this: tuple, label_a: str, label_b: str) -> None:
    run = cmp.run_a
    st.subheader("How much each head changed")
    charts.show(charts.cached("compare_change", this, lambda: compare_figures.change_grid(cmp)),
                key=compare_keys.CMP_GRID, name="compare-change", on_select=_on_grid, selection_mode="points",
                width="content")
    ranked = cmp.ranked(TOP)
    if cmp.unchanged:
        precisions = " and ".join(dict.fromkeys(r.precision or "float32" for r in (cmp.run_a, cmp.run_b)))
        st.success(f"A and B attend the same: every head's change is at most {ranked[0][2]:.2g}, within the "
                   f"{cmp.noise:.2g} that rounding in {precisions} alone gives. Click a cell to show a head side by "
                   "side below.", icon=":material/check_circle:")
    else:
        st.caption("Click a cell to show that head side by side below. Changed most: " + ", ".join(
            f"L{run.layer_ids[row]} H{h} ({v:.3g})" for row, h, v in ranked[:5]) + ".")
    st.subheader("Head by head")
    cols = st.columns([1, 1, 2])
    # until a head is chosen (here or on any page), the page opens on the head that changed most
    layer, head = shared_head.pick_head(run.layer_ids, run.num_heads, compare_keys.CMP_LAYER, compare_keys.CMP_HEAD,
                                        where=cols[:2], opening=(ranked[0][0], ranked[0][1]) if ranked else None)
    rescale = cols[2].toggle("Rescale A and B to their maximum", key=compare_keys.CMP_RESCALE, persist_state=keys.KEEP)
    fig = charts.cached("compare_side", (this, layer, head, rescale),
                        lambda: compare_figures.side_by_side(cmp, layer, head, rescale=rescale))
    charts.show(fig, key=compare_keys.CMP_SIDE, name=f"compare-L{run.layer_ids[layer]}-H{head}")
    st.caption(f"Left {plain(label_a)}, "
               + (f"middle {plain(label_b)}, right B − A (red: B attends more, blue: A attends more), as the "
                  "table below." if cmp.kind != "metrics" else f"right {plain(label_b)}."))


def _by_depth(cmp, this: tuple) -> None:
    st.subheader("Metrics by relative depth")
    st.caption("The two models have different numbers of layers or heads, so heads cannot be paired: each "
               "layer is placed at its relative depth (0 = first layer, 1 = last) and the spread of a metric "
               "over its heads is compared.")
    names = [c for c in metrics.METRICS if c in cmp.depth.columns]
    if not names:
        st.info("No head metric is available for both models.")
        return
    metric = st.selectbox("Metric", names, key=compare_keys.CMP_METRIC, persist_state=keys.KEEP,
                          format_func=lambda c: metrics.METRICS[c].label)
    charts.show(charts.cached("compare_depth", (this, metric),
                              lambda: compare_figures.depth_distributions(cmp, metric)),
                key=compare_keys.CMP_DEPTH, name=f"compare-depth-{metric}")


def _table(cmp) -> None:
    st.subheader("Head-table differences")
    table = cmp.table if cmp.same_shape else cmp.depth
    st.caption("One row per head, most changed first: each metric for A, for B, and B − A."
               if cmp.same_shape else "Every head of both models with its relative depth.")
    st.dataframe(table, hide_index=True, key=compare_keys.CMP_TABLE_DF,
                 column_config={c: st.column_config.NumberColumn(format="%.4f")
                                for c in table.columns if table[c].dtype.kind == "f"})
    stem = figure_style.safe_filename(f"compare-{cmp.run_a.model_name}-{cmp.run_b.model_name}")
    st.download_button("Download the differences (CSV)", lambda: export_views.table_csv(table), file_name=f"{stem}.csv",
                       mime="text/csv", key=compare_keys.DL_CMP, on_click="ignore")
