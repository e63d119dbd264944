"""The pair that *Heads behind a prediction* and *Circuit behind a prediction* both read: the sidebar's text (clean),
a corrupted text, and the answer and wrong tokens, drawn as one form (`pair_inputs`) under shared keys, so that a
pair typed on one page is the other's; its presets, each with **Undo**; why a model has no such pair (`refusal`);
and where a saved circuit puts its pair (`put_form`). Links carry the pair as both pages' controls
(`export/shared_controls.PAIR`: corrupted, answer, wrong).

A preset never replaces what the user typed without a way back: choosing one sets the sidebar's text (clean), the
corrupted text and empties the answer and wrong tokens; when the texts there before differed from the preset's, a
notice under the preset offers **Undo**, one click that puts them all back and returns the picker to the user's own
pair. The offer lasts while the boxes still hold the preset's texts: once the user edits them, undoing would throw
away the new edit, so it goes, and the picker returns to the user's own pair (`drop_if_edited`)."""

from __future__ import annotations

from typing import NamedTuple

import streamlit as st

from mha_viz.export import shared_controls
from mha_viz.interventions import prediction
from mha_viz.ui.kit import keys, resources, session
from mha_viz.ui.kit import text as text_kit
from mha_viz.ui.kit.analysis_key import ModelKey
from mha_viz.ui.kit.text import plain
from mha_viz.ui.shell import sidebar
from mha_viz.ui.shell.view_helpers import start_on_model

FIELDS = (keys.TEXT, shared_controls.PRED_CORRUPTED, shared_controls.PRED_ANSWER, shared_controls.PRED_WRONG)
SHOWN = 80  # characters of the replaced text quoted in the notice
OWN = "— your own pair —"


class Pair(NamedTuple):
    """What a result on a pair was computed from (a cache key of both pages)."""

    model: ModelKey
    clean: str
    corrupted: str
    answer: str  # "" : the clean run's prediction
    wrong: str  # "" : the corrupted run's prediction
    cap: int


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
    before, held = _now(), session.get(keys.PRED_UNDO)
    if held is not None and before[:2] == (held.clean, held.corrupted):  # the boxes hold the last preset's texts
        before = held.before
    if before[:2] != (preset.clean, preset.corrupted):
        session.put(keys.PRED_UNDO, Held(preset.name, preset.clean, preset.corrupted, before))
    else:  # nothing of the user's is lost: no undo to offer (an older one would now restore the wrong texts)
        session.pop(keys.PRED_UNDO)
    sidebar.choose(text=preset.clean)
    session.put(shared_controls.PRED_CORRUPTED, preset.corrupted)
    session.put_all((shared_controls.PRED_ANSWER, shared_controls.PRED_WRONG), ("", ""))


def drop_if_edited(options: dict) -> None:
    """Return the picker to the user's own pair (before it is drawn) once the sidebar's sentence or the corrupted
    text differs from the chosen preset's: its label and its blurb no longer describe the pair on screen.
    `options`: the presets by name."""
    preset = options.get(session.get(keys.PRED_PRESET))
    if preset is not None and _now()[:2] != (preset.clean, preset.corrupted):
        session.put(keys.PRED_PRESET, OWN)


def _undo() -> None:
    held = session.pop(keys.PRED_UNDO)
    if held is not None:
        session.put_all(FIELDS, held.before)
        session.put(keys.PRED_PRESET, OWN)


def _offer() -> None:
    """The notice and its Undo button while the preset's texts are still in the boxes."""
    held = session.get(keys.PRED_UNDO)
    if held is None:
        return
    if _now()[:2] != (held.clean, held.corrupted):  # edited since: the undo would lose the edit
        session.pop(keys.PRED_UNDO)
        return
    text, corrupted = held.before[:2]
    quoted = text if len(text) <= SHOWN else text[:SHOWN] + "…"
    replaced = ([f"your sentence “{plain(quoted)}”" if text.strip() else "the empty sentence"]
                if text != held.clean else [])  # a sentence that was the preset's already: not said replaced
    if corrupted != held.corrupted:
        replaced.append("your corrupted text" if corrupted.strip() else "the empty corrupted text")
    st.info(f"The preset *{plain(held.preset)}* replaced {' and '.join(replaced)}. **Undo** puts "
            f"{'them' if len(replaced) > 1 else 'it'} back.", icon=":material/undo:")
    st.button("Undo", key=keys.PRED_UNDO_GO, on_click=_undo,
              help="Restores the sidebar's sentence, the corrupted text and the answer and wrong tokens as they were "
                   "before the preset.")


def _on_preset(options: dict) -> None:
    preset = options.get(session.get(keys.PRED_PRESET))
    if preset is not None:  # the clean text is the sidebar's; what the user typed is kept for Undo
        apply(preset)


def refusal(model) -> str | None:
    """Why this model has no direct attribution, patching or circuit, in Markdown (None: it has)."""
    if not model.is_causal:
        return (f"{plain(model.name)} is an encoder: with no language-model head reading the residual stream linearly, "
                "direct logit attribution is not defined, and there is no next-token prediction to patch. "
                "Pick a decoder in the sidebar (smollm2, toy-induction, a GPT-2 or Llama-family model); the "
                "sidebar's *Show attention as: contributions* shows what this model's heads write.")
    if not model.has_head_outputs:
        return (f"The heads' outputs of {plain(model.name)} cannot be read ({plain(model.unread)}): no attribution "
                "or patching.")
    return None


def start_on_pair(page: str, message: str):
    """`view_helpers.start_on_model` for a page of a prediction (the prediction's, the circuit's, the task's): None
    after `message`, or after why its model has none (`refusal`)."""
    cur = start_on_model(page, message)
    if cur is None:
        return None
    why = refusal(cur.model)
    if why is not None:
        st.info(why, icon=":material/explore:")  # Markdown: the model's name is escaped in it
        return None
    return cur


def pair_inputs(cur) -> Pair:
    """The pair's form: the presets (with Undo), the clean text (the sidebar's, folded when long), the corrupted
    text and the answer and wrong tokens; returns the pair they make."""
    options = {p.name: p for p in prediction.presets(cur.model)}
    drop_if_edited(options)  # texts edited since: the user's own pair, no preset's blurb
    st.selectbox("Preset", [OWN] + list(options), key=keys.PRED_PRESET, persist_state=keys.KEEP,
                 on_change=_on_preset, args=(options,), help="Sets the sidebar's text (clean) and the corrupted text.")
    _offer()
    chosen = options.get(session.get(keys.PRED_PRESET))
    if chosen is not None:
        st.caption(plain(chosen.about))
    if len(cur.text) <= text_kit.FOLD_ABOVE:
        st.markdown("**Clean text** (the sidebar's):")
        st.text(cur.text)  # plain text: what was typed, no Markdown
    else:  # a long paste folded: the corrupted text stays in sight
        tokens = f", {cur.run.n:,} tokens" if cur.run is not None else ""
        with st.expander(f"**Clean text** (the sidebar's): {len(cur.text):,} characters{tokens}"):
            st.text(cur.text)
    corrupted = st.text_area("Corrupted text", key=shared_controls.PRED_CORRUPTED, persist_state=keys.KEEP, height=80,
                             help="The same number of tokens as the clean text: patching compares positions.")
    cols = st.columns(2)
    answer = cols[0].text_input("Answer token", key=shared_controls.PRED_ANSWER, persist_state=keys.KEEP,
                                placeholder="the clean run's prediction",
                                help="One token, with its leading space where the model has one (“ Mary”).")
    wrong = cols[1].text_input("Wrong token", key=shared_controls.PRED_WRONG, persist_state=keys.KEEP,
                               placeholder="the corrupted run's prediction",
                               help="One token. Empty: what the corrupted run predicts (its runner-up when that is "
                                    "the answer too).")
    return Pair(cur.model_key, cur.text, corrupted or "", answer or "", wrong or "", resources.token_cap())


def put_form(clean: str, corrupted: str, answer: str, wrong: str) -> None:
    """A pair put in the form before it is drawn (a saved circuit's): the sidebar's text is the clean one."""
    sidebar.choose(text=clean)
    session.put(shared_controls.PRED_CORRUPTED, corrupted)
    session.put_all((shared_controls.PRED_ANSWER, shared_controls.PRED_WRONG), (answer, wrong))
