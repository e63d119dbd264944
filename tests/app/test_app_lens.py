"""The sidebar's *Show attention as: contributions* through AppTest: every view of the run draws the
value-weighted attention of a fresh capture (computed here, independently), titled so; it combines
with *Hide tokens*; the Model view shows how much each head changed; our MHA has it too; a run
without a value path keeps its weights and says so."""

from __future__ import annotations

import numpy as np
import pytest

import mha_viz
from mha_viz.interventions import attribution
from mha_viz.ui.kit import keys
from mha_viz.ui.shell.sidebar import OTHER
from tests.app.helpers import chart_titles, charts, heatmap_tokens, open_page, shown, start_app

pytestmark = pytest.mark.model

LABEL = "value-weighted (‖α f(x)‖, row-normalised)"
TEXT = "The cat sat on the mat."


def _ok(at):
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]



def _head_z(at) -> np.ndarray:
    spec = next(s for s in charts(at) if s["data"][0]["type"] == "heatmap")
    return np.array(spec["data"][0]["z"], dtype=float)


def _expected(text: str, local: bool = False) -> mha_viz.AttentionRun:
    return mha_viz.analyze(mha_viz.load_model("minilm", device="cpu", local_attention=local), text)


def test_every_view_of_minilm_shows_contributions():
    at = start_app()
    at.text_area(key="text").input(TEXT).run()
    at.radio(key=keys.LENS).set_value(keys.LENS_CONTRIBUTIONS).run()
    _ok(at)
    weights = _expected(TEXT)
    contrib = attribution.as_contributions(weights)
    # the model view: its thumbnails are titled, and the JS grid equals the divergence computed here
    assert any(LABEL in t for t in chart_titles(at))
    grid = next(c for c in charts(at) if c["layout"].get("title", {}).get("text", "").startswith("JS divergence"))
    z = np.array(next(d["z"] for d in grid["data"] if d.get("type") == "heatmap"), dtype=float)
    np.testing.assert_allclose(z, attribution.lens_divergence(weights, contrib), atol=1e-5)
    assert z.max() > 0.01  # MiniLM's values differ in size: the lens changes some heads visibly
    open_page(at, "head_view")
    _ok(at)
    layer, head = at.session_state[keys.SEL_LAYER], at.session_state[keys.SEL_HEAD]
    np.testing.assert_allclose(_head_z(at), contrib.attentions[layer, head], atol=1e-4)
    assert not np.allclose(_head_z(at), weights.attentions[layer, head], atol=1e-3)
    assert LABEL in chart_titles(at)[0]
    for page in ("lines", "focus", "compare_heads", "head_metrics"):
        open_page(at, page)
        _ok(at)
        assert any(LABEL in t for t in chart_titles(at)), (page, chart_titles(at))
    for page in ("across_layers", "similarity", "model_facts"):  # pages without the label draw all the same
        open_page(at, page)
        _ok(at)
    # back to weights: the head view shows the weights again
    at.radio(key=keys.LENS).set_value(keys.LENS_WEIGHTS).run()
    open_page(at, "head_view")
    np.testing.assert_allclose(_head_z(at), weights.attentions[layer, head], atol=1e-4)
    assert not any(LABEL in t for t in chart_titles(at))


def test_contributions_with_special_tokens_hidden():
    at = start_app()
    at.text_area(key="text").input(TEXT).run()
    at.checkbox(key=keys.HIDE_SPECIAL).check().run()
    at.radio(key=keys.LENS).set_value(keys.LENS_CONTRIBUTIONS).run()
    open_page(at, "head_view")
    _ok(at)
    weights = _expected(TEXT)
    want = attribution.as_contributions(weights.drop_tokens(np.array(weights.special_mask)))
    assert "[CLS]" not in heatmap_tokens(at)
    layer, head = at.session_state[keys.SEL_LAYER], at.session_state[keys.SEL_HEAD]
    np.testing.assert_allclose(_head_z(at), want.attentions[layer, head], atol=1e-4)


def test_our_mha_has_contributions_too():
    at = start_app()
    at.text_area(key="text").input(TEXT).run()
    at.toggle(key=keys.LOCAL_ATTENTION).set_value(True).run()
    at.radio(key=keys.LENS).set_value(keys.LENS_CONTRIBUTIONS).run()
    open_page(at, "head_view")
    _ok(at)
    assert not at.info or all("value path" not in i.value for i in at.info)
    want = attribution.as_contributions(_expected(TEXT, local=True))
    layer, head = at.session_state[keys.SEL_LAYER], at.session_state[keys.SEL_HEAD]
    np.testing.assert_allclose(_head_z(at), want.attentions[layer, head], atol=1e-4)


def test_cross_attention_keeps_its_weights_and_says_why(t5_dir):
    at = start_app()
    at.selectbox(key="model_choice").set_value(OTHER).run()
    at.text_input(key=keys.MODEL_OTHER).input(str(t5_dir)).run()
    at.text_area(key="text").input("one two three").run()
    at.radio(key=keys.LENS).set_value(keys.LENS_CONTRIBUTIONS).run()
    at.button_group(key=keys.ATTN_PART).set_value("Cross").run()
    _ok(at)
    notes = shown(" ".join(i.value for i in at.info))
    assert "cross-attention is shown as weights" in notes
    assert not any(LABEL in t for t in chart_titles(at))
    at.button_group(key=keys.ATTN_PART).set_value("Encoder").run()
    _ok(at)
    assert "cannot be weighted" in shown(" ".join(i.value for i in at.info))
