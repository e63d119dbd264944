"""Every live run is checked for NaN and infinity (issue 38): a NaN planted in one layer's attention
weights of a random-init encoder, decoder and encoder–decoder, and in a generating decoder, raises
`mha_viz.capture.NotFiniteError` naming the first layer that Hugging Face's own forward (output_attentions,
independent of mha-viz's capture) shows non-finite, the precision the model computed in and the
precision to choose instead. The eager capture, the lean one (our MHA recomputes each layer, and its
softmax turns a NaN row into zeros: caught as a row that sums to 0) and generation are each checked."""

from __future__ import annotations

import pytest
import torch

import mha_viz

TEXT = "the quick brown fox jumps over the lazy dog"
TARGET = "a lazy dog"


def _planted(folder, dtype: str, weight) -> mha_viz.LoadedModel:
    """The model in `folder` loaded in `dtype` (its load-time probe finite), then NaN planted in
    `weight(hf_model)` before anything ran (a run packs the weights our MHA recomputes with)."""
    model = mha_viz.load_model(str(folder), device="cpu", dtype=dtype)
    assert model.precision == dtype
    with torch.no_grad():
        weight(model.hf_model).view(-1)[0] = float("nan")
    return model


def _first_not_finite(attentions) -> int:
    """The first layer whose attention (Hugging Face's own tuple) holds NaN or infinity."""
    return next(i for i, a in enumerate(attentions) if not torch.isfinite(a).all())


def _ids(model, text):
    return torch.tensor([mha_viz.tokenize(model, text).ids])


def _says(message: str, precision: str, instead: str) -> None:
    assert f"not finite (NaN or infinity) in {precision}:" in message, message
    assert f"Choose {instead} under Precision" in message, message


def test_an_encoder_in_float16(bert_dir):
    model = _planted(bert_dir, "float16", lambda m: m.bert.encoder.layer[1].attention.self.query.bias)
    with torch.inference_mode():
        layer = _first_not_finite(model.hf_model(input_ids=_ids(model, TEXT), output_attentions=True).attentions)
    assert layer == 1
    with pytest.raises(mha_viz.capture.NotFiniteError) as err:
        mha_viz.analyze(model, TEXT)
    assert isinstance(err.value, mha_viz.InputError)  # shown as the UI shows any InputError
    assert f"attention in layer {layer} of {model.name}" in str(err.value)
    _says(str(err.value), "float16", "bfloat16 (float32's range) or float32")


@pytest.mark.parametrize("lean", [False, True], ids=["eager", "lean"])
def test_a_decoder_in_bfloat16(gpt2_dir, lean):
    model = _planted(gpt2_dir, "bfloat16", lambda m: m.transformer.h[1].attn.c_attn.bias)
    with torch.inference_mode():
        layer = _first_not_finite(model.hf_model(input_ids=_ids(model, TEXT), output_attentions=True).attentions)
    assert layer == 1
    with pytest.raises(mha_viz.capture.NotFiniteError) as err:
        mha_viz.analyze(model, TEXT, lean=lean)
    assert f"attention in layer {layer} of" in str(err.value)
    _says(str(err.value), "bfloat16", "float32")
    assert "Choose bfloat16" not in str(err.value)
    # only the layers asked for are captured, and checked: layer 0 alone is finite
    assert mha_viz.analyze(model, TEXT, lean=lean, layers=[0]).layer_ids == [0]


def test_the_whole_text_overview_in_bfloat16(gpt2_dir):
    """The Model view's overview of a long text recomputes each head: a NaN head is refused, not pooled
    into a blank thumbnail."""
    model = _planted(gpt2_dir, "bfloat16", lambda m: m.transformer.h[1].attn.c_attn.bias)
    with pytest.raises(mha_viz.capture.NotFiniteError) as err:
        mha_viz.views.overview(model, TEXT)
    assert "attention in layer 1 of" in str(err.value)
    _says(str(err.value), "bfloat16", "float32")


@pytest.mark.parametrize("compiled", [True, False])
def test_the_whole_text_scan_in_bfloat16(gpt2_dir, compiled):
    """The scan of a long text reduces each layer a block at a time (compiled on the CPU, tensor operations
    on a GPU): a NaN head is refused, not counted as a head that looks nowhere."""
    model = _planted(gpt2_dir, "bfloat16", lambda m: m.transformer.h[1].attn.c_attn.bias)
    with pytest.raises(mha_viz.capture.NotFiniteError) as err:
        mha_viz.scan(model, TEXT, compiled=compiled)
    assert "attention in layer 1 of" in str(err.value)
    _says(str(err.value), "bfloat16", "float32")


def test_an_encoder_decoder_in_float32(t5_dir):
    model = _planted(t5_dir, "float32", lambda m: m.decoder.block[1].layer[0].SelfAttention.q.weight)
    src, tgt = _ids(model, TEXT), torch.tensor([[model.decoder_start()] + mha_viz.tokenize(model, TARGET).ids])
    with torch.inference_mode():
        out = model.hf_model(input_ids=src, decoder_input_ids=tgt, output_attentions=True)
    assert all(torch.isfinite(a).all() for a in out.encoder_attentions)
    layer = _first_not_finite(out.decoder_attentions)
    assert layer == 1
    with pytest.raises(mha_viz.capture.NotFiniteError) as err:
        mha_viz.analyze(model, TEXT, TARGET)
    message = str(err.value)
    assert f"decoder attention in layer {layer} of" in message and "in float32:" in message
    assert "the precision is not the cause" in message and "Choose" not in message


def test_a_generation_in_float16(gpt2_dir):
    model = _planted(gpt2_dir, "float16", lambda m: m.transformer.h[2].attn.c_attn.bias)
    with pytest.raises(mha_viz.capture.NotFiniteError) as err:
        mha_viz.generate(model, TEXT, 3)
    assert isinstance(err.value, mha_viz.capture.GenerationError)  # the Generate page's own error too
    assert "attention in layer 2 of" in str(err.value)
    _says(str(err.value), "float16", "bfloat16 (float32's range) or float32")


def test_scores_that_go_bad_while_generating_name_the_precision(gpt2_dir, monkeypatch):
    """The prompt's attention is finite; the scores for the second new token are not."""
    model = mha_viz.load_model(str(gpt2_dir), device="cpu", dtype="bfloat16")
    forward = type(model.hf_model).forward
    calls = []

    def bad_second_step(self, *args, **kwargs):
        out = forward(self, *args, **kwargs)
        calls.append(True)
        if len(calls) == 2:
            out.logits = out.logits * float("nan")
        return out

    monkeypatch.setattr(type(model.hf_model), "forward", bad_second_step)
    with pytest.raises(mha_viz.capture.NotFiniteError) as err:
        mha_viz.generate(model, TEXT, 3)
    assert "scores for new token 2 of" in str(err.value) and "Generation stopped there." in str(err.value)
    _says(str(err.value), "bfloat16", "float32")
