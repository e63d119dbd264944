"""Our MultiHeadAttention against hand computations and against PyTorch's own module."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from mha_viz_models import MultiHeadAttention, apply_rotary
from mha_viz_models.attention.config import Shape


def _set(lin: nn.Linear, weight, bias=None):
    with torch.no_grad():
        lin.weight.copy_(torch.as_tensor(weight, dtype=torch.float32))
        if bias is not None:
            lin.bias.copy_(torch.as_tensor(bias, dtype=torch.float32))


def _torch_and_ours(d: int, h: int) -> tuple[nn.MultiheadAttention, MultiHeadAttention]:
    """PyTorch's module (random init) and ours holding the same weights."""
    ref = nn.MultiheadAttention(d, h, batch_first=True)
    ours = MultiHeadAttention(Shape(d, h))
    for lin, w, b in zip((ours.w_q, ours.w_k, ours.w_v), ref.in_proj_weight.detach().chunk(3),
                         ref.in_proj_bias.detach().chunk(3)):
        _set(lin, w, b)
    _set(ours.w_o, ref.out_proj.weight.detach(), ref.out_proj.bias.detach())
    return ref, ours


def test_matches_hand_computation_on_tiny_input():
    # d_model 2, two heads of width 1, identity projections: head 0 reads coordinate 0.
    mha = MultiHeadAttention(Shape(2, 2, bias=False))
    for lin in (mha.w_q, mha.w_k, mha.w_v, mha.w_o):
        _set(lin, np.eye(2))
    x = torch.tensor([[[1.0, 0.0], [0.0, 2.0], [1.0, 1.0]]])  # (1, 3, 2)
    with torch.no_grad():
        out, probs = mha(x)
    for h in range(2):
        col = x[0, :, h].numpy()
        scores = np.outer(col, col) / math.sqrt(1.0)  # d_k = 1
        expected = np.exp(scores) / np.exp(scores).sum(1, keepdims=True)
        np.testing.assert_allclose(probs[0, h].numpy(), expected, rtol=1e-6)
        np.testing.assert_allclose(out[0, :, h].numpy(), expected @ col, rtol=1e-6)


def test_matches_torch_multihead_attention_with_padding():
    torch.manual_seed(0)
    d, h = 16, 4
    ref, ours = _torch_and_ours(d, h)
    x = torch.randn(2, 5, d)
    pad = torch.tensor([[False] * 5, [False, False, False, True, True]])
    ref_out, ref_w = ref(x, x, x, key_padding_mask=pad, need_weights=True, average_attn_weights=False)
    out, probs = ours(x, key_padding_mask=pad)
    torch.testing.assert_close(probs, ref_w, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(out, ref_out, atol=1e-6, rtol=1e-5)
    assert probs[1, :, :, 3:].abs().max() == 0  # padded keys get exactly nothing


def test_reference_path_matches_torch_multihead_attention_with_masks():
    """`reference_forward`, the textbook path without speed tricks, against PyTorch's module:
    causal and padding masks and an additive mask, weights and gradients."""
    torch.manual_seed(4)
    d, h, n = 12, 3, 6
    ref, ours = _torch_and_ours(d, h)
    x, bias = torch.randn(2, n, d), torch.randn(n, n)
    pad = torch.tensor([[False] * n, [False] * 4 + [True] * 2])
    causal = nn.Transformer.generate_square_subsequent_mask(n)
    out, probs = ours.reference_forward(x, attn_mask=bias, key_padding_mask=pad, is_causal=True)
    ref_out, ref_w = ref(x, x, x, attn_mask=causal + bias, need_weights=True, average_attn_weights=False,
                         key_padding_mask=torch.zeros(2, n).masked_fill(pad, float("-inf")))
    torch.testing.assert_close(probs, ref_w, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(out, ref_out, atol=1e-6, rtol=1e-5)
    out.square().sum().backward()
    ref_out.square().sum().backward()
    torch.testing.assert_close(ours.w_v.weight.grad, ref.in_proj_weight.grad[2 * d:], atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("d", [16, 12])  # d_k 4 (scale 1/2, q scaled first) and 3 (scores scaled)
def test_gradients_match_torch_and_inference_matches_training_path(d):
    torch.manual_seed(1)
    h = 4
    ref, ours = _torch_and_ours(d, h)
    x = torch.randn(2, 6, d)
    x_ours, x_ref = x.clone().requires_grad_(), x.clone().requires_grad_()
    out, probs = ours(x_ours, is_causal=True)
    ref_out, ref_w = ref(x_ref, x_ref, x_ref, attn_mask=nn.Transformer.generate_square_subsequent_mask(6),
                         need_weights=True, average_attn_weights=False)
    (out.square().sum() + probs[:, :, :, 0].sum()).backward()
    (ref_out.square().sum() + ref_w[:, :, :, 0].sum()).backward()
    torch.testing.assert_close(x_ours.grad, x_ref.grad, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(ours.w_q.weight.grad, ref.in_proj_weight.grad[:d], atol=1e-5, rtol=1e-4)
    with torch.inference_mode():  # the in-place path used without autograd gives the same
        out_inf, probs_inf = ours(x, is_causal=True)
    torch.testing.assert_close(probs_inf, probs.detach(), atol=0, rtol=0)
    torch.testing.assert_close(out_inf, out.detach(), atol=0, rtol=0)


def test_causal_mask_gives_exact_zeros_and_first_row_one_hot():
    mha = MultiHeadAttention(Shape(8, 2))
    _, probs = mha(torch.randn(1, 6, 8), is_causal=True)
    assert torch.equal(probs.triu(1), torch.zeros_like(probs))
    assert torch.equal(probs[0, :, 0, 0], torch.ones(2))
    torch.testing.assert_close(probs.sum(-1), torch.ones(1, 2, 6))


def test_bool_and_additive_masks_agree():
    mha = MultiHeadAttention(Shape(8, 2))
    x = torch.randn(1, 4, 8)
    keep = torch.tensor([[True, True, False, True]] * 4)  # (n_q, n_k)
    additive = torch.zeros(4, 4).masked_fill(~keep, torch.finfo(torch.float32).min)
    _, p_bool = mha(x, attn_mask=keep)
    _, p_add = mha(x, attn_mask=additive)
    torch.testing.assert_close(p_bool, p_add)
    assert p_bool[..., 2].abs().max() == 0


def test_fully_masked_row_is_zero_not_nan():
    mha = MultiHeadAttention(Shape(8, 2))
    keep = torch.tensor([[False, False], [True, True]])
    out, probs = mha(torch.randn(1, 2, 8), attn_mask=keep)
    assert torch.isfinite(out).all()
    assert probs[0, :, 0].abs().max() == 0
    torch.testing.assert_close(probs[0, :, 1].sum(-1), torch.ones(2))


def test_cross_attention_and_custom_head_width():
    mha = MultiHeadAttention(Shape(12, 3, d_k=5, d_v=7, d_kv_in=20, bias=False))
    q, kv = torch.randn(2, 4, 12), torch.randn(2, 9, 20)
    out, probs = mha(q, kv)
    assert out.shape == (2, 4, 12) and probs.shape == (2, 3, 4, 9)
    assert mha.w_q.bias is None and mha.w_o.weight.shape == (12, 21)
    # Hand-check head 1 against explicit slices of the weights.
    qh = q @ mha.w_q.weight[5:10].detach().T
    kh = kv @ mha.w_k.weight[5:10].detach().T
    expected = torch.softmax(qh @ kh.transpose(1, 2) / math.sqrt(5), -1)
    torch.testing.assert_close(probs[:, 1].detach(), expected, atol=1e-6, rtol=1e-5)


def test_grouped_query_attention_equals_mha_with_shared_kv():
    torch.manual_seed(1)
    d, h, g = 16, 4, 2
    gqa = MultiHeadAttention(Shape(d, h, num_kv_heads=g))
    mha = MultiHeadAttention(Shape(d, h))
    d_k = d // h
    _set(mha.w_q, gqa.w_q.weight, gqa.w_q.bias)
    _set(mha.w_o, gqa.w_o.weight, gqa.w_o.bias)
    # Query head i reads KV head i // (h / g): repeat each KV head's rows h / g times.
    rows = torch.cat([torch.arange(kv * d_k, (kv + 1) * d_k) for kv in range(g) for _ in range(h // g)])
    _set(mha.w_k, gqa.w_k.weight[rows], gqa.w_k.bias[rows])
    _set(mha.w_v, gqa.w_v.weight[rows], gqa.w_v.bias[rows])
    x = torch.randn(2, 5, d)
    out_g, p_g = gqa(x, is_causal=True)
    out_m, p_m = mha(x, is_causal=True)
    torch.testing.assert_close(p_g, p_m)
    torch.testing.assert_close(out_g, out_m)
    assert gqa.w_k.weight.shape == (g * d_k, d)


def test_num_kv_heads_must_divide_heads():
    with pytest.raises(ValueError, match="must divide"):
        MultiHeadAttention(Shape(12, 4, num_kv_heads=3))


def test_rotary_scores_depend_only_on_relative_position():
    # With RoPE, q_i·k_j depends on i - j: the same vector at every position gives a Toeplitz
    # score matrix. Without RoPE every score would be equal.
    d_k, n = 8, 6
    inv = 1.0 / (10000 ** (torch.arange(0, d_k, 2).float() / d_k))
    ang = torch.outer(torch.arange(n).float(), inv)  # (n, d_k/2)
    emb = torch.cat([ang, ang], -1)
    v = torch.randn(d_k)
    x = v.expand(1, 1, n, d_k)
    q = apply_rotary(x, emb.cos(), emb.sin())
    scores = (q @ q.transpose(-2, -1))[0, 0]
    for off in range(1, n):
        diag = torch.diagonal(scores, off)
        torch.testing.assert_close(diag, diag[0].expand_as(diag), atol=1e-5, rtol=1e-5)
    assert not torch.allclose(torch.diagonal(scores, 1)[0], torch.diagonal(scores, 2)[0])


@settings(max_examples=30, deadline=None)
@given(
    b=st.integers(1, 3), n_q=st.integers(1, 7), n_k=st.integers(1, 7),
    kv=st.sampled_from([1, 2, 4]), causal=st.booleans(),
)
def test_property_rows_are_distributions(b, n_q, n_k, kv, causal):
    mha = MultiHeadAttention(Shape(16, 4, num_kv_heads=kv))
    q, k = torch.randn(b, n_q, 16), torch.randn(b, n_k, 16)
    out, probs = mha(q, k, is_causal=causal)
    assert out.shape == (b, n_q, 16) and probs.shape == (b, 4, n_q, n_k)
    sums = probs.sum(-1)
    visible = (torch.arange(n_q)[:, None] + (n_k - n_q) >= 0).expand(b, 4, n_q, 1)[..., 0] if causal \
        else torch.ones(b, 4, n_q, dtype=torch.bool)
    torch.testing.assert_close(sums[visible], torch.ones_like(sums[visible]))
    assert (sums[~visible] == 0).all()
    assert (probs >= 0).all()


@pytest.mark.parametrize("case", ["plain", "causal", "padding", "gqa-causal", "cross-causal",
                                  "bool-mask", "additive-mask", "all-masked-row"])
def test_fused_path_equals_the_path_with_weights(case):
    """need_weights=False (PyTorch's fused SDPA) computes what the explicit path computes."""
    torch.manual_seed(0)
    B, n, d = 2, 7, 16
    kw = dict(num_kv_heads=2) if case.startswith("gqa") else {}
    mha = MultiHeadAttention(Shape(d, 4, **kw)).eval()
    x = torch.randn(B, n, d)
    key = torch.randn(B, 11, d) if case.startswith("cross") else None
    args: dict = {"is_causal": "causal" in case}
    if case == "padding":
        args["key_padding_mask"] = torch.tensor([[False] * n, [False] * 4 + [True] * 3])
    if case == "bool-mask":
        args["attn_mask"] = torch.rand(n, n) > 0.3
        args["attn_mask"][:, 0] = True
    if case == "additive-mask":
        args["attn_mask"] = torch.randn(B, 1, n, n)
    if case == "all-masked-row":
        mask = torch.ones(n, n, dtype=torch.bool)
        mask[3] = False  # query 3 may see nothing: zeros, not NaN
        args["attn_mask"] = mask
    with torch.no_grad():
        slow, probs = mha(x, key, **args)
        fast, none = mha(x, key, need_weights=False, **args)
    assert none is None and probs is not None
    assert torch.isfinite(fast).all()
    torch.testing.assert_close(fast, slow, atol=1e-5, rtol=1e-5)


def test_stacked_projection_follows_weight_changes():
    """forward() projects q, k, v with one product of the stacked weights, kept between calls
    without autograd: it must notice in-place updates (an optimiser step, a copy_)."""
    torch.manual_seed(3)
    mha = MultiHeadAttention(Shape(16, 4, num_kv_heads=2))
    x = torch.randn(2, 5, 16)

    def separate():
        q = mha.project_q(x)
        k, v = mha.project_kv(x, x)
        return mha.merge(mha.attend(q, k, v)[0])

    with torch.no_grad():
        torch.testing.assert_close(mha(x)[0], separate(), atol=1e-6, rtol=1e-5)
        mha.w_k.weight.mul_(2.0)  # in place: same storage, new version
        torch.testing.assert_close(mha(x)[0], separate(), atol=1e-6, rtol=1e-5)
    opt = torch.optim.SGD(mha.parameters(), lr=0.1)
    mha(x)[0].square().sum().backward()  # with autograd: stacked afresh, gradients reach W_Q
    assert mha.w_q.weight.grad is not None and mha.w_q.weight.grad.abs().sum() > 0
    opt.step()
    with torch.inference_mode():
        torch.testing.assert_close(mha(x)[0], separate(), atol=1e-6, rtol=1e-5)
