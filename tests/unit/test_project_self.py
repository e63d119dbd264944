"""`MultiHeadAttention.project_self`: the one place where self-attention's q, k, v are projected
and turned by RoPE (used by `forward`, the adapters, lean recompute and the teaching view)."""

from __future__ import annotations

import pytest
import torch

from mha_viz_models import MultiHeadAttention, apply_rotary
from mha_viz_models.attention.config import Shape


def _rope(n: int, d_k: int, batch: int | None = None):
    inv = 1.0 / (10000 ** (torch.arange(0, d_k, 2).float() / d_k))
    ang = torch.outer(torch.arange(n).float(), inv)  # (n, d_k / 2)
    emb = torch.cat([ang, ang], -1)  # (n, d_k)
    if batch is not None:
        emb = emb.expand(batch, n, d_k)  # (B, n, d_k), as Hugging Face passes it
    return emb.cos(), emb.sin()


@pytest.mark.parametrize("batched_rope", [False, True])
def test_project_self_with_rotary_is_project_q_kv_then_apply_rotary(batched_rope):
    torch.manual_seed(0)
    B, n, d, h, g = 2, 5, 32, 8, 2
    mha = MultiHeadAttention(Shape(d, h, num_kv_heads=g))
    x = torch.randn(B, n, d)
    cos, sin = _rope(n, mha.d_k, B if batched_rope else None)
    q, k, v = mha.project_self(x, (cos, sin))
    assert q.shape == (B, h, n, mha.d_k) and k.shape == (B, g, n, mha.d_k) and v.shape == (B, g, n, mha.d_v)
    q_ref = apply_rotary(mha.project_q(x), cos, sin)
    k_ref, v_ref = mha.project_kv(x, x)
    k_ref = apply_rotary(k_ref, cos, sin)
    # the same operations in the same order: bit for bit
    assert torch.equal(q, q_ref) and torch.equal(k, k_ref) and torch.equal(v, v_ref)


def test_project_self_without_rotary_and_stacked():
    torch.manual_seed(1)
    mha = MultiHeadAttention(Shape(16, 4, num_kv_heads=2))
    x = torch.randn(3, 7, 16)
    q, k, v = mha.project_self(x)
    assert torch.equal(q, mha.project_q(x))
    assert all(torch.equal(a, b) for a, b in zip((k, v), mha.project_kv(x, x)))
    with torch.no_grad():
        stacked = mha.project_self(x, stacked=True)
        assert all(torch.equal(a, b) for a, b in zip(stacked, mha.project_qkv(x)))  # one product
        for a, b in zip(stacked, (q, k, v)):
            torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-5)


def test_stacked_falls_back_to_three_products_when_the_biases_differ():
    torch.manual_seed(2)
    lin = [torch.nn.Linear(16, 16, bias=b) for b in (True, False, True, True)]
    mha = MultiHeadAttention.from_linears(*lin, num_heads=4)
    x = torch.randn(1, 4, 16)
    q, k, v = mha.project_self(x, stacked=True)
    assert torch.equal(q, mha.project_q(x)) and torch.equal(k, mha.project_kv(x, x)[0])


def test_forward_is_attend_and_merge_over_project_self():
    torch.manual_seed(3)
    mha = MultiHeadAttention(Shape(32, 4, num_kv_heads=2)).eval()
    x = torch.randn(2, 6, 32)
    rope = _rope(6, mha.d_k)
    with torch.no_grad():
        out, probs = mha(x, is_causal=True, rotary=rope)
        q, k, v = mha.project_self(x, rope, stacked=True)
        z, p = mha.attend(q, k, v, is_causal=True)
        assert torch.equal(probs, p) and torch.equal(out, mha.merge(z))
