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

import torch
import torch.nn.functional as F

from mha_viz_models.effective.layer import EffectiveLayer, NotExact, Taps, as_np, linear, weight_parts

KIND = "mlstm"
NAME = "xLSTM (mLSTM)"  # what tables and the grid call this kind
_NEEDS = ("mlstm_backend", "multihead_norm", "ogate_act_fn", "out_proj")


def matches(module) -> bool:
    return all(hasattr(module, a) for a in _NEEDS)


def taps(module) -> dict:
    return {"kernel": (module.mlstm_backend, "args"), "h": (module.mlstm_backend, "out"),
            "gate": (module.ogate_act_fn, "out")}


def mlstm_matrix(q: torch.Tensor, k: torch.Tensor, i: torch.Tensor, f: torch.Tensor, eps: float) -> torch.Tensor:
    """A[h, t, s] for queries and keys (heads, n, d_qk) and the gates' pre-activations (heads, n): (heads, n, n)
    float32, computed in float64 a head at a time."""
    heads, n, d = q.shape
    out = torch.empty(heads, n, n)
    causal = torch.ones(n, n, dtype=torch.bool).tril()
    for h in range(heads):
        cum = torch.cumsum(F.logsigmoid(f[h].double()), 0)  # F_t
        log_d = (cum[:, None] - cum[None, :] + i[h].double()[None, :]).masked_fill(~causal, float("-inf"))
        m = torch.maximum(cum, log_d.max(-1).values)  # the kernels' stabiliser (their state starts at m = 0)
        w = torch.exp(log_d - m[:, None]) * (q[h].double() @ k[h].double().t()) * d ** -0.5
        denom = torch.maximum(w.sum(-1).abs(), torch.exp(-m)) + eps
        out[h] = (w / denom[:, None]).float()
    return out


def compute(module, got: Taps, layer: int, name: str) -> EffectiveLayer:
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
        value_name="v (the value projection's output)", matrix=as_np(mlstm_matrix(q, k, i, f, eps)),
        values=as_np(v.transpose(0, 1)), parts=parts)


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
