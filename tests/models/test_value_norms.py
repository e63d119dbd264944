"""Value-weighted attention (issue 22, part 1): the decomposition of every attention module's
output into what each key writes through each head is exact (`docs/attribution.md`, section 1's check), the run's
value norms are those of that decomposition, and the contributions are A times the norms."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

import mha_viz
from mha_viz.interventions import attribution
from mha_viz_models.families.builtin import output_projection
from mha_viz_models.reading import values

TEXT = "The cat sat on the mat because it was tired."


@pytest.mark.parametrize("fixture", ["bert_dir", "gpt2_dir", "llama_dir"])
def test_the_heads_writes_add_up_to_the_attention_output(request, fixture):
    model = mha_viz.load_model(request.getfixturevalue(fixture), device="cpu")
    ids = torch.tensor([mha_viz.tokenize(model, TEXT).ids])
    written = []  # what each layer's W_O layer wrote, bias included
    hooks = [output_projection(m, fam).register_forward_hook(lambda _m, _i, out: written.append(out.detach()))
             for m, fam in model.attention_modules]
    try:
        cap = model.capture(ids, inputs=True)
    finally:
        for h in hooks:
            h.remove()
    run = mha_viz.analyze(model, TEXT, lean=False)
    for layer, (module, fam) in enumerate(model.attention_modules):
        f = values.head_values(model, cap, layer)[0]  # (H, n, d_model): f_h(x_j)
        a = cap.attentions[layer][0]  # (H, n, n)
        total = torch.einsum("hij,hjm->im", a, f)  # Σ_h Σ_j A f_h(x_j)
        bias = output_projection(module, fam).bias
        out = total + (bias if bias is not None else 0)
        torch.testing.assert_close(out, written[layer][0], rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(run.value_norms[layer], f.norm(dim=-1).numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(("fixture", "kept"), [("bert_dir", True), ("llama_dir", True), ("gpt2_dir", False)])
def test_the_norms_read_the_values_the_capture_kept(request, fixture, kept):
    """Where the model runs our W_V (its own layer), the capture keeps what it wrote and the norms
    project nothing again, with the very numbers a projection from the layer's input gives. GPT-2's
    fused c_attn makes our W_V a copy that never runs: nothing is kept, and the norms project."""
    model = mha_viz.load_model(request.getfixturevalue(fixture), device="cpu")
    ids = torch.tensor([mha_viz.tokenize(model, TEXT).ids])
    assert model.capture(ids).values is None  # only a capture that records the inputs keeps them
    cap = model.capture(ids, inputs=True)
    assert [v is not None for v in cap.values] == [kept] * model.num_layers
    projected = dataclasses.replace(cap, values=None)
    for layer in range(model.num_layers):
        assert torch.equal(values.value_norms(model, cap, layer), values.value_norms(model, projected, layer))
    mha = model.layer_adapter(0).mha
    gram = values.output_gram(mha.w_o, mha.num_heads, torch.float32)
    assert values.output_gram(mha.w_o, mha.num_heads, torch.float32) is gram  # made once


@pytest.mark.parametrize("lean", [True, False])
def test_contributions_are_the_weights_times_the_norms(llama_dir, lean):
    model = mha_viz.load_model(llama_dir, device="cpu")
    run = mha_viz.analyze(model, TEXT, lean=lean)
    assert run.value_norms.shape == (run.num_layers, run.num_heads, run.n) and run.value_norms.dtype == np.float32
    c = attribution.value_weighted(run)
    np.testing.assert_allclose(c, run.attentions * run.value_norms[:, :, None, :], rtol=1e-6)
    rows = attribution.value_weighted(run, normalise=True)
    np.testing.assert_allclose(rows.sum(-1), 1.0, atol=1e-5)
    assert not np.triu(rows, 1).any()  # causal stays causal
    assert attribution.label(True) == "value-weighted (‖α f(x)‖, row-normalised)"
    hidden = run.drop_tokens(np.array([True] + [False] * (run.n - 1)))  # the first token hidden
    np.testing.assert_allclose(hidden.value_norms, run.value_norms[:, :, 1:])


def test_a_run_without_value_norms_says_so():
    run = mha_viz.AttentionRun.from_array(np.full((1, 1, 2, 2), 0.5), ["a", "b"])
    with pytest.raises(mha_viz.InputError, match="value path"):
        attribution.value_weighted(run)


@pytest.mark.parametrize("fixture", ["gpt2_dir", "llama_dir"])
def test_direct_logit_attribution_adds_up_to_the_models_logit(request, fixture):
    """LayerNorm with biases and tied embeddings (GPT-2), RMSNorm (Llama): the heads' direct
    effects plus everything else, each through the frozen final norm, give the model's own logit."""
    model = mha_viz.load_model(request.getfixturevalue(fixture), device="cpu")
    d = attribution.direct_logit(model, TEXT)
    assert d.per_head.shape == (model.num_layers, model.num_heads) and d.position == len(d.tokens) - 1
    assert d.per_head.sum() + d.rest == pytest.approx(d.logit, rel=1e-4, abs=1e-4)
    assert np.abs(d.per_head).max() > 1e-4  # the heads do contribute
    diff = attribution.direct_logit(model, TEXT, target=d.target, wrong=(d.target + 1) % 300, position=3)
    assert diff.per_head.sum() + diff.rest == pytest.approx(diff.logit, rel=1e-4, abs=1e-4)
    promoted, suppressed = attribution.head_tokens(model, TEXT, 1, 0, k=5)
    assert len(promoted) == len(suppressed) == 5
    assert [v for _, v in promoted] == sorted((v for _, v in promoted), reverse=True)
    assert promoted[-1][1] >= suppressed[0][1]


def test_direct_logit_attribution_is_refused_for_an_encoder(bert_dir):
    with pytest.raises(mha_viz.InputError, match="not a decoder"):
        attribution.direct_logit(mha_viz.load_model(bert_dir, device="cpu"), TEXT)


def test_direct_logit_attribution_of_a_model_without_a_final_norm():
    """toy-induction has no norm at all: the unembedding reads the residual itself. The heads' writes
    plus the embeddings give the logit, and layer 1 (the induction layer) carries the repeat."""
    toy = mha_viz.load_model("toy-induction", device="cpu")
    text = "q w e r t y u i o q w e r t y u i"
    d = attribution.direct_logit(toy, text, target="o", wrong="z")
    assert d.per_head.sum() + d.rest == pytest.approx(d.logit, rel=1e-4, abs=1e-4)
    assert d.per_head[1].sum() > d.per_head[0].sum() and d.per_head[1].max() > 1
    promoted, _ = attribution.head_tokens(toy, text, 1, int(np.argmax(d.per_head[1])), k=3)
    assert promoted[0][0] == "o"  # the strongest induction head's write promotes the copied token


def test_a_norm_the_head_does_not_read_is_not_taken_for_the_read_out(gpt2_dir):
    """The read-out is refused when something lies between the last norm and the LM head."""
    from transformers import AutoModelForCausalLM

    from mha_viz_models.reading import readout

    hf = AutoModelForCausalLM.from_pretrained(gpt2_dir)
    probe = __import__("torch").tensor([[1, 2, 3]])
    assert readout.find(hf, probe) is not None
    hf.lm_head.register_forward_pre_hook(lambda mod, args: (args[0] * 2,))  # a doubling between them
    assert readout.find(hf, probe) is None


def test_a_norm_mha_viz_does_not_know_is_not_taken_for_no_norm():
    """A model whose every norm is a class mha-viz does not recognise (OLMo's, Cohere's): no norm
    seems to run, but the read-out is refused rather than taken for the residual itself."""
    from torch import nn

    from mha_viz_models.reading import readout

    toy = mha_viz.load_model("toy-induction", device="cpu")
    probe = __import__("torch").tensor([[1, 2, 3]])
    assert readout.find(toy.hf_model, probe).kind == readout.NONE

    class OddNorm(nn.Module):  # a norm under a name that ends in neither LayerNorm nor RMSNorm
        def forward(self, x):
            return x / x.pow(2).mean(-1, keepdim=True).add(1e-6).sqrt()
    model = __import__("copy").deepcopy(toy.hf_model)
    model.norm = OddNorm()
    assert readout.find(model, probe) is None
    scaled = __import__("copy").deepcopy(toy.hf_model)
    scaled.unembed.register_forward_hook(lambda _m, _a, out: out * 0.5)  # a logit scale after the head
    assert readout.find(scaled, probe) is None
