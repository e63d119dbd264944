"""xLSTM's mLSTM (transformers' `xlstm`, its native kernels): gated linear attention with a normaliser, one matrix
per head, exact.

Per head, with q_t, k_t, v_t, the input gate's pre-activation i_t and the forget gate's f_t (each soft-capped by the
layer), F_t = Σ_{r ≤ t} log σ(f_r) and the stabiliser m_t = max(F_t, max_{s ≤ t} (F_t − F_s + i_s)) (what the
recurrent and the chunkwise kernels both carry), the layer's kernel computes

    W[t, s] = exp(F_t − F_s + i_s − m_t) · (q_t · k_s) / √d_qk     (s ≤ t)
    h_t = Σ_s W[t, s] v_s / (max(|Σ_s W[t, s]|, exp(−m_t)) + ε)

so A[t, s] = W[t, s] / (max(|Σ_s W[t, s]|, exp(−m_t)) + ε): signed, its rows summing to ±1 at most. Folded into A:
the queries and keys, both gates and the normaliser. The value-like vector is v. Outside the mixing: the per-head
layer norm of h (its mean, linear, recomputed from A·v; its scale 1/√(var + ε) read from the forward), its weight and
bias, the output gate σ(o_t) and the output projection: output_t = W_out (σ(o_t) ⊙ norm(h_t)).

The `xlstm` package's kernels (Triton), where installed, replace transformers' own: the hooks read the same module
names, and a forward whose tensors differ fails the load's probe rather than show something else."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import torch
import torch.nn.functional as F

from mha_viz_models.effective.layer import (
    EffectiveLayer,
    NotExact,
    Taps,
    as_np,
    jobs_fields,
    linear,
    weight_parts,
)

KIND = "mlstm"
NAME = "xLSTM (mLSTM)"  # what tables and the grid call this kind
_NEEDS = ("mlstm_backend", "multihead_norm", "ogate_act_fn", "out_proj")


def matches(module) -> bool:
    return all(hasattr(module, a) for a in _NEEDS)


def taps(module) -> dict:
    return {"kernel": (module.mlstm_backend, "args"), "h": (module.mlstm_backend, "out"),
            "gate": (module.ogate_act_fn, "out")}


def mlstm_jobs(q: torch.Tensor, k: torch.Tensor, i: torch.Tensor, f: torch.Tensor, eps: float, rows: int, *,
               narrow: bool = False) -> list[tuple[int, int, Callable[[], torch.Tensor]]]:
    """A[h, t, s] for queries and keys (heads, n, d_qk) and the gates' pre-activations (heads, n), in float64 a head
    at a time, in blocks of `rows` rows (`layer.RowJobs`) as (first row, last row + 1, a call that makes (heads, b, n)
    float32, or with `narrow` (heads, b, last row + 1): over the keys the rows see alone), each made apart: a row's
    stabiliser and normaliser are its own (F_t, its keys' F_s + i_s and q_t·k_s)."""
    heads, n, d = q.shape
    cum = torch.cumsum(F.logsigmoid(f.double()), -1)  # (heads, n): F_t
    gate = i.double() - cum  # i_s − F_s

    def block(t0: int, t1: int) -> torch.Tensor:
        out = torch.zeros(heads, t1 - t0, t1 if narrow else n)
        later = torch.ones(t1 - t0, t1, dtype=torch.bool).triu(t0 + 1)  # key s after row t
        for h in range(heads):
            log_d = (cum[h, t0:t1, None] + gate[h, None, :t1]).masked_fill(later, float("-inf"))
            m = torch.maximum(cum[h, t0:t1], log_d.max(-1).values)  # the kernels' stabiliser (their state starts at 0)
            w = torch.exp(log_d - m[:, None]) * (q[h, t0:t1].double() @ k[h, :t1].double().t()) * d ** -0.5
            denom = torch.maximum(w.sum(-1).abs(), torch.exp(-m)) + eps
            out[h, :, :t1] = (w / denom[:, None]).float()
        return out
    return [(t0, min(n, t0 + rows), partial(block, t0, min(n, t0 + rows))) for t0 in range(0, n, rows)]


BY_ROWS = True  # `compute(..., by_rows=True)` gives the matrix's rows a block at a time (`mlstm_jobs`)
ROW_JOBS = True  # and each block made apart (`EffectiveLayer.row_jobs`)


def compute(module, got: Taps, layer: int, name: str, *, by_rows: bool = False) -> EffectiveLayer:
    kernel = got["kernel"]
    if len(kernel) != 5:
        raise NotExact(f"Layer {layer}: its mLSTM kernel was handed {len(kernel)} tensors, not the five (queries, "
                       "keys, values and both gates) mha-viz reads: a started state or another kernel.")
    q, k, v, i, f = kernel  # (heads, n, d) ×3, (heads, n) ×2
    h = got["h"]  # (heads, n, d_v): what the kernel made
    norm = module.multihead_norm
    eps = float(getattr(getattr(module, "config", None), "eps", 1e-6))
    heads, n, _ = v.shape
    parts = {"gate": as_np(got["gate"]),
             "norm.scale": as_np(torch.rsqrt(h.double().var(-1, unbiased=False) + norm.eps).t()),  # (n, heads)
             **weight_parts("out_proj", module.out_proj)}
    for part in ("weight", "bias"):
        if getattr(norm, part, None) is not None:
            parts[f"norm.{part}"] = as_np(getattr(norm, part))
    return EffectiveLayer(
        layer=layer, module=name, kind=KIND, label=f"{NAME}: gated linear attention with a normaliser, one matrix "
        "per head", structure="gated, normalised", grouping="head",
        folded="q_t·k_s/√d, the gates exp(F_t − F_s + i_s) and each row's normaliser",
        value_name="v (the value projection's output)", values=as_np(v.transpose(0, 1)), parts=parts,
        **_matrix(q, k, i, f, eps, by_rows))


def _matrix(q: torch.Tensor, k: torch.Tensor, i: torch.Tensor, f: torch.Tensor, eps: float, by_rows: bool) -> dict:
    """The EffectiveLayer fields of the matrix: whole, or by blocks of rows each made apart (`jobs_fields`)."""
    heads, n, _d = q.shape
    return jobs_fields(lambda rows, narrow: mlstm_jobs(q, k, i, f, eps, rows, narrow=narrow), heads, n, by_rows)


def reconstruct(layer: EffectiveLayer) -> torch.Tensor:
    """The layer's output from A, v and the separate parts: W_out (σ(o_t) ⊙ (w ⊙ (h_t − mean h_t) · scale_t + b))."""
    h = torch.as_tensor(layer.mixed()).double()  # (n, heads, d_v)
    scale = torch.as_tensor(layer.parts["norm.scale"]).double()
    y = ((h - h.mean(-1, keepdim=True)) * scale[..., None]).reshape(layer.n, -1).float()
    if "norm.weight" in layer.parts:
        y = y * torch.as_tensor(layer.parts["norm.weight"])
    if "norm.bias" in layer.parts:
        y = y + torch.as_tensor(layer.parts["norm.bias"])
    return linear(y * torch.as_tensor(layer.parts["gate"]), layer.parts, "out_proj")
