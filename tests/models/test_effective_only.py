"""Models made of state-space or recurrent layers alone (issue 88): random-init Mamba, Mamba-2, Falcon-Mamba and RWKV
folders load as a
user's model (`mha_viz_models.loading.effective_only`), and a run holds each layer's effective attention as weights:
for every group, |A| with each row divided by its sum, against A computed here by `effective_layers` on the same
weights loaded by transformers alone (not through mha-viz's loader), and A itself rebuilds each layer's output
(tests/models/test_effective_attention.py); RWKV's rows are its recurrence's, written here. xLSTM stays refused with
its reason, and our MHA is refused on a model without softmax layers."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import mha_viz
from mha_viz import needs
from mha_viz.budget import memory
from mha_viz_models.effective import effective_layers
from tests.models.effective_families import FAMILIES, save_random

pytestmark = pytest.mark.model
TEXT = "The keeper lit the lamp, and the boats came home one by one before the storm."


@pytest.fixture(scope="module", params=["mamba2", "mamba", "falcon_mamba", "rwkv"])
def folder(request, tmp_path_factory):
    return request.param, save_random(request.param, tmp_path_factory.mktemp(request.param))


def test_a_run_holds_each_groups_absolute_effective_attention_rows_normalised(folder):
    name, path = folder
    model = mha_viz.load_model(path, device="cpu")
    run = mha_viz.analyze(model, TEXT)
    cls, _config = FAMILIES[name]()
    theirs = cls.from_pretrained(path).eval()  # transformers alone
    ids = torch.tensor([model.tokenizer(TEXT)["input_ids"]])
    layers = effective_layers(theirs, ids)
    assert run.attentions.shape == (len(layers), model.num_heads, run.n, run.n) and run.n == ids.shape[1]
    for number, layer in enumerate(layers):
        a = np.abs(layer.matrix if layer.aggregated is None else layer.aggregated).astype(np.float64)
        want = a / a.sum(-1, keepdims=True)
        np.testing.assert_allclose(run.attentions[number], want, rtol=1e-5, atol=1e-6, err_msg=f"layer {number}")
    assert np.allclose(run.attentions.sum(-1), 1, atol=1e-5) and not np.triu(run.attentions, 1).any()
    assert run.head_outputs is None and not model.has_head_outputs and model.effective
    config = model.hf_model.config  # Mamba's and RWKV's: one block of channels' matrices at a time, beside the 8 means
    channels = model.num_heads if name == "mamba2" else (getattr(config, "attention_hidden_size", None) or
                                                         config.intermediate_size) // 8 + 8
    assert needs.analysis(model, run.n).host == memory.analysis_need(model, run.n).host + 16 * channels * run.n ** 2
    assert needs.generation(model, run.n, 8) == needs.analysis(model, run.n)  # Generate: a capture at each step
    facts = model.facts()
    assert "effective attention" in facts["attention implementation"] and "no softmax" in facts["architecture"]
    with pytest.raises(mha_viz.ModelLoadError, match="no softmax attention layer"):
        mha_viz.load_model(path, device="cpu", local_attention=True)


def test_rwkvs_rows_sum_to_1_and_mix_the_values_as_its_recurrence_does(tmp_path):
    """RWKV's time mixing by its recurrence, written here from the layer's own parameters in float64 (numerator and
    denominator carried token by token, the token itself with its bonus u): Σ_s A[c, t, s] v_s[c] is wkv_t[c], and
    every row of A sums to 1 with no weight negative."""
    path = save_random("rwkv", tmp_path / "rwkv")
    cls, _config = FAMILIES["rwkv"]()
    hf = cls.from_pretrained(path).eval()
    ids = torch.randint(3, 300, (1, 40), generator=torch.Generator().manual_seed(2))
    attention = hf.rwkv.blocks[1].attention
    got: dict = {}
    hooks = [getattr(attention, part).register_forward_hook(lambda _m, _i, out, part=part: got.update({part: out}))
             for part in ("key", "value")]
    with torch.no_grad():
        hf(input_ids=ids, use_cache=False)
    for h in hooks:
        h.remove()
    k, v = got["key"][0].double(), got["value"][0].double()  # (n, c)
    w, u = -torch.exp(attention.time_decay.detach().double()), attention.time_first.detach().double()
    num, den, wkv = torch.zeros_like(k[0]), torch.zeros_like(k[0]), []
    for t in range(k.shape[0]):
        here = torch.exp(u + k[t])
        wkv.append((num + here * v[t]) / (den + here))
        num, den = torch.exp(w) * num + torch.exp(k[t]) * v[t], torch.exp(w) * den + torch.exp(k[t])
    layer = effective_layers(hf, ids, layers=[1])[0]
    a = layer.matrix.astype(np.float64)
    np.testing.assert_allclose(a.sum(-1), 1, atol=1e-6)
    assert (a >= 0).all() and not np.triu(a, 1).any()
    np.testing.assert_allclose(layer.mixed()[..., 0], torch.stack(wkv).numpy(), rtol=1e-5, atol=1e-6)


def test_xlstm_is_refused_with_its_reason():
    from transformers import xLSTMConfig

    from mha_viz_models.families.architectures import refusal
    assert "xLSTM blocks" in refusal(xLSTMConfig(vocab_size=64, hidden_size=32, num_blocks=2, num_heads=4), "x")
