"""Loading random-init model folders, and the messages for folders that hold (part of) a model.
The messages for what holds no model at all: tests/unit/test_loading_errors.py."""

from __future__ import annotations

import pytest
import torch

import mha_viz
from mha_viz_models import ModelLoadError


def test_random_gpt2_folder_loads_with_facts(gpt2_dir):
    m = mha_viz.load_model(str(gpt2_dir), device="cpu")
    assert (m.model_type, m.num_layers, m.num_heads, m.num_kv_heads, m.d_model, m.d_k) == ("gpt2", 3, 4, 4, 64, 16)
    assert m.is_causal and m.max_positions == 64 and m.device == torch.device("cpu")
    assert m.num_params == sum(p.numel() for p in m.hf_model.parameters())
    assert m.hf_model.config._attn_implementation == "eager"
    assert next(m.hf_model.parameters()).dtype == torch.float32
    run = mha_viz.analyze(m, "The cat sat on the mat.")
    assert run.is_causal and run.attentions.shape[:2] == (3, 4)
    assert "".join(run.tokens).replace("␣", " ") == "The cat sat on the mat."  # a leading space shows as ␣


def test_folder_with_config_but_no_weights(tmp_path, gpt2_dir):
    (tmp_path / "config.json").write_text((gpt2_dir / "config.json").read_text())
    with pytest.raises(ModelLoadError, match="no weights"):
        mha_viz.load_model(str(tmp_path), device="cpu")


def test_our_attention_refuses_an_architecture_it_cannot_replace(tmp_path, bert_dir):
    from transformers import AutoTokenizer, DebertaV2Config, DebertaV2Model

    config = DebertaV2Config(vocab_size=30522, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                             intermediate_size=64, relative_attention=True, pos_att_type=["c2p", "p2c"])
    DebertaV2Model(config).save_pretrained(tmp_path)
    AutoTokenizer.from_pretrained(bert_dir).save_pretrained(tmp_path)
    hf = mha_viz.load_model(str(tmp_path), device="cpu")  # Hugging Face's attention captures it
    assert mha_viz.analyze(hf, "hello world").attentions.shape[:2] == (1, 2)
    with pytest.raises(ModelLoadError, match="Hugging Face's attention") as refused:
        mha_viz.load_model(str(tmp_path), device="cpu", local_attention=True)
    assert "disentangled attention" in str(refused.value) and "c2p, p2c" in str(refused.value)  # what is missing


def _save(folder, model_cls, config, tokenizer_from):
    from transformers import AutoTokenizer

    torch.manual_seed(0)
    model_cls(config).save_pretrained(folder)
    AutoTokenizer.from_pretrained(tokenizer_from).save_pretrained(folder)
    return str(folder)


def _refused(folder: str, *words: str) -> str:
    with pytest.raises(ModelLoadError) as caught:
        mha_viz.load_model(folder, device="cpu")
    message = str(caught.value)
    for word in (*words, "GPT-NeoX", "BERT"):  # names the architecture and what is supported
        assert word in message, (word, message)
    return message


def test_layers_that_are_not_attention_are_refused_by_name(tmp_path, gpt2_dir):
    """LFM2 with every layer its short convolution (no softmax layer, and not among the models read as effective
    attention alone): refused by name. Mamba, Mamba-2, RWKV and xLSTM load, as effective attention
    (tests/models/test_effective_only.py)."""
    from transformers import Lfm2Config, Lfm2ForCausalLM

    convolutions = _save(tmp_path / "lfm2", Lfm2ForCausalLM,
                         Lfm2Config(vocab_size=300, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                    num_attention_heads=4, num_key_value_heads=2, layer_types=["conv", "conv"]),
                         gpt2_dir)
    _refused(convolutions, "lfm2", "short convolution layers")


def test_a_relative_whose_attention_we_do_not_reproduce_is_caught_at_load(tmp_path, gpt2_dir):
    """OLMo looks like Llama (q/k/v/o_proj, scaling) but clips q, k and v (clip_qkv): the check at
    load sees our recompute disagree on a test input. Hugging Face's attention is still captured
    with every head's output (read off o_proj's input), without what our MHA would compute wrong
    (lean capture, the walkthrough); our MHA is refused, saying why. (Cohere, this test's first
    example, turns q and k in adjacent pairs: our MHA now does too.)"""
    from transformers import OlmoConfig, OlmoForCausalLM

    config = OlmoConfig(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64, clip_qkv=0.5)
    folder = _save(tmp_path / "olmo", OlmoForCausalLM, config, gpt2_dir)
    with torch.no_grad():  # peaked heads: q and k well past the clip, which cannot hide in near-uniform rows
        model = OlmoForCausalLM.from_pretrained(folder)
        for name, p in model.named_parameters():
            if name.endswith(("q_proj.weight", "k_proj.weight")):
                p.mul_(12)
        model.save_pretrained(folder)
    hf = mha_viz.load_model(folder, device="cpu")
    run = mha_viz.analyze(hf, "hello world again")
    assert run.attentions.shape[:2] == (2, 4) and run.head_outputs is not None and run.value_norms is not None
    assert hf.has_head_outputs and not hf.can_recompute and "does not reproduce the attention" in hf.stand_in
    with pytest.raises(ModelLoadError, match="does not reproduce the attention") as refused:
        mha_viz.load_model(folder, device="cpu", local_attention=True)
    assert "olmo" in str(refused.value)
