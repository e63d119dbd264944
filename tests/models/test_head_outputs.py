"""Head weights and head outputs z captured through real models (SmolLM2, MiniLM, random-init
GPT-2 and Llama), checked against the model's own projections; and the random-init baseline.
The measures themselves, on planted arrays: tests/unit/test_metrics_compare.py."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import mha_viz
import mha_viz_models
from mha_viz import metrics

TEXT = "The cat sat on the mat. The dog sat on the log."


# --- 3. grouped-query attention ---------------------------------------------------------------

@pytest.mark.model
def test_smollm2_qk_gqa_shapes_and_values(smollm2):
    """SmolLM2 (30 × 9 heads, 3 KV heads): weight shapes, and a (270, 270) QK cosine that is a cosine matrix."""
    w = smollm2.head_weights()
    assert tuple(w["W_Q"].shape) == (30, 9, 576, 64)
    assert tuple(w["W_K"].shape) == (30, 3, 576, 64)
    assert tuple(w["W_V"].shape) == (30, 3, 576, 64)
    assert tuple(w["W_O"].shape) == (30, 9, 64, 576)
    run = mha_viz.analyze(smollm2, "The cat sat.")
    qk = metrics.head_similarity(run, "qk", weights=w)
    assert qk.shape == (270, 270)
    np.testing.assert_allclose(qk, qk.T, atol=1e-7)
    np.testing.assert_allclose(np.diag(qk), 1.0, atol=1e-6)
    assert (qk >= -1).all() and (qk <= 1).all()
    # a few pairs against the model's own projections, materialised in float64
    def wqk(layer, h):
        attn = smollm2.hf_model.model.layers[layer].self_attn
        wq = attn.q_proj.weight.detach().double().numpy().T  # (d_model, H·d_k), x @ W
        wk = attn.k_proj.weight.detach().double().numpy().T  # (d_model, G·d_k)
        g = h // 3
        return (wq[:, h * 64:(h + 1) * 64] @ wk[:, g * 64:(g + 1) * 64].T).ravel()
    for (l1, h1), (l2, h2) in [((0, 0), (0, 1)), ((0, 0), (0, 5)), ((3, 8), (17, 2)), ((29, 4), (29, 3))]:
        a, b = wqk(l1, h1), wqk(l2, h2)
        expected = a @ b / (np.linalg.norm(a) * np.linalg.norm(b))
        assert qk[l1 * 9 + h1, l2 * 9 + h2] == pytest.approx(expected, abs=1e-5)


# --- 12. capture of z through real models ----------------------------------------------------

def _output_projection(model, layer: int) -> torch.nn.Module:
    """The Linear applying W_O in `layer`, found from the model's structure."""
    hf = model.hf_model
    if hasattr(hf, "encoder"):  # BertModel
        attn = hf.encoder.layer[layer].attention
        return attn.mha.w_o if hasattr(attn, "mha") else attn.output.dense
    if hasattr(hf, "transformer"):  # GPT2LMHeadModel
        attn = hf.transformer.h[layer].attn
        return attn.mha.w_o if hasattr(attn, "mha") else attn.c_proj
    attn = hf.model.layers[layer].self_attn  # Llama
    return attn.mha.w_o if hasattr(attn, "mha") else attn.o_proj


def _check_z_rebuilds_projection(model, text: str, *, rtol: float = 1e-5, atol: float = 1e-5):
    """Σ_h z_h W_O[h] + bias equals the projection's own output (forward hook) at the first and last layer."""
    layers = sorted({0, model.num_layers - 1})
    seen: dict[int, torch.Tensor] = {}
    hooks = []
    for layer in layers:
        hooks.append(_output_projection(model, layer).register_forward_hook(
            lambda _m, _i, out, layer=layer: seen.__setitem__(layer, out.detach().double().clone())))
    try:
        run = mha_viz.analyze(model, text)
    finally:
        for h in hooks:
            h.remove()
    w = model.head_weights()
    L, H, n = model.num_layers, model.num_heads, run.n
    z = run.head_outputs
    assert z is not None and z.dtype == np.float32
    assert z.shape == (L, H, n, w["W_O"].shape[2])
    for layer in layers:
        proj = _output_projection(model, layer)
        bias = 0.0 if proj.bias is None else proj.bias.detach().double().numpy()
        rebuilt = np.einsum("htv,hvd->td", z[layer].astype(np.float64), w["W_O"][layer].double().numpy()) + bias
        np.testing.assert_allclose(rebuilt, seen[layer][0].numpy(), rtol=rtol, atol=atol)
    return run


@pytest.mark.model
@pytest.mark.parametrize("hf_name,ours_name", [("minilm", "minilm_ours"), ("smollm2", "smollm2_ours")])
def test_head_outputs_of_bundled_models(request, hf_name, ours_name):
    """Captured z has shape (L, H, n, d_k), HF and our attention agree, and Σ_h z_h W_O[h] + b is the
    projection's output."""
    hf, ours = request.getfixturevalue(hf_name), request.getfixturevalue(ours_name)
    a = _check_z_rebuilds_projection(hf, TEXT)
    b = _check_z_rebuilds_projection(ours, TEXT)
    assert a.head_outputs.shape == (hf.num_layers, hf.num_heads, a.n, hf.d_k)
    assert np.abs(a.head_outputs - b.head_outputs).max() < 1e-5
    for key in ("W_Q", "W_K", "W_V", "W_O"):
        np.testing.assert_array_equal(hf.head_weights()[key].numpy(), ours.head_weights()[key].numpy())


def test_gpt2_conv1d_weights_and_outputs(gpt2_dir):
    """GPT-2's Conv1D layout: head_weights slices c_attn / c_proj as x @ W; z rebuilds c_proj's output."""
    model = mha_viz.load_model(str(gpt2_dir), device="cpu")
    w = model.head_weights()
    H, d = model.num_heads, model.d_model
    d_k = d // H
    for layer in range(model.num_layers):
        attn = model.hf_model.transformer.h[layer].attn
        c_attn = attn.c_attn.weight.detach()  # (d, 3d), x @ W
        for i, key in enumerate(("W_Q", "W_K", "W_V")):
            block = c_attn[:, i * d:(i + 1) * d]
            expected = torch.stack([block[:, h * d_k:(h + 1) * d_k] for h in range(H)])  # (H, d, d_k)
            torch.testing.assert_close(w[key][layer], expected, rtol=0, atol=0)
        c_proj = attn.c_proj.weight.detach()  # (d, d): rows read the concatenated heads
        expected_o = torch.stack([c_proj[h * d_k:(h + 1) * d_k] for h in range(H)])  # (H, d_k, d)
        torch.testing.assert_close(w["W_O"][layer], expected_o, rtol=0, atol=0)
    run = _check_z_rebuilds_projection(model, TEXT)
    ours = mha_viz.load_model(str(gpt2_dir), device="cpu", local_attention=True)
    assert np.abs(mha_viz.analyze(ours, TEXT).head_outputs - run.head_outputs).max() < 1e-5


def test_llama_gqa_weights_and_outputs(llama_dir):
    """Random Llama with 8 query / 2 KV heads: W_K slices k_proj per KV head; z rebuilds o_proj's output."""
    model = mha_viz.load_model(str(llama_dir), device="cpu")
    w = model.head_weights()
    d_k = model.d_k
    assert tuple(w["W_K"].shape) == (2, 2, 64, d_k) and tuple(w["W_Q"].shape) == (2, 8, 64, d_k)
    k_proj = model.hf_model.model.layers[1].self_attn.k_proj.weight.detach().T  # (d, G·d_k)
    torch.testing.assert_close(w["W_K"][1, 1], k_proj[:, d_k:2 * d_k], rtol=0, atol=0)
    run = _check_z_rebuilds_projection(model, TEXT)
    assert run.head_outputs.shape == (2, 8, run.n, d_k)
    # z of query heads 0..3 use V of KV head 0: the first query row (causal: sees token 0 only)
    # is exactly token 0's value, so those four heads agree there
    v0 = run.head_outputs[0, :4, 0]
    np.testing.assert_allclose(v0, np.broadcast_to(v0[0], v0.shape), atol=1e-6)
    assert np.abs(run.head_outputs[0, 4, 0] - v0[0]).max() > 1e-4


# --- 13. random baseline ----------------------------------------------------------------------

@pytest.mark.model
def test_random_baseline_same_shape_new_weights_reproducible(minilm):
    """random_baseline keeps shapes, changes the weights, is reproducible per seed and leaves the RNG alone."""
    trained = minilm.head_weights()
    state = torch.random.get_rng_state()
    twin = mha_viz_models.random_twin(minilm)
    assert torch.equal(torch.random.get_rng_state(), state)
    again = mha_viz_models.random_twin(minilm)
    other = mha_viz_models.random_twin(minilm, seed=1)
    assert (twin.num_layers, twin.num_heads, twin.d_model) == (minilm.num_layers, minilm.num_heads, minilm.d_model)
    w1, w2, w3 = twin.head_weights(), again.head_weights(), other.head_weights()
    for key in trained:
        assert w1[key].shape == trained[key].shape
        assert not torch.allclose(w1[key], trained[key])
        assert torch.equal(w1[key], w2[key])
        assert not torch.equal(w1[key], w3[key])
    # the trained model's weights were not touched
    assert torch.equal(minilm.head_weights()["W_Q"], trained["W_Q"])
    run = mha_viz.analyze(twin, "A short text.")
    assert run.head_outputs.shape == (minilm.num_layers, minilm.num_heads, run.n, minilm.d_k)
