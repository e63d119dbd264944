"""Lean capture: the model runs with fused attention, and the probabilities recomputed from
the recorded layer inputs equal eager capture (BERT-family, GPT-2, Llama/SmolLM2 with RoPE and
grouped-query attention; Hugging Face's attention and ours)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import mha_viz
import mha_viz_models
from tests.helpers import byte_bpe_tokenizer

TEXT = "The animal didn't cross the street because it was too tired. It slept."


def _check(model, ids, mask=None, atol=1e-5):
    eager = model.capture(ids, mask)
    lean = model.capture(ids, mask, lean=True)
    assert lean.attentions is None and len(lean.layer_inputs) == model.num_layers
    for layer in range(model.num_layers):
        torch.testing.assert_close(model.recompute(lean, layer), eager.attentions[layer], atol=atol, rtol=0)
    torch.testing.assert_close(lean.hidden, eager.hidden, atol=1e-4, rtol=1e-4)
    for z_lean, z_eager in zip(lean.head_outputs, eager.head_outputs):
        torch.testing.assert_close(z_lean, z_eager, atol=1e-4, rtol=1e-4)
    again = model.capture(ids, mask)  # eager attention is back after a lean run
    assert again.attentions is not None
    return eager, lean


@pytest.mark.model
@pytest.mark.parametrize("name", ["minilm", "minilm_ours", "smollm2", "smollm2_ours"])
def test_bundled_models(request, name):
    model = request.getfixturevalue(name)
    ids = model.tokenizer(TEXT, return_tensors="pt")["input_ids"]
    eager, lean = _check(model, ids)
    # a subset of heads is the same subset of the full layer (GQA: heads of different KV groups)
    heads = [0, model.num_heads - 1]
    torch.testing.assert_close(model.recompute(lean, 1, heads), eager.attentions[1][:, heads], atol=1e-5, rtol=0)


@pytest.mark.parametrize("fixture,local", [("gpt2_dir", False), ("gpt2_dir", True), ("bert_dir", False),
                                           ("bert_dir", True), ("llama_dir", False), ("llama_dir", True)])
def test_random_models_with_right_padding(request, fixture, local):
    model = mha_viz.load_model(str(request.getfixturevalue(fixture)), device="cpu", local_attention=local)
    enc = model.tokenizer(["A quick brown fox jumps over the lazy dog!", "Hello world"],
                          return_tensors="pt", padding=True)
    assert (enc["attention_mask"] == 0).any()  # the second row is padded on the right
    _check(model, enc["input_ids"], enc["attention_mask"])


@pytest.mark.model
@pytest.mark.parametrize("name", ["smollm2", "minilm_ours"])
def test_overview_one_head_at_a_time_equals_pooled_eager_capture(request, name):
    """The long-text overview (lean capture, one head's matrix at a time) gives the same
    thumbnails as pooling the full eager capture."""
    from mha_viz.views import detail

    model = request.getfixturevalue(name)
    text = "The keys to the old wooden cabinet in the hall are missing again. " * 12
    seen = []
    ov = mha_viz.views.overview(model, text, thumb=32, progress=lambda f, m: seen.append(f))
    run = mha_viz.analyze(model, text, max_tokens=model.max_positions)
    assert ov.tokens == run.tokens and ov.n > 100
    assert ov.pooled.shape == (model.num_layers, model.num_heads, 32, 32)
    np.testing.assert_allclose(ov.pooled, detail.max_pool(run.attentions, 32), atol=1e-5)
    assert seen[0] == 0.0 and seen[-1] == 1.0 and len(seen) == model.num_layers + 1


def test_overview_reaches_past_the_app_cap(gpt2_dir):
    """The overview takes the model's whole context (here 64 positions), not analyze's cap."""
    model = mha_viz.load_model(str(gpt2_dir), device="cpu")
    ov = mha_viz.views.overview(model, "hello world " * 100)
    assert ov.n == model.max_positions == 64 and ov.num_input_tokens > 64


@pytest.mark.model
def test_analyze_lean_equals_eager(smollm2):
    """analyze(lean=True) fills the same (L, H, n, n) array as the eager path, within 1e-5."""
    lean = mha_viz.analyze(smollm2, TEXT, lean=True)
    eager = mha_viz.analyze(smollm2, TEXT, lean=False)
    assert lean.tokens == eager.tokens
    np.testing.assert_allclose(lean.attentions, eager.attentions, atol=1e-5)
    np.testing.assert_allclose(lean.head_outputs, eager.head_outputs, atol=1e-4)


@pytest.mark.parametrize("kind", ["gpt_bigcode", "openai-gpt"])
def test_relatives_with_c_attn_are_not_taken_for_gpt2(tmp_path, kind):
    """GPTBigCode (multi-query Linear) and OpenAI-GPT have c_attn/c_proj but not GPT-2's
    layout: their attention is shown, head outputs and weights are said to be unavailable."""
    from transformers import GPTBigCodeConfig, GPTBigCodeForCausalLM, OpenAIGPTConfig, OpenAIGPTLMHeadModel

    tok = byte_bpe_tokenizer()
    if kind == "gpt_bigcode":
        model = GPTBigCodeForCausalLM(GPTBigCodeConfig(vocab_size=len(tok), n_positions=64, n_embd=32,
                                                       n_layer=2, n_head=4, multi_query=True))
    else:
        model = OpenAIGPTLMHeadModel(OpenAIGPTConfig(vocab_size=len(tok), n_positions=64, n_embd=32,
                                                     n_layer=2, n_head=4))
    model.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    loaded = mha_viz.load_model(str(tmp_path), device="cpu")
    assert not loaded.has_head_outputs
    run = mha_viz.analyze(loaded, "hello world, hello heads")
    assert run.attentions.shape[:2] == (2, 4) and run.head_outputs is None
    np.testing.assert_allclose(run.attentions.sum(-1), 1.0, atol=1e-5)


@pytest.mark.model
def test_random_baseline_is_eager_even_if_the_model_is_mid_lean_capture():
    """The twin copies the config under the model's lock and always uses eager attention."""
    model = mha_viz.load_model("minilm", device="cpu")
    model.hf_model.set_attn_implementation("sdpa")  # as during a lean capture
    twin = mha_viz_models.random_twin(model)
    model.hf_model.set_attn_implementation("eager")
    assert twin.hf_model.config._attn_implementation == "eager"
    assert mha_viz.analyze(twin, TEXT).attentions.shape[0] == 6


@pytest.mark.model
def test_some_layers_equal_those_rows_of_a_full_capture(minilm):
    """analyze(layers=...) holds only those layers, equal to the same rows of a full capture;
    metrics follow the model's layer numbers and weights; rollout refuses a run with gaps."""
    from mha_viz import metrics

    full = mha_viz.analyze(minilm, TEXT)
    part = mha_viz.analyze(minilm, TEXT, layers=[4, 1, 4])
    assert part.layer_ids == [1, 4] and part.model_layers == 6 and part.partial
    assert part.attentions.shape == (2, 12, full.n, full.n)
    np.testing.assert_allclose(part.attentions, full.attentions[[1, 4]], atol=1e-5)
    np.testing.assert_allclose(part.head_outputs, full.head_outputs[[1, 4]], atol=1e-5)
    weights = minilm.head_weights()
    t_full, t_part = metrics.head_table(full, weights), metrics.head_table(part, weights)
    rows = t_full[t_full.layer.isin([1, 4])].reset_index(drop=True)
    assert t_part.layer.tolist() == rows.layer.tolist()
    np.testing.assert_allclose(t_part.output_norm, rows.output_norm, rtol=1e-4)
    qk_full = metrics.head_similarity(full, "qk", weights=weights)
    idx = np.r_[12:24, 48:60]  # layers 1 and 4
    np.testing.assert_allclose(metrics.head_similarity(part, "qk", weights=weights), qk_full[np.ix_(idx, idx)],
                               atol=1e-5)
    with pytest.raises(ValueError, match="layers 1, 4 of 6 only"):
        metrics.rollout(part)
    first = mha_viz.analyze(minilm, TEXT, layers=[0, 1, 2])
    np.testing.assert_allclose(metrics.rollout(first), metrics.rollout(full)[:3], atol=1e-5)
    with pytest.raises(mha_viz.InputError, match="between 0 and 5"):
        mha_viz.analyze(minilm, TEXT, layers=[6])
