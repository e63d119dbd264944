"""Mamba-2 (state-space duality, SSD): one semiseparable matrix per head.

The layers (Mamba2Mixer, and the copies in Bamba, Falcon-H1, Granite 4 hybrid, Nemotron-H, Zamba2)
compute, per head h, with x, B, C read after the short convolution and its SiLU:

    state_t = exp(Δ_t a_h) · state_{t-1} + Δ_t · B_t x_tᵀ        y_t = C_tᵀ state_t + D_h · x_t

so y_t = Σ_{s ≤ t} A[h, t, s] · x_s + D_h · x_t with

    A[h, t, s] = (C_t · B_s) · exp(Σ_{r = s+1..t} Δ_r a_h) · Δ_s

Folded into A: Δ (softplus of its projection plus dt_bias, clamped to the layer's limit), a = -exp(A_log),
B and C (after the convolution and SiLU; a group's B and C serve its heads). The value-like vector
is x after the convolution and SiLU. Outside the mixing, as separate parts: the D skip, the gate
silu(z), the gated RMSNorm's per-token scale (read from the norm's input in the forward) and its
weight, and the output projection: output_t = W_out (w ⊙ r_t ⊙ silu(z_t) ⊙ y_t).

The convolution is applied by the layers with `F.conv1d` on `conv1d.weight` (its module never
runs, so a hook on it never fires): it is recomputed from in_proj's output, whose hook fires."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import torch
import torch.nn.functional as F

from mha_viz_models.effective.layer import (
    EffectiveLayer,
    Taps,
    as_np,
    causal_conv,
    jobs_fields,
    linear,
    silu_of,
    weight_parts,
)

KIND = "mamba2"
NAME = "Mamba-2 (SSD)"  # what tables and the grid call this kind
_NEEDS = ("A_log", "D", "dt_bias", "conv1d", "in_proj", "out_proj", "n_groups", "head_dim", "ssm_state_size",
          "intermediate_size", "conv_dim", "num_heads")


def matches(module: torch.nn.Module) -> bool:
    return all(hasattr(module, a) for a in _NEEDS) and not hasattr(module, "x_proj")


def _has_norm(module) -> bool:
    return getattr(module, "mamba_rms_norm", True) and not isinstance(module.norm, torch.nn.Identity)


def taps(module) -> dict:
    spec = {"in_proj": (module.in_proj, "out"), "out_proj": (module.out_proj, "in")}
    if _has_norm(module):
        spec["norm"] = (module.norm, "args")
    return spec


def kept_floats(module) -> int:
    """The floats a token its taps keep: in_proj's output, out_proj's input and, with a norm, its two inputs."""
    return module.in_proj.out_features + module.intermediate_size * (3 if _has_norm(module) else 1)


def ssd_jobs(C: torch.Tensor, B: torch.Tensor, dt: torch.Tensor, a: torch.Tensor, rows: int, *,
             narrow: bool = False) -> list[tuple[int, int, Callable[[], torch.Tensor]]]:
    """A[h, t, s] = (C_t · B_s) exp(Σ_{r=s+1..t} Δ_r a_h) Δ_s for s ≤ t, else 0, for C, B: (n, groups, state), dt:
    (n, heads), a: (heads,), in blocks of `rows` rows (`layer.RowJobs`) as (first row, last row + 1, a call that makes
    (heads, b, n) float32, or
    with `narrow` (heads, b, last row + 1): over the keys the rows see alone),
    each made apart (several threads at once) from the per-token C, B, Δ and the cumulative decays alone: its own
    keys directly, the earlier ones as C_t·B_s scaled by a factor a row and a factor a key, each exp of a float64
    difference at most 0 (two products a cell, no exp); the later keys 0."""
    n, heads = dt.shape
    per_group = heads // C.shape[1]
    cum = torch.cumsum((dt.float() * a.float()).double(), dim=0).t()  # (heads, n)
    dt64 = dt.double()

    def block(t0: int, t1: int) -> torch.Tensor:
        cb = torch.einsum("tgk,sgk->gts", C[t0:t1].float(), B[:t1].float())  # the keys the rows see: s < t1
        out = torch.zeros(heads, t1 - t0, t1 if narrow else n)
        for h in range(heads):  # in place, one head at a time
            g = h // per_group
            if t0:  # the earlier keys s < t0: exp(cum_t − cum_t0) · C_t·B_s · exp(cum_t0 − cum_s) Δ_s (cum falls)
                u = torch.exp(cum[h, t0:t1] - cum[h, t0]).float()
                w = (torch.exp(cum[h, t0] - cum[h, :t0]) * dt64[:t0, h]).float()
                o = out[h, :, :t0]
                torch.mul(cb[g, :, :t0], w[None, :], out=o)
                o.mul_(u[:, None])
            o = out[h, :, t0:t1]  # the block's own keys: the float64 difference, rounded once to float32
            torch.sub(cum[h, t0:t1, None], cum[h][None, t0:t1], out=o)
            o.clamp_(max=0.0).exp_().mul_(cb[g, :, t0:t1]).mul_(dt[t0:t1, h].float()[None, :])
            o.tril_()  # causal: row t0 + i keeps the keys s ≤ t0 + i
        return out
    return [(t0, min(n, t0 + rows), partial(block, t0, min(n, t0 + rows))) for t0 in range(0, n, rows)]


BY_ROWS = True  # `compute(..., by_rows=True)` gives the matrix's rows a block at a time (`ssd_jobs`)
ROW_JOBS = True  # and each block made apart (`EffectiveLayer.row_jobs`)


def compute(module, got: Taps, layer: int, name: str, *, by_rows: bool = False) -> EffectiveLayer:
    proj = got["in_proj"]
    if hasattr(module, "mup_vector"):  # Falcon-H1 scales in_proj's output by its μP vector
        proj = proj * module.mup_vector.detach().float().reshape(-1)
    d_inner, heads, p = module.intermediate_size, module.num_heads, module.head_dim
    gate, xbc, dt = proj.split([d_inner, module.conv_dim, heads], dim=-1)
    xbc = causal_conv(xbc, module.conv1d, silu_of(module, layer))
    gs = module.n_groups * module.ssm_state_size
    x, B, C = xbc.split([d_inner, gs, gs], dim=-1)
    lo, hi = getattr(module, "time_step_limit", (0.0, float("inf")))
    dt = torch.clamp(F.softplus(dt + module.dt_bias.detach().float()), min=lo, max=hi)
    a = -torch.exp(module.A_log.detach().float())
    n = x.shape[0]
    B = B.reshape(n, module.n_groups, module.ssm_state_size)
    C = C.reshape(n, module.n_groups, module.ssm_state_size)
    parts = {"D": as_np(module.D), "gate": as_np(F.silu(gate))}
    if _has_norm(module):
        y_in, z = got["norm"][:2]
        before = bool(getattr(module.norm, "norm_before_gate", False))
        scaled = y_in if before else y_in * F.silu(z)
        groups = getattr(module.norm, "n_groups", None) or d_inner // module.norm.group_size
        var = scaled.reshape(n, groups, -1).pow(2).mean(-1)
        parts["norm.scale"] = as_np(torch.rsqrt(var + module.norm.variance_epsilon))
        parts["norm.weight"] = as_np(module.norm.weight)
    parts.update(weight_parts("out_proj", module.out_proj))
    return EffectiveLayer(
        layer=layer, module=name, kind=KIND, label=f"{NAME}: semiseparable, one matrix per head",
        structure="semiseparable", grouping="head",
        folded="C_t·B_s, exp(Σ Δ_r a) between s and t, Δ_s; the convolution and SiLU in x, B, C",
        value_name="x (after the short convolution and SiLU)",
        **_matrix(C, B, dt, a, by_rows), values=as_np(x.reshape(n, heads, p)), parts=parts)


def _matrix(C: torch.Tensor, B: torch.Tensor, dt: torch.Tensor, a: torch.Tensor, by_rows: bool) -> dict:
    """The EffectiveLayer fields of the matrix: whole, or by blocks of rows each made apart (`jobs_fields`)."""
    n, heads = dt.shape
    return jobs_fields(lambda rows, narrow: ssd_jobs(C, B, dt, a, rows, narrow=narrow), heads, n, by_rows)


def scan_output(layer: EffectiveLayer) -> torch.Tensor:
    """y = Σ_s A · x_s + D · x_t, (n, d_inner): the scan's output before the gate and norm."""
    mixed = torch.as_tensor(layer.mixed())
    skip = torch.as_tensor(layer.parts["D"])[None, :, None] * torch.as_tensor(layer.values)
    return (mixed + skip).reshape(layer.n, -1)


def reconstruct(layer: EffectiveLayer) -> torch.Tensor:
    """The layer's output from A, x and the separate parts: W_out (w ⊙ r_t ⊙ silu(z_t) ⊙ y_t)."""
    y = scan_output(layer)
    gate = torch.as_tensor(layer.parts["gate"])
    if "norm.scale" in layer.parts:
        r = torch.as_tensor(layer.parts["norm.scale"])
        y = (y * gate).reshape(layer.n, r.shape[1], -1) * r[..., None]
        y = torch.as_tensor(layer.parts["norm.weight"]) * y.reshape(layer.n, -1)
    else:
        y = y * gate
    return linear(y, layer.parts, "out_proj")
