"""Models spread by accelerate (`load_model(..., max_memory=...)`): on the CPU, a device map that
keeps some layers on the CPU and offloads the others to disk (their weights are `meta` until a
forward pass loads them) captures, generates and attributes exactly as the model loaded whole."""

import numpy as np
import pytest
import torch

import mha_viz
import mha_viz_models
from mha_viz.interventions import attribution
from mha_viz_models import ModelLoadError
from tests.helpers import next_token_probs
from tests.tolerance import assert_same_argmax, assert_same_tokens

TEXT = "the quick brown fox jumps over the lazy dog, the quick brown fox"


@pytest.fixture(scope="module")
def whole_and_spread(llama_dir):
    whole = mha_viz.load_model(llama_dir, device="cpu")
    layer_bytes = sum(p.numel() * 4 for p in whole.hf_model.model.layers[0].parameters())
    # room on the CPU for the embeddings and about one layer: the rest goes to disk
    embed = whole.hf_model.get_input_embeddings().weight.numel() * 4
    spread = mha_viz.load_model(llama_dir, max_memory={"cpu": embed + int(1.5 * layer_bytes), "disk": "1GiB"})
    return whole, spread


def test_the_layers_really_are_spread(whole_and_spread):
    _, spread = whole_and_spread
    assert spread.placement == ("cpu", "disk")
    assert "placed by accelerate" in spread.facts()["device"]
    offloaded = [m for m, _ in spread.attention_modules if any(p.device.type == "meta" for p in m.parameters())]
    assert offloaded, "no attention module was offloaded: the test would prove nothing"


def test_capture_of_a_spread_model_equals_the_whole_one(whole_and_spread):
    whole, spread = whole_and_spread
    for lean in (False, True):
        a, b = mha_viz.analyze(whole, TEXT, lean=lean), mha_viz.analyze(spread, TEXT, lean=lean)
        np.testing.assert_allclose(b.attentions, a.attentions, atol=1e-6)
        np.testing.assert_allclose(b.head_outputs, a.head_outputs, atol=1e-5)
        np.testing.assert_allclose(b.value_norms, a.value_norms, rtol=1e-5, atol=1e-6)
    # weights read from offloaded layers equal the whole model's
    for k, w in whole.head_weights().items():
        torch.testing.assert_close(spread.head_weights()[k], w)


def test_generation_and_attribution_of_a_spread_model(whole_and_spread):
    whole, spread = whole_and_spread
    g1 = mha_viz.generate(whole, "the quick", max_new_tokens=4, stop_at_eos=False)
    g2 = mha_viz.generate(spread, "the quick", max_new_tokens=4, stop_at_eos=False)
    # probabilities within 1e-6, as the attention's: two tokens may trade the first place within twice that
    # (there the two texts part: what follows is not compared)
    near = 2e-6
    agree = assert_same_tokens([s.token_id for s in g1.steps], [s.token_id for s in g2.steps],
                               next_token_probs(whole, g1.run.token_ids[:g1.num_prompt_tokens]), near, "spread")
    n = g1.num_prompt_tokens + agree
    np.testing.assert_allclose(g2.run.attentions[..., :n, :n], g1.run.attentions[..., :n, :n], atol=1e-6)
    d1 = attribution.direct_logit(whole, TEXT)
    assert_same_argmax(attribution.direct_logit(spread, TEXT).target,  # the spread model's own prediction
                       next_token_probs(whole, mha_viz.tokenize(whole, TEXT).ids)([]), near, "target")
    d2 = attribution.direct_logit(spread, TEXT, target=d1.target)
    np.testing.assert_allclose(d2.per_head, d1.per_head, rtol=1e-4, atol=1e-5)


def test_bad_max_memory_is_a_message(llama_dir):
    with pytest.raises(ModelLoadError, match="unknown device 'tpu'"):
        mha_viz.load_model(llama_dir, max_memory={"tpu": "1GiB"})
    with pytest.raises(ModelLoadError, match="not a size"):
        mha_viz.load_model(llama_dir, max_memory={"cpu": "lots"})
    with pytest.raises(ModelLoadError, match="GPU 3"):
        mha_viz.load_model(llama_dir, max_memory={3: "1GiB", "cpu": "1GiB"})


def test_what_a_spread_model_cannot_do_is_a_message(llama_dir, whole_and_spread):
    whole, spread = whole_and_spread
    layer_bytes = sum(p.numel() * 4 for p in whole.hf_model.model.layers[0].parameters())
    embed = whole.hf_model.get_input_embeddings().weight.numel() * 4
    with pytest.raises(ModelLoadError,
                       match="Our MHA cannot stand in for the layers .*offloaded to the CPU or to disk"):
        mha_viz.load_model(llama_dir, local_attention=True,
                           max_memory={"cpu": embed + int(1.5 * layer_bytes), "disk": "1GiB"})
    with pytest.raises(ModelLoadError, match="spread over cpu \\+ disk.*no random baseline"):
        mha_viz_models.random_twin(spread)


def test_offloaded_layers_are_not_kept_loaded(whole_and_spread):
    """A layer accelerate keeps on disk is read through a copy made for that use: after an analysis
    no copy stays behind (they would add up beyond max_memory), and the model still runs."""
    _, spread = whole_and_spread
    mha_viz.analyze(spread, TEXT, lean=True)
    offloaded = [i for i, (m, _) in enumerate(spread.attention_modules)
                 if any(p.device.type == "meta" for p in m.parameters())]
    assert offloaded
    assert all(spread.layer_adapter(i) is not spread.layer_adapter(i) for i in offloaded)  # made per use, not kept
    # the per-head weights are kept: accelerate's new meta parameters around a forward change no weight
    before = spread.head_weights()
    mha_viz.analyze(spread, TEXT)
    assert spread.head_weights() is before
    assert all(p.device.type == "meta" for i in offloaded for p in spread.attention_modules[i][0].parameters())
