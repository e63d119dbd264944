"""Hybrid models (Qwen3-Next, Jamba, LFM2, MiniMax: softmax attention in layers 1 and 3, linear attention,
Mamba, short convolutions or lightning attention in layers 0 and 2) load and are read on their softmax layers, under
their own layer numbers, against Hugging Face's own eager attention; Falcon-H1 and Zamba2, whose layers hold
attention and Mamba-2 together, are read as both."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import mha_viz
from mha_viz import effective
from mha_viz.interventions import attribution
from mha_viz_models.families.builtin import output_projection
from tests.models.architectures_2026 import BOTH, HYBRIDS, build

TEXT = "The cat sat on the mat. The dog sat on the log."
# what each hybrid's other layers are (their configs call most of them "linear_attention")
MIXERS = {"qwen3_next": "gated DeltaNet", "jamba": "Mamba-1 (selective scan)", "lfm2": "short convolution",
          "minimax": "lightning attention"}


@pytest.fixture(scope="module", params=list(HYBRIDS))
def hybrid(request, tmp_path_factory):
    name = request.param
    return name, mha_viz.load_model(build(name, tmp_path_factory.mktemp(name)), device="cpu")


def test_the_softmax_layers_are_captured_under_their_own_numbers(hybrid):
    name, model = hybrid
    assert model.num_layers == 2 and model.layer_ids == [1, 3] and model.total_layers == 4
    assert model.other_layers == {MIXERS[name]: [0, 2]}  # named by the mixer found, not the config's layer type
    facts = model.facts()
    assert "(1, 3) of 4" in facts["layers"] and ": 0, 2" in facts["other layers (no attention pattern)"]
    ids = torch.tensor([mha_viz.tokenize(model, TEXT).ids])
    with torch.no_grad():  # Hugging Face's own: one probability tensor per softmax layer
        theirs = model.hf_model(input_ids=ids, output_attentions=True).attentions
    # MiniMax's lightning layers return weights of their own (their blocks' state): the softmax layers' by number
    theirs = [theirs[n] for n in (1, 3)] if len(theirs) == 4 else [a for a in theirs if a is not None]
    run = mha_viz.analyze(model, TEXT)
    assert run.layer_ids == [1, 3] and run.model_layers == 4 and run.partial
    for row in range(2):
        np.testing.assert_allclose(run.attentions[row], theirs[row][0].numpy(), atol=1e-6)
    one = mha_viz.analyze(model, TEXT, layers=[3])
    assert one.layer_ids == [3]
    np.testing.assert_allclose(one.attentions[0], run.attentions[1], atol=1e-6)
    with pytest.raises(mha_viz.InputError, match="softmax-attention layers 1, 3"):
        mha_viz.analyze(model, TEXT, layers=[0])
    with pytest.raises(ValueError, match="hybrid"):  # rollout follows every layer: it says why it cannot
        mha_viz.metrics.rollout(run)


def test_every_per_head_feature_on_the_softmax_layers(hybrid):
    name, model = hybrid
    assert model.has_head_outputs, model.unread
    run = mha_viz.analyze(model, TEXT)
    assert run.head_outputs is not None
    written = []
    hooks = [output_projection(m, fam).register_forward_hook(lambda _m, _i, out: written.append(out.detach()))
             for m, fam in model.attention_modules]
    try:
        with torch.no_grad():
            model.hf_model(input_ids=torch.tensor([run.token_ids]))
    finally:
        for h in hooks:
            h.remove()
    w_o = model.head_weights()["W_O"]  # rows by the model's layer numbers
    assert w_o.shape[0] == 4 and float(w_o[[0, 2]].abs().max()) == 0
    for row, number in enumerate(run.layer_ids):  # z through W_O is what the model's W_O layer wrote
        proj = output_projection(*model.attention_modules[row])
        bias = 0 if proj.bias is None else proj.bias
        through = torch.einsum("hnd,hdm->nm", torch.as_tensor(run.head_outputs[row]), w_o[number]) + bias
        torch.testing.assert_close(through, written[row][0], atol=1e-5, rtol=1e-5)
    table = mha_viz.metrics.head_table(run, model.head_weights())
    assert sorted(set(table["layer"])) == [1, 3] and table["output_norm"].notna().all()
    d = attribution.direct_logit(model, TEXT)
    assert d.per_head.shape == (2, model.num_heads)
    assert float(d.per_head.sum() + d.rest) == pytest.approx(d.logit, rel=1e-4, abs=1e-4)
    if name == "qwen3_next":  # its gate multiplies each head's output after attention: no value norms
        assert not model.reads_values and "gate" in model.unread and run.value_norms is None
    else:
        assert run.value_norms is not None


def test_a_model_without_softmax_layers_is_refused_unless_its_layers_are_read_exactly():
    """LFM2 with every layer its short convolution: no softmax layer, and not among the models read as effective
    attention alone (Mamba, xLSTM…): refused by name from its config, saying which are read."""
    from transformers import Lfm2Config, MambaConfig, xLSTMConfig

    from mha_viz_models.families.architectures import refusal
    assert refusal(MambaConfig(vocab_size=64, hidden_size=32, num_hidden_layers=2), "m") is None  # effective
    assert refusal(xLSTMConfig(vocab_size=64, hidden_size=32, num_blocks=2, num_heads=4), "x") is None
    why = refusal(Lfm2Config(vocab_size=64, hidden_size=32, num_hidden_layers=2, layer_types=["conv", "conv"]), "c")
    assert "short convolution layers" in why and "no attention probabilities" in why and "xLSTM (mLSTM)" in why


def test_each_token_mixing_layer_s_share_is_its_mean_output_norm(hybrid):
    """`EffectiveAttention.mixing_shares`: every token-mixing layer (softmax or not) by the mean norm of what it
    writes, read here off the decoder layers' own submodules by name in a plain forward."""
    name, model = hybrid
    eff = mha_viz.effective.effective_attention(model, TEXT)
    ids = torch.tensor([mha_viz.tokenize(model, TEXT).ids])
    mixers = ("self_attn", "linear_attn", "mamba", "conv", "short_conv")
    norms, hooks = {}, []
    for i, layer in enumerate(model.hf_model.model.layers):
        part = next(getattr(layer, m) for m in mixers if hasattr(layer, m))
        hooks.append(part.register_forward_hook(lambda _m, _a, out, i=i: norms.__setitem__(
            i, float((out[0] if isinstance(out, tuple) else out)[0].norm(dim=-1).mean()))))
    try:
        with torch.no_grad():
            model.hf_model(input_ids=ids, use_cache=False)
    finally:
        for h in hooks:
            h.remove()
    kinds = {la.layer: effective.kind(la) for la in eff.layers}
    assert set(eff.output_norms) == {(0, kinds[0]), (1, effective.SOFTMAX), (2, kinds[2]), (3, effective.SOFTMAX)}
    for (i, _kind), norm in eff.output_norms.items():
        assert norm == pytest.approx(norms[i], rel=1e-5), (name, i)
    shares = eff.mixing_shares()
    assert list(shares) == [(0, kinds[0]), (1, effective.SOFTMAX), (2, kinds[2]), (3, effective.SOFTMAX)]
    assert sum(shares.values()) == pytest.approx(1.0)
    assert shares[1, effective.SOFTMAX] == pytest.approx(norms[1] / sum(norms.values()))


@pytest.fixture(scope="module", params=list(BOTH))
def both(request, tmp_path_factory):
    name = request.param
    return name, mha_viz.load_model(build(name, tmp_path_factory.mktemp(name)), device="cpu")


def test_a_layer_of_attention_and_mamba_is_read_as_both(both):
    """Falcon-H1 (attention and Mamba-2 heads side by side in every layer, its keys multiplied) and Zamba2 (a shared
    attention block run in layers 1 and 3, then their Mamba-2): the softmax heads against Hugging Face's own, the
    Mamba-2 mixers as effective attention in the same layers, and each mixer's share of the writes against its output
    read off the model's submodules, times its layer's multiplier."""
    name, model = both
    softmax = [0, 1, 2, 3] if name == "falcon_h1" else [1, 3]
    assert model.layer_ids == softmax and model.total_layers == 4
    assert model.other_layers == {"Mamba-2 (SSD)": [0, 1, 2, 3]}
    assert model.can_recompute and model.stand_in is None  # our MHA reproduces them (Falcon-H1's key multiplier)
    ids = torch.tensor([mha_viz.tokenize(model, TEXT).ids])
    layer, norms, hooks = [0], {}, []

    def keep(softmax_part, factor):
        def hook(_m, _a, out):
            out = out[0] if isinstance(out, tuple) else out
            norms[layer[0], softmax_part] = factor * float(out[0].norm(dim=-1).mean())
        return hook
    for i, block in enumerate(model.hf_model.model.layers):
        hooks.append(block.register_forward_pre_hook(lambda _m, _a, i=i: layer.__setitem__(0, i)))
        for sub in block.modules():
            kind = type(sub).__name__
            if kind.endswith("Attention") or kind.endswith("Mixer"):
                softmax_part = kind.endswith("Attention")
                factor = getattr(block, "attn_out_multiplier" if softmax_part else "ssm_out_multiplier", 1.0)
                hooks.append(sub.register_forward_hook(keep(softmax_part, factor)))
    try:
        with torch.no_grad():
            theirs = model.hf_model(input_ids=ids, output_attentions=True, use_cache=False).attentions
    finally:
        for h in hooks:
            h.remove()
    run = mha_viz.analyze(model, TEXT)
    assert run.layer_ids == softmax and run.model_layers == 4
    theirs = [a for a in theirs if a is not None]
    for row in range(len(softmax)):
        np.testing.assert_allclose(run.attentions[row], theirs[row][0].numpy(), atol=1e-6)
    ours = mha_viz.analyze(mha_viz.load_model(model.source, device="cpu", local_attention=True), TEXT)
    np.testing.assert_allclose(ours.attentions, run.attentions, atol=1e-5)
    eff = mha_viz.effective.effective_attention(model, TEXT)
    assert eff.layer_ids == [0, 1, 2, 3]
    shares = eff.mixing_shares()
    assert [n for n, _ in shares] == sorted([*softmax, 0, 1, 2, 3])  # a layer of both: its softmax heads first
    assert sorted(norms) == sorted((n, k == effective.SOFTMAX) for n, k in shares)
    total = sum(norms.values())
    for (n, k), share in shares.items():
        assert share == pytest.approx(norms[n, k == effective.SOFTMAX] / total, rel=1e-5), (name, n, k)


def test_falcon_h1_s_multipliers_are_in_its_heads_weights(both):
    """Falcon-H1 multiplies its attention's input (0.8 here) and output (0.9375) in the decoder layer: loaded, the
    factors sit in the attention's own projections, so the model computes what Hugging Face's unfolded one does, and
    each head's z through W_O (plus the bias) is the attention's write into the residual stream, its multiplier
    included, as read off the unfolded model."""
    name, model = both
    if name != "falcon_h1":
        pytest.skip("Zamba2 has no multiplier around its attention")
    from transformers import AutoModelForCausalLM
    reference = AutoModelForCausalLM.from_pretrained(model.source, attn_implementation="eager").eval()
    blocks = reference.model.layers
    assert {(b.attention_in_multiplier, b.attn_out_multiplier) for b in blocks} == {(0.8, 0.9375)}
    assert {(b.attention_in_multiplier, b.attn_out_multiplier) for b in model.hf_model.model.layers} == {(1.0, 1.0)}
    writes = []
    hooks = [b.self_attn.register_forward_hook(
        lambda _m, _a, out, b=b: writes.append(out[0][0] * b.attn_out_multiplier)) for b in blocks]
    ids = torch.tensor([mha_viz.tokenize(model, TEXT).ids])
    try:
        with torch.no_grad():
            want = reference(input_ids=ids, use_cache=False).logits
    finally:
        for h in hooks:
            h.remove()
    with torch.no_grad():
        np.testing.assert_allclose(model.hf_model(input_ids=ids, use_cache=False).logits.numpy(), want.numpy(),
                                   atol=1e-5, rtol=1e-5)
    run = mha_viz.analyze(model, TEXT)
    w_o = model.head_weights()["W_O"]
    for row, number in enumerate(run.layer_ids):
        proj = model.hf_model.model.layers[number].self_attn.o_proj
        bias = 0 if proj.bias is None else proj.bias
        through = torch.einsum("hnd,hdm->nm", torch.as_tensor(run.head_outputs[row]), w_o[number]) + bias
        torch.testing.assert_close(through, writes[number], atol=1e-5, rtol=1e-5)
