"""`mha_viz.analyze` and `AttentionRun`: shapes, distributions, causal zeros, tokens."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import mha_viz
from mha_viz import AttentionRun

TEXT = "The cat sat on the mat. Then the cat slept."


def _check_run(run: AttentionRun, model):
    L, H, n = model.num_layers, model.num_heads, run.n
    assert run.attentions.shape == (L, H, n, n) and run.attentions.dtype == np.float32
    np.testing.assert_allclose(run.attentions.sum(-1), 1.0, atol=1e-5)
    ids = model.tokenizer(TEXT)["input_ids"]
    assert run.token_ids == ids
    assert run.raw_tokens == model.tokenizer.convert_ids_to_tokens(ids)
    assert len(run.tokens) == len(ids) == len(run.word_ids) == len(run.special_mask)
    assert run.num_kv_heads == model.num_kv_heads and run.model_name == model.name
    assert not any(t.startswith(("Ġ", "▁", "##")) for t in run.tokens)


@pytest.mark.model
def test_analyze_minilm(minilm):
    run = mha_viz.analyze(minilm, TEXT)
    _check_run(run, minilm)
    assert not run.is_causal
    assert run.tokens[0] == "[CLS]" and run.tokens[-1] == "[SEP]"
    assert run.special_mask[0] and run.special_mask[-1] and not any(run.special_mask[1:-1])
    # bidirectional: the first query attends to later keys somewhere in the model
    assert run.attentions[:, :, 0, 1:].max() > 0.05
    assert run.tokens[1:4] == ["the", "cat", "sat"]


@pytest.mark.model
def test_analyze_smollm2_is_exactly_causal(smollm2):
    run = mha_viz.analyze(smollm2, TEXT)
    _check_run(run, smollm2)
    assert run.is_causal and run.num_kv_heads == 3 and run.num_heads == 9
    upper = np.triu(np.ones((run.n, run.n), dtype=bool), 1)
    assert (run.attentions[:, :, upper] == 0).all()  # exactly zero, not merely small
    assert (run.attentions[:, :, 0, 0] == 1).all()
    assert run.tokens[:3] == ["The", "␣cat", "␣sat"]  # a leading space shown: "␣cat"


@pytest.mark.model
def test_analyze_with_our_attention_matches(minilm, minilm_ours):
    a = mha_viz.analyze(minilm, TEXT).attentions
    b = mha_viz.analyze(minilm_ours, TEXT).attentions
    np.testing.assert_allclose(a, b, atol=1e-5)


@pytest.mark.model
def test_long_text_is_truncated_with_count(minilm):
    text = "word " * 700
    run = mha_viz.analyze(minilm, text)
    assert run.n == minilm.max_positions == 512
    assert run.truncated and run.num_input_tokens == 702  # 700 words + [CLS] + [SEP]
    assert run.tokens[-1] == "[SEP]"
    capped = mha_viz.analyze(minilm, text, max_tokens=40)
    assert capped.n == 40 and capped.truncated


@pytest.mark.model
@pytest.mark.parametrize("text", ["", "   ", "\n\t "])
def test_blank_text_is_an_input_error(minilm, text):
    with pytest.raises(mha_viz.InputError, match="Type a sentence"):
        mha_viz.analyze(minilm, text)


@pytest.mark.model
@pytest.mark.parametrize("text", [
    "😀" * 50, "日本語のテキスト", "שלום עולם", "a\u200bb\u202ec", "x\x00y", "<script>alert(1)</script>",
], ids=["emoji", "cjk", "rtl", "zero-width+override", "nul", "html"])
def test_unusual_text_is_captured(minilm, smollm2, text):
    for model in (minilm, smollm2):
        run = mha_viz.analyze(model, text)
        np.testing.assert_allclose(run.attentions.sum(-1), 1.0, atol=1e-5)
        assert all(t for t in run.tokens)
        assert not any("\u202e" in t or "\u200b" in t or "\x00" in t for t in run.tokens)


@pytest.mark.model
def test_cached_gguf_reload_gives_same_weights(smollm2):
    """The second load reads the safetensors cache; it must hold the GGUF's weights."""
    from transformers import AutoModelForCausalLM

    from mha_viz_models.loading.bundled import BUNDLED

    folder = BUNDLED["smollm2"].locate()
    gguf = next(folder.glob("*.gguf"))
    direct = AutoModelForCausalLM.from_pretrained(folder, gguf_file=gguf.name, dtype=torch.float32)
    cached = smollm2.hf_model.state_dict()
    for name, tensor in direct.state_dict().items():
        assert torch.equal(tensor, cached[name]), name
