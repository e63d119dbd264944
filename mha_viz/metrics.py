"""Head metrics from attention patterns, vectorized over all heads (`../shared/docs/head-metrics.md`).

Implemented so far: the per-head statistics and pattern classes of section 1 (`head_table`),
the pattern comparisons of section 2 (`head_similarity`: JS divergence, cosine), the
diversity D of a set of heads (`diversity`) and attention rollout (`rollout`, section 4).
All functions take an `AttentionRun` and return plain numpy / pandas.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from .capture import AttentionRun

# Pattern-class thresholds: conventions after Clark et al. 2019 / Kovaleva et al. 2019, not facts.
BROAD_NORM_ENTROPY = 0.9
DIAGONAL_MASS = 0.5
VERTICAL_MASS = 0.6
BLOCK_MASS = 0.8
PUNCTUATION = frozenset({".", ","})


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


def head_table(run: AttentionRun) -> pd.DataFrame:
    """One row per (layer, head) with the statistics of spec section 1 and a pattern class.

    Columns: layer, head, entropy (nats), norm_entropy, confidence, distance, distance_norm,
    self, prev, next, first, sep, punct, prev_token_score, duplicate_score, induction_score,
    pattern (one of diagonal / vertical / broad / block / heterogeneous, with details after ':').
    """
    A = run.attentions.astype(np.float64)  # (L, H, n, n)
    L, H, n = run.num_layers, run.num_heads, run.n
    valid = _valid(run)
    k = valid.sum(1)  # (n,) keys each query sees
    smooth = np.where(valid, 0.9999 * A + 0.0001 / k[:, None], 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        row_ent = -np.where(smooth > 0, smooth * np.log(smooth), 0.0).sum(-1)  # (L, H, n)
    rows = k > 1
    norm_ent = (row_ent[..., rows] / np.log(k[rows])).mean(-1) if rows.any() else np.full((L, H), np.nan)
    idx = np.arange(n)
    dist = np.abs(idx[:, None] - idx[None, :])
    special = np.asarray(run.special_mask, dtype=bool)
    sep_cols = special & (idx > 0)
    punct_cols = np.array([t in PUNCTUATION for t in run.tokens])
    cols = {
        "entropy": row_ent.mean(-1),
        "norm_entropy": norm_ent,
        "confidence": A.max(-1).mean(-1),
        "distance": (A * dist).sum(-1).mean(-1),
        "self": np.diagonal(A, 0, -2, -1).mean(-1),
        "prev": np.diagonal(A, -1, -2, -1).sum(-1) / n,
        "next": np.diagonal(A, 1, -2, -1).sum(-1) / n,
        "first": A[..., :, 0].mean(-1),
        "sep": A[..., :, sep_cols].sum(-1).mean(-1),
        "punct": A[..., :, punct_cols].sum(-1).mean(-1),
    }
    cols["distance_norm"] = cols["distance"] / n
    total = A.sum((-2, -1))
    for name, P in detection_patterns(run).items():
        cols[name] = (A * P).sum((-2, -1)) / total
    seg = _segments(run)
    if seg is not None:
        same = seg[:, None] == seg[None, :]
        in_segment = (A * same).sum(-1).min(-1)  # the worst row's mass inside its own segment
    else:
        in_segment = np.zeros((L, H))
    layers, heads = np.meshgrid(np.arange(L), np.arange(H), indexing="ij")
    table = pd.DataFrame({"layer": layers.ravel(), "head": heads.ravel()})
    for name, values in cols.items():
        table[name] = np.asarray(values).ravel()
    table["pattern"] = [
        classify(r.norm_entropy, r.self, r.prev, r.next, r.first, r.sep, r.punct, b)
        for r, b in zip(table.itertuples(), in_segment.ravel())
    ]
    return table


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


def head_similarity(run: AttentionRun, kind: str = "js") -> np.ndarray:
    """(L·H, L·H) comparison of every pair of heads; index = layer * H + head.

    kind "js": mean over query rows of the Jensen–Shannon divergence (natural log, 0..ln 2)
    of smoothed rows Ã = 0.999·A + 0.001/n; 0 for identical heads (a divergence, not a
    similarity). kind "cosine": cosine of the flattened matrices (0..1).
    """
    flat = torch.from_numpy(run.attentions.reshape(run.num_layers * run.num_heads, run.n, run.n).astype(np.float64))
    if kind == "cosine":
        x = flat.reshape(flat.shape[0], -1)
        x = x / x.norm(dim=1, keepdim=True).clamp_min(1e-30)
        return (x @ x.T).clamp(-1, 1).numpy()
    if kind != "js":
        raise ValueError(f"unknown similarity kind {kind!r}; use 'js' or 'cosine'")
    p = 0.999 * flat + 0.001 / run.n  # (N, n, n)
    plogp = (p * p.log()).sum(-1)  # (N, n)
    N = p.shape[0]
    out = torch.zeros(N, N, dtype=torch.float64)
    chunk = max(1, int(2e7 // (run.n * run.n)))  # bound the (chunk, n, n) temporaries
    for i in range(N):
        for j0 in range(i, N, chunk):
            q = p[j0:j0 + chunk]
            m = 0.5 * (p[i] + q)
            js = 0.5 * (plogp[i] + plogp[j0:j0 + chunk]) - (m * m.log()).sum(-1)  # (c, n)
            out[i, j0:j0 + chunk] = js.mean(-1)
    out = torch.triu(out, 1)
    return (out + out.T).clamp_min(0).numpy()


def diversity(similarity: np.ndarray) -> float:
    """D = 1/(h(h-1)) Σ_{i≠j} (1 - |s_ij|) for an (h, h) similarity in [-1, 1]: 0 when all
    heads are identical, 1 when they are mutually orthogonal."""
    s = np.asarray(similarity, dtype=np.float64)
    h = s.shape[0]
    if h < 2:
        return float("nan")
    off = ~np.eye(h, dtype=bool)
    return float((1 - np.abs(s[off])).sum() / (h * (h - 1)))


def rollout(run: AttentionRun) -> np.ndarray:
    """Attention rollout (Abnar & Zuidema 2020): (layers, n, n), row i of layer l says how much
    token i at layer l draws on each input token. Â_l = rows-renormalised 0.5·mean_h A_l + 0.5·I;
    R_1 = Â_1, R_l = Â_l R_{l-1}. Rows sum to 1."""
    A = torch.from_numpy(run.attentions.astype(np.float64)).mean(1)  # (L, n, n); copies, so read-only runs work
    eye = torch.eye(run.n, dtype=torch.float64)
    A_hat = 0.5 * A + 0.5 * eye
    A_hat = A_hat / A_hat.sum(-1, keepdim=True)
    out = torch.empty_like(A_hat)
    acc = eye
    for layer in range(run.num_layers):
        acc = A_hat[layer] @ acc
        out[layer] = acc
    return out.numpy()
