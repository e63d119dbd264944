"""The *Heads behind a prediction* page: a clean text (the sidebar's) and a corrupted one, each head's
direct logit attribution and its restored fraction as layers × heads grids — estimated first
(attribution patching: one backward pass), patched for real on request, then both side by side with
a scatter and where they disagree — one layer's estimate by head and position, and the shared head
opened: its attention in both runs, its value-weighted attention, the tokens it
promotes and suppresses, and patching it position by position beside the estimate
(`mha_viz.interventions.prediction`, `mha_viz.interventions.attribution`). The pair's form is the shell's
(`pair`), which *Circuit behind a prediction* draws too."""

from __future__ import annotations

import dataclasses
from typing import Hashable

import streamlit as st

import mha_viz
from mha_viz.circuits import need as job_need
from mha_viz.drawing import heads as head_figures
from mha_viz.drawing import style as figure_style
from mha_viz.features.prediction import controls as prediction_keys
from mha_viz.features.prediction import explanation_figures, ranking
from mha_viz.features.prediction import figures as attribution_figures
from mha_viz.features.prediction.plan import plan_estimate, plan_patching
from mha_viz.interventions import attribution, estimate, prediction
from mha_viz.ui.kit import charts, jobs, plans, resources, session, shared_head
from mha_viz.ui.kit.text import plain
from mha_viz.ui.shell import export_views, notebook_button, pair

CANCEL_HELP = "Stop; nothing is kept."
CANCEL_REAL_HELP = "Stop patching; what was found before is kept."
FOUND = "Found for this pair: change a text or a token to find the heads again."


def prediction_page() -> None:
    cur = pair.start_on_pair("prediction", "This page uses the sidebar's model and text: fix the message above first.")
    if cur is None:
        return
    model = cur.model
    st.caption("Which heads carry a prediction? The clean text is the sidebar's; the corrupted one differs in what "
               "matters (a name, a landmark, the repeated half). **Direct logit attribution**: what each head's write "
               "at the last position adds to logit(answer) − logit(wrong). **Restored fraction**: the corrupted run "
               "with one head's clean output, as a share of the gap between the runs (activation patching): "
               "estimated first for every head at every position from one backward pass, patched for real on "
               "request. Over a set of pairs: *Heads behind a task*; how the heads connect: *Circuit behind a "
               "prediction*.")
    key = pair.pair_inputs(cur)
    _cancelled_notice(key)
    stored = session.get(prediction_keys.PRED_RESULT)
    expl = stored[1] if stored is not None and stored[0] == key else None
    if expl is not None:
        jobs.finished(st, "Find the heads", FOUND)
    else:
        planned, why = plans.try_plan(lambda: plan_estimate(model, key.clean, key.corrupted, _answer(key.answer),
                                                      _answer(key.wrong), max_tokens=key.cap))
        if why is not None:  # said before the button, not after the work
            st.warning(why, icon=":material/memory:")
            return
        buttons = jobs.buttons("Find the heads", prediction_keys.PRED_GO, cancel_key=prediction_keys.PRED_CANCEL,
                               cancel_help=CANCEL_HELP, ran=FOUND,
                               help="Estimates every head at every position from one forward pass on each text "
                                    "and one backward pass (attribution patching). Patching each of the "
                                    f"{model.num_layers * model.num_heads} heads for real is offered next.")
        if not buttons.pressed:
            return
        expl = _compute(key, planned)
        if expl is None:  # a message says why; nothing runs to cancel
            buttons.idle()
            return
        buttons.done()
    _results(cur, key, expl)


def _cancelled_notice(key: pair.Pair) -> None:
    """Say what a stopped run left: nothing of a stopped estimate; the estimate, when real patching of
    this same pair stopped (a stop that came with new inputs needs no word)."""
    if jobs.cancelled(prediction_keys.PRED_RUNNING) is not None:
        st.warning("The estimate was cancelled; nothing was kept.", icon=":material/stop_circle:")
    if jobs.cancelled(prediction_keys.PRED_REAL_RUNNING) == key:
        st.warning("Patching was cancelled; what was found before it is kept.", icon=":material/stop_circle:")


def _answer(text: str):
    return text if text else None


def _job(key: pair.Pair, running: str, first: str, what: str, planned, *, batch: bool):
    """(result, None) of the plan run under a progress bar, in a server slot admitted on its need, or (None, a
    message) (`jobs.run`)."""
    def budgeted(progress):
        return plans.run_admitted(planned, progress=progress)
    return jobs.run(running, key, budgeted, first=first, what=what, time_left=batch,  # real patching: layer by layer
                    out_of_memory=f"{what} ran out of memory: use shorter texts or a smaller model.")


def _compute(key: pair.Pair, planned):
    """The explanation of `key` as planned, with a progress bar, in a server slot; None after a message."""
    if not key.corrupted.strip():
        st.info("Type a corrupted text above, or pick a preset.", icon=":material/edit:")
        return None
    expl, error = _job(key, prediction_keys.PRED_RUNNING, "Estimating every head…", "The estimate", planned,
                       batch=False)
    if error:
        st.error(plain(error), icon=":material/warning:")
        return None
    session.put(prediction_keys.PRED_RESULT, (key, expl))
    for old in (prediction_keys.PRED_EXTRA, prediction_keys.PRED_POS_LAYER):
        session.pop(old, None)
    shared_head.choose_head_in(expl.clean.layer_ids, *ranking.top_head(expl))  # a new pair opens its top head
    return expl


def _results(cur, key: pair.Pair, expl: prediction.Explanation) -> None:
    d = expl.dla
    a, w = plain(repr(expl.answer_text)), plain(repr(expl.wrong_text))
    st.success(f"m = logit({a}) − logit({w}) at the last token: **{expl.m_clean:+.2f}** on the clean text, "
               f"**{expl.m_corrupted:+.2f}** on the corrupted one. The heads' direct writes{d.caveat} add "
               f"{float(d.per_head.sum()):+.2f} on the clean text; everything else (embeddings, MLPs, biases) "
               f"{d.rest:+.2f}.", icon=":material/target:")
    if expl.estimate is None:
        st.info(plain(f"No estimate: {expl.no_estimate} Real patching keeps no gradients and may still fit."),
                icon=":material/info:")
    else:
        st.caption(estimate.ABOUT)
    if expl.patching is None:
        expl = _real_patching(cur.model, key, expl)
    show_grids(expl)
    stem = figure_style.safe_filename(f"{cur.model.name}-heads-behind-a-prediction")
    cols = st.columns(2)
    cols[0].download_button("Download the grids (CSV)", lambda: export_views.table_csv(expl.table()),
                            key=prediction_keys.DL_PRED, file_name=f"{stem}.csv", mime="text/csv", on_click="ignore",
                            help="A row a head: direct logit attribution, the estimate, and real patching once run.")
    if expl.estimate is not None:
        cols[1].download_button("Download the estimate by position (CSV)",  # made when clicked: L·H·n rows
                                lambda: export_views.table_csv(expl.position_table()),
                                key=prediction_keys.DL_PRED_POSITIONS, file_name=f"{stem}-by-position.csv",
                                mime="text/csv", on_click="ignore",
                                help="A row a layer, head and position: the estimate of patching that head there only.")
        _position_grid(expl)
    one_head(cur, key, expl)


def _real_patching(model, key: pair.Pair, expl: prediction.Explanation) -> prediction.Explanation:
    """The button that patches every head for real, with progress and Cancel: `expl` with real
    patching once it has run (kept for this pair), else `expl` as it was. A pair too long for it is said
    instead of the button."""
    planned, why = plans.try_plan(lambda: plan_patching(model, expl, key.clean, key.corrupted, max_tokens=key.cap))
    if why is not None:
        st.info(why, icon=":material/memory:")
        return expl
    buttons = jobs.buttons("Patch every head for real", prediction_keys.PRED_REAL_GO,
                           cancel_key=prediction_keys.PRED_REAL_CANCEL, cancel_help=CANCEL_REAL_HELP, primary=False,
                           help=f"Patches each of the {model.num_layers * model.num_heads} heads: one batched "
                                f"forward a layer ({model.num_layers} in all). The estimate stays, and both are "
                                "compared.")
    if not buttons.pressed:
        return expl
    done, error = _job(key, prediction_keys.PRED_REAL_RUNNING, "Patching every head…", "Patching", planned,
                       batch=True)
    if error:
        buttons.idle()
        st.error(plain(error), icon=":material/warning:")
        return expl
    session.put(prediction_keys.PRED_RESULT, (key, done))
    buttons.done()
    return done


def _position_grid(expl: prediction.Explanation) -> None:
    """The estimate of one layer by head and patched position (every layer's is in the CSV)."""
    ids = expl.clean.layer_ids
    st.subheader("Where each head reads it: the estimate by position")
    follows = shared_head.head_in_run(ids, expl.clean.num_heads)[0]  # the chosen head's layer
    if session.get(prediction_keys.PRED_POS_FOLLOWS) != follows:  # opened, or another head chosen since: its layer
        session.put(prediction_keys.PRED_POS_FOLLOWS, follows)
        session.pop(prediction_keys.PRED_POS_LAYER)
    session.settle(prediction_keys.PRED_POS_LAYER,
                   min(int(session.get(prediction_keys.PRED_POS_LAYER, follows)), len(ids) - 1))
    row = int(st.selectbox("Layer (by position)", list(range(len(ids))), key=prediction_keys.PRED_POS_LAYER,
                           format_func=lambda r: str(ids[r]),
                           help="Each cell: the estimated restored fraction of patching that head at that position "
                                "only. Opens on the chosen head's layer. Real patching by position is in the one-head "
                                "panel below."))
    charts.show(attribution_figures.position_grid(expl.estimate.values[row], expl.corrupted.tokens, ids[row]),
                key=prediction_keys.PRED_POSITION_GRID, name="estimate-by-position")


# --- the grids and the one-head panel

def _on_grid(widget: str, layer_ids: list[int], num_heads: int) -> None:
    picked = charts.clicked(widget, lambda points: head_figures.grid_pick(points, num_heads))
    if picked is not None and picked[0] < len(layer_ids):
        shared_head.choose_head_in(layer_ids, *picked)  # the panel below opens it


def _grids(expl: prediction.Explanation, agree) -> None:
    """The grids there are and the scatter, two to a row: the estimate beside real patching once
    both exist (one colour scale), direct logit attribution beside the scatter below them."""
    d, ids = expl.dla, expl.clean.layer_ids
    dla = (explanation_figures.dla_grid(expl), prediction_keys.PRED_DLA_GRID, "direct-logit-attribution")
    fractions = []
    if expl.estimate is not None:
        fractions.append((explanation_figures.estimate_grid(expl), prediction_keys.PRED_ESTIMATE_GRID,
                          "estimated-restored-fraction"))
    if expl.patching is not None:
        fractions.append((explanation_figures.restored_grid(expl), prediction_keys.PRED_RESTORED_GRID,
                          "restored-fraction"))
    shown = fractions + [dla] if len(fractions) == 2 else [dla] + fractions
    if agree is not None:
        shown.append((explanation_figures.estimate_scatter(expl), None, "estimate-against-real"))
    for i in range(0, len(shown), 2):
        for (fig, key, name), where in zip(shown[i:i + 2], st.columns(2)):
            if key is None:
                charts.show(fig, key=prediction_keys.PRED_SCATTER, where=where, name=name)
            else:
                charts.show(fig, key=key, where=where, on_select=lambda k=key: _on_grid(k, ids, d.per_head.shape[1]),
                            selection_mode="points", name=name)


def show_grids(expl: prediction.Explanation) -> None:
    """The agreement of the estimate with real patching (once both exist), the grids and their caption."""
    agree = expl.agreement()
    if agree is not None:
        st.info(ranking.agreement_text(expl, agree), icon=":material/balance:")
    _grids(expl, agree)
    shared = (" The estimate and real patching share one colour scale: a colour is the same fraction on both."
              if expl.estimate is not None and expl.patching is not None else "")
    st.caption(f"Red helps the answer, blue the wrong token; 0 is white.{shared} {expl.dla.label}: what each head's "
               "write at the last token adds to the logit difference. Restored fraction: the share of the gap between "
               "the runs that the corrupted run regains when this one head's output is the clean run's. "
               f"{ranking.top_heads_text(expl)} Click a cell to open that head below.")


def _extra(model, key: Hashable, n: int, what: str, layer: int, head: int, compute):
    """A result of the one-head panel, kept for this pair of `n` tokens (each costs a forward, admitted as one)."""
    store = session.setdefault(prediction_keys.PRED_EXTRA, {})
    k = (key, layer, head, what)
    if k not in store:
        planned = job_need.plan_patched(model, n, compute)
        result, error = resources.attempt(lambda: plans.run_admitted(planned), what="This head's panel", out_of_memory=(
            "This head's panel ran out of memory: use shorter texts or a smaller model."))
        if error:
            raise mha_viz.InputError(error)
        store[k] = result
    return store[k]


def one_head(cur, key: Hashable, expl: prediction.Explanation) -> None:
    """The panel of the shared head (`shared_head`) in the explanation `expl` of `key` (the page's
    pair): its attention in both runs, its value-weighted attention, the tokens it promotes and
    suppresses, and real patching of it position by position beside the estimate."""
    model, run = cur.model, expl.clean
    st.subheader("One head")
    cols = st.columns([1, 1, 3])
    layer, head = shared_head.pick_head(run.layer_ids, run.num_heads, prediction_keys.PRED_LAYER,
                                        prediction_keys.PRED_HEAD, where=cols[:2])
    notebook_button.record(layer=layer, head=head, corrupted=key.corrupted, answer=key.answer, wrong=key.wrong,
                           patched=expl.patching is not None,
                           position_layer=session.get(prediction_keys.PRED_POS_LAYER))
    parts = [f"{expl.dla.label} {float(expl.dla.per_head[layer, head]):+.3f}"]
    if expl.estimate is not None:
        parts.append(f"estimated restored fraction {float(expl.estimated[layer, head]):.3f}")
    if expl.patching is not None:
        parts.append(f"patched for real {float(expl.patching.restored[layer, head]):.3f}")
    cols[2].caption("; ".join(parts) + ".")
    left, right = st.columns(2)
    charts.show(head_figures.head_heatmap(expl.clean, layer, head), key=prediction_keys.PRED_CLEAN_HEAD, where=left,
                name="clean-attention")
    charts.show(head_figures.head_heatmap(expl.corrupted, layer, head), key=prediction_keys.PRED_CORRUPTED_HEAD,
                where=right, name="corrupted-attention")
    left.caption("Clean run.")
    right.caption("Corrupted run.")
    st.caption("Below: the clean run's value-weighted attention (what each key moves through this head, each row "
               "normalised), and the tokens this head's write at the last position promotes and suppresses through "
               "the final norm and the unembedding (a logit lens of the write).")
    left, right = st.columns(2)
    if expl.clean.value_norms is not None:
        run = expl.clean  # weighted one layer only: the panel draws one head
        row = dataclasses.replace(run, attentions=run.attentions[layer:layer + 1], head_outputs=None,
                                  value_norms=run.value_norms[layer:layer + 1], layer_ids=[run.layer_ids[layer]])
        charts.show(head_figures.head_heatmap(attribution.as_contributions(row), 0, head),
                    key=prediction_keys.PRED_WEIGHTED_HEAD, where=left, name="clean-value-weighted")
    else:
        left.info(f"The value path of {plain(model.name)} cannot be read: no value-weighted attention.")
    answer, wrong = expl.dla.target, expl.dla.wrong
    try:
        promoted, suppressed = _extra(model, key, expl.clean.n, "tokens", layer, head, lambda: attribution.head_tokens(
            model, key.clean, layer, head, k=8, max_tokens=key.cap))
        charts.show(attribution_figures.token_bars(promoted, suppressed, f"Layer {layer}, head {head}: tokens its "
                                                   "write promotes and suppresses"),
                    key=prediction_keys.PRED_TOKENS, where=right, name="head-tokens")
        by_pos = _extra(model, key, expl.clean.n, "positions", layer, head, lambda: attribution.patch_positions(
            model, key.clean, key.corrupted, layer, head, answer, wrong, max_tokens=key.cap))
    except mha_viz.InputError as exc:
        st.warning(plain(str(exc)), icon=":material/warning:")
        return
    charts.show(attribution_figures.position_bars(by_pos.values, expl.corrupted.tokens,
                                                  f"Layer {layer}, head {head} patched at one position at a time",
                                                  estimate=None if expl.estimate is None else
                                                  expl.estimate.values[layer, head]),
                key=prediction_keys.PRED_POSITIONS, name="restored-by-position")
    st.caption("Each filled bar: the corrupted run with this head's clean output at that position only, patched for "
               "real; each outlined bar: the estimate of the same. The positions where the texts differ, and the last "
               "one (where the answer is read), usually carry it.")
