"""The neuron view's numbers are the model's own: for every query i, the softmax over the row of
(q_i · k_j sums × scale, causal mask for decoders) reproduces the captured attention
probabilities within 1e-5 — with RoPE (SmolLM2), grouped-query attention, our MHA and
toy-induction."""

from __future__ import annotations

import numpy as np
import pytest

import mha_viz
from mha_viz.views import qk, teaching

TEXT = "The cat sat on the mat because it was warm."
TOY_TEXT = "q w e r t y q w e r t y"


def _check(model, text: str, layer: int, head: int) -> None:
    run = mha_viz.analyze(model, text)
    w = teaching.walkthrough(model, text, layer, head)
    assert w.n == run.n
    for i in range(w.n):
        nv = qk.neuron(w, i, (i * 7) % w.n)
        assert nv.score == pytest.approx(float(nv.q @ nv.k))
        assert nv.score == pytest.approx(float(nv.product.sum()))
        assert nv.scaled == pytest.approx(nv.score * w.scale)
        np.testing.assert_allclose(nv.row_probs, run.attentions[layer, head, i], atol=1e-5)
        assert nv.row_probs.sum() == pytest.approx(1.0)
    assert w.rope == (model.name == "smollm2")  # only the Llama-family model turns q, k by RoPE


@pytest.mark.model
@pytest.mark.parametrize("layer,head", [(0, 0), (3, 7), (5, 11)])
def test_neuron_scores_reproduce_minilm(minilm, layer, head):
    _check(minilm, TEXT, layer, head)


@pytest.mark.model
def test_neuron_scores_reproduce_minilm_with_our_mha(minilm_ours):
    _check(minilm_ours, TEXT, 2, 4)


@pytest.mark.model
@pytest.mark.parametrize("layer,head", [(0, 0), (14, 5), (29, 8)])
def test_neuron_scores_reproduce_smollm2_with_rope_and_gqa(smollm2, layer, head):
    w = teaching.walkthrough(smollm2, TEXT, layer, head)
    assert w.rope and w.kv_head == head // 3 and w.is_causal
    nv = qk.neuron(w, 2, 5)
    assert nv.masked and nv.prob == 0.0  # a later key is hidden from the query
    _check(smollm2, TEXT, layer, head)


@pytest.fixture(scope="module")
def toy():
    return mha_viz.load_model("toy-induction", device="cpu")


@pytest.mark.parametrize("layer,head", [(0, 1), (1, 2)])
def test_neuron_scores_reproduce_toy_induction(toy, layer, head):
    _check(toy, TOY_TEXT, layer, head)


def test_neuron_from_a_model_and_bad_positions(toy):
    nv = qk.neuron(toy, 3, 1, text=TOY_TEXT, layer=1, head=0)
    assert not nv.rope and nv.tokens[3] == "e"
    with pytest.raises(IndexError):
        qk.neuron(toy, 99, 0, text=TOY_TEXT, layer=1, head=0)


@pytest.mark.model
def test_a_window_of_an_encoder_folds_the_keys_on_both_sides(minilm):
    """An encoder's query sees keys before and after a window: they are one term of its softmax, whose score is the
    log-sum-exp of theirs (computed here by hand from the walkthrough's own q and k over the whole text)."""
    run = mha_viz.analyze(minilm, TEXT)
    whole = teaching.walkthrough(minilm, TEXT, 2, 7, size=run.n)
    w = teaching.walkthrough(minilm, TEXT, 2, 7, start=4, size=5)
    assert (w.start, w.n, w.total) == (4, 5, run.n) and whole.outside_scaled is None
    outside = np.r_[0:4, 9:run.n]
    np.testing.assert_allclose(w.outside_scaled, np.log(np.exp(whole.scaled[4:9][:, outside].astype(float)).sum(1)),
                               rtol=1e-5)
    np.testing.assert_allclose(w.probs, run.attentions[2, 7, 4:9, 4:9], atol=1e-6)
    np.testing.assert_allclose(w.outside_probs, run.attentions[2, 7, 4:9][:, outside].sum(1), atol=1e-6)
    for i in range(w.n):
        np.testing.assert_allclose(qk.neuron(w, i, 0).row_probs, run.attentions[2, 7, 4 + i, 4:9], atol=1e-6)
