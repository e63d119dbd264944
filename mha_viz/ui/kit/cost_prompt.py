"""A computation that takes long asks first: its cost stated from figures measured on 2 CPU cores, and a
click that accepts it, once a session (`accepted`); what reading every head of a long run costs
(`read_seconds`), which Head similarity and Compare add to their own."""

from __future__ import annotations

import streamlit as st

from mha_viz.ui.kit import keys, session


def entries(run) -> float:
    """Probabilities of every head that a causal run can make non-zero (all of them otherwise)."""
    return run.num_layers * run.num_heads * run.n * run.n * (0.5 if run.is_causal else 1.0)


# measured on 2 quiet CPU cores: every head's rows of a long run of SmolLM2 at 2,048 tokens read again (each
# layer's rows recomputed, a block at a time) in 6.6 s
READ_S = 6.6 / (30 * 9 * 2048 * 2048 / 2)
ASK_ABOVE_S = 20.0  # a computation that takes longer waits for a click that accepts its stated cost


def read_seconds(run) -> float:
    """About how long reading every head's rows once more takes: 0 for a run that holds them."""
    return 0.0 if run.is_dense else READ_S * entries(run)


def read_note(run) -> str:
    """What reading every head costs this run, as a clause."""
    return "" if run.is_dense else " (a text this long keeps no head's n × n: every head's rows are recomputed once)"


def duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"


def accepted(what, seconds: float, said: str, button_key: str) -> bool:
    """Whether a long computation (`what`: a hashable name of it) may run now: quick, or its cost `said`
    (a sentence) and accepted with a click, once a session."""
    if seconds < ASK_ABOVE_S:
        return True
    done = session.get(keys.COST_ACCEPTED) or ()
    if what in done:
        return True
    st.info(f"{said} It takes about {duration(seconds)} on 2 CPU cores; the result is kept for this text.",
            icon=":material/timer:")
    if st.button(f"Start (about {duration(seconds)})", key=button_key, type="primary"):
        session.put(keys.COST_ACCEPTED, tuple(done) + (what,))
        return True
    return False
