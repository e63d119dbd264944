"""A crowd on a server just started (issues 10 and 20): a server whose script has never run (its health check is
all that was asked) gets 8 browser sessions at the same moment, spread over the pages, so that their first renders
import the pages' libraries all at once. Each session opens a teacher's link with a draft sentence of its own and
types its own sentence as soon as its text box takes input, pressing Ctrl+Enter while its first run is still going;
a session that landed elsewhere then opens the Head view, all at about the same moment again (`crowd`). No page may
show an error or an exception, nor the server log one; the box must keep the typed sentence and the Head view show
its tokens: what the user typed wins over anything the app sets before a run.

Before `mha_viz.ui.shell.preload` (on the app of commit 9ef9d17, whose pages imported their views
lazily), four of eight such sessions failed on every try with *This view could not be drawn
(AttributeError: partially initialized module 'pandas' has no attribute 'Series')*: a session
importing pandas while another's Plotly figure looked pandas up in `sys.modules`. Since issue 20 the server's
start (app.py's `st.App`, `preload.lifespan`) does that preload before the server answers its health check; the
test checks that it did, and the crowd then checks that no session races another whichever way the preload ran
(the script's own `preload.warm()` still makes a session wait for one in progress).

Before the typed-early fix (the sidebar's inputs were put back from a copy before each run, and a value written by
code wins over the browser's in Streamlit), a session lost its sentence in 1 of 8 in a round on a server just
started (1 of 24 on a loaded warm server: test_e2e_typed_early): one round does not catch every such race, which is
why the rounds can be raised.

This test was two until stop 80, test_a_crowd_on_a_cold_server_each_sees_its_own_sentence (each session landing,
then switching to the Head view and sending its sentence, 100 s) and test_e2e_typed_early's round on a server just
started (every session typing early on the Head view, 67 s); one crowd now does both (issue 53: the suite's time).

MiniLM (the default model) for every session: this checks imports and typing, not model loading (the warm round
of test_e2e_typed_early mixes two models). MHA_VIZ_E2E_COLD_SESSIONS=16 runs a crowd of 16 and
MHA_VIZ_E2E_ROUNDS=3 three rounds, each on a server of its own (by hand; `make test` runs 8 sessions, one round).
"""

from __future__ import annotations

import os
import re
import time

import pytest

from .conftest import ARTIFACTS, start_server
from .crowd import Visit, crowd, problems

pytestmark = pytest.mark.e2e
SESSIONS = int(os.environ.get("MHA_VIZ_E2E_COLD_SESSIONS", "8"))
ROUNDS = int(os.environ.get("MHA_VIZ_E2E_ROUNDS", "1"))
# Where each session lands, by URL path ("" is the default page, the model view): the pages
# whose first render imports something (PIL for the model view's thumbnails, pandas and the
# head table, scipy for the similarity layout, Plotly everywhere).
LANDING = ("", "head_view", "head_metrics", "similarity", "", "head_view", "across_layers", "compare_heads")
WORDS = ["tigers", "comets", "apples", "rivers", "engines", "violins", "glaciers", "lanterns",
         "falcons", "deserts", "pianos", "harbors", "meteors", "orchards", "beetles", "islands"]


def _failures_in_log(log_text: str) -> list[str]:
    """The server's "view failed" records and uncaught exceptions, with their last line."""
    lines = log_text.splitlines()
    found = []
    for i, line in enumerate(lines):
        if "view failed" in line or "Traceback" in line:
            error = next((later for later in lines[i + 1:]
                          if re.match(r"^\W*\w*(Error|Exception)\b", later)), "")
            found.append(f"{line.strip()[:120]} … {error.strip()[:300]}")
    return found


def test_a_crowd_on_a_server_just_started_types_at_once_and_each_sees_its_own_sentence(e2e_ready, request):
    found = []
    for rep in range(ROUNDS):
        log_path = ARTIFACTS / f"server-cold-{rep}.log"
        visits = [Visit(LANDING[i % len(LANDING)], "minilm", f"A draft sentence {i} for round {rep}.",
                        f"Session {i} writes about {WORDS[i % len(WORDS)]} in round {rep}.") for i in range(SESSIONS)]
        with start_server(log_path) as base_url:
            start = time.monotonic()
            assert "preloaded the pages' libraries" in log_path.read_text(errors="replace"), (
                "the server answered its health check before its start had preloaded the pages' libraries")
            results = crowd(base_url, visits)
            shown_s = time.monotonic() - start
            run_of = request.getfixturevalue("run_of")  # only now: the crowd had the cores to itself
            found += problems(f"server just started, round {rep}", visits, results, run_of)
            found += [f"round {rep}, the server logged: {failure}"
                      for failure in _failures_in_log(log_path.read_text(errors="replace"))]
            print(f"crowd of {SESSIONS}: every sentence shown {shown_s:.1f} s after the server answered")
    assert not found, "a crowd on a server just started:\n" + "\n".join(found)
