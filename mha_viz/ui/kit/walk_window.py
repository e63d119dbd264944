"""The window of the walkthrough that *Teaching* and *Queries and keys* share: which `TEACH_TOKENS` tokens of a
longer text their steps show, picked on one slider, kept in the session (the same window on both pages) and
carried by links."""

from __future__ import annotations

import streamlit as st

from mha_viz.export import shared_controls
from mha_viz.ui.kit import keys, session
from mha_viz.views.teaching import TEACH_TOKENS, Walkthrough


def window_start(total: int) -> int:
    """The first token of the window over a text of `total` tokens: a slider when the text is longer than the
    window (the value clamped to the text before it is drawn), else 0."""
    last = total - TEACH_TOKENS
    if last <= 0:
        return 0
    session.settle(shared_controls.TEACH_START, max(0, min(int(session.get(shared_controls.TEACH_START) or 0), last)))
    return int(st.slider(f"Which {TEACH_TOKENS} tokens: the window's first token", 0, last,
                         key=shared_controls.TEACH_START, persist_state=keys.KEEP,
                         help=f"The steps show {TEACH_TOKENS} queries against the same {TEACH_TOKENS} keys, so that "
                              "every cell stays readable. The other keys of each row are one more column: "
                              "their scores' log-sum-exp, so every softmax is the model's, exactly."))


def caption(w: Walkthrough, total: int) -> str:
    """What the walkthrough's window shows of a text of `total` tokens, for the page's caption ("" for a whole
    text)."""
    if total <= w.n:
        return ""
    which = "earlier" if w.is_causal else "other"
    folded = (f"Each row's {w.outside:,} {which} keys are folded into the column {w.outside_label}, whose score is "
              "log Σ e^score over them, so each row's softmax is exact: that column's probability is what those "
              "keys take together." if w.outside else "")
    return f"Tokens {w.start}–{w.start + w.n - 1} of {total:,}. " + folded
