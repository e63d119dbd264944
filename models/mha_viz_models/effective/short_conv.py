"""LFM2's short convolution: a banded matrix per channel, exact.

The layer computes, per channel c, with B, C, x the three thirds of in_proj's output and w the
depthwise convolution's kernel of length K (applied with F.conv1d on its weight):

    y_t[c] = C_t[c] · (Σ_{s = t−K+1..t} w[c, K−1−(t−s)] · B_s[c] · x_s[c] + bias[c])

so A[c, t, s] = w[c, K−1−(t−s)] · B_s[c] for t−K < s ≤ t, else 0: banded, K wide. Folded into A:
the kernel and the input gate B. The value-like vector is x (one number per channel). Outside the
mixing: the output gate C (per token and channel), the convolution's bias, and out_proj.
One matrix per channel: (hidden, n, n)."""

from __future__ import annotations

import torch

from mha_viz_models.effective.layer import EffectiveLayer, Taps, as_np, linear, weight_parts

KIND = "short_conv"
NAME = "short convolution"  # what tables and the grid call this kind


def matches(module) -> bool:
    return type(module).__name__.endswith("ShortConv") and hasattr(module, "conv") and hasattr(module, "in_proj")


def taps(module) -> dict:
    return {"in_proj": (module.in_proj, "out")}


def banded_matrix(w: torch.Tensor, b_gate: torch.Tensor, n: int) -> torch.Tensor:
    """A[c, t, s] = w[c, K−1−(t−s)] · b_gate[s, c] inside the band, 0 outside: (channels, n, n)."""
    k = w.shape[-1]
    lag = torch.arange(n)[:, None] - torch.arange(n)[None, :]  # t − s
    inside = (lag >= 0) & (lag < k)
    taps_ = w[:, (k - 1 - lag).clamp(0, k - 1)] * inside  # (channels, n, n)
    return taps_ * b_gate.t()[:, None, :]


def compute(module, got: Taps, layer: int, name: str) -> EffectiveLayer:
    B, C, x = got["in_proj"].chunk(3, dim=-1)
    n = x.shape[0]
    w = module.conv.weight.detach().float()[:, 0]  # (channels, K)
    parts = {"gate": as_np(C), **weight_parts("out_proj", module.out_proj)}
    if module.conv.bias is not None:
        parts["conv.bias"] = as_np(module.conv.bias)
    return EffectiveLayer(
        layer=layer, module=name, kind=KIND,
        label=f"{NAME}: banded ({w.shape[1]} wide), one matrix per channel",
        structure="banded", grouping="channel", folded="the convolution's kernel and the input gate B_s",
        value_name="x (the third of in_proj's output)",
        matrix=as_np(banded_matrix(w, B, n)), values=as_np(x[:, :, None]), parts=parts)


def reconstruct(layer: EffectiveLayer) -> torch.Tensor:
    y = torch.as_tensor(layer.mixed())[..., 0]
    if "conv.bias" in layer.parts:
        y = y + torch.as_tensor(layer.parts["conv.bias"])
    return linear(torch.as_tensor(layer.parts["gate"]) * y, layer.parts, "out_proj")
