"""The *Heads behind a prediction* page: a clean text (the sidebar's) and a corrupted one, each head's
direct logit attribution and its restored fraction as layers × heads grids — estimated first
(attribution patching: one backward pass), patched for real on request, then both side by side with
a scatter and where they disagree — one layer's estimate by head and position, and the shared head
opened (`prediction_head`): its attention in both runs, its value-weighted attention, the tokens it
promotes and suppresses, and patching it position by position beside the estimate
(`mha_viz.interventions.prediction`, `mha_viz.interventions.attribution`)."""

from __future__ import annotations

from typing import NamedTuple

import streamlit as st

from mha_viz.drawing import style as figure_style
from mha_viz.features.prediction import controls as prediction_controls
from mha_viz.features.prediction import controls as prediction_keys
from mha_viz.features.prediction import figures as attribution_figures
from mha_viz.features.prediction import need as prediction_need
from mha_viz.features.prediction.circuit import page as circuit_page
from mha_viz.features.prediction.heads import page as heads_page
from mha_viz.features.prediction.task import page as task_page
from mha_viz.interventions import estimate, prediction
from mha_viz.text.tokenize import InputError
from mha_viz.ui.kit import charts, jobs, keys, resources, session, shared_head
from mha_viz.ui.kit import text as text_kit
from mha_viz.ui.kit.analysis_key import ModelKey
from mha_viz.ui.kit.text import plain
from mha_viz.ui.shell import export_views, sidebar
from mha_viz.ui.shell.view_helpers import start_on_model

# --- preset_undo: A preset never replaces what the user typed without a way back (*Heads behind a prediction*):
# choosing one sets the sidebar's text (clean), the corrupted text and empties the answer and wrong tokens; when the
# texts there before differed from the preset's, a notice under the preset offers **Undo**, one click that puts them
# all back and returns the picker to the user's own pair. The offer lasts while the boxes still hold the preset's
# texts: once the user edits them, undoing would throw away the new edit, so it goes, and the picker returns to the
# user's own pair (its label and blurb no longer describe the texts: `drop_if_edited`).

FIELDS = (keys.TEXT, prediction_keys.PRED_CORRUPTED, prediction_keys.PRED_ANSWER, prediction_keys.PRED_WRONG)
SHOWN = 80  # characters of the replaced text quoted in the notice


class Held(NamedTuple):
    """What one preset replaced, and what it put there."""

    preset: str  # its name
    clean: str
    corrupted: str
    before: tuple[str, str, str, str]  # FIELDS' values before it


def _now() -> tuple[str, ...]:
    return tuple(session.get(key) or "" for key in FIELDS)


def apply(preset) -> None:
    """Set `preset`'s texts (a `prediction` preset: .name, .clean, .corrupted), keeping the user's
    for Undo when they differ from the preset's (one preset over another, unedited: still the user's)."""
    before, held = _now(), session.get(prediction_keys.PRED_UNDO)
    if held is not None and before[:2] == (held.clean, held.corrupted):  # the boxes hold the last preset's texts
        before = held.before
    if before[:2] != (preset.clean, preset.corrupted):
        session.put(prediction_keys.PRED_UNDO, Held(preset.name, preset.clean, preset.corrupted, before))
    else:  # nothing of the user's is lost: no undo to offer (an older one would now restore the wrong texts)
        session.pop(prediction_keys.PRED_UNDO)
    sidebar.choose(text=preset.clean)
    session.put(prediction_keys.PRED_CORRUPTED, preset.corrupted)
    session.put_all((prediction_keys.PRED_ANSWER, prediction_keys.PRED_WRONG), ("", ""))


def drop_if_edited(options: dict, own: str) -> None:
    """Return the picker to `own` (before it is drawn) once the sidebar's sentence or the corrupted
    text differs from the chosen preset's: its label and its blurb no longer describe the pair on
    screen. `options`: the presets by name."""
    preset = options.get(session.get(prediction_keys.PRED_PRESET))
    if preset is not None and _now()[:2] != (preset.clean, preset.corrupted):
        session.put(prediction_keys.PRED_PRESET, own)


def _undo(own: str) -> None:
    held = session.pop(prediction_keys.PRED_UNDO)
    if held is not None:
        session.put_all(FIELDS, held.before)
        session.put(prediction_keys.PRED_PRESET, own)


def offer(own: str) -> None:
    """The notice and its Undo button while the preset's texts are still in the boxes; `own` is the
    picker's option for the user's own pair, chosen again by Undo."""
    held = session.get(prediction_keys.PRED_UNDO)
    if held is None:
        return
    if _now()[:2] != (held.clean, held.corrupted):  # edited since: the undo would lose the edit
        session.pop(prediction_keys.PRED_UNDO)
        return
    text = held.before[0]
    quoted = text if len(text) <= SHOWN else text[:SHOWN] + "…"
    what = f"your sentence “{plain(quoted)}”" if text.strip() else "the empty sentence"
    st.info(f"The preset *{plain(held.preset)}* replaced {what} and your corrupted text. **Undo** puts them back.",
            icon=":material/undo:")
    st.button("Undo", key=prediction_keys.PRED_UNDO_GO, on_click=_undo, args=(own,),
              help="Restores the sidebar's sentence, the corrupted text and the answer and wrong tokens as they were "
                   "before the preset.")


OWN = "— your own pair —"
CANCEL_HELP = "Stop; nothing is kept."
CANCEL_REAL_HELP = "Stop patching; what was found before is kept."
FOUND = "Found for this pair: change a text or a token to find the heads again."


class PredKey(NamedTuple):
    """What one *Heads behind a prediction* result was computed from."""

    model: ModelKey
    clean: str
    corrupted: str
    answer: str  # "" : the clean run's prediction
    wrong: str  # "" : the corrupted run's prediction
    cap: int


def _on_preset(options: dict) -> None:
    preset = options.get(session.get(prediction_keys.PRED_PRESET))
    if preset is not None:  # the clean text is the sidebar's; what the user typed is kept for Undo
        apply(preset)


def _refusal(model) -> str | None:
    """Why this model has no direct attribution or patching, in Markdown (None: it has)."""
    if not model.is_causal:
        return (f"{plain(model.name)} is an encoder: with no language-model head reading the residual stream linearly, "
                "direct logit attribution is not defined, and there is no next-token prediction to patch. "
                "Pick a decoder in the sidebar (smollm2, toy-induction, a GPT-2 or Llama-family model); the "
                "sidebar's *Show attention as: contributions* shows what this model's heads write.")
    if not model.has_head_outputs:
        return (f"The heads' outputs of {plain(model.name)} cannot be read ({plain(model.unread)}): no attribution "
                "or patching.")
    return None


def prediction_page() -> None:
    cur = start_on_model("prediction", "This page uses the sidebar's model and text: fix the message "
                                                      "above first.")
    if cur is None:
        return
    model = cur.model
    why = _refusal(model)
    if why is not None:
        st.info(why, icon=":material/explore:")  # Markdown: the model's name is escaped in it
        return
    st.radio("Task", prediction_controls.TASKS, key=prediction_keys.PRED_TASK, persist_state=keys.KEEP, horizontal=True,
             help="One pair (the sidebar's text and a corrupted one), or a task: a set of pairs (a standard task's "
                  "generator, or your file), each head's mean over them with its uncertainty.")
    if task_page.is_task():
        st.caption("Which heads carry a prediction across a task? Each pair is a clean prompt, a corrupted one that "
                   "differs in what matters, and an answer and a wrong token; the sidebar's text is not used here. "
                   "The method runs on every pair, then each head's mean over the pairs with its uncertainty.")
        return task_page.task_view(cur)
    st.caption("Which heads carry a prediction? The clean text is the sidebar's; the corrupted one differs in what "
               "matters (a name, a landmark, the repeated half). **Direct logit attribution**: what each head's write "
               "at the last position adds to logit(answer) − logit(wrong). **Restored fraction**: the corrupted run "
               "with one head's clean output, as a share of the gap between the runs (activation patching): "
               "estimated first for every head at every position from one backward pass, patched for real on "
               "request.")
    options = {p.name: p for p in prediction.presets(model)}
    drop_if_edited(options, OWN)  # texts edited since: the user's own pair, no preset's blurb
    st.selectbox("Preset", [OWN] + list(options), key=prediction_keys.PRED_PRESET, persist_state=keys.KEEP,
                 on_change=_on_preset, args=(options,),
                 help="Sets the sidebar's text (clean) and the corrupted text.")
    offer(OWN)
    chosen = options.get(session.get(prediction_keys.PRED_PRESET))
    if chosen is not None:
        st.caption(plain(chosen.about))
    if len(cur.text) <= text_kit.FOLD_ABOVE:
        st.markdown("**Clean text** (the sidebar's):")
        st.text(cur.text)  # plain text: what was typed, no Markdown
    else:  # a long paste folded: the corrupted text stays in sight
        tokens = f", {cur.run.n:,} tokens" if cur.run is not None else ""
        with st.expander(f"**Clean text** (the sidebar's): {len(cur.text):,} characters{tokens}"):
            st.text(cur.text)
    corrupted = st.text_area("Corrupted text", key=prediction_keys.PRED_CORRUPTED, persist_state=keys.KEEP, height=80,
                             help="The same number of tokens as the clean text: patching compares positions.")
    cols = st.columns(2)
    answer = cols[0].text_input("Answer token", key=prediction_keys.PRED_ANSWER, persist_state=keys.KEEP,
                                placeholder="the clean run's prediction",
                                help="One token, with its leading space where the model has one (“ Mary”).")
    wrong = cols[1].text_input("Wrong token", key=prediction_keys.PRED_WRONG, persist_state=keys.KEEP,
                               placeholder="the corrupted run's prediction",
                               help="One token. Empty: what the corrupted run predicts (its runner-up when that is "
                                    "the answer too).")
    key = PredKey(cur.model_key, cur.text, corrupted or "", answer or "", wrong or "", resources.token_cap())
    _cancelled_notice(key)
    stored = session.get(prediction_keys.PRED_RESULT)
    expl = stored[1] if stored is not None and stored[0] == key else None
    if expl is not None:
        jobs.finished(st, "Find the heads", FOUND)
    else:
        if (why := _over_budget(model, key, batch=False)) is not None:  # said before the button, not after the work
            st.warning(why, icon=":material/memory:")
            return
        buttons = jobs.buttons("Find the heads", prediction_keys.PRED_GO, cancel_key=prediction_keys.PRED_CANCEL,
                               cancel_help=CANCEL_HELP, ran=FOUND,
                               help="Estimates every head at every position from one forward pass on each text "
                                    "and one backward pass (attribution patching). Patching each of the "
                                    f"{model.num_layers * model.num_heads} heads for real is offered next.")
        auto = circuit_page.asked_by_link(buttons)  # a link with a circuit: the heads found on opening
        if not (buttons.pressed or auto):
            return
        expl = _compute(model, key)
        if expl is None:  # a message says why; nothing runs to cancel
            buttons.idle()
            return
        circuit_page.heads_found(key, auto)
        buttons.done()
    _results(cur, key, expl)


def _over_budget(model, key: PredKey, *, batch: bool) -> str | None:
    """Why the estimate (or, `batch`, real patching) of this pair would not fit the capture budget, with the longest
    text that would (None: it fits)."""
    try:
        prediction.check_budget(model, key.clean, key.cap, batch=batch)
    except InputError as exc:
        return plain(str(exc))
    return None


def _cancelled_notice(key: PredKey) -> None:
    """Say what a stopped run left: nothing of a stopped estimate; the estimate, when real patching of
    this same pair stopped (a stop that came with new inputs needs no word)."""
    if jobs.cancelled(prediction_keys.PRED_RUNNING) is not None:
        st.warning("The estimate was cancelled; nothing was kept.", icon=":material/stop_circle:")
    if jobs.cancelled(prediction_keys.PRED_REAL_RUNNING) == key:
        st.warning("Patching was cancelled; what was found before it is kept.", icon=":material/stop_circle:")


def _answer(text: str):
    return text if text else None


def _job(model, key: PredKey, running: str, first: str, what: str, work, *, batch: bool):
    """(result, None) of work(progress) under a progress bar, within the memory budget and a server
    slot, or (None, a message) (`jobs.run`)."""
    def budgeted(progress):
        prediction.check_budget(model, key.clean, key.cap, batch=batch)
        with resources.slots().hold(need=prediction_need.prediction(model, key.clean, key.cap, batch=batch)):
            return work(progress)
    return jobs.run(running, key, budgeted, first=first, what=what, time_left=batch,  # real patching: layer by layer
                    out_of_memory=f"{what} ran out of memory: use shorter texts or a smaller model.")


def _compute(model, key: PredKey):
    """The explanation of `key` with a progress bar, in a server slot; None after a message."""
    if not key.corrupted.strip():
        st.info("Type a corrupted text above, or pick a preset.", icon=":material/edit:")
        return None
    expl, error = _job(model, key, prediction_keys.PRED_RUNNING, "Estimating every head…", "The estimate",
                       lambda progress: prediction.explain(model, key.clean, key.corrupted, _answer(key.answer),
                                                           _answer(key.wrong), max_tokens=key.cap, progress=progress),
                       batch=False)
    if error:
        st.error(plain(error), icon=":material/warning:")
        return None
    session.put(prediction_keys.PRED_RESULT, (key, expl))
    for old in (prediction_keys.PRED_EXTRA, prediction_keys.PRED_POS_LAYER):
        session.pop(old, None)
    shared_head.choose_head_in(expl.clean.layer_ids, *heads_page.top_head(expl))  # a new pair opens its top head
    return expl


def _results(cur, key: PredKey, expl: prediction.Explanation) -> None:
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
    heads_page.show_grids(expl)
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
    heads_page.one_head(cur, key, expl)
    circuit_page.circuit_section(cur, key, d.target, d.wrong)


def _real_patching(model, key: PredKey, expl: prediction.Explanation) -> prediction.Explanation:
    """The button that patches every head for real, with progress and Cancel: `expl` with real
    patching once it has run (kept for this pair), else `expl` as it was. A pair too long for it is said
    instead of the button."""
    if (why := _over_budget(model, key, batch=True)) is not None:
        st.info(why, icon=":material/memory:")
        return expl
    buttons = jobs.buttons("Patch every head for real", prediction_keys.PRED_REAL_GO,
                           cancel_key=prediction_keys.PRED_REAL_CANCEL, cancel_help=CANCEL_REAL_HELP, primary=False,
                           help=f"Patches each of the {model.num_layers * model.num_heads} heads: one batched "
                                f"forward a layer ({model.num_layers} in all). The estimate stays, and both are "
                                "compared.")
    if not buttons.pressed:
        return expl
    done, error = _job(model, key, prediction_keys.PRED_REAL_RUNNING, "Patching every head…", "Patching",
                       lambda progress: prediction.patch(model, expl, key.clean, key.corrupted, max_tokens=key.cap,
                                                         progress=progress), batch=True)
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
