"""MiniMax's lightning attention: decayed linear attention, one matrix per head, exact.

The layer splits act(qkv_proj(x)) into q, k, v per head and, by blocks (its `block_size`), computes
o_t = Σ_{s ≤ t} (q_t · k_s) · exp(−λ_h (t − s)) · v_s, λ_h its fixed per-head slope (`slope_rate`, set by
the head and the layer's depth). The blocks' query, key and block decays multiply out to exactly
exp(−λ_h (t − s)) for every pair, inside a block or across, so A[h, t, s] = (q_t · k_s) exp(−λ_h (t − s))
for s ≤ t: no softmax, no normalisation by the row. Folded into A: q, k (after the activation) and
the decay. The value-like vector is v after the activation. Outside the mixing: the RMSNorm over all
heads' outputs together (its per-token scale and weight), the sigmoid output gate
(sigmoid(output_gate(x))) and out_proj."""

from __future__ import annotations

from collections.abc import Iterator

import torch

from mha_viz_models.effective.layer import EffectiveLayer, Taps, as_np, linear, matrix_fields, row_step, weight_parts

KIND = "lightning"
NAME = "lightning attention"  # what tables and the grid call this kind


def matches(module) -> bool:
    return all(hasattr(module, a) for a in ("slope_rate", "qkv_proj", "output_gate", "block_size", "norm"))


def taps(module) -> dict:
    return {"qkv": (module.qkv_proj, "out"), "norm": (module.norm, "in"), "gate": (module.output_gate, "out")}


def decayed_matrix(q: torch.Tensor, k: torch.Tensor, slope: torch.Tensor) -> torch.Tensor:
    """A[h, t, s] = (q_t · k_s) exp(−λ_h (t − s)) for s ≤ t, else 0. q, k: (heads, n, d); slope: (heads,)."""
    return next(decayed_rows(q, k, slope, q.shape[1]))[1]


def decayed_rows(q: torch.Tensor, k: torch.Tensor, slope: torch.Tensor,
                 rows: int) -> Iterator[tuple[int, torch.Tensor]]:
    """`decayed_matrix` `rows` rows at a time, in order: (first row, (heads, rows, n))."""
    n = q.shape[1]
    for t0 in range(0, n, rows):
        t1 = min(n, t0 + rows)
        lag = (torch.arange(t0, t1)[:, None] - torch.arange(n)[None, :]).float()
        decay = torch.exp(-slope.float()[:, None, None] * lag).masked_fill(lag < 0, 0.0)
        yield t0, (q[:, t0:t1] @ k.transpose(1, 2)) * decay


BY_ROWS = True  # `compute(..., by_rows=True)` gives the matrix's rows a block at a time (`decayed_rows`)


def compute(module, got: Taps, layer: int, name: str, *, by_rows: bool = False) -> EffectiveLayer:
    heads, d = module.num_attention_heads, module.head_dim
    qkv = module.act_fn(got["qkv"])
    n = qkv.shape[0]
    q, k, v = qkv.reshape(n, heads, 3 * d).split(d, dim=-1)
    q, k, slope = q.transpose(0, 1), k.transpose(0, 1), module.slope_rate.detach().reshape(-1)
    step = row_step(heads, n)
    matrix = matrix_fields(lambda: decayed_matrix(q, k, slope), lambda: decayed_rows(q, k, slope, step), by_rows)
    o = got["norm"]
    parts = {"norm.scale": as_np(torch.rsqrt(o.pow(2).mean(-1) + module.norm.variance_epsilon)),
             "norm.weight": as_np(module.norm.weight), "gate": as_np(torch.sigmoid(got["gate"])),
             **weight_parts("out_proj", module.out_proj)}
    return EffectiveLayer(
        layer=layer, module=name, kind=KIND, label=f"{NAME}: decayed linear attention, one matrix per head",
        structure="decayed linear attention", grouping="head",
        folded="q_t · k_s (after the activation) and the decay exp(−λ_h (t − s))",
        value_name="v (after the activation)", **matrix, values=as_np(v), parts=parts)


def reconstruct(layer: EffectiveLayer) -> torch.Tensor:
    o = torch.as_tensor(layer.mixed()).reshape(layer.n, -1)
    o = o * torch.as_tensor(layer.parts["norm.scale"])[:, None] * torch.as_tensor(layer.parts["norm.weight"])
    return linear(o * torch.as_tensor(layer.parts["gate"]), layer.parts, "out_proj")
