"""RecurrentGemma's recurrent block (Griffin's RG-LRU): a recurrent (semiseparable, rank one per
channel) matrix per channel, exact, and its mean over each head's block of channels.

The block computes x = conv_1d(linear_x(u)) (the module runs; no activation after it), then, per
channel c, with the gates of x read in the forward (i_t = sigmoid(input gate), r_t = sigmoid(recurrent
gate), block-diagonal per head) and a_t = exp(−8 r_t softplus(Λ_c)):

    h_t = a_t h_{t−1} + m_t i_t x_t,   m_t = √(1 − a_t²) (m = 1 and no carry at position 0, the reset)

so A[c, t, s] = (Π_{r = s+1..t} a_r[c]) · m_s[c] · i_s[c] for s ≤ t. Folded into A: the recurrence gate,
the input gate and the √(1 − a²) normalisation. The value-like vector is x, the RG-LRU's input (after
the convolution, which is not folded). Outside the mixing: the y branch's gate gelu(linear_y(u)) and
linear_out: output_t = W_out (gate_t ⊙ h_t) + b_out."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from mha_viz_models.effective.layer import EffectiveLayer, NotExact, Taps, as_np, linear, weight_parts

KIND = "rg_lru"
NAME = "RG-LRU"  # what tables and the grid call this kind


def matches(module) -> bool:
    return all(hasattr(module, a) for a in ("rg_lru", "linear_x", "linear_y", "linear_out"))


def taps(module) -> dict:
    return {"lru": (module.rg_lru, "args"), "y": (module.linear_y, "out")}


def _gate(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """sigmoid of the block-diagonal gate: x (n, heads · width) through (heads, width, width) + (heads, width)."""
    heads, width = bias.shape
    blocks = torch.einsum("nhi,hij->nhj", x.reshape(-1, heads, width), weight.detach().float()) + bias.detach().float()
    return torch.sigmoid(blocks.reshape(x.shape[0], -1))


def recurrent_matrix(log_a: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """A[c, t, s] = exp(Σ_{r=s+1..t} log a_r[c]) · scale_s[c] for s ≤ t: (channels, n, n) float32.
    log_a, scale: (n, channels); log_a[0] is never used (nothing comes before position 0)."""
    n, channels = log_a.shape
    cum = torch.cumsum(torch.cat([torch.zeros(1, channels, dtype=torch.float64), log_a[1:].double()]), dim=0).t()
    keep = torch.ones(n, n, dtype=torch.bool).tril()
    out = torch.empty(channels, n, n)
    for c0 in range(0, channels, 64):
        seg = (cum[c0:c0 + 64, :, None] - cum[c0:c0 + 64, None, :]).masked_fill(~keep, float("-inf"))
        out[c0:c0 + 64] = (torch.exp(seg) * scale[:, c0:c0 + 64].double().t()[:, None, :]).float()
    return out


def compute(module, got: Taps, layer: int, name: str) -> EffectiveLayer:
    lru = module.rg_lru
    x, positions = got["lru"][0], got["lru"][1].reshape(-1)
    if bool((positions[1:] == 0).any()) or int(positions[0]) != 0:
        raise NotExact(f"Layer {layer}: the RG-LRU resets inside the text (a position 0 after the first token).")
    i = _gate(x, lru.input_gate_weight, lru.input_gate_bias)
    r = _gate(x, lru.recurrent_gate_weight, lru.recurrent_gate_bias)
    log_a = -8.0 * r * F.softplus(lru.recurrent_param.detach().float())
    m = torch.sqrt(1 - torch.exp(2 * log_a))
    m[0] = 1.0  # the reset at position 0
    matrix = recurrent_matrix(log_a, m * i)
    heads = lru.num_attention_heads
    parts = {"gate": as_np(module.act_fn(got["y"])), **weight_parts("linear_out", module.linear_out)}
    return EffectiveLayer(
        layer=layer, module=name, kind=KIND, label=f"{NAME}: recurrent, one matrix per channel",
        structure="recurrent", grouping="channel",
        folded="the recurrence gates Π a_r between s and t, √(1 − a_s²) and the input gate i_s",
        value_name="x (the RG-LRU's input, after the convolution)",
        matrix=as_np(matrix), values=as_np(x[:, :, None]), parts=parts,
        aggregated=as_np(matrix.reshape(heads, -1, *matrix.shape[1:]).mean(1)),
        aggregation=f"mean over each head's block of {lru.block_width} channels")


def reconstruct(layer: EffectiveLayer) -> torch.Tensor:
    h = torch.as_tensor(layer.mixed())[..., 0]
    return linear(h * torch.as_tensor(layer.parts["gate"]), layer.parts, "linear_out")
