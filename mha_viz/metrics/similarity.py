"""Every pair of heads compared (`docs/head-metrics.md`, section 2): pattern JS divergence and cosine, output CKA,
residual correlation, the seed's R_ij and QK / OV weight cosines, on all heads or a few."""

from __future__ import annotations

import numpy as np
import torch

from mha_viz.capture.run import AttentionRun
from mha_viz.metrics.gram import gram_upper, symmetric_numpy
from mha_viz.metrics.head_writes import Weights, as_tensor, flat_outputs, head_writes, on_device, run_weights
from mha_viz.metrics.js import js_finish, js_sum
from mha_viz.metrics.measures import SIMILARITIES
from mha_viz.metrics.row_blocks import aligned, block_rows, every_layer
from mha_viz_models.attention.heads import kv_head

# the weights each weight-based kind reads: a model our MHA cannot compute has W_O only (`LoadedModel.head_weights`)
WEIGHTS_NEEDED = {"qk": ("W_Q", "W_K"), "ov": ("W_V", "W_O"), "residual": ("W_O",)}


def missing_weights(kind: str, weights: Weights) -> list[str]:
    """The weights `kind` needs that `weights` does not hold."""
    return [k for k in WEIGHTS_NEEDED.get(kind, ()) if k not in weights]


def head_similarity(run: AttentionRun, kind: str = "js", *, weights: Weights | None = None,
                    device: str | torch.device | None = None) -> np.ndarray:
    """(L·H, L·H) comparison of every pair of heads; index = layer * H + head.

    Kinds (see SIMILARITIES): "js" (a divergence, 0 for identical heads), "cosine" (patterns),
    "cka", "residual", "seed_r" (need the run's head outputs; "residual" also `weights`),
    "qk", "ov" (need `weights` only: they do not depend on the text).
    `device`: where the per-text kinds "js", "cosine", "cka", "residual" and "seed_r" compute (e.g.
    the model's "cuda"; default the CPU); the result is a float64 numpy array either way.
    """
    if kind not in _SIMILARITY:
        raise ValueError(f"unknown similarity kind {kind!r}; use one of {', '.join(SIMILARITIES)}")
    needs = SIMILARITIES[kind].needs
    if "weights" in needs and (weights is None or missing_weights(kind, weights)):
        raise ValueError(f"the {SIMILARITIES[kind].label} needs the model's "
                         f"{', '.join(WEIGHTS_NEEDED[kind])} (weights=model.head_weights())")
    if "outputs" in needs and run.head_outputs is None:
        raise ValueError(f"the {SIMILARITIES[kind].label} needs each head's output, which this run does not have")
    if device is not None and kind in _ON_DEVICE:
        return _SIMILARITY[kind](run, run_weights(run, weights), device)
    return _SIMILARITY[kind](run, run_weights(run, weights))


def _pattern_cosine(run: AttentionRun, _weights=None, device=None) -> np.ndarray:
    """Cosine of the flattened patterns: their Gram matrix summed block by block over query rows."""
    inner = None
    for _first, flat in pattern_blocks(run, device, triangle=False):  # zeros add nothing to inner products
        inner = gram_upper(flat, inner)
    return _cosine_from_inner(symmetric_numpy(inner))


def _js(run: AttentionRun, _weights=None, device=None) -> np.ndarray:
    """Mean-over-rows JS divergence of every pair of smoothed patterns (see metrics/js.py), its sums
    added block by block over query rows (`js.js_sum`).

    Entries that are the smoothing floor in every head (above the diagonal of a causal run)
    add 0 and are dropped. Where both heads sit within a factor 2 of the entry's mean over
    heads, JS comes from a degree-10 polynomial as matrix products (error at most 4e-5 nats
    per entry, proven in js.py); the other entries are computed exactly. Measured: 0.25 s for 144
    heads of a random-init BERT-base at n = 512 on 2 CPU cores (0.7 × its forward pass with
    capture); when more than 13 % of the entries are far from the mean (trained, peaked heads) the
    exact pass is cheaper, N²n²/2 logarithms: 0.65 s for 144 heads, 0.18 s for MiniLM's 72, at
    n = 512.
    """
    total = None
    for _first, flat in pattern_blocks(run, device):
        part = js_sum(flat, run.n)
        total = part if total is None else total.add_(part)
    return js_finish(total, run.n).cpu().numpy()


def pattern_blocks(run: AttentionRun, device=None, *, triangle: bool = True):
    """(first row, float32 (L·H, M) on `device`): every head's entries of a block of query rows side by
    side (`row_blocks.every_layer`), as the pairwise pattern measures sum them: a causal run's keys after
    the block's last row left out (0 in every head), and with `triangle` every entry above the diagonal."""
    H, n = run.num_heads, run.n
    for first, layers in every_layer(run):
        b = layers[0].shape[1]
        last = first + b if run.is_causal else n  # row first + i of a causal run sees keys 0 … first + i
        keep = None
        if run.is_causal and triangle:
            keep = (np.arange(last)[None, :] <= np.arange(first, last)[:, None]).ravel()
        flat = np.empty((run.num_layers * H, b * last if keep is None else int(keep.sum())), dtype=np.float32)
        for layer, rows in enumerate(layers):
            part = rows[:, :, :last].reshape(H, b * last)
            flat[layer * H:(layer + 1) * H] = part if keep is None else part[:, keep]
        yield first, on_device(flat, device)


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
    q = as_tensor(weights["W_Q"]).float()
    H = q.shape[1]
    q = q.reshape(-1, *q.shape[2:])  # (N, d, d_k)
    k = _expand_kv(as_tensor(weights["W_K"]).float(), H)  # (N, d, d_k)
    return _cosine_from_inner(_paired_trace(q, k))


def _ov(run: AttentionRun, weights: Weights) -> np.ndarray:
    """Cosine of W_OV[h] = W_V[h] W_O[h]: ⟨W_OV^i, W_OV^j⟩ = tr((W_V^iᵀ W_V^j)(W_O^j W_O^iᵀ))."""
    o = as_tensor(weights["W_O"]).float()
    H = o.shape[1]
    v = _expand_kv(as_tensor(weights["W_V"]).float(), H)  # (N, d, d_v)
    o_t = o.reshape(-1, *o.shape[2:]).transpose(1, 2)  # (N, d, d_v): W_O[h]ᵀ
    return _cosine_from_inner(_paired_trace(v, o_t))


def _cka(run: AttentionRun, _weights=None, device=None) -> np.ndarray:
    """Debiased linear CKA (Kornblith 2019 with the unbiased HSIC of Song et al. 2012).

    With K_h = z_h z_hᵀ, diagonal set to 0, U-centred (Székely & Rizzo), HSIC_u(i, j) is
    ⟨U_i, U_j⟩ / (n(n − 3)), so CKA is the cosine of the flattened U matrices. Built in
    row chunks of tokens so no (N, n, n) array is held at once. Needs n ≥ 4 (else NaN).
    """
    z = flat_outputs(run, device)  # (N, n, d_v)
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
    rows = rows / (n - 2)
    row_less_total = rows - (total / ((n - 1) * (n - 2)))[:, None]  # (N, n)
    inner = torch.zeros(N, N, dtype=torch.float64, device=z.device)
    chunk = max(1, int(2e6 // (N * n)))
    for t0 in range(0, n, chunk):
        t1 = min(n, t0 + chunk)
        u = z[:, t0:t1] @ z.transpose(1, 2)  # (N, c, n): K rows, U-centred in place
        u.sub_(row_less_total[:, t0:t1, None]).sub_(rows[:, None, :])
        idx = torch.arange(t0, t1, device=z.device)
        u[:, idx - t0, idx] = 0.0  # U-centred matrices have a zero diagonal
        gram_upper(u.reshape(N, -1), inner)
    return _cosine_from_inner(symmetric_numpy(inner))


def _residual(run: AttentionRun, weights: Weights, device=None) -> np.ndarray:
    """Pearson correlation of the heads' residual-stream writes, centred per coordinate."""
    chunks, mean = head_writes(run, weights, device)
    N = mean.shape[0]
    inner = torch.zeros(N, N, dtype=torch.float64, device=mean.device)
    for o in chunks:
        gram_upper(o.sub_(mean).reshape(N, -1), inner)
    return _cosine_from_inner(symmetric_numpy(inner))


def _seed_r(run: AttentionRun, _weights=None, device=None) -> np.ndarray:
    """The seed's R_ij = ‖z_i z_jᵀ‖_F / (‖z_i‖_F ‖z_j‖_F), via ‖z_i z_jᵀ‖²_F = ⟨z_iᵀz_i, z_jᵀz_j⟩_F."""
    z = flat_outputs(run, device).double()
    c = z.transpose(1, 2) @ z  # (N, d_v, d_v)
    flat = c.reshape(c.shape[0], -1)
    tr = torch.diagonal(c, dim1=1, dim2=2).sum(-1)  # ‖z_i‖²_F
    inner = (flat @ flat.T).clamp_min(0)
    return (inner.sqrt() / (tr[:, None] * tr[None, :]).sqrt().clamp_min(1e-300)).cpu().numpy()


_SIMILARITY = {"js": _js, "cosine": _pattern_cosine, "cka": _cka, "residual": _residual,
               "seed_r": _seed_r, "qk": _qk, "ov": _ov}
_ON_DEVICE = {"js", "cosine", "cka", "residual", "seed_r"}  # kinds that take `device`


def select_heads(run: AttentionRun, heads: list[int], weights: Weights | None = None):
    """A run (and weights) holding only `heads` (indices layer * H + head), as one layer of
    len(heads) heads each with its own KV head, so that pairwise measures of a few heads cost
    what a few heads cost (each head read alone: `run.head`, never every head's array; of a long run, their rows
    a block at a time). Returns (run, weights or None); pairwise values are unchanged."""
    layers, hs = np.divmod(np.asarray(heads), run.num_heads)
    kv = kv_head(hs, run.num_heads, run.num_kv_heads)
    held = ({"attentions": np.stack([run.head(int(a), int(b)) for a, b in zip(layers, hs)])[None]} if run.is_dense
            else {"source": _picked_source(run, layers, hs), "shape": (1, len(heads))})  # a long run: rows by blocks
    sub = AttentionRun(
        tokens=run.tokens, **held, is_causal=run.is_causal,
        num_kv_heads=len(heads), model_name=run.model_name, token_ids=run.token_ids,
        special_mask=run.special_mask, text=run.text,
        head_outputs=None if run.head_outputs is None else run.head_outputs[layers, hs][None],
    )
    if weights is None:
        return sub, None
    w = {k: as_tensor(v) for k, v in run_weights(run, weights).items()}
    rows = {"W_Q": hs, "W_K": kv, "W_V": kv, "W_O": hs, "copying": hs}  # query heads' rows, or the KV heads they read
    return sub, {k: w[k][layers, rows[k]][None] for k in w}


def _picked_source(run: AttentionRun, layers: np.ndarray, hs: np.ndarray):
    """A `head_rows.Blocks` reader of one layer whose head j is the long run's head (layers[j], hs[j]): their rows
    recomputed a block at a time and handed over side by side (`row_blocks.aligned`), never a head's n × n whole
    (SmolLM2 at 8,192 tokens: 256 MB a head)."""
    def blocks(_layer: int, heads: list[int] | None, start: int, stop: int):
        which = range(len(hs)) if heads is None else heads
        readers = [run.source(int(layers[j]), [int(hs[j])], start, stop) for j in which]
        for first, parts in aligned(readers, start, stop, block_rows(len(readers), run.n)):
            yield first, np.concatenate(parts)
    return blocks


def as_similarity(matrix: np.ndarray, kind: str) -> np.ndarray:
    """A comparison as a similarity in [-1, 1]: the JS divergence becomes 1 − JS / ln 2."""
    return 1.0 - np.asarray(matrix) / np.log(2) if kind == "js" else np.asarray(matrix)


def as_dissimilarity(matrix: np.ndarray, kind: str) -> np.ndarray:
    """A comparison as a dissimilarity ≥ 0 with zero diagonal, for ordering and maps."""
    d = np.asarray(matrix, dtype=np.float64) if kind == "js" else 1.0 - np.abs(np.asarray(matrix, dtype=np.float64))
    d = np.nan_to_num(0.5 * (d + d.T), nan=1.0)
    np.fill_diagonal(d, 0.0)
    return np.clip(d, 0.0, None)
