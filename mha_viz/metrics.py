"""Head metrics, vectorized over all heads (the specification: `shared/docs/head-metrics.md`).

- `head_table`: per-head pattern statistics and pattern classes (spec section 1), plus the
  importance norms of section 3 when the run has head outputs and the weights are given.
- `head_similarity`: every pair of heads compared (section 2): JS divergence and cosine of
  patterns, output CKA (debiased), residual correlation, the seed's R_ij, QK / OV weight cosines.
- `diversity`, `layer_diversity`: the diversity D of sets of heads (section 2).
- `rollout`, `rollout_through_head`, `flow`: attention across layers (section 4).
- `cluster_order`, `mds`: layouts of a dissimilarity matrix for the views.

Functions take an `AttentionRun` (and, where weights matter, the dict of
`LoadedModel.head_weights()`) and return plain numpy / pandas. `METRICS` and `SIMILARITIES`
hold each measure's one-line formula and what high and low values mean, for the UI.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from .capture import AttentionRun, tensor_view

Weights = dict  # "W_Q" (L, H, d, d_k), "W_K" (L, G, d, d_k), "W_V" (L, G, d, d_v), "W_O" (L, H, d_v, d)


@dataclass(frozen=True)
class Measure:
    """What the UI says about a measure: its formula in one line and how to read it."""

    label: str
    formula: str
    high: str
    low: str
    needs: str = "attention"  # "attention", "outputs" (z), "weights" or "outputs+weights"


METRICS: dict[str, Measure] = {
    "entropy": Measure("Entropy (nats)", "mean_i −Σ_j Â_ij ln Â_ij,  Â = 0.9999·A + 0.0001/k_i",
                       "attention spread over many tokens", "attention on one or two tokens"),
    "norm_entropy": Measure("Normalized entropy", "mean_i H(A_i) / ln k_i  (k_i = keys row i may see)",
                            "close to uniform over the visible keys (> 0.9: broad)", "sharp, one-hot rows"),
    "confidence": Measure("Confidence", "mean_i max_j A_ij", "each query picks one key", "no key stands out"),
    "distance": Measure("Mean distance", "mean_i Σ_j A_ij·|i − j|", "looks far away", "looks at itself or neighbours"),
    "self": Measure("Self", "mean_i A_i,i", "attends to itself", "ignores itself"),
    "prev": Measure("Previous token", "mean_i A_i,i−1", "attends to the previous token", "does not"),
    "next": Measure("Next token", "mean_i A_i,i+1", "attends to the next token", "does not"),
    "first": Measure("First token (sink)", "mean_i A_i,0", "parks attention on [CLS] / BOS", "does not"),
    "sep": Measure("[SEP] tokens", "mean_i Σ_{j ∈ SEP} A_ij", "parks attention on separators", "does not"),
    "punct": Measure("Punctuation", "mean_i Σ_{j ∈ {'.', ','}} A_ij", "attends to . and ,", "does not"),
    "prev_token_score": Measure("Previous-token score (detector form of prev)", "Σ(A ⊙ P)/ΣA,  P[i, i−1] = 1",
                                "a previous-token head (TransformerLens detector; equals prev when "
                                "every row sums to 1)", "not one"),
    "duplicate_score": Measure("Duplicate-token score", "Σ(A ⊙ P)/ΣA,  P[i, j] = 1 if tok_j = tok_i, j < i",
                               "looks back at earlier copies of the same token", "does not"),
    "induction_score": Measure("Induction score", "Σ(A ⊙ P)/ΣA,  P[i, j+1] = 1 if tok_j = tok_i, j < i",
                               "looks at the token after an earlier copy (an induction head); "
                               "a perfect one scores 0.5 on a sequence repeated twice", "not an induction head"),
    "output_norm": Measure("Output norm", "mean_t ‖z_t W_O[h]‖₂  (Kobayashi 2020)",
                           "writes a lot into the residual stream", "writes little", "outputs+weights"),
    "mean_output_norm": Measure("Mean-output norm (seed's I_i)", "‖mean_t z_t W_O[h]‖₂",
                                "a large constant part in what it writes",
                                "zero-mean output: may still be large, this only sees the constant part",
                                "outputs+weights"),
}

SIMILARITIES: dict[str, Measure] = {
    "js": Measure("JS divergence of patterns",
                  "mean_i JS(Ã_h[i], Ã_h'[i]),  Ã = 0.999·A + 0.001/n,  natural log (0 .. ln 2)",
                  "different patterns (a divergence: high = unlike)", "the same pattern"),
    "cosine": Measure("Pattern cosine", "⟨A_h, A_h'⟩ / (‖A_h‖ ‖A_h'‖) over the flattened matrices",
                      "look at the same places", "look at different places"),
    "cka": Measure("Output CKA (debiased)", "linear CKA of z_h, z_h' (n × d_v) with the unbiased HSIC",
                   "the heads' outputs carry the same information, up to rotation and scale",
                   "unrelated outputs", "outputs"),
    "residual": Measure("Residual correlation", "Pearson r of z_h W_O[h] and z_h' W_O[h'] over all n·d_model "
                        "entries, centred per coordinate", "they write the same thing into the residual stream",
                        "unrelated (negative: opposite)", "outputs+weights"),
    "seed_r": Measure("Seed's R_ij (not 1 for identical heads)", "‖z_i z_jᵀ‖_F / (‖z_i‖_F ‖z_j‖_F)",
                      "as written in the seed it is NOT 1 for identical heads (random identical "
                      "heads give about 0.2): prefer output CKA", "", "outputs"),
    "qk": Measure("QK weight cosine", "cos(W_Q[h] W_K[h]ᵀ, W_Q[h'] W_K[h']ᵀ) via tr((W_Q'ᵀ W_Q)(W_Kᵀ W_K'))",
                  "score tokens alike (content part only for RoPE models; GQA heads of one group "
                  "share W_K, so they differ only by W_Q)", "unrelated (negative: opposite)", "weights"),
    "ov": Measure("OV weight cosine", "cos(W_V[h] W_O[h], W_V[h'] W_O[h']) via tr((W_Vᵀ W_V')(W_O' W_Oᵀ))",
                  "move the same information (GQA heads of one group share W_V)",
                  "unrelated (negative: opposite)", "weights"),
}

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
            values[name] = float(A[ii, jj].sum(dtype=torch.float64)) / total if len(ii) else 0.0
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


def head_similarity(run: AttentionRun, kind: str = "js", *, weights: Weights | None = None) -> np.ndarray:
    """(L·H, L·H) comparison of every pair of heads; index = layer * H + head.

    Kinds (see SIMILARITIES): "js" (a divergence, 0 for identical heads), "cosine" (patterns),
    "cka", "residual", "seed_r" (need the run's head outputs; "residual" also `weights`),
    "qk", "ov" (need `weights` only: they do not depend on the text).
    """
    if kind not in _SIMILARITY:
        raise ValueError(f"unknown similarity kind {kind!r}; use one of {', '.join(SIMILARITIES)}")
    needs = SIMILARITIES[kind].needs
    if "weights" in needs and weights is None:
        raise ValueError(f"the {SIMILARITIES[kind].label} needs the model's weights (weights=model.head_weights())")
    if "outputs" in needs and run.head_outputs is None:
        raise ValueError(f"the {SIMILARITIES[kind].label} needs each head's output, which this run does not have")
    return _SIMILARITY[kind](run, _run_layers(run, weights))


def _run_layers(run: AttentionRun, weights: Weights | None) -> Weights | None:
    """The model's weights (L, …) cut to the layers the run holds (`run.layer_ids`)."""
    if weights is None or len(weights["W_Q"]) == run.num_layers:
        return weights
    rows = torch.as_tensor(run.layer_ids)
    return {k: _tensor(v)[rows] for k, v in weights.items()}


def _pattern_cosine(run: AttentionRun, _weights=None) -> np.ndarray:
    x = tensor_view(run.attentions.reshape(run.num_layers * run.num_heads, -1))  # (N, n²) float32
    return _cosine_from_inner((x @ x.T).double().numpy())


def _js(run: AttentionRun, _weights=None) -> np.ndarray:
    """Mean-over-rows JS divergence of every pair of smoothed patterns.

    Summed over all entries, JS(p, q) = ½(Σ p ln p + Σ q ln q) − Σ m ln m with m = (p + q)/2 and
    Σ m ln m = ½ Σ s ln s − ln 2 · Σ m for s = p + q, so each pair costs one add, one log and
    one dot product over its n² entries, done in column blocks that stay in cache. Entries that
    are the smoothing floor in both heads (above the diagonal of a causal run) add a known
    constant and are not computed. The cost is N²n²/2 logarithms: about 3 s for 144 heads at
    n = 512 on 2 CPU cores, the one metric slower than the forward pass (see benchmarks/).
    """
    L, H, n = run.num_layers, run.num_heads, run.n
    N, eps = L * H, 0.001 / n
    flat = tensor_view(run.attentions.reshape(N, n * n))
    if run.is_causal:
        rows, cols = np.tril_indices(n)
        flat = flat[:, torch.from_numpy(rows * n + cols)]  # (N, n(n+1)/2)
    p = flat.float() * 0.999 + eps  # (N, M)
    skipped = n * n - p.shape[1]  # entries equal to eps in every head
    plogp = (p * p.log()).sum(-1, dtype=torch.float64) + skipped * eps * math.log(eps)  # (N,)
    mass = p.sum(-1, dtype=torch.float64) + skipped * eps  # (N,): Σ p (n, up to rounding)
    sls = torch.zeros(N, N, dtype=torch.float64)  # Σ s ln s for every pair i < j
    block = 8192  # measured: larger blocks lose cache, smaller ones lose to per-call overhead
    buf, logs = torch.empty(N, block), torch.empty(N, block)
    for c0 in range(0, p.shape[1], block):
        chunk = p[:, c0:c0 + block].contiguous()  # (N, c)
        w = chunk.shape[1]
        for i in range(N - 1):
            s = torch.add(chunk[i + 1:], chunk[i], out=buf[:N - i - 1, :w])  # (N − i − 1, c)
            ls = torch.log(s, out=logs[:N - i - 1, :w])
            sls[i, i + 1:] += torch.linalg.vecdot(s, ls).double()
    sls += skipped * 2 * eps * math.log(2 * eps)
    m_mass = 0.5 * (mass[:, None] + mass[None, :])
    js = 0.5 * (plogp[:, None] + plogp[None, :]) - (0.5 * sls - math.log(2) * m_mass)
    js = torch.triu(js, 1)
    return ((js + js.T) / n).clamp_min(0).numpy()


def _tensor(x) -> torch.Tensor:
    return (x if isinstance(x, torch.Tensor) else torch.as_tensor(np.asarray(x))).detach().cpu()


def _expand_kv(w: torch.Tensor, num_heads: int) -> torch.Tensor:
    """(L, G, ...) -> (L·H, ...): query head h of a layer reads KV head h // (H / G)."""
    group = num_heads // w.shape[1]
    return w.repeat_interleave(group, dim=1).reshape(-1, *w.shape[2:])


def _paired_trace(a: torch.Tensor, b: torch.Tensor) -> np.ndarray:
    """(N, N) of ⟨a_i b_iᵀ, a_j b_jᵀ⟩_F = Σ_xy (a_iᵀ a_j)_xy (b_iᵀ b_j)_xy for a (N, m, r) and
    b (N, m', r), without forming any m × m' matrix. Rows of heads go in chunks so that the
    (chunk·r, N·r) Gram blocks stay small; only the upper triangle is computed."""
    N, m, r = a.shape
    a_flat = a.permute(1, 0, 2).reshape(m, N * r)  # (m, N·r): every head's columns side by side
    b_flat = b.permute(1, 0, 2).reshape(b.shape[1], N * r)
    out = torch.zeros(N, N, dtype=torch.float64)
    chunk = max(1, int(4e6 // (N * r * r)))
    for i0 in range(0, N, chunk):
        i1 = min(N, i0 + chunk)
        ga = (a_flat[:, i0 * r:i1 * r].T @ a_flat[:, i0 * r:]).reshape(i1 - i0, r, N - i0, r)  # (c, r, N', r)
        gb = (b_flat[:, i0 * r:i1 * r].T @ b_flat[:, i0 * r:]).reshape(i1 - i0, r, N - i0, r)
        out[i0:i1, i0:] = ga.mul_(gb).sum((1, 3), dtype=torch.float64)
    out = torch.triu(out) + torch.triu(out, 1).T
    return out.numpy()


def _cosine_from_inner(inner: np.ndarray) -> np.ndarray:
    """Cosines from a Gram matrix. A head with norm 0 (a dead head: W_O = 0, constant output)
    is like no other head (0) and its similarity to itself is undefined (NaN)."""
    diag = np.diag(inner).copy()
    norms = np.sqrt(np.clip(diag, 1e-300, None))
    out = np.clip(inner / norms[:, None] / norms[None, :], -1.0, 1.0)
    dead = diag <= 1e-300
    out[dead, :] = 0.0
    out[:, dead] = 0.0
    out[dead, dead] = np.nan
    return out


def _qk(run: AttentionRun, weights: Weights) -> np.ndarray:
    """Cosine of W_QK[h] = W_Q[h] W_K[h]ᵀ: ⟨W_QK^i, W_QK^j⟩ = tr((W_Q^jᵀ W_Q^i)(W_K^iᵀ W_K^j))."""
    q = _tensor(weights["W_Q"]).float()
    H = q.shape[1]
    q = q.reshape(-1, *q.shape[2:])  # (N, d, d_k)
    k = _expand_kv(_tensor(weights["W_K"]).float(), H)  # (N, d, d_k)
    return _cosine_from_inner(_paired_trace(q, k))


def _ov(run: AttentionRun, weights: Weights) -> np.ndarray:
    """Cosine of W_OV[h] = W_V[h] W_O[h]: ⟨W_OV^i, W_OV^j⟩ = tr((W_V^iᵀ W_V^j)(W_O^j W_O^iᵀ))."""
    o = _tensor(weights["W_O"]).float()
    H = o.shape[1]
    v = _expand_kv(_tensor(weights["W_V"]).float(), H)  # (N, d, d_v)
    o_t = o.reshape(-1, *o.shape[2:]).transpose(1, 2)  # (N, d, d_v): W_O[h]ᵀ
    return _cosine_from_inner(_paired_trace(v, o_t))


def _outputs(run: AttentionRun) -> torch.Tensor:
    """(N, n, d_v) float32. Float32 is enough: on MiniLM at n = 512, CKA and residual
    correlation differ from float64 by about 1e-7."""
    z = run.head_outputs
    return tensor_view(z.reshape(-1, *z.shape[2:])).float()


def _cka(run: AttentionRun, _weights=None) -> np.ndarray:
    """Debiased linear CKA (Kornblith 2019 with the unbiased HSIC of Song et al. 2012).

    With K_h = z_h z_hᵀ, diagonal set to 0, U-centred (Székely & Rizzo), HSIC_u(i, j) is
    ⟨U_i, U_j⟩ / (n(n − 3)), so CKA is the cosine of the flattened U matrices. Built in
    row chunks of tokens so no (N, n, n) array is held at once. Needs n ≥ 4 (else NaN).
    """
    z = _outputs(run)  # (N, n, d_v)
    N, n, _ = z.shape
    if n < 4:
        return np.full((N, N), np.nan)
    # CKA ignores a constant shift; removing it first keeps float32 from cancelling when a
    # head's output has a large constant part
    z = z - z.mean(1, keepdim=True)
    diag = (z * z).sum(-1)  # (N, n): K_h[t, t]
    rows = z @ z.sum(1, keepdim=True).transpose(1, 2)  # (N, n, 1): K_h 1
    rows = rows[..., 0] - diag  # row sums of K with a zero diagonal
    total = rows.sum(-1)  # (N,)
    inner = torch.zeros(N, N, dtype=torch.float64)
    chunk = max(1, int(2e6 // (N * n)))
    for t0 in range(0, n, chunk):
        t1 = min(n, t0 + chunk)
        k = z[:, t0:t1] @ z.transpose(1, 2)  # (N, c, n)
        u = (k - rows[:, t0:t1, None] / (n - 2) - rows[:, None, :] / (n - 2)
             + total[:, None, None] / ((n - 1) * (n - 2)))
        idx = torch.arange(t0, t1)
        u[:, idx - t0, idx] = 0.0  # U-centred matrices have a zero diagonal
        f = u.reshape(N, -1)
        inner += (f @ f.T).double()
    return _cosine_from_inner(inner.numpy())


def _head_writes(run: AttentionRun, weights: Weights):
    """What every head writes into the residual stream, o_h = z_h W_O[h]: a generator of token
    chunks (N, c, d_model) and the per-head mean over tokens (N, 1, d_model)."""
    z = _outputs(run)
    w_o = _tensor(weights["W_O"]).float()
    w_o = w_o.reshape(-1, *w_o.shape[2:])  # (N, d_v, d_model)
    mean = z.mean(1, keepdim=True) @ w_o  # (N, 1, d_model)
    chunk = max(1, int(4e6 // (z.shape[0] * w_o.shape[-1])))
    chunks = ((z[:, t0:t0 + chunk] @ w_o) for t0 in range(0, z.shape[1], chunk))  # (N, c, d_model)
    return chunks, mean


def _residual(run: AttentionRun, weights: Weights) -> np.ndarray:
    """Pearson correlation of the heads' residual-stream writes, centred per coordinate."""
    chunks, mean = _head_writes(run, weights)
    N = mean.shape[0]
    inner = torch.zeros(N, N, dtype=torch.float64)
    for o in chunks:
        f = (o - mean).reshape(N, -1)
        inner += (f @ f.T).double()
    return _cosine_from_inner(inner.numpy())


def _seed_r(run: AttentionRun, _weights=None) -> np.ndarray:
    """The seed's R_ij = ‖z_i z_jᵀ‖_F / (‖z_i‖_F ‖z_j‖_F), via ‖z_i z_jᵀ‖²_F = ⟨z_iᵀz_i, z_jᵀz_j⟩_F."""
    z = _outputs(run).double()
    c = z.transpose(1, 2) @ z  # (N, d_v, d_v)
    flat = c.reshape(c.shape[0], -1)
    tr = torch.diagonal(c, dim1=1, dim2=2).sum(-1)  # ‖z_i‖²_F
    inner = (flat @ flat.T).clamp_min(0)
    return (inner.sqrt() / (tr[:, None] * tr[None, :]).sqrt().clamp_min(1e-300)).numpy()


_SIMILARITY = {"js": _js, "cosine": _pattern_cosine, "cka": _cka, "residual": _residual,
               "seed_r": _seed_r, "qk": _qk, "ov": _ov}


def importance(run: AttentionRun, weights: Weights) -> dict[str, np.ndarray]:
    """Spec section 3, as (L, H) arrays: "output_norm" = mean_t ‖o_h,t‖₂ and the seed's
    "mean_output_norm" = ‖mean_t o_h,t‖₂, with o_h = z_h W_O[h] (W_O's bias is shared, left out)."""
    if run.head_outputs is None:
        raise ValueError("importance needs each head's output, which this run does not have")
    chunks, mean = _head_writes(run, _run_layers(run, weights))
    norms = torch.cat([o.norm(dim=-1) for o in chunks], dim=1)  # (N, n)
    shape = (run.num_layers, run.num_heads)
    return {"output_norm": norms.mean(1).reshape(shape).numpy(),
            "mean_output_norm": mean[:, 0].norm(dim=-1).reshape(shape).numpy()}


def select_heads(run: AttentionRun, heads: list[int], weights: Weights | None = None):
    """A run (and weights) holding only `heads` (indices layer * H + head), as one layer of
    len(heads) heads each with its own KV head, so that pairwise measures of a few heads cost
    what a few heads cost. Returns (run, weights or None); pairwise values are unchanged."""
    layers, hs = np.divmod(np.asarray(heads), run.num_heads)
    kv = hs // (run.num_heads // run.num_kv_heads)
    sub = AttentionRun(
        tokens=run.tokens, attentions=run.attentions[layers, hs][None], is_causal=run.is_causal,
        num_kv_heads=len(heads), model_name=run.model_name, token_ids=run.token_ids,
        special_mask=run.special_mask, text=run.text,
        head_outputs=None if run.head_outputs is None else run.head_outputs[layers, hs][None],
    )
    if weights is None:
        return sub, None
    w = {k: _tensor(v) for k, v in _run_layers(run, weights).items()}
    return sub, {"W_Q": w["W_Q"][layers, hs][None], "W_K": w["W_K"][layers, kv][None],
                 "W_V": w["W_V"][layers, kv][None], "W_O": w["W_O"][layers, hs][None]}


def as_similarity(matrix: np.ndarray, kind: str) -> np.ndarray:
    """A comparison as a similarity in [-1, 1]: the JS divergence becomes 1 − JS / ln 2."""
    return 1.0 - np.asarray(matrix) / np.log(2) if kind == "js" else np.asarray(matrix)


def as_dissimilarity(matrix: np.ndarray, kind: str) -> np.ndarray:
    """A comparison as a dissimilarity ≥ 0 with zero diagonal, for ordering and maps."""
    d = np.asarray(matrix, dtype=np.float64) if kind == "js" else 1.0 - np.abs(np.asarray(matrix, dtype=np.float64))
    d = np.nan_to_num(0.5 * (d + d.T), nan=1.0)
    np.fill_diagonal(d, 0.0)
    return np.clip(d, 0.0, None)


def diversity(similarity: np.ndarray) -> float:
    """D = 1/(h(h-1)) Σ_{i≠j} (1 - |s_ij|) for an (h, h) similarity in [-1, 1]: 0 when all
    heads are identical, 1 when they are mutually orthogonal."""
    s = np.asarray(similarity, dtype=np.float64)
    h = s.shape[0]
    if h < 2:
        return float("nan")
    off = ~np.eye(h, dtype=bool)
    return float((1 - np.abs(s[off])).sum() / (h * (h - 1)))


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


def layer_diversity(similarity: np.ndarray, num_layers: int, num_heads: int) -> np.ndarray:
    """D within each layer's heads, (L,), from an (L·H, L·H) similarity in [-1, 1]."""
    s = np.asarray(similarity).reshape(num_layers, num_heads, num_layers, num_heads)
    return np.array([diversity(s[l, :, l, :]) for l in range(num_layers)])


def cluster_order(dissimilarity: np.ndarray) -> np.ndarray:
    """A permutation that puts similar heads next to each other: average-linkage clustering,
    leaves in optimal order."""
    from scipy.cluster.hierarchy import leaves_list, linkage, optimal_leaf_ordering
    from scipy.spatial.distance import squareform

    d = np.asarray(dissimilarity, dtype=np.float64)
    if d.shape[0] < 3:
        return np.arange(d.shape[0])
    condensed = squareform(d, checks=False)
    tree = linkage(condensed, method="average")
    return leaves_list(optimal_leaf_ordering(tree, condensed))


def mds(dissimilarity: np.ndarray, *, dim: int = 2, iterations: int = 300, seed: int = 0) -> np.ndarray:
    """Metric MDS (SMACOF, started from classical MDS): (N, dim) points whose distances match
    the dissimilarities as well as possible (Clark et al. 2019 map heads this way from JS)."""
    d = np.asarray(dissimilarity, dtype=np.float64)
    N = d.shape[0]
    if N <= dim:
        return np.eye(N, dim)
    # classical MDS: top eigenvectors of the double-centred squared dissimilarities
    J = np.eye(N) - 1.0 / N
    B = -0.5 * J @ (d ** 2) @ J
    vals, vecs = np.linalg.eigh(B)
    order = np.argsort(vals)[::-1][:dim]
    X = vecs[:, order] * np.sqrt(np.clip(vals[order], 1e-12, None))
    X += np.random.default_rng(seed).normal(scale=1e-6, size=X.shape)  # break ties of equal points
    prev = np.inf
    for _ in range(iterations):  # Guttman transform with unit weights
        sq = (X * X).sum(1)
        dist = np.sqrt(np.clip(sq[:, None] + sq[None, :] - 2 * X @ X.T, 0.0, None))
        stress = ((dist - d) ** 2).sum() / 2
        ratio = np.divide(d, dist, out=np.zeros_like(d), where=dist > 1e-12)
        Bx = -ratio
        np.fill_diagonal(Bx, 0.0)
        np.fill_diagonal(Bx, -Bx.sum(1))
        X = Bx @ X / N
        if prev - stress < 1e-9 * max(prev, 1e-12):
            break
        prev = stress
    return X - X.mean(0)


def diversity_table(similarity: np.ndarray, baseline: np.ndarray | None, num_layers: int,
                    num_heads: int, layer_ids: list[int] | None = None) -> pd.DataFrame:
    """Diversity D per layer and over all heads, beside the same measure on the model at random
    initialisation. Both matrices are similarities in [-1, 1] (see `as_similarity`).
    layer_ids: the model's layer number of each row (default 0, 1, …)."""
    names = list(range(num_layers)) if layer_ids is None else layer_ids
    rows = [f"layer {l}" for l in names] + ["all heads"]
    table = pd.DataFrame({"heads": rows})
    for column, sim in (("D", similarity), ("D_random_init", baseline)):
        if sim is None:
            continue
        table[column] = list(layer_diversity(sim, num_layers, num_heads)) + [diversity(sim)]
    return table
