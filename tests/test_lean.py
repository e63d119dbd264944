"""Lean capture: the model runs with fused attention, and the probabilities recomputed from
the recorded layer inputs equal eager capture (BERT-family, GPT-2, Llama/SmolLM2 with RoPE and
grouped-query attention; Hugging Face's attention and ours)."""

from __future__ import annotations

import pytest
import torch

import mha_viz

pytestmark = pytest.mark.model
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
