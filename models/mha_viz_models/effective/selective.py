"""Mamba-1's selective scan (Mamba, Falcon-Mamba, Jamba): one matrix per channel, exact, and their
mean over blocks of channels (the aggregation Ali et al. use to show a layer's hidden attention).

Per channel c of the d_inner channels, with a state of N numbers, a = −exp(A_log[c]) (N,),
Δ_t[c] = softplus(dt_proj.weight · dt_t + dt_proj.bias) and B_t, C_t (N,) shared by the channels:

    h_t[c] = exp(Δ_t[c] a) ⊙ h_{t−1}[c] + Δ_t[c] B_t x_t[c]        y_t[c] = C_t · h_t[c] + D[c] x_t[c]

so A[c, t, s] = Σ_k C_t[k] B_s[k] exp(Σ_{r = s+1..t} Δ_r[c] a_k) · Δ_s[c]. Folded into A: Δ, a, B and C
(read after x_proj, and after Jamba's and Falcon-Mamba's norms on Δ, B and C, each by a hook). The
value-like vector is x after the short convolution and SiLU (x_proj's input), one number per channel.
Outside the mixing: the D skip, the gate silu(z) and out_proj: output_t = W_out (silu(z_t) ⊙ y_t)."""

from __future__ import annotations

from dataclasses import replace

import torch
import torch.nn.functional as F

from mha_viz_models.effective.layer import EffectiveLayer, Taps, as_np, linear, weight_parts

KIND = "mamba1"
NAME = "Mamba-1 (selective scan)"  # what tables and the grid call this kind
BLOCKS = 8  # the aggregated view: the mean over each of 8 blocks of consecutive channels
CHUNK = 64  # queries a chunk of `selective_matrix`
_NORMS = ("dt_layernorm", "b_layernorm", "c_layernorm")


def matches(module) -> bool:
    return all(hasattr(module, a) for a in ("x_proj", "dt_proj", "A_log", "D", "in_proj", "out_proj")) and \
        isinstance(module.x_proj, torch.nn.Linear)


def taps(module) -> dict:
    spec = {"in_proj": (module.in_proj, "out"), "x_in": (module.x_proj, "in"), "x_out": (module.x_proj, "out")}
    for norm in _NORMS:
        if isinstance(getattr(module, norm, None), torch.nn.Module):
            spec[norm] = (getattr(module, norm), "out")
    return spec


def selective_matrix(C: torch.Tensor, B: torch.Tensor, dt: torch.Tensor, a: torch.Tensor,
                     chunk: int = CHUNK) -> torch.Tensor:
    """A[c, t, s] = Σ_k C_t[k] exp(Σ_{r=s+1..t} Δ_r[c] a[c, k]) B_s[k] Δ_s[c] for s ≤ t, for C, B: (n, N), dt:
    (n, channels), a: (channels, N): (channels, n, n) float32, computed in float64 by chunks of `chunk` queries.

    With cum the cumulative sums of Δ a (float64; they decrease along the text, a < 0 < Δ) and b the first query of
    t's chunk, a key s before the chunk splits its decay at b: exp(cum_t − cum_s) = exp(cum_t − cum_b) ·
    exp(cum_b − cum_s), both factors at most 1. The keys before the chunk are then one matrix product over k with
    R_b[c, k, s] = exp(cum_b − cum_s) B_s[k] Δ_s[c], carried from chunk to chunk by the factor exp(cum_b' − cum_b);
    only the chunk's own keys take the exponentials of their differences. Exponentials: channels · N · n · chunk,
    where the plain form took channels · N · n²."""
    n, channels = dt.shape
    cum = torch.cumsum(dt.double()[:, :, None] * a.double()[None], dim=0).permute(1, 2, 0)  # (c, N, n)
    C, B, dt = C.double(), B.double(), dt.double()
    out = torch.zeros(channels, n, n)
    carried = torch.zeros(channels, C.shape[1], n, dtype=torch.float64)  # R_b over the keys before b: [..., :b]
    for b in range(0, n, chunk):
        e = min(n, b + chunk)
        here = cum[:, :, b:e]  # (c, N, q)
        keep = torch.ones(e - b, e - b, dtype=torch.bool).tril()
        seg = (here[..., :, None] - here[..., None, :]).masked_fill(~keep, float("-inf")).exp_()  # (c, N, t, s)
        out[:, b:e, b:e] = (torch.einsum("tk,sk,ckts->cts", C[b:e], B[b:e], seg) * dt[b:e].t()[:, None, :]).float()
        if b:
            left = C[b:e].t()[None] * torch.exp(here - cum[:, :, b:b + 1])  # (c, N, q): C_t[k] exp(cum_t − cum_b)
            out[:, b:e, :b] = (left.transpose(1, 2) @ carried[..., :b]).float()
        if e < n:  # R over the keys before e, referred to e
            carried[..., :b] *= torch.exp(cum[:, :, e:e + 1] - cum[:, :, b:b + 1])  # exp(cum_e − cum_b)
            carried[..., b:e] = torch.exp(cum[:, :, e:e + 1] - here) * B[b:e].t()[None] * dt[b:e].t()[:, None, :]
    return out


def edges(channels: int, blocks: int = BLOCKS) -> list[tuple[int, int]]:
    """(first, end) of each of `blocks` runs of consecutive channels."""
    blocks = max(1, min(blocks, channels))
    cut = [round(i * channels / blocks) for i in range(blocks + 1)]
    return list(zip(cut, cut[1:]))


def block_mean(matrix: torch.Tensor, blocks: int = BLOCKS) -> torch.Tensor:
    """The mean of the per-channel matrices over each of `blocks` runs of consecutive channels."""
    return torch.stack([matrix[a:b].mean(0) for a, b in edges(matrix.shape[0], blocks)])


CHANNEL_MEANS = True  # `compute(..., channel_means=True)`: the block means alone, a block of channels at a time


def per_channel(layer: EffectiveLayer, matrices, values: torch.Tensor, channel_means: bool) -> EffectiveLayer:
    """`layer` (its labels and parts) with its matrices: `matrices(first, end)` gives channels first..end − 1's
    (channels, n, n). Every channel's, and their block means (`aggregated`); or with `channel_means` the block means
    alone, made a block of channels at a time (a block's matrices held at once, not every channel's: what a run
    reads), its values the blocks' mean values (no reconstruction from those)."""
    channels = values.shape[1]
    blocks = edges(channels)
    about = f"mean over each of {len(blocks)} blocks of {channels // len(blocks)} consecutive channels"
    if channel_means:
        means = torch.stack([matrices(a, b).mean(0) for a, b in blocks])
        mean_values = torch.stack([values[:, a:b].mean(1) for a, b in blocks], 1)
        return replace(layer, grouping="channel group (mean)", matrix=as_np(means),
                       values=as_np(mean_values[..., None]), aggregation=about)
    matrix = matrices(0, channels)
    return replace(layer, matrix=as_np(matrix), aggregated=as_np(block_mean(matrix)), aggregation=about)


def compute(module, got: Taps, layer: int, name: str, *, channel_means: bool = False) -> EffectiveLayer:
    state, rank = module.ssm_state_size, module.time_step_rank
    z = got["in_proj"].chunk(2, dim=-1)[1]
    x = got["x_in"]
    dt_low, B, C = got["x_out"].split([rank, state, state], dim=-1)
    if "dt_layernorm" in taps(module):
        dt_low, B, C = got["dt_layernorm"], got["b_layernorm"], got["c_layernorm"]
    dt = F.softplus(dt_low @ module.dt_proj.weight.detach().float().t() + module.dt_proj.bias.detach().float())
    a = -torch.exp(module.A_log.detach().float())
    parts = {"D": as_np(module.D), "gate": as_np(F.silu(z)), **weight_parts("out_proj", module.out_proj)}
    bare = EffectiveLayer(
        layer=layer, module=name, kind=KIND, label=f"{NAME}: semiseparable, one matrix per channel",
        structure="semiseparable", grouping="channel",
        folded="C_t·(exp(Σ Δ_r a) ⊙ B_s) between s and t, Δ_s; the convolution and SiLU in x",
        value_name="x (after the short convolution and SiLU)", matrix=None, values=as_np(x[:, :, None]), parts=parts)
    return per_channel(bare, lambda i, j: selective_matrix(C, B, dt[:, i:j], a[i:j]), x, channel_means)


def reconstruct(layer: EffectiveLayer) -> torch.Tensor:
    x = torch.as_tensor(layer.values)[..., 0]
    y = torch.as_tensor(layer.mixed())[..., 0] + torch.as_tensor(layer.parts["D"]) * x
    return linear(y * torch.as_tensor(layer.parts["gate"]), layer.parts, "out_proj")
