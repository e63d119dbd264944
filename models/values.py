"""What each key token writes through each head (Kobayashi et al. 2020): f_h(x_j) =
(x_j W_V[G] + b_V[G]) W_O[h], the value of token j carried through head h's rows of the output
projection (W_O's bias belongs to no token). A head's output at query i is Σ_j A[h, i, j] f_h(x_j);
the norms ‖f_h(x_j)‖ turn every attention pattern into contributions (`mha_viz.attribution`)."""

from __future__ import annotations

import torch

from .loaded import Capture, LoadedModel


def head_values(loaded: LoadedModel, capture: Capture, layer: int) -> torch.Tensor:
    """f_h(x_j) for every head and key of one layer: (B, H, n, d_model), from the layer's
    recorded input (a lean capture, or an eager one with `inputs=True`)."""
    inp = capture.layer_inputs[layer]
    mha = loaded.layer_adapter(layer).mha
    with loaded.lock, torch.inference_mode():
        _, v = mha.project_kv(inp.hidden, inp.hidden)  # (B, G, n, d_v), b_V included; RoPE never turns values
        v = v.repeat_interleave(mha.num_heads // mha.num_kv_heads, dim=1)  # (B, H, n, d_v): query head h reads KV h // (H/G)
        w_o = mha.w_o.weight.T.reshape(mha.num_heads, mha.d_v, -1)  # (H, d_v, d_model): head h's rows of W_O
        return torch.einsum("bhnd,hdm->bhnm", v, w_o.to(v.dtype))


def value_norms(loaded: LoadedModel, capture: Capture, layer: int) -> torch.Tensor:
    """‖f_h(x_j)‖₂ for every head and key of one layer: (B, H, n). Computed as the quadratic form
    v (W_O[h] W_O[h]ᵀ) vᵀ of the d_v-wide values (the Gram matrix made in float64): d_model / d_v
    times cheaper than making f_h(x_j) (12 × for MiniLM), no (n, d_model) product in memory."""
    inp = capture.layer_inputs[layer]
    mha = loaded.layer_adapter(layer).mha
    with loaded.lock, torch.inference_mode():
        _, v = mha.project_kv(inp.hidden, inp.hidden)  # (B, G, n, d_v)
        w_o = mha.w_o.weight.T.reshape(mha.num_heads, mha.d_v, -1).double()  # (H, d_v, d_model), exact Gram
        gram = (w_o @ w_o.transpose(1, 2)).to(v.dtype)  # (H, d_v, d_v): W_O[h] W_O[h]ᵀ
        group = mha.num_heads // mha.num_kv_heads
        B, G, n, d_v = v.shape
        vg = v.reshape(B, G, 1, n, d_v)  # each KV head's values, for the `group` query heads that read them
        squared = (torch.matmul(vg, gram.reshape(1, G, group, d_v, d_v)) * vg).sum(-1)  # (B, G, group, n)
        return squared.reshape(B, mha.num_heads, n).clamp_min(0).sqrt()
