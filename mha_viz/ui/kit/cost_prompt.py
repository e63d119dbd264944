"""A computation that takes long asks first: its cost stated from figures measured on 2 CPU cores
(`mha_viz.budget.seconds`, the features' `cost` modules), and a click that accepts it, once a session
(`accepted`); the ask is gone from the page once accepted."""

from __future__ import annotations

import streamlit as st

from mha_viz.budget.seconds import duration
from mha_viz.ui.kit import keys, session

ASK_ABOVE_S = 20.0  # a computation that takes longer waits for a click that accepts its stated cost
SAY_ABOVE_S = 3.0  # one that takes longer (but not that long) says its cost while it runs


def read_note(run) -> str:
    """What reading every head costs this run, as a clause."""
    return "" if run.is_dense else " (a text this long keeps no head's n × n: every head's rows are recomputed once)"


def accepted(what, seconds: float, said: str, button_key: str) -> bool:
    """Whether a long computation (`what`: a hashable name of it) may run now: quick, or its cost `said`
    (a sentence) and accepted with a click, once a session."""
    if seconds < ASK_ABOVE_S:
        return True
    done = session.get(keys.COST_ACCEPTED) or ()
    if what in done:
        return True
    ask = st.empty()  # the ask and its button, gone from the page once accepted: the result replaces them
    with ask.container():
        st.info(f"{said} It takes about {duration(seconds)} on 2 CPU cores; the result is kept for this text.",
                icon=":material/timer:")
        start = st.button(f"Start (about {duration(seconds)})", key=button_key, type="primary")
    if start:
        ask.empty()
        session.put(keys.COST_ACCEPTED, tuple(done) + (what,))
        return True
    return False
