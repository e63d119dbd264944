"""The gated delta rule (gated DeltaNet: Qwen3-Next, Qwen3.5; Kimi Delta Attention: Kimi Linear),
exact, by chunks in the WY (UT-transform) form the layers' own kernels use.

Per head, with the state S_t (key dim × value dim), α_t = exp(g_t) (a scalar per head in gated
DeltaNet, one per key channel in KDA) and β_t = sigmoid(b_t):

    S_t = (I − β_t k_t k_tᵀ) Diag(α_t) S_{t−1} + β_t k_t v_tᵀ        o_t = S_tᵀ q_t

so o_t = Σ_{s ≤ t} A[h, t, s] · v_s with A[h, t, s] = β_s · q_tᵀ Π_{r = t..s+1} ((I − β_r k_r k_rᵀ) Diag(α_r)) k_s
(for a scalar α, the issue's α_r (I − β_r k_r k_rᵀ)): the delta rule's removal term (− β_r k_r k_rᵀ) is
kept, never dropped. Folded into A: q and k after the short convolution, SiLU and L2 normalisation,
q's 1/√d_k, β and the decays. The value-like vector is v after the convolution and SiLU. Outside the
mixing: the output norm (an RMSNorm over each head's d_v channels: its per-token scale and weight),
the output gate (silu(z) in gated DeltaNet, sigmoid in KDA), and the output projection.

By chunks of 64 (as the layers' kernels): inside a chunk, T = (I + strict_lower(diag(β) K Kᵀ ⊙ decay))⁻¹
(a unit-triangular solve); the chunk's own block is A = tril(Q Kᵀ ⊙ decay) · T · diag(β); the
sources before it reach its rows through W, the state's coefficients on every earlier v (S = W V),
updated once a chunk by the chunk's transition diag(e^{G_last}) − K_dᵀ T (diag(β) K ⊙ e^G)."""

from __future__ import annotations

from collections.abc import Iterator

import torch
import torch.nn.functional as F

from mha_viz_models.effective.layer import (
    EffectiveLayer,
    Taps,
    as_np,
    causal_conv,
    linear,
    matrix_fields,
    silu_of,
    weight_parts,
)

KIND = "gated_deltanet"
NAME = "gated DeltaNet"  # what tables and the grid call this kind
CHUNK = 64


def l2norm(x: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """As the layers' kernels (FLA's): x / sqrt(Σ x² + eps)."""
    return x * torch.rsqrt((x * x).sum(-1, keepdim=True) + eps)


def delta_matrix(q: torch.Tensor, k: torch.Tensor, beta: torch.Tensor, g: torch.Tensor,
                 chunk: int = CHUNK) -> torch.Tensor:
    """The effective attention of the gated delta rule, (heads, n, n) float32, causal.

    q, k: (heads, n, d_k), q already scaled; beta: (heads, n); g: log decays, (heads, n) one per head
    (gated DeltaNet) or (heads, n, d_k) one per key channel (KDA)."""
    heads, n, _ = k.shape
    out = torch.zeros(heads, n, n)
    for i0, rows in delta_rows(q, k, beta, g, chunk):
        out[:, i0:i0 + rows.shape[1]] = rows
    return out


def delta_rows(q: torch.Tensor, k: torch.Tensor, beta: torch.Tensor, g: torch.Tensor,
               chunk: int = CHUNK) -> Iterator[tuple[int, torch.Tensor]]:
    """`delta_matrix` a chunk of rows at a time, in order: (first row, (heads, rows, n) float32). What it carries
    from chunk to chunk is the state's coefficients on every earlier value, (heads, d_k, n): O(n), not n × n."""
    heads, n, dk = k.shape
    g = g if g.dim() == 3 else g[..., None]  # (heads, n, 1) or (heads, n, d_k): broadcasts over d_k
    w = torch.zeros(heads, dk, n)  # S = W V: the state's coefficients on every earlier value
    for i0 in range(0, n, chunk):
        i1 = min(i0 + chunk, n)
        c = i1 - i0
        qc, kc, bc = q[:, i0:i1], k[:, i0:i1], beta[:, i0:i1]
        G = g[:, i0:i1].cumsum(1)  # (heads, c, 1 | d_k): log decay from the chunk's start
        lower = torch.ones(c, c, dtype=torch.bool).tril()
        diff = (G[:, :, None, :] - G[:, None, :, :]).masked_fill(~lower[None, :, :, None], float("-inf")).exp()
        kb = kc * bc[..., None]
        ut = _decayed(kb, kc, diff)  # its diagonal is ignored: unit triangular
        eye = torch.eye(c).expand(heads, c, c)
        t = torch.linalg.solve_triangular(ut, eye, upper=False, unitriangular=True)  # T
        qk = _decayed(qc, kc, diff)  # tril(Q Kᵀ ⊙ decay), diagonal included
        rows = torch.zeros(heads, c, n)
        rows[:, :, i0:i1] = (qk @ t) * bc[:, None, :]
        kcd = t @ (kb * G.exp())  # T (diag(β) K ⊙ e^G)
        if i0:
            q_eff = qc * G.exp() - qk @ kcd  # what reads the state at the chunk's start
            rows[:, :, :i0] = q_eff @ w[:, :, :i0]
        yield i0, rows
        kd = kc * (G[:, -1:] - G).exp()  # keys decayed to the chunk's end
        if i0:
            w[:, :, :i0] = G[:, -1].exp()[..., None] * w[:, :, :i0] - kd.transpose(1, 2) @ (kcd @ w[:, :, :i0])
        w[:, :, i0:i1] = (kd.transpose(1, 2) @ t) * bc[:, None, :]


def _decayed(a: torch.Tensor, b: torch.Tensor, diff: torch.Tensor) -> torch.Tensor:
    """Σ_d a[i, d] b[j, d] diff[i, j, d]: a matrix product times the decay when it is one per head."""
    if diff.shape[-1] == 1:
        return (a @ b.transpose(1, 2)) * diff[..., 0]
    return torch.einsum("hid,hjd,hijd->hij", a, b, diff)


def gated_rms_parts(core: torch.Tensor, gate: torch.Tensor, norm, act) -> dict:
    """The output norm and gate as parts: norm.scale (n, heads) = 1/√(mean(o²) + eps) of the mixing's
    output o (n, heads, d_v) read in the forward, norm.weight (d_v,), gate = act(z) (n, heads · d_v)."""
    var = core.pow(2).mean(-1)
    return {"norm.scale": as_np(torch.rsqrt(var + norm.variance_epsilon)), "norm.weight": as_np(norm.weight),
            "gate": as_np(act(gate).reshape(core.shape[0], -1))}


def matches(module) -> bool:
    return type(module).__name__.endswith("GatedDeltaNet") and hasattr(module, "A_log")


def taps(module) -> dict:
    if hasattr(module, "in_proj_qkvz"):  # Qwen3-Next
        spec = {"qkvz": (module.in_proj_qkvz, "out"), "ba": (module.in_proj_ba, "out")}
    else:  # Qwen3.5
        spec = {"qkv": (module.in_proj_qkv, "out"), "b": (module.in_proj_b, "out"), "a": (module.in_proj_a, "out")}
    return {**spec, "norm": (module.norm, "args")}


def _projections(module, got):
    """q, k, v before the convolution (n, key_dim | value_dim) and b, a (n, v heads)."""
    if hasattr(module, "in_proj_qkvz"):
        q, k, v, _z, b, a = module.fix_query_key_value_ordering(got["qkvz"][None], got["ba"][None])
        n = q.shape[1]
        return q.reshape(n, -1), k.reshape(n, -1), v.reshape(n, -1), b[0], a[0]
    q, k, v = got["qkv"].split([module.key_dim, module.key_dim, module.value_dim], dim=-1)
    return q, k, v, got["b"], got["a"]


BY_ROWS = True  # `compute(..., by_rows=True)` gives the matrix's rows a chunk at a time (`delta_rows`)


def rows_of(q: torch.Tensor, k: torch.Tensor, beta: torch.Tensor, g: torch.Tensor, by_rows: bool) -> dict:
    """The EffectiveLayer fields of the delta rule's matrix (heads first): whole, or its chunks (`matrix_fields`)."""
    return matrix_fields(lambda: delta_matrix(q, k, beta, g), lambda: delta_rows(q, k, beta, g, CHUNK), by_rows)


def compute(module, got: Taps, layer: int, name: str, *, by_rows: bool = False) -> EffectiveLayer:
    q, k, v, b, a = _projections(module, got)
    n, hv, hk, dk, dv = q.shape[0], module.num_v_heads, module.num_k_heads, module.head_k_dim, module.head_v_dim
    mixed = causal_conv(torch.cat([q, k, v], dim=-1), module.conv1d, silu_of(module, layer))
    q, k, v = mixed.split([module.key_dim, module.key_dim, module.value_dim], dim=-1)
    q = l2norm(q.reshape(n, hk, dk)).repeat_interleave(hv // hk, dim=1) * dk ** -0.5
    k = l2norm(k.reshape(n, hk, dk)).repeat_interleave(hv // hk, dim=1)
    beta = b.float().sigmoid()
    g = -module.A_log.detach().float().exp() * F.softplus(a.float() + module.dt_bias.detach().float())
    matrix = rows_of(q.transpose(0, 1), k.transpose(0, 1), beta.t(), g.t(), by_rows)
    core, z = got["norm"][:2]
    parts = {**gated_rms_parts(core.reshape(n, hv, dv), z.reshape(n, hv, dv), module.norm, F.silu),
             **weight_parts("out_proj", module.out_proj)}
    return EffectiveLayer(
        layer=layer, module=name, kind=KIND, label=f"{NAME}: exact with the delta rule, one matrix per head",
        structure="delta rule", grouping="head",
        folded="q, k (convolution, SiLU, L2 norm, 1/√d_k), β, the decays exp(g) and the removal terms "
               "(I − β_r k_r k_rᵀ) between s and t",
        value_name="v (after the short convolution and SiLU)",
        **matrix, values=as_np(v.reshape(n, hv, dv)), parts=parts)


def gated_output(layer: EffectiveLayer, proj: str) -> torch.Tensor:
    """W_out (gate ⊙ w ⊙ r_{t,h} ⊙ o_t): the output from the mixing and the named parts."""
    o = torch.as_tensor(layer.mixed())  # (n, heads, d_v)
    o = o * torch.as_tensor(layer.parts["norm.scale"])[..., None] * torch.as_tensor(layer.parts["norm.weight"])
    o = o.reshape(layer.n, -1) * torch.as_tensor(layer.parts["gate"])
    return linear(o, layer.parts, proj)


def reconstruct(layer: EffectiveLayer) -> torch.Tensor:
    return gated_output(layer, "out_proj")
