"""The *Heads behind a prediction* page through AppTest: on toy-induction's preset its grids equal
direct logit attribution and patching computed here, a clicked or picked head opens its panel (its
position patching equal to patching one position at a time), the CSV holds both grids, and every
refusal is a message with the user's inputs kept."""

from __future__ import annotations

import numpy as np
import pytest

import mha_viz
from mha_viz.budget import capture_budget
from mha_viz.export import shared_controls
from mha_viz.features.prediction import controls as prediction_keys
from mha_viz.features.prediction import figures as attribution_figures
from mha_viz.interventions import ablation, attribution, prediction
from mha_viz.ui.kit import keys
from mha_viz.ui.shell.sidebar import OTHER
from tests.app.helpers import chart_title, charts, open_page, shown, start_app, titled

pytestmark = pytest.mark.model




def _z(chart) -> np.ndarray:
    return np.array(next(d["z"] for d in chart["data"] if d.get("type") == "heatmap"), dtype=float)


def _page(model: str | None = None):
    at = start_app()
    if model:
        at.selectbox(key=keys.MODEL_CHOICE).set_value(model).run()
    open_page(at, "prediction")
    assert not at.exception, at.exception
    return at


def _messages(at) -> str:
    return shown(" ".join(m.value for m in [*at.error, *at.info, *at.warning]))


def test_toy_induction_preset_finds_the_induction_heads():
    at = _page("toy-induction")
    at.selectbox(key=keys.PRED_PRESET).set_value(prediction.INDUCTION.name).run()
    assert at.text_area(key=keys.TEXT).value == prediction.INDUCTION.clean  # the sidebar's text is the clean one
    assert at.text_area(key=shared_controls.PRED_CORRUPTED).value == prediction.INDUCTION.corrupted
    assert [t.value for t in at.text] == [prediction.INDUCTION.clean]  # shown as plain text, as typed
    at.button(key=prediction_keys.PRED_GO).click().run()
    assert not at.exception and not at.error, (at.exception, [e.value for e in at.error])
    toy = mha_viz.load_model("toy-induction", device="cpu")
    clean, corrupted = prediction.INDUCTION.clean, prediction.INDUCTION.corrupted
    est = attribution.estimate_positions(toy, clean, corrupted)
    dla = attribution.direct_logit(toy, clean, est.answer, est.wrong)
    # the estimate first: no real patching, no scatter, until asked for
    np.testing.assert_allclose(_z(titled(at, "Estimated restored fraction")), est.values.sum(-1), atol=1e-5)
    np.testing.assert_allclose(_z(titled(at, "Direct logit attribution")), dla.per_head, atol=1e-5)
    assert not any(chart_title(c).startswith(("Restored fraction", "Estimate against")) for c in charts(at))
    assert "attribution patching" in shown(" ".join(c.value for c in at.caption))
    grid = titled(at, "Estimated restored fraction")["data"][0]
    assert grid["zmin"] == -grid["zmax"]  # diverging, centred at 0
    # the panel opens on the head the estimate puts first: an induction head of layer 1
    layer, head = at.session_state[prediction_keys.PRED_LAYER], at.session_state[prediction_keys.PRED_HEAD]
    assert (layer, head) == np.unravel_index(int(np.argmax(est.values.sum(-1))), (2, toy.num_heads)) and layer == 1
    # one layer's estimate by head and position
    at.selectbox(key=prediction_keys.PRED_POS_LAYER).set_value(0).run()
    np.testing.assert_allclose(_z(titled(at, "Layer 0: estimated restored fraction by head and patched")),
                               est.values[0], atol=1e-5)

    at.button(key=prediction_keys.PRED_REAL_GO).click().run()  # real patching, beside the estimate
    assert not at.exception and not at.error, (at.exception, [e.value for e in at.error])
    want = attribution.patch_heads(toy, clean, corrupted)
    np.testing.assert_allclose(_z(titled(at, "Restored fraction")), want.restored, atol=1e-5)
    np.testing.assert_allclose(_z(titled(at, "Estimated restored fraction")), est.values.sum(-1), atol=1e-5)
    agree = attribution.agreement(est.values.sum(-1), want.restored)
    scatter = titled(at, "Estimate against real patching")
    assert f"Pearson r = {agree.pearson:.3f}" in chart_title(scatter)
    assert f"Spearman ρ = {agree.spearman:.3f}" in chart_title(scatter)
    heads = next(d for d in scatter["data"] if d.get("mode") == "markers")
    np.testing.assert_allclose(np.array(heads["x"], dtype=float), want.restored.ravel(), atol=1e-5)
    np.testing.assert_allclose(np.array(heads["y"], dtype=float), est.values.sum(-1).ravel(), atol=1e-5)
    assert agree.differ.any()  # the toy's saturated induction heads: the previous-token head is missed
    for title in ("Restored fraction", "Estimated restored fraction"):  # the heads that differ, ringed on both
        rings = [d for d in titled(at, title)["data"] if d.get("name") == attribution_figures.MARK]
        assert rings and sorted(zip(rings[0]["y"], rings[0]["x"])) == sorted(zip(*np.nonzero(agree.differ)))
    count = int(agree.differ.sum())
    assert (f"{count} heads differ" if count > 1 else "1 head differs") in _messages(at)
    assert at.session_state[prediction_keys.PRED_LAYER] == layer  # the opened head stays
    # another head, picked: its attention in both runs, value-weighted, its tokens, patching by position
    at.selectbox(key=prediction_keys.PRED_LAYER).set_value(0).run()
    at.selectbox(key=prediction_keys.PRED_HEAD).set_value(2).run()
    assert not at.exception and not at.error
    titles = [chart_title(c) for c in charts(at)]
    assert sum(t.startswith("Layer 0, head 2") for t in titles) == 5, titles  # both runs, weighted, tokens, bars
    assert any("value-weighted" in t for t in titles)
    bars = titled(at, "Layer 0, head 2 patched at one position")
    by_pos = attribution.patch_positions(toy, clean, corrupted, 0, 2)
    drawn = next(t for t in bars["data"] if t["name"] == "patched for real")
    np.testing.assert_allclose(np.array(drawn["y"], dtype=float), by_pos.values, atol=1e-5)
    swatch = {t["name"]: t["marker"]["color"] for t in bars["data"] if t["name"].startswith("patched for real:")}
    colours = [swatch["patched for real: restores"] if v >= 0 else swatch["patched for real: works against"]
               for v in drawn["y"]]
    assert drawn["marker"]["color"] == colours  # each bar in its sign's legend colour (issue 90)
    estimate = next(t for t in bars["data"] if t["name"] == "estimate")
    np.testing.assert_allclose(np.array(estimate["y"], dtype=float), est.values[0, 2], atol=1e-5)
    labels = [b.proto.label for b in at.get("download_button")]
    assert "Download the grids (CSV)" in labels and "Download the estimate by position (CSV)" in labels
    expl = prediction.patch(toy, prediction.explain(toy, clean, corrupted), clean, corrupted)
    csv = expl.table()
    assert list(csv.columns) == ["layer", "head", "direct_logit_attribution", "estimated_fraction", "restored_fraction"]
    np.testing.assert_allclose(csv["restored_fraction"].to_numpy().reshape(want.restored.shape), want.restored,
                               atol=1e-5)
    by_position = expl.position_table()
    assert len(by_position) == est.values.size
    np.testing.assert_allclose(by_position["estimated_fraction"].to_numpy().reshape(est.values.shape), est.values,
                               atol=1e-6)
    assert list(by_position.query("layer == 1 and head == 0")["token"]) == list(expl.corrupted.tokens)


def test_cancelled_real_patching_keeps_the_estimate():
    at = _page("toy-induction")
    at.selectbox(key=keys.PRED_PRESET).set_value(prediction.INDUCTION.name).run()
    at.button(key=prediction_keys.PRED_GO).click().run()
    key = at.session_state[prediction_keys.PRED_RESULT][0]
    at.session_state[prediction_keys.PRED_REAL_RUNNING] = key  # as a run stopped by Cancel leaves it
    at.run()
    assert "Patching was cancelled; what was found before it is kept" in _messages(at)
    assert titled(at, "Estimated restored fraction") and not any(
        chart_title(c).startswith("Restored fraction") for c in charts(at))
    assert at.text_area(key=shared_controls.PRED_CORRUPTED).value == prediction.INDUCTION.corrupted
    # stopped because the user typed a new corrupted text: no word about a kept estimate, no old result
    at.session_state[prediction_keys.PRED_REAL_RUNNING] = key
    at.text_area(key=shared_controls.PRED_CORRUPTED).input("z x c v b n m k l q w e r t y u i").run()
    assert "Patching was cancelled" not in _messages(at)
    assert not any(chart_title(c).startswith(("Estimated", "Restored", "Direct")) for c in charts(at))
    assert at.button(key=prediction_keys.PRED_GO)  # a new pair waits for its own button
    at.session_state[prediction_keys.PRED_RUNNING] = "a stopped estimate"
    at.run()
    assert "The estimate was cancelled; nothing was kept" in _messages(at)


@pytest.mark.parametrize("corrupted, answer, wrong, says", [
    ("q w e", "", "", "same number of tokens"),
    (prediction.INDUCTION.clean, "o", "z", "same logit difference"),
    (prediction.INDUCTION.corrupted, "o", "o", "both 'o'"),
    (prediction.INDUCTION.corrupted, "o p", "", "give a single token"),
    ("", "", "", "Type a corrupted text"),
])
def test_what_cannot_be_patched_is_a_message_and_the_inputs_stay(corrupted, answer, wrong, says):
    at = _page("toy-induction")
    at.text_area(key=keys.TEXT).input(prediction.INDUCTION.clean).run()
    at.text_area(key=shared_controls.PRED_CORRUPTED).input(corrupted).run()
    at.text_input(key=shared_controls.PRED_ANSWER).input(answer).run()
    at.text_input(key=shared_controls.PRED_WRONG).input(wrong).run()
    at.button(key=prediction_keys.PRED_GO).click().run()
    assert not at.exception, at.exception
    assert says in _messages(at), _messages(at)
    assert at.text_area(key=shared_controls.PRED_CORRUPTED).value == corrupted  # nothing the user typed is lost
    assert at.text_input(key=shared_controls.PRED_ANSWER).value == answer
    assert not any(chart_title(c).startswith(("Restored", "Estimated")) for c in charts(at))


def test_an_encoder_gets_a_message_not_a_grid():
    at = _page()  # minilm, the default
    assert "is an encoder" in _messages(at) and "direct logit attribution is not defined" in _messages(at)
    assert not at.get("plotly_chart")


def test_an_encoder_decoder_gets_the_pages_message(t5_dir):
    at = start_app()
    at.selectbox(key=keys.MODEL_CHOICE).set_value(OTHER).run()
    at.text_input(key=keys.MODEL_OTHER).input(str(t5_dir)).run()
    open_page(at, "prediction")
    assert not at.exception and "encoder–decoder" in _messages(at)


def test_over_the_memory_budget_is_refused_before_anything_runs(monkeypatch):
    # the sidebar's capture of the 18 tokens (10 KB) and both runs for the panel (21 KB) fit; a batch of
    # 4 sequences more, for real patching (41 KB), does not
    monkeypatch.setattr(capture_budget, "capture_budget", lambda: 30_000)
    at = _page("toy-induction")
    at.selectbox(key=keys.PRED_PRESET).set_value(prediction.INDUCTION.name).run()
    at.button(key=prediction_keys.PRED_GO).click().run()
    assert not at.exception and not at.error
    assert titled(at, "Estimated restored fraction")
    assert not at.exception  # real patching would not fit: said in place of its button, before any work
    assert "Patching every head of toy-induction" in _messages(at) and "texts of at most" in _messages(at)
    assert not [b for b in at.button if b.key == prediction_keys.PRED_REAL_GO]
    assert titled(at, "Estimated restored fraction")  # what was found before stays
    assert not any(chart_title(c).startswith("Restored fraction") for c in charts(at))


def test_a_long_text_is_folded_and_refused_before_the_button_with_the_length_that_fits(monkeypatch):
    """Issue 90: a 17,850-character clean text was printed inline, pushing the corrupted text 3,240 px down, and
    *Find the heads* refused after 6.6 s of work without saying what would fit. Now the text is folded, the
    refusal stands where the button would, and it names the longest text that fits: both texts' attention (2 · L ·
    H · n² · 4 bytes) within the budget at that length and over it one token longer, computed here."""
    budget = 200_000  # toy-induction's 64 tokens (its context): the sidebar's run fits (131 KB), both texts do not
    monkeypatch.setattr(capture_budget, "capture_budget", lambda: budget)
    text = "a s d f g h j k l " * 40
    at = _page("toy-induction")
    at.text_area(key=keys.TEXT).input(text).run()
    open_page(at, "prediction")
    at.text_area(key=shared_controls.PRED_CORRUPTED).input(text.replace("a", "q", 1)).run()
    assert not at.exception and not at.error
    folded = next(e for e in at.expander if "Clean text" in e.label)
    assert [t.value for t in folded.text] == [text.strip()] and [t.value for t in at.text].count(text.strip()) == 1
    assert not [b for b in at.button if b.key == prediction_keys.PRED_GO]
    said = _messages(at)
    assert "Finding the heads of toy-induction" in said, said
    fits = int(said.split("texts of at most ")[1].split(" tokens")[0].replace(",", ""))
    toy = mha_viz.load_model("toy-induction", device="cpu")
    assert 2 * toy.attention_bytes(fits) <= budget < 2 * toy.attention_bytes(fits + 1)
    assert at.text_area(key=shared_controls.PRED_CORRUPTED).value == text.replace("a", "q", 1)  # nothing lost


def test_without_room_for_the_backward_pass_real_patching_is_still_offered(monkeypatch):
    """The estimate's backward pass would not fit: the page says so, draws direct logit attribution,
    and patches for real on request (it keeps no gradients)."""
    monkeypatch.setattr(ablation, "gradient_bytes", lambda model, n, **_: 2**50)
    at = _page("toy-induction")
    at.selectbox(key=keys.PRED_PRESET).set_value(prediction.INDUCTION.name).run()
    at.button(key=prediction_keys.PRED_GO).click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert "No estimate: Estimating every head of toy-induction" in _messages(at)
    assert titled(at, "Direct logit attribution")
    assert not any(chart_title(c).startswith("Estimated") for c in charts(at))
    at.button(key=prediction_keys.PRED_REAL_GO).click().run()
    assert not at.exception and not at.error
    toy = mha_viz.load_model("toy-induction", device="cpu")
    want = attribution.patch_heads(toy, prediction.INDUCTION.clean, prediction.INDUCTION.corrupted)
    np.testing.assert_allclose(_z(titled(at, "Restored fraction")), want.restored, atol=1e-5)
    assert not any(chart_title(c).startswith(("Estimated", "Estimate against")) for c in charts(at))
    assert (at.session_state[prediction_keys.PRED_LAYER], at.session_state[prediction_keys.PRED_HEAD]) == (
        1, int(np.argmax(want.restored[1])))


def test_a_gpt2_family_folder_gets_both_grids(gpt2_dir):
    """A random-init GPT-2 saved to a folder (the path GPT-2 weights take here): the page patches
    it with the user's own pair, each token defaulting to each run's prediction."""
    clean, corrupted = "one two three four five", "one two four three five"
    at = start_app()
    at.selectbox(key=keys.MODEL_CHOICE).set_value(OTHER).run()
    at.text_input(key=keys.MODEL_OTHER).input(str(gpt2_dir)).run()
    at.text_area(key=keys.TEXT).input(clean).run()
    open_page(at, "prediction")
    assert [p.name for p in prediction.presets(mha_viz.load_model(gpt2_dir, device="cpu"))] == [
        prediction.IOI.name, prediction.FACTUAL.name]
    at.text_area(key=shared_controls.PRED_CORRUPTED).input(corrupted).run()
    at.button(key=prediction_keys.PRED_GO).click().run()
    at.button(key=prediction_keys.PRED_REAL_GO).click().run()
    assert not at.exception and not at.error, (at.exception, [e.value for e in at.error])
    model = mha_viz.load_model(gpt2_dir, device="cpu")
    want = attribution.patch_heads(model, clean, corrupted)
    np.testing.assert_allclose(_z(titled(at, "Restored fraction")), want.restored, atol=1e-5)
    dla = attribution.direct_logit(model, clean, want.answer, want.wrong)
    np.testing.assert_allclose(_z(titled(at, "Direct logit attribution")), dla.per_head, atol=1e-5)
