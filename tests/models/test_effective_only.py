"""Models made of state-space layers alone (issue 88): random-init Mamba, Mamba-2 and Falcon-Mamba folders load as a
user's model (`mha_viz_models.loading.effective_only`), and a run holds each layer's effective attention as weights:
for every group, |A| with each row divided by its sum, against A computed here by `effective_layers` on the same
weights loaded by transformers alone (not through mha-viz's loader), and A itself rebuilds each layer's output
(tests/models/test_effective_attention.py). RWKV and xLSTM stay refused with their reason, and our MHA is refused on
a model without softmax layers."""

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


@pytest.fixture(scope="module", params=["mamba2", "mamba", "falcon_mamba"])
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
    channels = model.num_heads if name == "mamba2" else model.hf_model.config.intermediate_size  # Mamba: a channel
    assert needs.analysis(model, run.n).host == memory.analysis_need(model, run.n).host + 16 * channels * run.n ** 2
    facts = model.facts()
    assert "effective attention" in facts["attention implementation"] and "no softmax" in facts["architecture"]
    with pytest.raises(mha_viz.ModelLoadError, match="no softmax attention layer"):
        mha_viz.load_model(path, device="cpu", local_attention=True)


def test_rwkv_and_xlstm_are_refused_with_their_reason(tmp_path):
    from transformers import RwkvConfig, xLSTMConfig

    from mha_viz_models.families.architectures import refusal
    assert "RWKV" in refusal(RwkvConfig(vocab_size=64, hidden_size=32, num_hidden_layers=2), "r")
    assert "xLSTM" in refusal(xLSTMConfig(vocab_size=64, hidden_size=32, num_blocks=2), "x")
