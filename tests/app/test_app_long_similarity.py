"""Head similarity, Across layers and Compare on a long run (MHA_VIZ_DENSE_MB=0: every analysis keeps each layer's
input and recomputes rows) open without an error while building every head's array is forbidden (`forbid_dense`):
JS and cosine between heads and rollout are summed a block of rows at a time, two runs compared a layer's block at
a time. Under a tiny capture budget, Across layers refuses rollout with the token count that fits, as a message;
under one that holds one layer's rollout and not every layer's, it draws the layer asked for alone."""

from __future__ import annotations

import re

import numpy as np
import pytest

from mha_viz import metrics
from mha_viz.capture import head_rows
from mha_viz.features.across_layers import controls as across_layers_keys
from mha_viz.features.compare import controls as compare_keys
from mha_viz.features.similarity import controls as similarity_keys
from mha_viz.features.similarity import page as similarity_page
from mha_viz.ui.kit import cost_prompt, keys
from tests.app.helpers import charts, open_page, start_app
from tests.helpers import ROOT

pytestmark = pytest.mark.model
TEXT = "The animal didn't cross the street because it was too tired. It slept there all day long."


def _clean(at, page: str) -> None:
    assert not at.exception, (page, at.exception)
    assert not at.error, (page, [e.value for e in at.error])


def test_similarity_across_layers_and_compare_open_on_a_long_run_without_every_head(monkeypatch):
    monkeypatch.setenv("MHA_VIZ_DENSE_MB", "0")
    with head_rows.forbid_dense():
        at = start_app()
        at.text_area(key="text").input(TEXT).run()
        run = at.session_state[keys.CURRENT].run
        assert not run.is_dense and run.summary is not None
        for page in ("similarity", "across_layers", "compare"):
            open_page(at, page)
            _clean(at, page)
        # Compare: the sidebar's sentence against sentence B, token by token when both have as many tokens
        at.text_area(key=compare_keys.CMP_TEXT_B).input(TEXT.replace("tired", "wide")).run()
        _clean(at, "compare")
        change = np.asarray(charts(at)[0]["data"][0]["z"], dtype=float)
        assert change.shape == (run.num_layers, run.num_heads) and change.max() > 1e-3
        open_page(at, "similarity")
        at.selectbox(key=similarity_keys.SIM_KIND).set_value("cosine").run()
        _clean(at, "similarity")
        assert not run.is_dense
    matrix = next(c for c in charts(at) if c["data"][0]["type"] == "heatmap")
    shown = np.asarray(matrix["data"][0]["z"], dtype=float)
    # every head whole, layer by layer (not `run.attentions`, which would keep them in the app's cached run)
    flat = np.concatenate([run.layer_rows(layer) for layer in range(run.num_layers)]).reshape(
        run.num_layers * run.num_heads, -1).astype(np.float64)
    inner = flat @ flat.T
    norms = np.sqrt(np.diag(inner))
    np.testing.assert_allclose(shown, inner / norms[:, None] / norms[None, :], atol=1e-5)


def test_rollout_over_the_capture_budget_says_the_length_that_fits(monkeypatch):
    monkeypatch.setenv("MHA_VIZ_DENSE_MB", "0")
    monkeypatch.setenv("MHA_VIZ_MAX_CAPTURE_MB", "1")
    text = (ROOT / "mha_viz" / "corpus" / "sample.txt").read_text()[:2500]
    with head_rows.forbid_dense():
        at = start_app()
        at.text_area(key="text").input(text).run()
        run = at.session_state[keys.CURRENT].run
        open_page(at, "across_layers")
        _clean(at, "across_layers")
    said = [w.value for w in at.warning if "Rollout" in w.value]
    assert len(said) == 1, [w.value for w in at.warning]
    fits = re.search(r"at most (\d+) tokens", said[0])
    assert fits, said
    assert 0 < int(fits.group(1)) < run.n
    # not even one layer's fits (`rollout_layer`: three n × n, counted as two layers and one Â), and the length
    # said is one layer's longest
    assert "one layer's" in said[0], said
    assert metrics.across_layers.rollout_bytes(2, int(fits.group(1))) <= 2**20
    assert metrics.across_layers.rollout_bytes(2, int(fits.group(1)) + 1) > 2**20


def test_rollout_over_the_budget_for_every_layer_draws_each_layer_alone(monkeypatch):
    """Every layer's rollout over the capture budget, one layer's within it: the page says why and what a layer
    costs, waits for a click where that is long (every layer counts as long here), then draws the layer chosen
    (and through one head: the layer below, asked for again), computed alone, equal to the float64 rollout of the
    run's own probabilities."""
    monkeypatch.setenv("MHA_VIZ_DENSE_MB", "0")
    monkeypatch.setattr(cost_prompt, "ASK_ABOVE_S", 0.0)
    text = (ROOT / "mha_viz" / "corpus" / "sample.txt").read_text()[:2500]
    with head_rows.forbid_dense():
        at = start_app()
        at.number_input(key=keys.TOKEN_LIMIT).set_value(240).run()  # drawn cell by cell (at most 256 tokens)
        at.text_area(key="text").input(text).run()
        run = at.session_state[keys.CURRENT].run
        assert run.n == 240
        every, one = (metrics.across_layers.rollout_bytes(k, run.n) for k in (run.num_layers, 2))
        mb = int((every + one) / 2 / 2**20)  # between the two (the budget is whole MiB)
        assert one <= mb * 2**20 < every
        monkeypatch.setenv("MHA_VIZ_MAX_CAPTURE_MB", str(mb))
        open_page(at, "across_layers")
        _clean(at, "across_layers")
        assert not [w.value for w in at.warning if "Rollout" in w.value]
        said = " ".join(i.value for i in at.info)
        assert "layer 5's is computed alone" in said and "takes about" in said, said
        assert not [c for c in charts(at) if c["data"] and c["data"][0]["type"] == "heatmap"]  # nothing computed yet
        at.button(key=across_layers_keys.LAYERS_START).click().run()
        _clean(at, "across_layers")
        layers = [run.layer_rows(layer).astype(np.float64).mean(0) for layer in range(run.num_layers)]
        rolled, expected = np.eye(run.n), []
        for mean in layers:  # R_l = Â_l R_{l-1}, Â = rows-renormalised ½·mean + ½·I
            hat = 0.5 * mean + 0.5 * np.eye(run.n)
            rolled = hat / hat.sum(-1, keepdims=True) @ rolled
            expected.append(rolled)
        shown = np.asarray(next(c for c in charts(at) if c["data"][0]["type"] == "heatmap")["data"][0]["z"], float)
        np.testing.assert_allclose(shown, expected[-1], rtol=0, atol=2e-6)  # the last layer, the slider's default
        at.radio(key=across_layers_keys.LAYERS_METHOD).set_value("rollout through one head").run()
        at.number_input(key=across_layers_keys.LAYERS_HEAD).set_value(2).run()
        said = " ".join(i.value for i in at.info)  # the layer below, for the head: asked for again
        assert "the rollout below layer 5, which the head reads through, is computed alone" in said, said
        at.button(key=across_layers_keys.LAYERS_START).click().run()
        _clean(at, "across_layers")
        shown = np.asarray(next(c for c in charts(at) if c["data"][0]["type"] == "heatmap")["data"][0]["z"], float)
        head = run.layer_rows(run.num_layers - 1)[2].astype(np.float64)
        np.testing.assert_allclose(shown, head @ expected[-2], rtol=0, atol=2e-6)


def test_a_long_rollout_of_every_layer_says_its_cost_and_waits_for_a_click(monkeypatch):
    """Every layer's rollout within the budget, but long (every rollout counts as long here): the page says what
    it costs and draws nothing until the click; then each layer picked is drawn from it without asking again."""
    monkeypatch.setattr(cost_prompt, "ASK_ABOVE_S", 0.0)
    at = start_app()
    at.text_area(key="text").input(TEXT).run()
    run = at.session_state[keys.CURRENT].run
    open_page(at, "across_layers")
    _clean(at, "across_layers")
    said = " ".join(i.value for i in at.info)
    assert "Rollout multiplies the head mean of each of the 6 layers" in said and "takes about" in said, said
    assert not [c for c in charts(at) if c["data"] and c["data"][0]["type"] == "heatmap"]
    at.button(key=across_layers_keys.LAYERS_START).click().run()
    rolled = metrics.rollout(run)
    for layer in (run.num_layers - 1, 2):
        at.slider(key=across_layers_keys.LAYERS_LAYER).set_value(layer).run()
        _clean(at, "across_layers")
        assert not [i.value for i in at.info if "Rollout multiplies" in i.value]  # accepted once for this text
        shown = np.asarray(next(c for c in charts(at) if c["data"][0]["type"] == "heatmap")["data"][0]["z"], float)
        np.testing.assert_allclose(shown, rolled[layer], rtol=0, atol=1e-6)


def test_a_slow_comparison_says_its_cost_and_waits_for_a_click(monkeypatch):
    monkeypatch.setenv("MHA_VIZ_DENSE_MB", "0")
    for module in (similarity_page, cost_prompt):  # every comparison counts as slow
        monkeypatch.setattr(module, "ASK_ABOVE_S", 0.0)
    with head_rows.forbid_dense():
        at = start_app()
        at.text_area(key="text").input(TEXT).run()
        open_page(at, "similarity")
        _clean(at, "similarity")
        said = " ".join(i.value for i in at.info)
        assert "every pair of the 72 heads" in said and "recomputed once" in said and "takes about" in said, said
        assert not [c for c in charts(at) if c["data"] and c["data"][0]["type"] == "heatmap"]  # nothing computed yet
        at.button(key=similarity_keys.SIM_START).click().run()
        _clean(at, "similarity")
        assert [c for c in charts(at) if c["data"] and c["data"][0]["type"] == "heatmap"]
        at.selectbox(key=similarity_keys.SIM_KIND).set_value("cosine").run()
        assert at.button(key=similarity_keys.SIM_START)  # another measure: asked again
        open_page(at, "compare")  # two long runs compared head by head: asked first too
        _clean(at, "compare")
        assert "Comparing the two runs head by head" in " ".join(i.value for i in at.info)
        assert not charts(at)
        at.button(key=compare_keys.CMP_START).click().run()
        _clean(at, "compare")
        assert charts(at) and not run_is_dense(at)
        # the estimate is gone once its result is on the page (issue 90: it stayed on screen)
        assert not [i.value for i in at.info if "takes about" in i.value]
        assert not [b for b in at.button if b.label.startswith("Start (about")]


def test_the_comparisons_estimate_follows_the_basis_it_will_compare_on(monkeypatch):
    """Issue 90: a 4,893-token text against a short sentence B was estimated from reading every head of both (64 s)
    and took 6.6 s: texts of different lengths and word counts compare by head metrics, which reads no row. The
    estimate reads the rows only where `compare` then does (the same tokens, or the same words)."""
    import mha_viz
    from mha_viz.budget.seconds import read_seconds
    from mha_viz.features.compare.cost import COMPARE_X, compare_seconds

    monkeypatch.setenv("MHA_VIZ_DENSE_MB", "0")
    model = mha_viz.load_model("minilm", device="cpu")
    a, b, other = (mha_viz.analyze(model, t) for t in (TEXT, TEXT.replace("tired", "wide"), "Another sentence."))
    assert not a.is_dense and read_seconds(a) > 0
    assert mha_viz.compare(a, b).kind == "tokens"
    assert compare_seconds(a, b) == pytest.approx(COMPARE_X * (read_seconds(a) + read_seconds(b)))
    assert mha_viz.compare(a, other).kind == "metrics" and compare_seconds(a, other) == 0.0


def run_is_dense(at) -> bool:
    return at.session_state[keys.CURRENT].run.is_dense


def test_a_run_held_whole_is_not_served_once_the_setting_asks_for_rows(monkeypatch):
    """The server's cache files a run under MHA_VIZ_DENSE_MB too: the same text run densely first (by this or
    another test in the process) must not come back when the setting makes it a long run."""
    at = start_app()
    at.text_area(key="text").input(TEXT).run()
    assert at.session_state[keys.CURRENT].run.is_dense
    monkeypatch.setenv("MHA_VIZ_DENSE_MB", "0")
    at = start_app()
    at.text_area(key="text").input(TEXT).run()
    assert not at.session_state[keys.CURRENT].run.is_dense
