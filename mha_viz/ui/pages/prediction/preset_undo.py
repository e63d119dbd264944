"""A preset never replaces what the user typed without a way back (*Heads behind a prediction*):
choosing one sets the sidebar's text (clean), the corrupted text and empties the answer and wrong
tokens; when the texts there before differed from the preset's, a notice under the preset offers
**Undo**, one click that puts them all back and returns the picker to the user's own pair. The
offer lasts while the boxes still hold the preset's texts: once the user edits them, undoing would
throw away the new edit, so it goes, and the picker returns to the user's own pair (its label and
blurb no longer describe the texts: `drop_if_edited`)."""

from __future__ import annotations

from typing import NamedTuple

import streamlit as st

from mha_viz.features.prediction import controls as prediction_keys
from mha_viz.ui.kit import keys, session
from mha_viz.ui.kit.text import plain
from mha_viz.ui.shell import sidebar

FIELDS = (keys.TEXT, keys.PRED_CORRUPTED, keys.PRED_ANSWER, keys.PRED_WRONG)
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
    session.put(keys.PRED_CORRUPTED, preset.corrupted)
    session.put_all((keys.PRED_ANSWER, keys.PRED_WRONG), ("", ""))


def drop_if_edited(options: dict, own: str) -> None:
    """Return the picker to `own` (before it is drawn) once the sidebar's sentence or the corrupted
    text differs from the chosen preset's: its label and its blurb no longer describe the pair on
    screen. `options`: the presets by name."""
    preset = options.get(session.get(keys.PRED_PRESET))
    if preset is not None and _now()[:2] != (preset.clean, preset.corrupted):
        session.put(keys.PRED_PRESET, own)


def _undo(own: str) -> None:
    held = session.pop(prediction_keys.PRED_UNDO)
    if held is not None:
        session.put_all(FIELDS, held.before)
        session.put(keys.PRED_PRESET, own)


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
