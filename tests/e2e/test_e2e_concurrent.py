"""Several people at once: 8 browser contexts (8 Streamlit sessions), opened at once on links to the head
view of MiniLM or SmolLM2, send their own sentences at the same moment. Each sees only its own tokens, all
finish, and each model is loaded once for all of them (the server logs every load)."""

from __future__ import annotations

import re

import pytest

from mha_viz.ui import sidebar

from .conftest import RUN_TIMEOUT_S, assert_own_tokens, new_app, send_all

pytestmark = pytest.mark.e2e
WORDS = ["apples", "rivers", "engines", "violins", "glaciers", "lanterns", "tigers", "comets"]


def _loads(log_text: str) -> list[str]:
    return re.findall(r"model loaded: (\S+) \(device (\S+), our MHA (\S+)\)", log_text)


def test_eight_sessions_at_once_each_see_their_own_tokens(server, server_log, browser, run_of):
    log = server_log
    before = len(log.read_text(errors="replace"))  # loads by earlier tests (the cache holds a few models)
    sessions = []
    models = ["smollm2" if i % 2 else "minilm" for i in range(len(WORDS))]
    try:
        for i, model in enumerate(models):  # every session opened at once, on its link (head view, model)
            sessions.append(new_app(browser, server, f"concurrent-{i}"))
            sessions[-1].page.goto(f"{server}/head_view?model={model}", wait_until="commit")
        for ui, model in zip(sessions, models):
            ui.page.locator("[data-testid=stPlotlyChart]").first.wait_for(timeout=RUN_TIMEOUT_S * 1000)
            ui.wait_idle()
            assert ui.heading() == "Head view" and ui.model_title() == sidebar.model_title(model)
        texts = [f"Session {i} writes about {word} and more {word}." for i, word in enumerate(WORDS)]
        send_all(sessions, texts)  # all eight at once: nobody waits for the others
        assert_own_tokens(sessions, texts, models, run_of)
    finally:
        for ui in sessions:
            ui.close()
    loads = _loads(log.read_text(errors="replace")[before:])  # during this test only
    assert len(loads) == len(set(loads)), f"a model was loaded more than once: {loads}"
