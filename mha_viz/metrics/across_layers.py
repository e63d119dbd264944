"""Attention followed across layers (spec section 4): rollout, rollout through one head, and
attention flow."""

from __future__ import annotations

import numpy as np
import torch

from ..arrays import tensor_view
from ..capture import AttentionRun


def _layer_list(layer_ids: list[int]) -> str:
    return ", ".join(map(str, layer_ids))


def rollout(run: AttentionRun) -> np.ndarray:
    """Attention rollout (Abnar & Zuidema 2020): (layers, n, n), row i of layer l says how much
    token i at layer l draws on each input token. Â_l = rows-renormalised 0.5·mean_h A_l + 0.5·I;
    R_1 = Â_1, R_l = Â_l R_{l-1}. Rows sum to 1."""
    A_hat = torch.from_numpy(_residual_attention(run, run.num_layers))  # (L, n, n)
    eye = torch.eye(run.n, dtype=torch.float64)
    out = torch.empty_like(A_hat)
    acc = eye
    for layer in range(run.num_layers):
        acc = A_hat[layer] @ acc
        out[layer] = acc
    return out.numpy()


def _residual_attention(run: AttentionRun, layers: int) -> np.ndarray:
    """Â_l = rows-renormalised ½·mean_h A_l + ½·I for the first `layers` layers, float64
    (layers, n, n): the graph both rollout and flow walk."""
    if not run.from_first_layer:
        raise ValueError(f"rollout and flow follow every layer from the first; this run holds layers "
                         f"{_layer_list(run.layer_ids)} only")
    A = tensor_view(run.attentions[:layers]).mean(1, dtype=torch.float64).numpy()  # (l, n, n), a new array
    A_hat = 0.5 * A + 0.5 * np.eye(run.n)
    return A_hat / A_hat.sum(-1, keepdims=True)


def rollout_through_head(run: AttentionRun, layer: int, head: int,
                         rolled: np.ndarray | None = None) -> np.ndarray:
    """The per-head variant of rollout: A_{l,h} R_{l-1} (n, n), with R_{-1} = I (rows sum to 1).
    `rolled`: `rollout(run)` when the caller has it already."""
    A = run.attentions[layer, head].astype(np.float64)
    if layer == 0:
        return A
    return A @ (rollout(run) if rolled is None else rolled)[layer - 1]


FLOW_MAX_TOKENS = 64  # max-flow over every (query, input token) pair grows as n⁴; see `flow`


_FLOW_SCALE = 1_000_000  # capacities become integers (scipy's max-flow needs them): 1e-6 resolution


def flow(run: AttentionRun, layer: int | None = None) -> np.ndarray:
    """Attention flow (Abnar & Zuidema 2020): (n, n), entry [i, j] is the maximum flow from
    token i after `layer` (default the last) down to input token j in the layered graph whose
    edges from (l, i) to (l − 1, j) have capacity Â_l[i, j] (Â as in `rollout`).

    Each row is then divided by its sum, as the authors' code does, so rows compare with
    rollout. One max-flow per (i, j) pair, each over L·n² edges: offered only for
    n ≤ FLOW_MAX_TOKENS.
    """
    # scipy is heavy and needed only here: imported when first used, not with the package
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import maximum_flow

    n = run.n
    if n > FLOW_MAX_TOKENS:
        raise ValueError(f"flow is offered for inputs of at most {FLOW_MAX_TOKENS} tokens "
                         f"(it needs n² max-flow problems over L·n² edges); this one has {n}. Use rollout.")
    top = run.num_layers - 1 if layer is None else layer
    cap = np.rint(_residual_attention(run, top + 1) * _FLOW_SCALE).astype(np.int32)
    # Node (l, i) is l·n + i; l = 0 are the inputs, l = k the output of layer k − 1.
    src, dst, val = [], [], []
    ii, jj = np.nonzero(np.ones((n, n), dtype=bool))
    for k in range(top + 1):
        c = cap[k][ii, jj]
        keep = c > 0
        src.append((k + 1) * n + ii[keep])
        dst.append(k * n + jj[keep])
        val.append(c[keep])
    size = (top + 2) * n
    graph = csr_matrix((np.concatenate(val), (np.concatenate(src), np.concatenate(dst))), shape=(size, size))
    out = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            out[i, j] = maximum_flow(graph, (top + 1) * n + i, j, method="dinic").flow_value
    return out / out.sum(1, keepdims=True)
