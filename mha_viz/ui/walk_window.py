"""The window of the walkthrough that *Teaching* and *Queries and keys* share: which `TEACH_TOKENS` tokens of a
longer text their steps show, picked on one slider, kept in the session (the same window on both pages) and
carried by links."""

from __future__ import annotations

import streamlit as st

from mha_viz.ui import keys, session
from mha_viz.views.teaching import TEACH_TOKENS


def window_start(total: int) -> int:
    """The first token of the window over a text of `total` tokens: a slider when the text is longer than the
    window (the value clamped to the text before it is drawn), else 0."""
    last = total - TEACH_TOKENS
    if last <= 0:
        return 0
    session.settle(keys.TEACH_START, max(0, min(int(session.get(keys.TEACH_START) or 0), last)))
    return int(st.slider(f"Which {TEACH_TOKENS} tokens: the window's first token", 0, last, key=keys.TEACH_START,
                         persist_state=keys.KEEP,
                         help=f"The steps show {TEACH_TOKENS} queries against the same {TEACH_TOKENS} keys, so that "
                              "every cell stays readable. The other keys of each row are one more column: "
                              "their scores' log-sum-exp, so every softmax is the model's, exactly."))


def caption(start: int, n: int, total: int) -> str:
    """What a window of n tokens from `start` out of `total` shows, for the page's caption ("" for a whole text)."""
    if total <= n:
        return ""
    return (f"Tokens {start}–{start + n - 1} of {total:,}: each row's {total - n:,} other keys are folded into "
            "the column ⟨keys outside⟩, whose score is log Σ e^score over them, so each row's softmax is exact: that "
            "column's probability is what those keys take together.")
