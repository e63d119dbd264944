"""What a long run keeps of the model's own outputs (`Scan.own`, `AttentionRun.own`): its loss and last logits read
through the LM head apart from the base model's forward (`mha_viz_models.reading.lm_head`), a block of rows at a
time (`own_outputs.from_hidden`), and each head's mean output. Switch heads off reads its every-head-on outcome off
them with no forward, equal to the pass it replaces (issue 59: that pass cost 35 s at 8,192 tokens of SmolLM2); the
LM head applied apart equals the model's own logits, with a logit scale (Cohere 2) or a cap (Gemma 2), and is
refused for a model that does something else after its base model."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import mha_viz
from mha_viz.capture import own_outputs
from mha_viz.interventions import ablation_outcome as outcome
from mha_viz_models.reading import lm_head
from tests.helpers import ROOT, save_peaked
from tests.models import architectures_2026

pytestmark = pytest.mark.model
TEXT = " ".join((ROOT / "mha_viz" / "corpus" / "sample.txt").read_text().split()[:60])


def _gemma2(out) -> str:
    from transformers import Gemma2Config, Gemma2ForCausalLM
    config = Gemma2Config(**architectures_2026.common(final_logit_softcapping=3.0, attn_logit_softcapping=None,
                                                      sliding_window=8, layer_types=["sliding_attention",
                                                                                     "full_attention"] * 2))
    return save_peaked(Gemma2ForCausalLM, config, out, sharpened=architectures_2026.SHARPENED, scale=4.0)


def _counting(model):
    """A forward hook on the model's top module, and the list it appends to."""
    seen: list[int] = []
    return model.hf_model.register_forward_hook(lambda *_: seen.append(1)), seen


@pytest.mark.parametrize("which", ["cohere2", "gemma2"])
def test_the_lm_head_apart_is_the_models_logits(which, tmp_path):
    folder = _gemma2(tmp_path) if which == "gemma2" else architectures_2026.build(which, tmp_path)
    model = mha_viz.load_model(folder, device="cpu")
    scale = getattr(model.hf_model.config, "logit_scale", None)
    cap = getattr(model.hf_model.config, "final_logit_softcapping", None)
    assert (scale is not None and scale != 1) or cap  # each brings what the head alone would miss
    ids = torch.tensor([mha_viz.tokenize(model, TEXT, 40).ids])
    with torch.inference_mode():
        own = model.hf_model(input_ids=ids, use_cache=False).logits[0]
        hidden = model.hf_model.base_model(input_ids=ids, use_cache=False).last_hidden_state[0]
        apart = lm_head.of(model)
        assert apart is not None
        np.testing.assert_allclose(apart(hidden).numpy(), own.numpy(), atol=1e-5, rtol=1e-5)
        plain = model.hf_model.get_output_embeddings()(hidden)
    assert not torch.allclose(plain, own, atol=1e-3)  # the head alone is not the logits here


def test_a_model_that_changes_its_logits_after_the_head_is_refused(tiny_gpt2, monkeypatch):
    forward = type(tiny_gpt2.hf_model).forward

    def doubled(self, *args, **kwargs):
        out = forward(self, *args, **kwargs)
        out.logits = out.logits * 2
        return out
    monkeypatch.setattr(type(tiny_gpt2.hf_model), "forward", doubled)
    assert lm_head.find(tiny_gpt2.hf_model, torch.tensor([[0, 1]])) is None
    monkeypatch.undo()
    assert lm_head.find(tiny_gpt2.hf_model, torch.tensor([[0, 1]])) is not None


def test_the_loss_made_a_block_at_a_time_is_the_whole_ones(tiny_gpt2, monkeypatch):
    ids = mha_viz.tokenize(tiny_gpt2, TEXT, 48).ids
    with torch.inference_mode():
        out = tiny_gpt2.hf_model(input_ids=torch.tensor([ids]), use_cache=False)
        hidden = tiny_gpt2.hf_model.base_model(input_ids=torch.tensor([ids]), use_cache=False).last_hidden_state[0]
    whole = own_outputs.own_outputs(out, ids, causal=True)
    vocabulary = out.logits.shape[-1]
    monkeypatch.setattr(own_outputs, "LOGIT_BLOCK_BYTES", 4 * vocabulary * 7)  # blocks of 7 rows, the last short
    with torch.inference_mode():
        blocks = own_outputs.from_hidden(hidden, ids, logits=lm_head.of(tiny_gpt2))
    assert len(ids) - 1 > 7 and (len(ids) - 1) % 7
    assert blocks.loss == pytest.approx(whole.loss, abs=1e-5)
    np.testing.assert_allclose(blocks.last_logits, whole.last_logits, atol=1e-5)
    by_hand = float(torch.nn.functional.cross_entropy(out.logits[0, :-1].float(), torch.tensor(ids[1:])))
    assert whole.loss == pytest.approx(by_hand, abs=1e-5)  # the model's own mean loss, not from_hidden's sum
    np.testing.assert_array_equal(whole.last_logits, out.logits[0, -1].float().numpy())


@pytest.mark.parametrize("which", ["tiny_gpt2", "smollm2", "minilm"])
def test_a_long_runs_own_outputs_stand_for_the_pass(request, which):
    model = request.getfixturevalue(which) if which == "tiny_gpt2" else mha_viz.load_model(which, device="cpu")
    long = mha_viz.analyze(model, TEXT, dense=False)
    assert not long.is_dense and long.own is not None and long.own is long.summary.own
    assert long.own.head_means.shape[:2] == (model.num_layers, model.num_heads)
    handle, forwards = _counting(model)
    try:
        read = outcome.unablated(model, TEXT, run=long)
    finally:
        handle.remove()
    assert not forwards  # nothing ran: the long run's scan stood for the pass
    plain = outcome.unablated(model, TEXT)  # the pass itself, fused attention
    assert read.loss == pytest.approx(plain.loss, abs=1e-5)
    np.testing.assert_allclose(read.means[0].numpy(), plain.means[0].numpy(), atol=1e-5)
    if plain.embedding is not None:
        np.testing.assert_allclose(read.embedding.numpy(), plain.embedding.numpy(), atol=1e-5)
    else:
        assert [label for label, _ in read.top] == [label for label, _ in plain.top] == ["next token"]
        np.testing.assert_allclose([p for _t, p in read.top[0][1]], [p for _t, p in plain.top[0][1]], atol=1e-5)
    keep = np.ones((model.num_layers, model.num_heads), dtype=bool)
    keep[1, :2] = False  # mean-ablation puts the long run's means in: the same outcome as the pass's
    a = outcome.ablated(model, TEXT, keep, mean_ablation=True, base=read)
    b = outcome.ablated(model, TEXT, keep, mean_ablation=True, base=plain)
    assert a.loss == pytest.approx(b.loss, abs=1e-5)


def test_a_half_precision_long_run_keeps_none(tiny_gpt2, monkeypatch):
    monkeypatch.setattr(tiny_gpt2, "dtype", torch.bfloat16)  # what from_run would refuse anyway: not made
    assert mha_viz.analyze(tiny_gpt2, TEXT, dense=False).own is None


def test_the_scan_stands_when_its_own_outputs_cannot_be_made(tiny_gpt2, monkeypatch):
    """The model's own outputs are extra: a read-out that fails (here: out of memory) leaves them out, the long run
    is made; and a caller that does not want them (a generation's long runs) gets none."""
    def failing(_model):
        raise torch.OutOfMemoryError("no room for the logits")
    monkeypatch.setattr(lm_head, "of", failing)
    long = mha_viz.analyze(tiny_gpt2, TEXT, dense=False)
    assert not long.is_dense and long.own is None and long.summary.table is not None
    monkeypatch.undo()
    assert mha_viz.scan(tiny_gpt2, TEXT, keep_own=False).own is None
    assert mha_viz.scan(tiny_gpt2, TEXT).own is not None


def test_a_long_runs_own_outputs_are_made_at_their_first_read(gpt2_dir):
    """The loss and last logits are made when first read (the LM head over every token: 2.6–3.8 s of the first page
    at 8,192 tokens of SmolLM2, which only Switch heads off reads), equal to the model's own."""
    from mha_viz.scan.own_later import LaterOwn

    model = mha_viz.load_model(gpt2_dir, device="cpu")
    long = mha_viz.analyze(model, TEXT, dense=False)
    assert isinstance(long.own, LaterOwn) and not long.own.made  # nothing made yet
    ids = torch.tensor([list(long.token_ids)])
    with torch.inference_mode():
        logits = model.hf_model(input_ids=ids).logits[0].float()
    want = torch.nn.functional.cross_entropy(logits[:-1], ids[0, 1:]).item()
    assert long.own.loss == pytest.approx(want, rel=1e-5)
    np.testing.assert_allclose(long.own.last_logits, logits[-1].numpy(), atol=1e-4)
    assert long.own.made
