"""Encoder–decoders (T5 with a deeper decoder, BART, Marian, mBART, Pegasus) through
`mha_viz.analyze(model, source, target)`: the encoder, decoder and cross-attention equal Hugging
Face's `encoder_attentions`, `decoder_attentions` and `cross_attentions` for the same ids (one
forward of the model itself, independent of the app's capture); the target is the decoder's
start token and the typed text, or what the model writes greedily (at most 32 tokens; compared with
other computations up to a step whose two best tokens lie within their rounding); and the input that
cannot be analysed gets a message."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import mha_viz
from tests.helpers import byte_bpe_tokenizer
from tests.tolerance import assert_same_argmax, assert_same_tokens

SOURCE = "The cat sat on the mat. The dog sat on the log."
TARGET = "A quick brown fox."
# the next token's probabilities in two computations (through the KV cache or one forward, our MHA or Hugging
# Face's): within 1e-5 each, so two tokens may trade the first place within twice that
NEAR = 2e-5


def _t5(v):
    from transformers import T5Config, T5ForConditionalGeneration
    return T5ForConditionalGeneration, T5Config(
        vocab_size=v, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=3, num_heads=4,
        decoder_start_token_id=0, pad_token_id=0, eos_token_id=0)


def _bart_like(name):
    def build(v):
        import transformers
        config_cls = getattr(transformers, f"{name}Config")
        model_cls = getattr(transformers, {"Bart": "BartForConditionalGeneration", "Marian": "MarianMTModel",
                                           "MBart": "MBartForConditionalGeneration",
                                           "Pegasus": "PegasusForConditionalGeneration"}[name])
        return model_cls, config_cls(
            vocab_size=v, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
            decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=64,
            pad_token_id=0, bos_token_id=0, eos_token_id=0, decoder_start_token_id=0, forced_eos_token_id=None)
    return build


BUILDERS = {"t5": _t5, "bart": _bart_like("Bart"), "marian": _bart_like("Marian"), "mbart": _bart_like("MBart"),
            "pegasus": _bart_like("Pegasus")}


@pytest.fixture(scope="module", params=list(BUILDERS))
def seq2seq(request, tmp_path_factory):
    tok = byte_bpe_tokenizer()
    cls, config = BUILDERS[request.param](len(tok))
    torch.manual_seed(7)
    folder = tmp_path_factory.mktemp(request.param)
    cls(config).save_pretrained(folder)
    tok.save_pretrained(folder)
    return request.param, mha_viz.load_model(folder, device="cpu")


def _hugging_face(model, source_ids, target_ids):
    with torch.no_grad():
        out = model.hf_model(input_ids=torch.tensor([source_ids]), decoder_input_ids=torch.tensor([target_ids]),
                             output_attentions=True)
    return [torch.stack([a[0] for a in part]).numpy()
            for part in (out.encoder_attentions, out.decoder_attentions, out.cross_attentions)]


@pytest.mark.parametrize("target", [TARGET, None])
def test_the_three_attentions_equal_hugging_face(seq2seq, target):
    family, model = seq2seq
    assert model.is_encoder_decoder and not model.is_causal
    res = mha_viz.analyze(model, SOURCE, target)
    assert isinstance(res, mha_viz.capture.EncoderDecoderRun) and res.written == (target is None)
    enc, dec, cross = res.encoder, res.decoder, res.cross
    assert enc.token_ids == mha_viz.tokenize(model, SOURCE).ids and not enc.is_causal and dec.is_causal
    assert dec.token_ids[0] == model.decoder_start()
    if target is None:  # greedy, at most 32 new tokens
        assert 2 <= len(dec.token_ids) <= 33
    else:
        assert dec.token_ids[1:] == model.tokenizer(text_target=TARGET)["input_ids"] and res.target == TARGET
    want = _hugging_face(model, enc.token_ids, dec.token_ids)
    for got, expected in zip((enc.attentions, dec.attentions, cross.attentions), want):
        np.testing.assert_allclose(got, expected, atol=1e-6, rtol=0)
    L, H = model.decoder_layers, model.decoder_heads
    assert cross.attentions.shape == (L, H, len(dec.tokens), len(enc.tokens))
    assert (cross.query_tokens, cross.key_tokens) == (dec.tokens, enc.tokens)
    assert (cross.query_token_ids, cross.key_token_ids) == (dec.token_ids, enc.token_ids)
    np.testing.assert_allclose(cross.attentions.sum(-1), 1.0, atol=1e-5)
    assert not np.triu(dec.attentions, 1).any()
    if family == "t5":  # a decoder deeper than its encoder
        assert (enc.num_layers, dec.num_layers) == (2, 3)


def _next_probs(model, source_ids: list[int]):
    """`assert_same_tokens`' scores: the decoder's next-token probabilities after its start and `prefix`,
    from one forward of the model (no cache)."""
    def after(prefix) -> np.ndarray:
        with torch.no_grad():
            logits = model.hf_model(input_ids=torch.tensor([source_ids]),
                                    decoder_input_ids=torch.tensor([[model.decoder_start(), *prefix]])).logits[0, -1]
        return torch.softmax(logits.float(), -1).numpy()
    return after


def test_the_written_target_is_the_models_greedy_output(seq2seq):
    _, model = seq2seq
    res = mha_viz.analyze(model, SOURCE)
    after = _next_probs(model, res.encoder.token_ids)
    seq = []  # one step at a time, by hand: the argmax of the next-token probabilities
    for _ in range(len(res.decoder.token_ids) - 1):
        seq.append(int(after(seq).argmax()))
    assert res.decoder.token_ids[0] == model.decoder_start()
    assert_same_tokens(seq, res.decoder.token_ids[1:], after, NEAR, "by hand against the KV cache")


def test_what_cannot_be_analysed_gets_a_message(seq2seq, tiny_gpt2):
    _, model = seq2seq
    with pytest.raises(mha_viz.InputError, match="target text"):
        mha_viz.analyze(model, SOURCE, "   ")
    with pytest.raises(mha_viz.InputError, match="captured all at once"):
        mha_viz.analyze(model, SOURCE, layers=[0])
    with pytest.raises(mha_viz.InputError, match="encoder–decoders"):
        mha_viz.analyze(tiny_gpt2, SOURCE, TARGET)
    with pytest.raises(mha_viz.InputError):
        mha_viz.analyze(model, "  ")


def test_a_capture_over_the_memory_budget_is_refused_before_it_runs(seq2seq, monkeypatch):
    _, model = seq2seq
    src = mha_viz.tokenize(model, SOURCE).n
    tgt = 1 + len(model.tokenizer(text_target=TARGET)["input_ids"])
    need = mha_viz.capture.seq2seq.capture_bytes(model, src, tgt)
    L, H, Ld, Hd = model.num_layers, model.num_heads, model.decoder_layers, model.decoder_heads
    assert need == 4 * (L * H * src * src + Ld * Hd * tgt * tgt + Ld * Hd * tgt * src)  # by hand
    real = mha_viz.settings.from_env()

    class Tight:  # the deployment's settings, with a budget one byte short
        max_capture_bytes = need - 1

        def __getattr__(self, name):
            return getattr(real, name)
    monkeypatch.setattr(mha_viz.settings, "from_env", Tight)
    calls = []
    monkeypatch.setattr(type(model), "capture_seq2seq", lambda *a, **k: calls.append(a))
    with pytest.raises(mha_viz.InputError, match="MHA_VIZ_MAX_CAPTURE_MB"):
        mha_viz.analyze(model, SOURCE, TARGET)
    assert not calls  # nothing ran


def test_our_mha_stands_in_for_every_attention_of_an_encoder_decoder(seq2seq):
    """Encoder, decoder and cross-attention computed by our MHA (same weights): the same
    probabilities and logits as Hugging Face's, and the same greedy target (through the KV
    cache). T5: its relative position bias (the first layer's, shared) and no scaling."""
    name, hf = seq2seq
    ours = mha_viz.load_model(hf.source, device="cpu", local_attention=True)
    roles = [a.role for a in ours.adapters]
    assert (roles.count("encoder"), roles.count("decoder"), roles.count("cross")) == (
        hf.num_layers, hf.decoder_layers, hf.decoder_layers)
    theirs, mine = mha_viz.analyze(hf, SOURCE, TARGET), mha_viz.analyze(ours, SOURCE, TARGET)
    for part in ("encoder", "decoder", "cross"):
        np.testing.assert_allclose(mine.parts[part].attentions, theirs.parts[part].attentions, atol=1e-5, rtol=0)
    ids = torch.tensor([theirs.encoder.token_ids]), torch.tensor([theirs.decoder.token_ids])
    with torch.no_grad():
        logits = [m.hf_model(input_ids=ids[0], decoder_input_ids=ids[1]).logits for m in (hf, ours)]
    torch.testing.assert_close(logits[1], logits[0], atol=1e-5, rtol=1e-5)
    written = [mha_viz.analyze(m, SOURCE).decoder.token_ids for m in (hf, ours)]
    assert written[0][0] == written[1][0] == hf.decoder_start()
    assert_same_tokens(written[0][1:], written[1][1:], _next_probs(hf, theirs.encoder.token_ids), NEAR,
                       "ours against Hugging Face's")


def test_each_written_token_is_the_decoders_most_likely_at_the_row_before(seq2seq):
    _, model = seq2seq
    res = mha_viz.analyze(model, SOURCE)
    assert len(res.steps) == len(res.decoder.token_ids) - 1
    with torch.no_grad():
        logits = model.hf_model(input_ids=torch.tensor([res.encoder.token_ids]),
                                decoder_input_ids=torch.tensor([res.decoder.token_ids])).logits[0]
    for t, step in enumerate(res.steps, start=1):
        probs = torch.softmax(logits[t - 1], -1)
        assert step.token_id == res.decoder.token_ids[t]
        assert_same_argmax(step.token_id, probs.numpy(), NEAR, f"step {t}")  # greedy, through the cache
        assert step.prob == pytest.approx(float(probs[step.token_id]), rel=1e-5)
        assert step.top[0][1] == pytest.approx(step.prob, rel=1e-6) and len(step.top) == 10
