"""The *Heads behind a prediction* page: a clean text (the sidebar's) and a corrupted one, each head's
direct logit attribution and its restored fraction as layers × heads grids — estimated first
(attribution patching: one backward pass), patched for real on request, then both side by side with
a scatter and where they disagree — one layer's estimate by head and position, and the shared head
opened (`prediction_head`): its attention in both runs, its value-weighted attention, the tokens it
promotes and suppresses, and patching it position by position beside the estimate
(`mha_viz.interventions.prediction`, `mha_viz.interventions.attribution`)."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import streamlit as st

from mha_viz.budget import needs
from mha_viz.figures import attribution as attribution_figures
from mha_viz.figures import heads as head_figures
from mha_viz.figures import style as figure_style
from mha_viz.interventions import estimate, prediction
from mha_viz.ui import (
    charts,
    circuit_section,
    export_views,
    jobs,
    keys,
    prediction_head,
    preset_undo,
    resources,
    session,
    shared_head,
)
from mha_viz.ui.analysis_key import ModelKey
from mha_viz.ui.text import plain
from mha_viz.ui.view_helpers import start_on_model

OWN = "— your own pair —"
CANCEL_HELP = "Stop; nothing is kept."
CANCEL_REAL_HELP = "Stop patching; what was found before is kept."


class PredKey(NamedTuple):
    """What one *Heads behind a prediction* result was computed from."""

    model: ModelKey
    clean: str
    corrupted: str
    answer: str  # "" : the clean run's prediction
    wrong: str  # "" : the corrupted run's prediction
    cap: int


def _on_preset(options: dict) -> None:
    preset = options.get(session.get(keys.PRED_PRESET))
    if preset is not None:  # the clean text is the sidebar's; what the user typed is kept for Undo
        preset_undo.apply(preset)


def _refusal(model) -> str | None:
    """Why this model has no direct attribution or patching (None: it has)."""
    if not model.is_causal:
        return (f"{model.name} is an encoder: with no language-model head reading the residual stream linearly, "
                "direct logit attribution is not defined, and there is no next-token prediction to patch. "
                "Pick a decoder in the sidebar (smollm2, toy-induction, a GPT-2 or Llama-family model); the "
                "sidebar's *Show attention as: contributions* shows what this model's heads write.")
    if not model.has_head_outputs:
        return f"The heads' outputs of {model.name} cannot be read ({model.unread}): no attribution or patching."
    return None


def prediction_page() -> None:
    cur = start_on_model("Heads behind a prediction", "This page uses the sidebar's model and text: fix the message "
                                                      "above first.")
    if cur is None:
        return
    model = cur.model
    why = _refusal(model)
    if why is not None:
        st.info(plain(why), icon="🧭")
        return
    st.caption("Which heads carry a prediction? The clean text is the sidebar's; the corrupted one differs in what "
               "matters (a name, a landmark, the repeated half). **Direct logit attribution**: what each head's write "
               "at the last position adds to logit(answer) − logit(wrong). **Restored fraction**: the corrupted run "
               "with one head's clean output, as a share of the gap between the runs (activation patching): "
               "estimated first for every head at every position from one backward pass, patched for real on "
               "request.")
    options = {p.name: p for p in prediction.presets(model)}
    st.selectbox("Preset", [OWN] + list(options), key=keys.PRED_PRESET, persist_state=keys.KEEP,
                 on_change=_on_preset, args=(options,),
                 help="Sets the sidebar's text (clean) and the corrupted text.")
    preset_undo.offer(OWN)
    chosen = options.get(session.get(keys.PRED_PRESET))
    if chosen is not None:
        st.caption(plain(chosen.about))
    st.markdown("**Clean text** (the sidebar's):")
    st.text(cur.text)  # plain text: what was typed, no Markdown
    corrupted = st.text_area("Corrupted text", key=keys.PRED_CORRUPTED, persist_state=keys.KEEP, height=80,
                             help="The same number of tokens as the clean text: patching compares positions.")
    cols = st.columns(2)
    answer = cols[0].text_input("Answer token", key=keys.PRED_ANSWER, persist_state=keys.KEEP,
                                placeholder="the clean run's prediction",
                                help="One token, with its leading space where the model has one (“ Mary”).")
    wrong = cols[1].text_input("Wrong token", key=keys.PRED_WRONG, persist_state=keys.KEEP,
                               placeholder="the corrupted run's prediction",
                               help="One token. Empty: what the corrupted run predicts (its runner-up when that is "
                                    "the answer too).")
    key = PredKey(cur.model_key, cur.text, corrupted or "", answer or "", wrong or "", resources.token_cap())
    _cancelled_notice(key)
    stored = session.get(keys.PRED_RESULT)
    expl = stored[1] if stored is not None and stored[0] == key else None
    if expl is None:
        buttons = jobs.buttons("Find the heads", keys.PRED_GO, cancel_key=keys.PRED_CANCEL, cancel_help=CANCEL_HELP,
                               help="Estimates every head at every position from one forward pass on each text "
                                    "and one backward pass (attribution patching). Patching each of the "
                                    f"{model.num_layers * model.num_heads} heads for real is offered next.")
        auto = circuit_section.asked_by_link(buttons)  # a link with a circuit: the heads found on opening
        if not (buttons.pressed or auto):
            return
        expl = _compute(model, key)
        if expl is None:  # a message says why; nothing runs to cancel
            buttons.idle()
            return
        circuit_section.heads_found(key, auto)
        buttons.done()
    _results(cur, key, expl)


def _cancelled_notice(key: PredKey) -> None:
    """Say what a stopped run left: nothing of a stopped estimate; the estimate, when real patching of
    this same pair stopped (a stop that came with new inputs needs no word)."""
    if jobs.cancelled(keys.PRED_RUNNING) is not None:
        st.warning("The estimate was cancelled; nothing was kept.", icon="⏹️")
    if jobs.cancelled(keys.PRED_REAL_RUNNING) == key:
        st.warning("Patching was cancelled; what was found before it is kept.", icon="⏹️")


def _answer(text: str):
    return text if text else None


def _job(model, key: PredKey, running: str, first: str, what: str, work, *, batch: bool):
    """(result, None) of work(progress) under a progress bar, within the memory budget and a server
    slot, or (None, a message) (`jobs.run`)."""
    def budgeted(progress):
        prediction.check_budget(model, key.clean, key.cap, batch=batch)
        with resources.slots().hold(need=needs.prediction(model, key.clean, key.cap, batch=batch)):
            return work(progress)
    return jobs.run(running, key, budgeted, first=first, what=what,
                    out_of_memory=f"{what} ran out of memory: use shorter texts or a smaller model.")


def _compute(model, key: PredKey):
    """The explanation of `key` with a progress bar, in a server slot; None after a message."""
    if not key.corrupted.strip():
        st.info("Type a corrupted text above, or pick a preset.", icon="✍️")
        return None
    expl, error = _job(model, key, keys.PRED_RUNNING, "Estimating every head…", "The estimate",
                       lambda progress: prediction.explain(model, key.clean, key.corrupted, _answer(key.answer),
                                                           _answer(key.wrong), max_tokens=key.cap, progress=progress),
                       batch=False)
    if error:
        st.error(plain(error), icon="⚠️")
        return None
    session.put(keys.PRED_RESULT, (key, expl))
    for old in (keys.PRED_EXTRA, keys.PRED_POS_LAYER):
        session.pop(old, None)
    shared_head.choose_head_in(expl.clean.layer_ids, *_top(expl))  # a new pair opens its top head
    return expl


def _on_grid(widget: str, layer_ids: list[int], num_heads: int) -> None:
    picked = charts.clicked(widget, lambda points: head_figures.grid_pick(points, num_heads))
    if picked is not None and picked[0] < len(layer_ids):
        shared_head.choose_head_in(layer_ids, *picked)  # the panel below opens it


def _agreement_text(expl: prediction.Explanation, agree) -> str:
    def value(v: float) -> str:
        return f"{v:.3f}" if np.isfinite(v) else "undefined (one side is constant)"
    count = int(agree.differ.sum())
    differ = {0: "No head differs", 1: "1 head differs (ringed on both grids)"}.get(
        count, f"{count} heads differ (ringed on both grids)")
    return (f"Estimate against real patching over the {expl.estimated.size} heads: Pearson r = {value(agree.pearson)}, "
            f"Spearman ρ = {value(agree.spearman)}. {differ} by more than {estimate.DISAGREE} of the gap; the largest "
            f"difference is {agree.largest:.3f}, at layer {expl.clean.layer_ids[agree.where[0]]}, "
            f"head {agree.where[1]}.")


def _grids(expl: prediction.Explanation, agree) -> None:
    """The layers × heads grids there are (direct logit attribution, the estimate, real patching)
    and the scatter of the two, two to a row; a click on a grid opens that head."""
    d, ids = expl.dla, expl.clean.layer_ids
    shape, differ = d.per_head.shape, None if agree is None else agree.differ
    shown = [(attribution_figures.dla_grid(d.per_head, expl.answer_text, expl.wrong_text, ids, d.label),
              keys.PRED_DLA_GRID, "direct-logit-attribution")]
    if expl.estimate is not None:
        shown.append((attribution_figures.estimate_grid(expl.estimated, ids, differ), keys.PRED_ESTIMATE_GRID,
                      "estimated-restored-fraction"))
    if expl.patching is not None:
        shown.append((attribution_figures.restored_grid(expl.patching.restored, ids, differ), keys.PRED_RESTORED_GRID,
                      "restored-fraction"))
    if agree is not None:
        shown.append((attribution_figures.agreement_scatter(expl.estimated, expl.patching.restored, agree.pearson,
                                                            agree.spearman, ids, differ),
                      None, "estimate-against-real"))
    for i in range(0, len(shown), 2):
        for (fig, key, name), where in zip(shown[i:i + 2], st.columns(2)):
            if key is None:
                charts.show(fig, key=keys.PRED_SCATTER, where=where, name=name)
            else:
                charts.show(fig, key=key, where=where, on_select=lambda k=key: _on_grid(k, ids, shape[1]),
                            selection_mode="points", name=name)


def _top(expl: prediction.Explanation) -> tuple[int, int]:
    """The head a new pair's panel opens on: the largest estimated restored fraction, else the largest
    real one, else the largest direct effect."""
    grid = expl.estimated if expl.estimate is not None else (
        expl.patching.restored if expl.patching is not None else np.abs(expl.dla.per_head))
    at = np.unravel_index(int(np.argmax(grid)), grid.shape)
    return int(at[0]), int(at[1])


def _results(cur, key: PredKey, expl: prediction.Explanation) -> None:
    d = expl.dla
    a, w = plain(repr(expl.answer_text)), plain(repr(expl.wrong_text))
    st.success(f"m = logit({a}) − logit({w}) at the last token: **{expl.m_clean:+.2f}** on the clean text, "
               f"**{expl.m_corrupted:+.2f}** on the corrupted one. The heads' direct writes{d.caveat} add "
               f"{float(d.per_head.sum()):+.2f} on the clean text; everything else (embeddings, MLPs, biases) "
               f"{d.rest:+.2f}.", icon="🎯")
    if expl.estimate is None:
        st.info(plain(f"No estimate: {expl.no_estimate} Real patching keeps no gradients and may still fit."),
                icon="ℹ️")
    else:
        st.caption(estimate.ABOUT)
    if expl.patching is None:
        expl = _real_patching(cur.model, key, expl)
    agree = expl.agreement()
    if agree is not None:
        st.info(_agreement_text(expl, agree), icon="⚖️")
    _grids(expl, agree)
    ids, top = expl.clean.layer_ids, _top(expl)
    top_dla = np.unravel_index(int(np.argmax(np.abs(d.per_head))), d.per_head.shape)
    best = "" if expl.estimate is None else (f"Largest estimated restored fraction: layer {ids[top[0]]}, head {top[1]} "
                                             f"({float(expl.estimated[top]):.2f}); ")
    st.caption(f"Red helps the answer, blue the wrong token; 0 is white. {d.label}: what each "
               "head's write at the last token adds to the logit difference. Restored fraction: the share of the "
               "gap between the runs that the corrupted run regains when this one head's output is the clean "
               f"run's. {best}largest direct effect: layer {ids[top_dla[0]]}, head {top_dla[1]} "
               f"({float(d.per_head[top_dla]):+.2f}). Click a cell to open that head below.")
    stem = figure_style.safe_filename(f"{cur.model.name}-heads-behind-a-prediction")
    cols = st.columns(2)
    cols[0].download_button("Download the grids (CSV)", lambda: export_views.table_csv(expl.table()), key=keys.DL_PRED,
                            file_name=f"{stem}.csv", mime="text/csv", on_click="ignore",
                            help="A row a head: direct logit attribution, the estimate, and real patching once run.")
    if expl.estimate is not None:
        cols[1].download_button("Download the estimate by position (CSV)",  # made when clicked: L·H·n rows
                                lambda: export_views.table_csv(expl.position_table()), key=keys.DL_PRED_POSITIONS,
                                file_name=f"{stem}-by-position.csv", mime="text/csv", on_click="ignore",
                                help="A row a layer, head and position: the estimate of patching that head there only.")
        _position_grid(expl)
    prediction_head.one_head(cur, key, expl)
    circuit_section.circuit_section(cur, key, d.target, d.wrong)


def _real_patching(model, key: PredKey, expl: prediction.Explanation) -> prediction.Explanation:
    """The button that patches every head for real, with progress and Cancel: `expl` with real
    patching once it has run (kept for this pair), else `expl` as it was."""
    buttons = jobs.buttons("Patch every head for real", keys.PRED_REAL_GO, cancel_key=keys.PRED_REAL_CANCEL,
                           cancel_help=CANCEL_REAL_HELP, primary=False,
                           help=f"Patches each of the {model.num_layers * model.num_heads} heads: one batched "
                                f"forward a layer ({model.num_layers} in all). The estimate stays, and both are "
                                "compared.")
    if not buttons.pressed:
        return expl
    done, error = _job(model, key, keys.PRED_REAL_RUNNING, "Patching every head…", "Patching",
                       lambda progress: prediction.patch(model, expl, key.clean, key.corrupted, max_tokens=key.cap,
                                                         progress=progress), batch=True)
    if error:
        buttons.idle()
        st.error(plain(error), icon="⚠️")
        return expl
    session.put(keys.PRED_RESULT, (key, done))
    buttons.done()
    return done


def _position_grid(expl: prediction.Explanation) -> None:
    """The estimate of one layer by head and patched position (every layer's is in the CSV)."""
    ids = expl.clean.layer_ids
    st.subheader("Where each head reads it: the estimate by position")
    session.settle(keys.PRED_POS_LAYER, min(int(session.get(keys.PRED_POS_LAYER, len(ids) - 1)), len(ids) - 1))
    row = int(st.selectbox("Layer (by position)", list(range(len(ids))), key=keys.PRED_POS_LAYER,
                           format_func=lambda r: str(ids[r]),
                           help="Each cell: the estimated restored fraction of patching that head at that position "
                                "only. Real patching by position is in the one-head panel below."))
    charts.show(attribution_figures.position_grid(expl.estimate.values[row], expl.corrupted.tokens, ids[row]),
                key=keys.PRED_POSITION_GRID, name="estimate-by-position")
