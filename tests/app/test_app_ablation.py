"""The *Switch heads off* page through AppTest: the loss it shows is the model's loss with those
heads off, a second visit runs no forward pass (the outcomes are cached per head set), and texts
the loss cannot score get a message instead of a traceback."""

from __future__ import annotations

import numpy as np
import pytest

from mha_viz.interventions import ablation
from tests.app.helpers import frame, open_page, open_with_text, start_app

pytestmark = pytest.mark.model


def _forward_passes(at):
    """(a list that grows by one for every forward pass of the page's model from now on, the hook's
    handle: remove it, the model is shared by the tests)."""
    calls: list[int] = []
    model = at.session_state["_current"].model
    return calls, model.hf_model.register_forward_hook(lambda *_: calls.append(1))


def test_the_loss_shown_is_the_loss_with_those_heads_off_and_a_second_visit_runs_no_pass():
    text = "The capital of France is"
    at = open_with_text("ablation", text, model="smollm2")
    unmoved = next(m for m in at.metric if m.label.startswith("next-token loss"))  # every head on: no rise shown
    assert unmoved.delta == "±0.0000" and unmoved.proto.direction == unmoved.proto.NONE  # was "↑ +0.0000"
    at.selectbox(key="heads_layer_pick").set_value(2)
    at.button(key="heads_layer_off").click().run()
    assert not at.exception and not at.error
    model = at.session_state["_current"].model
    keep = np.ones((model.num_layers, model.num_heads), bool)
    keep[2] = False
    before, after = ablation.masked_loss(model, text, np.ones_like(keep)), ablation.masked_loss(model, text, keep)
    loss = next(m for m in at.metric if m.label.startswith("next-token loss"))
    assert float(loss.value) == pytest.approx(after, abs=1e-4)
    assert float(loss.delta) == pytest.approx(after - before, abs=2e-4)

    calls, hook = _forward_passes(at)
    try:
        open_page(at, "model_facts")
        open_page(at, "ablation")
        assert not at.exception and not at.error
        assert any("9 of 270 heads off" in m.value for m in at.markdown)
        assert not calls  # the loss and the top-5, before and after, come from the cache
        at.button(key="heads_all_on").click().run()
        at.radio(key="ablate_mode").set_value("replaced by their mean output on this text").run()
    finally:
        hook.remove()
    assert not at.exception and not at.error
    assert not calls  # every head on: the unablated outcome serves both columns, whatever the mode
    preds = frame(at, "every head on")
    assert preds["every head on"].tolist() == preds["with the heads off"].tolist()


def test_a_text_the_next_token_loss_cannot_score_gets_a_message():
    at = start_app()
    at.selectbox(key="model_choice").set_value("smollm2").run()
    model = at.session_state["_current"].model
    word = next(w for w in ("Hello", "Hi", "The", "cat") if len(model.tokenizer(w)["input_ids"]) == 1)
    at.text_area(key="text").input(word).run()
    open_page(at, "ablation")
    assert not at.exception
    assert any("at least two tokens" in e.value for e in at.error)


def test_without_a_second_sentence_the_embedding_model_shows_the_cosine_alone():
    at = open_with_text("ablation", "A dog runs in the park.")
    at.text_input(key="ablation_other").input("   ").run()
    at.selectbox(key="heads_layer_pick").set_value(0)
    at.button(key="heads_layer_off").click().run()
    assert not at.exception and not at.error
    labels = [m.label for m in at.metric]
    assert labels == ["cosine: sentence embedding, heads off vs on"]
    assert 0 < float(at.metric[0].value) < 1
    # the page says it measures the cosine it shows (its importance's loss, 1 − cosine, is not what is drawn here)
    said = [c.value for c in at.caption if "Measured:" in c.value]
    assert said and "Measured: the cosine between the sentence embedding with these heads off" in said[0], said
    at.text_input(key="ablation_other").input("A cat sleeps on the sofa.").run()
    assert [m.label for m in at.metric] == ["cosine: sentence embedding, heads off vs on",
                                            "cosine to sentence 2, heads on", "… with the heads off"]


def test_a_long_text_says_each_change_runs_the_model_again_and_how_long_the_last_took(monkeypatch):
    """Issue 90: switching a layer off on a 3,169-token text took 11.5 s, unannounced. Past RERUN_NOTE_TOKENS the
    page says each change runs the model again over the text's tokens, and once a pass with heads off was
    measured, how long it took (the thresholds lowered here, so a sentence stands for a long text)."""
    from mha_viz.features.ablation import page as page

    monkeypatch.setattr(page, "RERUN_NOTE_TOKENS", 3)
    monkeypatch.setattr(page, "RERUN_NOTE_S", 0.0)
    at = open_with_text("ablation", "The capital of France is", model="smollm2")
    n = at.session_state["_current"].run.n

    def note() -> str:
        return next((c.value for c in at.caption if "Each change runs" in c.value), "")
    assert f"over this text's {n:,} tokens again." in note()  # no pass with heads off yet: no time
    at.button(key="heads_layer_off").click().run()
    assert not at.exception and not at.error
    assert "; the last one took " in note() and note().endswith(" s.")
    monkeypatch.setattr(page, "RERUN_NOTE_TOKENS", 10_000)
    at.run()
    assert "the last one took" in note()  # a short text with a measured pass still says it
