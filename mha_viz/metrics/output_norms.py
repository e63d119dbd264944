"""How much each head writes into the residual stream (`docs/head-metrics.md`, section 3): the norms of its output
o_h = z_h W_O[h], from a dense run's every head at once (`head_output_norms`) or from one layer's outputs as a
long run's scan makes them (`output_norms`)."""

from __future__ import annotations

import numpy as np
import torch

from mha_viz.capture.run import AttentionRun
from mha_viz.metrics.head_writes import Weights, as_tensor, flat_outputs


def head_output_norms(run: AttentionRun, weights: Weights, *,
               device: str | torch.device | None = None) -> dict[str, np.ndarray]:
    """The output norms of `docs/head-metrics.md`, section 3, as (L, H) arrays: "output_norm" =
    mean_t ‖o_h,t‖₂ and the seed's "mean_output_norm" = ‖mean_t o_h,t‖₂, with o_h = z_h W_O[h]
    (W_O's bias is shared, left out).

    Without forming o: with W_O[h] W_O[h]ᵀ = F Fᵀ (float64 Cholesky, d_v × d_v; for a singular
    one, as a head with W_O = 0, F = V Λ^½ from its eigendecomposition), ‖z W_O[h]‖ = ‖z F‖ row
    by row: a d_v-wide product instead of a d_model-wide one (12× fewer operations on BERT-base),
    still a norm of a product, not a difference of squares."""
    if run.head_outputs is None:
        raise ValueError("the output norms need each head's output, which this run does not have")
    w_o = as_tensor(weights["W_O"])  # only W_O: `run_weights` would also cut W_Q, W_K and W_V
    if len(w_o) != run.num_layers:
        w_o = w_o[torch.as_tensor(run.layer_ids)]  # a run of some layers only
    z = flat_outputs(run, device)  # (N, n, d_v)
    norms = output_norms(z, w_o.reshape(-1, *w_o.shape[2:]))
    shape = (run.num_layers, run.num_heads)
    return {name: values.reshape(shape) for name, values in norms.items()}


def output_norms(z: torch.Tensor, w_o: torch.Tensor) -> dict[str, np.ndarray]:
    """`head_output_norms`'s "output_norm" and "mean_output_norm" (N,) of N heads from their outputs z (N, n, d_v) and
    their W_O (N, d_v, d_model), on z's device: one layer's heads of a long run as its scan makes them, or every
    head of a dense one."""
    w_o = w_o.to(z.device).double()
    gram = w_o @ w_o.transpose(1, 2)  # (N, d_v, d_v)
    factor, info = torch.linalg.cholesky_ex(gram)  # 2 ms for 144 heads; eigh takes 150
    bad = info != 0
    if bool(bad.any()):
        vals, vecs = torch.linalg.eigh(gram[bad])
        factor[bad] = vecs * vals.clamp_min(0).sqrt()[:, None, :]
    r_t = factor.float()  # (N, d_v, d_v): F
    norms = (z.float() @ r_t).norm(dim=-1)  # (N, n)
    mean = z.float().mean(1, keepdim=True) @ r_t  # (N, 1, d_v)
    return {"output_norm": norms.mean(1).cpu().numpy(), "mean_output_norm": mean[:, 0].norm(dim=-1).cpu().numpy()}
