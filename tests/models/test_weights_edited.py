"""Weights changed in place after something was computed from them alone (a notebook zeroing a head under
`torch.no_grad()`): the per-head matrices, the adapter over a fused projection (its own copy of the rows) and the
composition and copying scores are computed again, each equal to what a fresh load given the same edit computes, and
the edit is where it was made (by hand: GPT-2's `Conv1D` computes x @ W, so a head's columns of `c_attn` are its
W_Q, its rows of `c_proj` its W_O). Until this was fixed each was kept from before the edit for the model's life."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import mha_viz

D_HEAD = 16  # tests/conftest.py's gpt2_dir: 64 wide, 4 heads


def _edit(model) -> None:
    layers = model.hf_model.transformer.h
    with torch.no_grad():
        layers[1].attn.c_attn.weight[:, :D_HEAD] *= 3  # layer 1, head 0: its queries three times as large
        layers[0].attn.c_proj.weight[D_HEAD:2 * D_HEAD] = 0  # layer 0, head 1: writes nothing


@pytest.mark.model
def test_an_edit_in_place_is_seen_by_what_the_weights_alone_give(gpt2_dir):
    model = mha_viz.load_model(str(gpt2_dir), device="cpu")  # its own: the session's tiny_gpt2 stays as it is
    before = {k: w.clone() for k, w in model.head_weights().items()}
    composed_before = mha_viz.composition_scores(model)
    copying_before = mha_viz.copying_scores(model)
    _edit(model)
    fresh = mha_viz.load_model(str(gpt2_dir), device="cpu")
    _edit(fresh)

    after = model.head_weights()
    torch.testing.assert_close(after["W_Q"][1, 0], 3 * before["W_Q"][1, 0])
    torch.testing.assert_close(after["W_Q"][1, 1:], before["W_Q"][1, 1:])
    assert not after["W_O"][0, 1].any() and before["W_O"][0, 1].any()
    for kind, w in fresh.head_weights().items():
        torch.testing.assert_close(after[kind], w, rtol=0, atol=0)
    for layer in (0, 1):  # the adapter's own copy of the fused rows, as a fresh one makes it
        ours, theirs = model.layer_adapter(layer).mha, fresh.layer_adapter(layer).mha
        for name in ("w_q", "w_k", "w_v", "w_o"):
            torch.testing.assert_close(getattr(ours, name).weight, getattr(theirs, name).weight, rtol=0, atol=0)

    composed, copying = mha_viz.composition_scores(model), mha_viz.copying_scores(model)
    for kind, scores in mha_viz.composition_scores(fresh).items():
        np.testing.assert_allclose(composed[kind], scores, rtol=1e-6, atol=1e-7, equal_nan=True)
    np.testing.assert_allclose(copying, mha_viz.copying_scores(fresh), rtol=1e-6, atol=1e-7, equal_nan=True)
    assert np.isnan(copying[0, 1]) and not np.isnan(copying_before[0, 1])  # a head that writes nothing copies nothing
    assert np.isnan(composed["v"][0, 1]).all() and not np.isnan(composed_before["v"][0, 1, 1:]).any()
