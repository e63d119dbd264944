"""Per-head statistics of attention patterns and importance (spec sections 1 and 3): the head
table, the detector patterns and the pattern classes."""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from ..arrays import tensor_view
from ..capture import AttentionRun
from .head_writes import Weights, head_writes, run_weights
from .measures import BLOCK_MASS, BROAD_NORM_ENTROPY, DIAGONAL_MASS, PUNCTUATION, VERTICAL_MASS


def _valid(run: AttentionRun) -> np.ndarray:
    """(n, n) bool: the keys each query may see (all, or j <= i for a causal run)."""
    n = run.n
    full = np.ones((n, n), dtype=bool)
    return np.tril(full) if run.is_causal else full


def _ids(run: AttentionRun) -> np.ndarray:
    """One integer per token for equality tests: token ids when known, else the display text."""
    if run.token_ids:
        return np.asarray(run.token_ids)
    _, inverse = np.unique(np.asarray(run.tokens, dtype=object).astype(str), return_inverse=True)
    return inverse


def detection_patterns(run: AttentionRun) -> dict[str, np.ndarray]:
    """The (n, n) target patterns P of TransformerLens' head detector.

    previous-token: P[i, i-1] = 1; duplicate-token: P[i, j] = 1 if tok_j = tok_i, j < i;
    induction: the duplicate pattern shifted one column right, P[i, j+1] = 1 if tok_j = tok_i, j < i.
    """
    n = run.n
    ids = _ids(run)
    prev = np.eye(n, k=-1)
    earlier = np.tril(np.ones((n, n), dtype=bool), -1)
    dup = (ids[:, None] == ids[None, :]) & earlier
    induction = np.zeros((n, n))
    induction[:, 1:] = dup[:, :-1]
    return {"prev_token_score": prev, "duplicate_score": dup.astype(float), "induction_score": induction}


def _segments(run: AttentionRun) -> np.ndarray | None:
    """Segment index per token for two-segment inputs ([CLS] a [SEP] b [SEP]), else None."""
    special = np.asarray(run.special_mask, dtype=bool)
    inner = [i for i in np.flatnonzero(special) if 0 < i < run.n - 1]
    if len(inner) != 1:
        return None
    seg = np.zeros(run.n, dtype=int)
    seg[inner[0] + 1:] = 1
    return seg


def head_table(run: AttentionRun, weights: Weights | None = None) -> pd.DataFrame:
    """One row per (layer, head) with the statistics of spec section 1 and a pattern class.

    Columns: layer, head, entropy (nats), norm_entropy, confidence, distance, distance_norm,
    self, prev, next, first, sep, punct, prev_token_score, duplicate_score, induction_score,
    pattern (one of diagonal / vertical / broad / block / heterogeneous, with details after ':').
    With `weights` and a run that has head outputs, also output_norm and mean_output_norm.
    """
    L, H, n = run.num_layers, run.num_heads, run.n
    cols = _pattern_stats(run)
    cols["distance_norm"] = cols["distance"] / n
    in_segment = cols.pop("in_segment")
    layers, heads = np.meshgrid(np.asarray(run.layer_ids), np.arange(H), indexing="ij")
    table = pd.DataFrame({"layer": layers.ravel(), "head": heads.ravel()})  # the model's layer numbers
    for name, values in cols.items():
        table[name] = np.asarray(values).ravel()
    table["pattern"] = [
        classify(r.norm_entropy, r.self, r.prev, r.next, r.first, r.sep, r.punct, b)
        for r, b in zip(table.itertuples(), in_segment.ravel())
    ]
    if weights is not None and run.head_outputs is not None:
        norms = importance(run, weights)
        for name in ("output_norm", "mean_output_norm"):
            table[name] = norms[name].ravel()
    return table


def _pattern_stats(run: AttentionRun) -> dict[str, np.ndarray]:
    """The (L, H) statistics of spec section 1, one head at a time in float32 (row sums in
    float64): each (n, n) temporary stays in cache, which makes this several times faster than
    whole-array passes at n = 512."""
    L, H, n = run.num_layers, run.num_heads, run.n
    valid = torch.from_numpy(_valid(run))
    k = valid.sum(1)  # (n,) keys each query sees
    floor = (torch.where(valid, 0.0001 / k[:, None].float(), torch.zeros(())) if run.is_causal
             else torch.tensor(0.0001 / n))  # the smoothing mass on each visible key
    rows = k > 1
    log_k = torch.log(k[rows].double())
    idx = torch.arange(n)
    dist = (idx[:, None] - idx[None, :]).abs().float().reshape(-1)  # (n²,): |i − j|
    special = torch.tensor(np.asarray(run.special_mask, dtype=bool))
    columns = torch.stack([(special & (idx > 0)).float(),  # [SEP]-like tokens after the first
                           torch.tensor([t in PUNCTUATION for t in run.tokens]).float(),
                           torch.ones(n)], 1)  # (n, 3): one product gives sep, punct and the total
    targets = {name: np.nonzero(P) for name, P in detection_patterns(run).items()}  # sparse (i, j)
    seg = _segments(run)
    same = None if seg is None else torch.from_numpy(seg[:, None] == seg[None, :]).float()
    names = ["entropy", "norm_entropy", "confidence", "distance", "self", "prev", "next", "first",
             "sep", "punct", *targets, "in_segment"]
    out = {name: np.zeros((L, H)) for name in names}
    flat = tensor_view(run.attentions.reshape(L * H, n, n))
    for h in range(L * H):
        A = flat[h].float()  # (n, n)
        smooth = torch.add(floor, A, alpha=0.9999).clamp_min_(1e-30)  # masked: 0 · log(1e-30) = 0
        row_ent = -smooth.log().mul_(smooth).sum(-1, dtype=torch.float64)  # (n,)
        sums = (A @ columns).sum(0, dtype=torch.float64)  # (3,)
        mass, total = sums[:2] / n, float(sums[2])
        values = {
            "entropy": row_ent.mean(),
            "norm_entropy": (row_ent[rows] / log_k).mean() if rows.any() else float("nan"),
            "confidence": A.amax(-1).sum(dtype=torch.float64) / n,
            "distance": float(torch.dot(A.reshape(-1), dist)) / n,
            "self": torch.diagonal(A, 0).sum(dtype=torch.float64) / n,
            "prev": torch.diagonal(A, -1).sum(dtype=torch.float64) / n,
            "next": torch.diagonal(A, 1).sum(dtype=torch.float64) / n,
            "first": A[:, 0].sum(dtype=torch.float64) / n,
            "sep": mass[0], "punct": mass[1],
            # the worst row's mass inside its own segment (block pattern)
            "in_segment": (A * same).sum(-1).amin() if same is not None else 0.0,
        }
        for name, (ii, jj) in targets.items():
            values[name] = float(A[ii, jj].sum(dtype=torch.float64)) / total if len(ii) and total > 0 else 0.0
        for name, value in values.items():
            out[name][h // H, h % H] = float(value)
    return out


def classify(norm_entropy, self_, prev, next_, first, sep, punct, in_segment=0.0) -> str:
    """Pattern class by the spec's rules, in order, later rules overriding earlier ones."""
    label = "heterogeneous"
    if norm_entropy > BROAD_NORM_ENTROPY:
        label = "broad"
    diag = {"self": self_, "prev": prev, "next": next_}
    best = max(diag, key=diag.get)
    if diag[best] > DIAGONAL_MASS:
        label = f"diagonal:{best}"
    vert = {"first": first, "sep": sep, "punct": punct}
    if sum(vert.values()) > VERTICAL_MASS:
        label = f"vertical:{max(vert, key=vert.get)}"
    if in_segment > BLOCK_MASS:
        label = "block"
    return label


def importance(run: AttentionRun, weights: Weights) -> dict[str, np.ndarray]:
    """Spec section 3, as (L, H) arrays: "output_norm" = mean_t ‖o_h,t‖₂ and the seed's
    "mean_output_norm" = ‖mean_t o_h,t‖₂, with o_h = z_h W_O[h] (W_O's bias is shared, left out)."""
    if run.head_outputs is None:
        raise ValueError("importance needs each head's output, which this run does not have")
    chunks, mean = head_writes(run, run_weights(run, weights))
    norms = torch.cat([o.norm(dim=-1) for o in chunks], dim=1)  # (N, n)
    shape = (run.num_layers, run.num_heads)
    return {"output_norm": norms.mean(1).reshape(shape).numpy(),
            "mean_output_norm": mean[:, 0].norm(dim=-1).reshape(shape).numpy()}
