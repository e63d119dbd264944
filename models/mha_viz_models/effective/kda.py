"""Kimi Delta Attention (Kimi Linear): the gated delta rule with a decay per key channel, exact, by
the chunked WY form of `delta.delta_matrix` (formula and what is folded: docs/effective-attention.md).

The decay g (n, heads, d_k) is the forget gate's own output, read by a hook on it; β = sigmoid(b_proj).
Outside the mixing: the output norm (RMSNorm over each head's channels), the sigmoid output gate
(g_b_proj(g_a_proj(x))) and o_proj."""

from __future__ import annotations

import torch

from mha_viz_models.effective.delta import gated_output, gated_rms_parts, l2norm, rows_of
from mha_viz_models.effective.layer import EffectiveLayer, Taps, as_np, causal_conv, silu_of, weight_parts

KIND = "kda"
NAME = "Kimi Delta Attention"  # what tables and the grid call this kind


def matches(module) -> bool:
    return type(module).__name__.endswith("DeltaAttention") and hasattr(module, "forget_gate")


def taps(module) -> dict:
    return {"q": (module.q_proj, "out"), "k": (module.k_proj, "out"), "v": (module.v_proj, "out"),
            "g": (module.forget_gate, "out"), "b": (module.b_proj, "out"), "norm": (module.o_norm, "args")}


BY_ROWS = True  # as gated DeltaNet's: `delta.delta_rows`


def compute(module, got: Taps, layer: int, name: str, *, by_rows: bool = False) -> EffectiveLayer:
    heads, d = module.num_heads, module.head_dim
    mixed = causal_conv(torch.cat([got["q"], got["k"], got["v"]], dim=-1), module.conv1d, silu_of(module, layer))
    n = mixed.shape[0]
    q, k, v = (x.reshape(n, heads, d) for x in mixed.split([module.qkv_dim] * 3, dim=-1))
    q, k = l2norm(q) * d ** -0.5, l2norm(k)
    beta = got["b"].sigmoid()
    g = got["g"].reshape(n, heads, d)
    matrix = rows_of(q.transpose(0, 1), k.transpose(0, 1), beta.t(), g.transpose(0, 1), by_rows)
    core, gate = got["norm"][:2]
    parts = {**gated_rms_parts(core.reshape(n, heads, d), gate.reshape(n, heads, d), module.o_norm, torch.sigmoid),
             **weight_parts("o_proj", module.o_proj)}
    return EffectiveLayer(
        layer=layer, module=name, kind=KIND,
        label=f"{NAME}: exact with the delta rule, a decay per channel, one matrix per head",
        structure="delta rule", grouping="head",
        folded="q, k (convolution, SiLU, L2 norm, 1/√d_k), β, the per-channel decays and the removal terms "
               "(I − β_r k_r k_rᵀ) between s and t",
        value_name="v (after the short convolution and SiLU)",
        **matrix, values=as_np(v), parts=parts)


def reconstruct(layer: EffectiveLayer) -> torch.Tensor:
    return gated_output(layer, "o_proj")
