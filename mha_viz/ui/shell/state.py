"""What the views draw in this rerun: the sidebar's `Current` (the run for its inputs, or a
message and the last good run), kept for the page (`publish`, `current`), and the messages above
a view (`show_status`)."""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

import mha_viz
from mha_viz.text.tokenize import count_text
from mha_viz.ui.kit import keys, notes, resources, seq2seq_views, session
from mha_viz.ui.kit.analysis_key import AnalysisKey, ModelKey
from mha_viz.ui.kit.text import plain


@dataclass
class Current:
    """What the views draw: the run for the current inputs, or the error and the last good run."""

    run: mha_viz.AttentionRun | None = None
    model: mha_viz.LoadedModel | None = None
    error: str | None = None  # a message for the user; set when `run` is not for the current inputs
    notice: str | None = None  # a prompt (blank text), not an error
    stale: bool = False  # `run` is the last good one, not the current inputs'
    key: AnalysisKey | None = None  # what `run` was computed from; keys every cached result of it
    # the model loaded for the current inputs and the current text, even when the capture was
    # refused: the whole-text overview works from them
    text_model: mha_viz.LoadedModel | None = None
    text: str = ""
    model_key: ModelKey | None = None
    # the run before the sidebar's *Hide tokens* (every token, aligned with the model's own tensors);
    # `run` is it with the hidden tokens dropped (`run.hidden` says what), or the same run
    full_run: mha_viz.AttentionRun | None = None
    hide_note: str | None = None  # why *Hide tokens* hid nothing (every token, or none, matched)
    # the run as weights, after *Hide tokens*: `run` is it, or its contributions (sidebar, *Show
    # attention as*); `lens_note` says why contributions were asked for and not shown
    weights_run: mha_viz.AttentionRun | None = None
    lens_note: str | None = None
    # an encoder–decoder's three attentions; `run` is the part picked in the sidebar (key.part)
    seq2seq: mha_viz.capture.EncoderDecoderRun | None = None
    # a chat rendered with the model's template (the sidebar's *Input*: Chat): `text` is its text, and it says each
    # token's role (`mha_viz.text.chat.ChatText`); None for a plain text
    chat: object | None = None


def publish(cur: Current) -> Current:
    """This rerun's `Current`, for the page and the frame's extras (`current`); a run for the
    current inputs also becomes the last good one."""
    if cur.run is not None and not cur.stale:
        session.put(keys.LAST_GOOD, (cur.run, cur.model, cur.key, cur.seq2seq))
        session.put(keys.LAST_FULL, cur.full_run)
    session.put(keys.CURRENT, cur)
    return cur


def with_last_good(cur: Current) -> Current:
    last = session.get(keys.LAST_GOOD)
    if last is not None:
        cur.run, cur.model, cur.key = last[:3]
        cur.seq2seq = last[3] if len(last) > 3 else None  # a session older than encoder–decoders kept 3
        cur.full_run = session.get(keys.LAST_FULL) or cur.run
        cur.weights_run = cur.run if not cur.run.lens else None
        cur.stale = True
    return cur


def show_status(cur: Current, *, sentence_notes: bool = True, stale_note: bool = True) -> bool:
    """Messages above a view; returns whether there is a run to draw. `sentence_notes`: the notes about the
    sidebar's sentence (cut to the limit, unknown to the model); off on a page that reads a text of its own.
    `stale_note`: say that the last successful result is shown (off on a page that will not draw it)."""
    if cur.error:
        st.error(plain(cur.error), icon=":material/warning:")
    if cur.notice:
        st.info(cur.notice, icon=":material/edit:")
    if cur.run is None:
        return False
    if cur.stale and stale_note:
        st.caption(f"Showing the last successful result ({plain(cur.run.model_name)}).")
    seq2seq_views.status(cur)
    if seq2seq_views.is_cross(cur.run):
        if cur.hide_note:
            st.info(plain(cur.hide_note), icon=":material/visibility_off:")
        notes.lens_status(cur)
        return True
    run = cur.full_run or cur.run
    if sentence_notes and run.truncated and (stale_note or not cur.stale):  # a page drawing no stale run: no cut
        limit = min(cur.model.max_positions, resources.token_cap()) if cur.model else run.n
        why = ("the model's positions" if cur.model and cur.model.max_positions <= resources.token_cap()
               else "the sidebar's *Token limit*")
        total = count_text(run.num_input_tokens, run.num_input_tokens_is_estimate)
        said = "The text shown, the last successful one," if cur.stale else "The text"  # not the sidebar's now
        st.warning(f"{said} has {total} tokens; the first {run.n:,} were kept "
                   f"(at most {limit:,} tokens: {why}).", icon=":material/content_cut:")
    if sentence_notes:
        notes.unknown_status(cur, run)
    notes.hidden_status(cur)
    notes.lens_status(cur)
    return True


def current() -> Current:
    """The `Current` that app.py computed for this rerun."""
    return session.get(keys.CURRENT) or Current(notice="Loading…")
