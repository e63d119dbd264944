"""The public deployment mode through AppTest: only the allow-listed models and a token cap
are offered, and analyses beyond the limit wait for a free slot."""

from __future__ import annotations

import threading
import time

import pytest

import mha_viz_models
from mha_viz import analyze_text
from mha_viz.ui.kit import keys
from mha_viz.ui.shell import sidebar
from tests.app.helpers import start_app

pytestmark = pytest.mark.model


def test_public_mode_offers_only_the_allow_list_and_caps_tokens(public):
    at = start_app()
    assert at.selectbox(key="model_choice").options == [sidebar.model_title(k) for k in mha_viz_models.BUNDLED]
    assert keys.MODEL_OTHER not in [t.key for t in at.text_input]  # no free-form hub id or folder
    limit = at.number_input(key="token_limit")
    assert limit.value == 32 and limit.max == 32
    at.text_area(key="text").input("word " * 100).run()
    assert any("first 32" in w.value for w in at.warning)


def test_analyses_beyond_the_limit_wait_for_a_free_slot(monkeypatch):
    """With one slot taken elsewhere, a new analysis waits (with a notice) and runs once the
    slot is given back: it starts after the release, and finishes without an error."""
    from mha_viz.ui.kit import resources

    monkeypatch.setenv("MHA_VIZ_MAX_CONCURRENT", "1")
    resources.slots.clear()
    started, released = [], []
    real = analyze_text.analyze

    def recording(*args, **kwargs):
        started.append(time.monotonic())
        return real(*args, **kwargs)

    monkeypatch.setattr(analyze_text, "analyze", recording)
    slots = resources.slots()
    hold, refused, real_wait = slots.hold(), threading.Event(), slots.wait

    def waiting(*args, **kwargs):  # the app was refused a slot and waits for one
        refused.set()
        return real_wait(*args, **kwargs)

    monkeypatch.setattr(slots, "wait", waiting)

    def release():  # only once the analysis is waiting for the slot: no sleep
        assert refused.wait(240), "the analysis never waited for the slot"
        released.append(time.monotonic())
        hold.__exit__(None, None, None)

    try:
        at = start_app()  # the first sentence: minilm loads while the slot is free
        hold.__enter__()  # then another analysis takes the only slot
        releaser = threading.Thread(target=release)
        releaser.start()
        at.text_area(key="text").input("Waiting for a free slot.").run()
        releaser.join(240)
        assert refused.is_set() and not at.exception and not at.error
        assert at.session_state["_current"].run.text == "Waiting for a free slot."
        assert started and released and started[-1] >= released[0]
    finally:
        resources.slots.clear()
