"""`mha_viz_models.attention.rotary` and `mha_viz_models.attention.visibility` against independent computations:
each RoPE layout is a rotation of its own pairs of dimensions by its own angle (written out pair by pair), Llama 4's
complex angles are the same rotation, chunks and windows hide what their definitions hide, and a
sink column takes a share of each row."""

from __future__ import annotations

import math

import pytest
import torch

from mha_viz_models import MultiHeadAttention
from mha_viz_models.attention.config import Extras, Positions, Shape
from mha_viz_models.attention.rotary import apply_complex_rotary, apply_rotary, query_temperature
from mha_viz_models.attention.visibility import hidden_keys

D, N = 8, 5


def _angles() -> torch.Tensor:
    """(N, D / 2): the angle of pair f at position p, p · 10000^(−2f / D)."""
    inv = 10000.0 ** (-torch.arange(0, D, 2).double() / D)  # (D / 2,)
    return torch.arange(N).double()[:, None] * inv[None, :]


def _turned(x: torch.Tensor, pairs: list[tuple[int, int]]) -> torch.Tensor:
    """x (…, N, D) with pair f = (a, b) of each position turned by angle f, one pair at a time."""
    out, theta = x.clone(), _angles()
    for f, (a, b) in enumerate(pairs):
        c, s = theta[:, f].cos(), theta[:, f].sin()  # (N,)
        out[..., a], out[..., b] = x[..., a] * c - x[..., b] * s, x[..., b] * c + x[..., a] * s
    return out


@pytest.mark.parametrize("layout", ["halves", "halves_once", "pairs"])
def test_each_layout_turns_its_own_pairs(layout):
    x = torch.randn(2, 3, N, D, dtype=torch.float64)  # (B, h, n, d)
    theta = _angles()  # (N, D / 2)
    cos, sin = {"halves": (torch.cat([theta, theta], -1).cos(), torch.cat([theta, theta], -1).sin()),
                "halves_once": (theta.cos(), theta.sin()),
                "pairs": (theta.repeat_interleave(2, -1).cos(), theta.repeat_interleave(2, -1).sin())}[layout]
    pairs = ([(2 * f, 2 * f + 1) for f in range(D // 2)] if layout == "pairs"
             else [(f, f + D // 2) for f in range(D // 2)])
    torch.testing.assert_close(apply_rotary(x, cos, sin, layout), _turned(x, pairs))


def test_complex_angles_turn_adjacent_pairs():
    x = torch.randn(1, 2, N, D)
    freqs = torch.polar(torch.ones(N, D // 2), _angles().float())[None]  # (1, N, D / 2), e^{iθ}
    torch.testing.assert_close(apply_complex_rotary(x, freqs), _turned(x.double(), [(2 * f, 2 * f + 1)
                               for f in range(D // 2)]).float())


def test_a_layer_without_rope_ignores_the_angles_it_is_handed():
    mha = MultiHeadAttention(Shape(16, 2), Positions(rope=None))
    x, theta = torch.randn(1, N, 16), torch.randn(N, 8)
    for a, b in zip(mha.project_self(x, (theta.cos(), theta.sin())), mha.project_self(x)):
        torch.testing.assert_close(a, b, atol=0, rtol=0)


def test_query_temperature_is_llama_4s_formula():
    got = query_temperature(6, 3, floor_scale=2, attn_scale=0.5)[:, 0]
    want = [1 + 0.5 * math.log(1 + math.floor((p + 1) / 2)) for p in range(3, 9)]
    torch.testing.assert_close(got, torch.tensor(want))


@pytest.mark.parametrize("n_q", [7, 3])  # a whole text, and its last 3 queries after a KV cache
def test_chunks_and_windows_hide_what_they_define(n_q):
    n_k, c, w = 7, 3, 2
    chunked = hidden_keys(n_q, n_k, chunk=c)
    windowed = hidden_keys(n_q, n_k, window=w)
    for i in range(n_q):
        p = n_k - n_q + i  # the query's position
        for j in range(n_k):
            assert bool(chunked[i, j]) == (j > p or j // c != p // c)
            assert bool(windowed[i, j]) == (j > p or j <= p - w)


def test_sink_logits_take_a_share_of_each_row():
    """With sink logit s_h, a row is softmax over [scores, s_h] without its last entry."""
    mha = MultiHeadAttention(Shape(16, 2), extras=Extras(sinks=torch.tensor([0.5, -1.0])))
    q, k, v = mha.project_self(torch.randn(1, N, 16))
    z, probs = mha.attend(q, k, v, is_causal=True)
    scores = mha.scores(q, k).masked_fill(torch.ones(N, N, dtype=torch.bool).triu(1), float("-inf"))
    full = torch.cat([scores, mha.sinks.reshape(1, 2, 1, 1).expand(1, 2, N, 1)], -1).softmax(-1)  # (1, 2, N, N + 1)
    torch.testing.assert_close(probs, full[..., :-1])
    torch.testing.assert_close(z, probs @ v)
    assert (probs.sum(-1) < 1).all()
