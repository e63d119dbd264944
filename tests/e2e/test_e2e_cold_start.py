"""A crowd on a cold server (issue 10): a server that has just started, whose script has never
run (its health check is all that was asked), gets 8 browser sessions at the same moment, spread
over the pages, so that their first renders import the pages' libraries all at once. Then each
session opens the Head view and applies its own sentence, all at the same moment again. Every
session must show its own sentence's tokens, and none may show an error or an exception.

Before `mha_viz.ui.shell.preload` (on the app of commit 9ef9d17, whose pages imported their views
lazily), four of eight such sessions failed on every try with *This view could not be drawn
(AttributeError: partially initialized module 'pandas' has no attribute 'Series')*: a session
importing pandas while another's Plotly figure looked pandas up in `sys.modules`.

Since issue 20 the server's start (app.py's `st.App`, `preload.lifespan`) does that preload
before the server answers its health check; the test checks that it did, and the crowd then
checks that no session races another whichever way the preload ran (the script's own
`preload.warm()` still makes a session wait for one in progress).

MiniLM (the default model) for every session: this checks imports, not model loading.
MHA_VIZ_E2E_COLD_SESSIONS=16 runs a crowd of 16 (by hand; CI runs 8).
"""

from __future__ import annotations

import os
import re
import time

import pytest

from .conftest import ARTIFACTS, RUN_TIMEOUT_S, assert_own_tokens, new_app, send_all, start_server

pytestmark = pytest.mark.e2e
SESSIONS = int(os.environ.get("MHA_VIZ_E2E_COLD_SESSIONS", "8"))
# Where each session lands, by URL path ("" is the default page, the model view): the pages
# whose first render imports something (PIL for the model view's thumbnails, pandas and the
# head table, scipy for the similarity layout, Plotly everywhere).
LANDING = ("", "head_view", "head_metrics", "similarity", "", "head_view", "across_layers", "compare_heads")
WORDS = ["tigers", "comets", "apples", "rivers", "engines", "violins", "glaciers", "lanterns",
         "falcons", "deserts", "pianos", "harbors", "meteors", "orchards", "beetles", "islands"]
FIRST_RENDER = "[data-testid=stMain] h1, [data-testid=stException], [data-testid=stAlertContentError]"


def _problems(ui) -> list[str]:
    """What `App.assert_clean` refuses, as a list (to report every session at once)."""
    found = [f"exception: {text[:300]}" for text in ui.exceptions()]
    found += [f"error: {text[:300]}" for text in ui.alerts("Error")]
    found += [f"dialog: {text}" for text in ui.dialogs]
    found += [f"JavaScript error: {text[:300]}" for text in ui.page_errors]
    return found


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


def test_a_crowd_on_a_cold_server_each_sees_its_own_sentence(e2e_ready, browser, request):
    log_path = ARTIFACTS / "server-cold.log"
    sessions = []
    with start_server(log_path) as base_url:
        start = time.monotonic()
        assert "preloaded the pages' libraries" in log_path.read_text(errors="replace"), (
            "the server answered its health check before its start had preloaded the pages' libraries")
        try:
            sessions = [new_app(browser, base_url, f"cold-{i}") for i in range(SESSIONS)]
            for i, ui in enumerate(sessions):  # all at once: nobody waits for anybody's first page
                ui.page.goto(f"{base_url}/{LANDING[i % len(LANDING)]}", wait_until="commit")
            for ui in sessions:
                ui.page.locator(FIRST_RENDER).first.wait_for(timeout=RUN_TIMEOUT_S * 1000)
                ui.wait_idle()
            first_render_s = time.monotonic() - start
            landed = {f"session {i} on /{LANDING[i % len(LANDING)]}": _problems(ui)
                      for i, ui in enumerate(sessions)}
            landed = {name: found for name, found in landed.items() if found}
            log_failures = _failures_in_log(log_path.read_text(errors="replace"))
            assert not landed, (f"{len(landed)} of {SESSIONS} sessions failed their first render on a "
                                f"cold server: {landed}; server log: {log_failures}")

            for arrived in [ui.start_goto("Head view") for ui in sessions if ui.heading() != "Head view"]:
                arrived()  # every session's switch clicked at once, then each waited for
            texts = [f"Session {i} writes about {WORDS[i % len(WORDS)]}." for i in range(SESSIONS)]
            send_all(sessions, texts)  # all at once again
            run_of = request.getfixturevalue("run_of")  # only now: the crowd had the cores to itself
            assert_own_tokens(sessions, texts, ["minilm"] * SESSIONS, run_of)
            failures = _failures_in_log(log_path.read_text(errors="replace"))
            assert not failures, f"the server logged failures: {failures}"
            print(f"\ncold crowd of {SESSIONS}: every first render in {first_render_s:.1f} s, "
                  f"every sentence shown {time.monotonic() - start:.1f} s after the server answered")
        except BaseException:
            for ui in sessions:
                try:
                    ui.shot("FAILED")
                except Exception:  # noqa: BLE001 - a failed screenshot must not hide the failure
                    pass
            raise
        finally:
            for ui in sessions:
                ui.close()
