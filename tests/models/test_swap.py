"""`local_attention=True`: our MHA inside real models computes what Hugging Face's eager
attention computes — probabilities and final hidden states within 1e-5, padded batches too."""

from __future__ import annotations

import pytest
import torch

import mha_viz
from mha_viz_models.families.adapters import BertFamilyAttention, GPT2FamilyAttention, LlamaFamilyAttention

SENTENCES = [
    "The cat sat on the mat.",
    "Attention heads look at tokens; some look back, some look at the start of the text.",
    "Hello world!",
]


def _compare(hf: mha_viz.LoadedModel, ours: mha_viz.LoadedModel, adapter_type, sentences=SENTENCES):
    assert ours.adapters and all(isinstance(a, adapter_type) for a in ours.adapters)
    assert len(ours.adapters) == ours.num_layers
    assert not any(isinstance(a, adapter_type) for a in hf.hf_model.modules())
    tok = hf.tokenizer
    batches = [tok([s], return_tensors="pt") for s in sentences]
    batches.append(tok(sentences, return_tensors="pt", padding=True))  # a padded batch
    for enc in batches:
        h_hf, a_hf, _ = hf.forward(enc["input_ids"], enc["attention_mask"])
        h_us, a_us, _ = ours.forward(enc["input_ids"], enc["attention_mask"])
        valid = enc["attention_mask"].bool()  # (B, n): compare real tokens, not padding rows
        assert torch.allclose(h_hf[valid], h_us[valid], atol=1e-5, rtol=0)
        rows = valid[:, None, :, None]
        for layer, (x, y) in enumerate(zip(a_hf, a_us)):
            diff = ((x - y).abs() * rows).max().item()
            assert diff <= 1e-5, f"layer {layer}: max difference {diff}"
    # the padded keys get no attention from real queries in our implementation either
    enc = batches[-1]
    _, a_us, _ = ours.forward(enc["input_ids"], enc["attention_mask"])
    pad_keys = ~enc["attention_mask"].bool()
    assert pad_keys.any()
    real_rows = enc["attention_mask"].bool()[:, None, :, None]
    assert (a_us[0] * real_rows * pad_keys[:, None, None, :]).abs().max() == 0


@pytest.mark.model
def test_minilm_real_weights(minilm, minilm_ours):
    assert minilm_ours.implementation.startswith("ours") and minilm.implementation == "Hugging Face eager"
    _compare(minilm, minilm_ours, BertFamilyAttention)


@pytest.mark.model
def test_smollm2_rope_and_gqa(smollm2, smollm2_ours):
    assert smollm2_ours.num_kv_heads == 3 and smollm2_ours.num_heads == 9
    _compare(smollm2, smollm2_ours, LlamaFamilyAttention)


def test_random_gpt2(gpt2_dir):
    hf = mha_viz.load_model(str(gpt2_dir), device="cpu")
    ours = mha_viz.load_model(str(gpt2_dir), device="cpu", local_attention=True)
    assert hf.is_causal and ours.is_causal
    _compare(hf, ours, GPT2FamilyAttention)


def test_random_bert_with_lm_head(bert_dir):
    hf = mha_viz.load_model(str(bert_dir), device="cpu")
    ours = mha_viz.load_model(str(bert_dir), device="cpu", local_attention=True)
    assert type(hf.hf_model).__name__ == "BertForMaskedLM" and not hf.is_causal
    _compare(hf, ours, BertFamilyAttention)
    enc = hf.tokenizer(SENTENCES[:1], return_tensors="pt")
    _, _, out_hf = hf.forward(enc["input_ids"])
    _, _, out_us = ours.forward(enc["input_ids"])
    torch.testing.assert_close(out_hf.logits, out_us.logits, atol=1e-5, rtol=0)


def test_random_llama_gqa(llama_dir):
    hf = mha_viz.load_model(str(llama_dir), device="cpu")
    ours = mha_viz.load_model(str(llama_dir), device="cpu", local_attention=True)
    assert ours.num_kv_heads == 2 and ours.num_heads == 8
    _compare(hf, ours, LlamaFamilyAttention)


@pytest.mark.model
def test_our_weights_are_the_models_weights(minilm_ours):
    """The adapters reuse the trained parameters: changing ours changes the model's."""
    adapter = minilm_ours.adapters[0]
    params = {id(p) for p in minilm_ours.hf_model.parameters()}
    assert id(adapter.mha.w_q.weight) in params and id(adapter.mha.w_o.weight) in params


def test_concurrent_analyses_each_get_their_own_capture(gpt2_dir):
    """Several sessions share one model: each analysis must see only its own tokens' attention."""
    import threading

    ours = mha_viz.load_model(str(gpt2_dir), device="cpu", local_attention=True)
    texts = ["The cat sat.", "Hello world, hello attention, hello heads.", "A quick brown fox jumps."]
    expected = {t: mha_viz.analyze(ours, t).attentions for t in texts}
    results, errors = [], []

    def work(text):
        try:
            for _ in range(5):
                results.append((text, mha_viz.analyze(ours, text).attentions))
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(t,)) for t in texts * 2]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(results) == 30
    for text, att in results:
        assert att.shape == expected[text].shape
        assert (att == expected[text]).all()
