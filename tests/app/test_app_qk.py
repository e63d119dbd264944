"""The Queries and keys page through AppTest: the neuron view shows the model's own numbers (its
softmax row equals the head view's attention), the map draws queries and keys and highlights a
clicked query's strongest keys; one token and a long text (the page reads the walkthrough's first
64 tokens and says so) draw without errors."""

from __future__ import annotations

import numpy as np
import pytest

from tests.app.helpers import charts, open_with_text

pytestmark = pytest.mark.model

LONG = " ".join(["the cat sat on the mat and looked at the dog"] * 14)  # > 128 tokens


def _figure(at, prefix: str) -> dict:
    return next(c for c in charts(at) if c["layout"]["title"]["text"].startswith(prefix))


def test_neuron_view_matches_the_captured_row_and_a_click_picks_a_query():
    at = open_with_text("qk", "The cat sat on the mat.")
    at.selectbox(key="qk_layer").set_value(2)
    at.selectbox(key="qk_head").set_value(5)
    at.selectbox(key="qk_i").set_value(3)
    at.selectbox(key="qk_j").set_value(1).run()
    assert not at.exception and not at.error
    run = at.session_state["_current"].run
    neuron = _figure(at, "Layer 2 head 5: query 3")
    probs = np.array(next(d for d in neuron["data"] if d.get("name") == "softmax")["y"], dtype=float)
    np.testing.assert_allclose(probs, run.attentions[2, 5, 3], atol=1e-5)
    assert "no RoPE" in neuron["layout"]["title"]["text"]
    qmap = _figure(at, "Queries (●) and keys (◆)")
    assert [d["marker"]["symbol"] for d in qmap["data"][:2]] == ["circle", "diamond"]
    assert sum(d["mode"] == "lines" for d in qmap["data"]) == 3  # query 3's three strongest keys
    # a click on query 5 of the map (AppTest cannot click: set the event the chart would send)
    at.session_state["qk_i"] = 5
    at.radio(key="qk_method").set_value("tsne")
    at.toggle(key="qk_translate").set_value(True).run()
    assert not at.exception and not at.error
    assert _figure(at, "Layer 2 head 5: query 5")
    assert "t-SNE, keys translated and scaled" in _figure(at, "Queries")["layout"]["title"]["text"]


def test_one_token_on_a_rope_decoder():
    at = open_with_text("qk", "Hi", model="smollm2")
    assert at.session_state["_current"].run.n == 1
    neuron = _figure(at, "Layer 0 head 0")
    assert "after RoPE" in neuron["layout"]["title"]["text"]
    assert not at.exception and not at.error


def test_a_long_text_reads_a_window_of_64_tokens_that_the_slider_moves():
    at = open_with_text("qk", LONG)
    run = at.session_state["_current"].run
    assert run.n > 128
    assert any(f"Tokens 0–63 of {run.n}" in c.value for c in at.caption)
    qmap = _figure(at, "Queries")
    assert len(qmap["data"][0]["x"]) == 64 and len(qmap["data"][1]["x"]) == 64
    at.slider(key="teach_start").set_value(run.n - 64).run()  # the last 64 tokens
    assert not at.exception and not at.error
    assert any(f"Tokens {run.n - 64}–{run.n - 1} of {run.n}" in c.value for c in at.caption)
    assert at.selectbox(key="qk_i").format_func(63).startswith(f"{run.n - 1}: ")
    assert len(_figure(at, "Queries")["data"][0]["x"]) == 64


def test_a_model_whose_weights_cannot_be_read_gets_a_message(tmp_path):
    from transformers import GPTBigCodeConfig, GPTBigCodeForCausalLM

    from mha_viz.ui.shell.sidebar import OTHER
    from tests.helpers import byte_bpe_tokenizer

    tok = byte_bpe_tokenizer()
    config = GPTBigCodeConfig(vocab_size=len(tok), n_positions=64, n_embd=32, n_layer=2, n_head=4,
                              multi_query=True)
    GPTBigCodeForCausalLM(config).save_pretrained(tmp_path)  # attention shown, weights unreadable
    tok.save_pretrained(tmp_path)
    at = open_with_text("qk", "hello world")
    at.selectbox(key="model_choice").set_value(OTHER).run()
    at.text_input(key="model_other").input(str(tmp_path)).run()
    assert not at.exception and not at.error
    assert at.title[0].value == "Queries and keys"
    assert any("Queries and keys are recomputed with mha-viz's own MHA, which cannot compute" in i.value
               for i in at.info)
