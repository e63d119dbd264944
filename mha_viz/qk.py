"""Inside one head: one query against one key (BertViz's neuron view) and every query and key of
the head in one 2-D map (AttentionViz).

`neuron(w, i, j)` takes a `teaching.Walkthrough` (the head's real q, k after RoPE where the model
uses it) and returns q_i, k_j, their element-wise product, its sum (the score q_i · k_j), the
score × scale (1/√d_k) and the softmax over query i's whole row, computed from the same q · k
sums with the causal mask for decoders: that row equals the captured attention probabilities.

`qk_map(q, k)` projects the n queries and n keys jointly to 2-D (PCA by default, exact t-SNE as
an option). With `translate=True` it first applies AttentionViz's key translation and scaling,
which change no attention weight:
  1. scaling: q ← α q, k ← k / α with α = √(mean‖k‖ / mean‖q‖), so queries and keys have the
     same mean norm (every product q · k is unchanged);
  2. translation: k ← k + (mean q − mean k), so the keys' mean equals the queries' mean (each
     score of query i moves by the constant q_i · c, which a row's softmax ignores).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .teaching import Walkthrough, walkthrough

METHODS = ("pca", "tsne")
TSNE_MAX_POINTS = 1024  # exact t-SNE is O(N²) per iteration


@dataclass(frozen=True)
class Neuron:
    """Query i against key j in one head, term by term."""

    tokens: list[str]
    layer: int
    head: int
    kv_head: int
    i: int
    j: int
    rope: bool  # q and k were turned by rotary position embeddings before the products
    is_causal: bool
    scale: float  # 1 / √d_k for most models
    q: np.ndarray  # (d_k,) q_i
    k: np.ndarray  # (d_k,) k_j
    product: np.ndarray  # (d_k,) q_i ⊙ k_j
    score: float  # Σ product = q_i · k_j
    scaled: float  # score × scale (then soft-capped, Gemma 2)
    row_scaled: np.ndarray  # (n,) q_i · k_t × scale for every key t (-inf where masked)
    row_probs: np.ndarray  # (n,) softmax of row_scaled: the attention of query i
    masked: bool  # key j is hidden from query i (causal, j > i; or outside a sliding window): probability 0

    @property
    def prob(self) -> float:
        return float(self.row_probs[self.j])


def neuron(source, i: int, j: int, *, text: str | None = None, layer: int = 0, head: int = 0,
           max_tokens: int | None = None) -> Neuron:
    """Query i against key j. `source`: a `teaching.Walkthrough`, or a loaded model (then
    `text`, `layer`, `head` and optionally `max_tokens` make the walkthrough). Raises IndexError
    for positions outside the walkthrough's tokens."""
    if isinstance(source, Walkthrough):
        w = source
    else:
        if text is None:
            raise ValueError("neuron(model, …) needs text=")
        kwargs = {} if max_tokens is None else {"max_tokens": max_tokens}
        w = walkthrough(source, text, layer, head, **kwargs)
    n = w.n
    if not (0 <= i < n and 0 <= j < n):
        raise IndexError(f"positions must lie in 0..{n - 1}: got query {i}, key {j}")
    q = w.Q[i].astype(np.float64)
    K = w.K.astype(np.float64)  # (n, d_k)
    product = q * K[j]
    row = (K @ q) * w.scale  # (n,) every score of row i, scaled
    if w.softcap is not None:  # Gemma 2's logit soft-capping, as the model computes it
        row = np.tanh(row / w.softcap) * w.softcap
    scaled = float(row[j])  # q_i · k_j × scale (soft-capped), masked or not
    keys = np.arange(n)
    hidden = keys > i if w.is_causal else np.zeros(n, dtype=bool)
    if w.window is not None and w.is_causal:  # a sliding window hides keys `window` or more back
        hidden |= keys <= i - w.window
    elif w.window is not None:  # an encoder's local layer: keys more than `window` away
        hidden |= np.abs(keys - i) > w.window
    row = np.where(hidden, -np.inf, row)
    e = np.exp(row - row[~hidden].max())
    probs = e / e.sum()
    score = float(product.sum())
    return Neuron(tokens=list(w.tokens), layer=w.layer, head=w.head, kv_head=w.kv_head, i=i, j=j,
                  rope=w.rope, is_causal=w.is_causal, scale=float(w.scale), q=q, k=K[j].copy(),
                  product=product, score=score, scaled=scaled, row_scaled=row, row_probs=probs,
                  masked=bool(hidden[j]))


def align_keys(q: np.ndarray, k: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """AttentionViz's scaling and key translation (module doc): returns (q', k') with equal mean
    norms before the translation, mean(k') = mean(q'), and q'_a · k'_b − q_a · k_b constant along
    each query's row, so every softmax row is unchanged."""
    q = np.asarray(q, dtype=np.float64)
    k = np.asarray(k, dtype=np.float64)
    qn, kn = np.linalg.norm(q, axis=1).mean(), np.linalg.norm(k, axis=1).mean()
    alpha = np.sqrt(kn / qn) if qn > 0 and kn > 0 else 1.0
    q, k = q * alpha, k / alpha
    return q, k + (q.mean(0) - k.mean(0))


def pca_2d(x: np.ndarray) -> np.ndarray:
    """The rows of x on their first two principal axes (numpy SVD of the centred data); a
    missing axis (fewer than 2 points or dimensions) is 0. Signs fixed: each axis's largest
    |loading| is positive."""
    x = np.asarray(x, dtype=np.float64)
    c = x - x.mean(0)
    out = np.zeros((len(x), 2))
    if len(x) < 2:
        return out
    _, _, vt = np.linalg.svd(c, full_matrices=False)
    for a in range(min(2, len(vt))):
        v = vt[a] * np.sign(vt[a][np.argmax(np.abs(vt[a]))] or 1.0)
        out[:, a] = c @ v
    return out


def _p_conditional(d2: np.ndarray, perplexity: float) -> np.ndarray:
    """Row-wise Gaussian affinities with each row's entropy at log(perplexity) (binary search
    on the precision β)."""
    n = len(d2)
    P = np.zeros((n, n))
    target = np.log(perplexity)
    for a in range(n):
        d = np.delete(d2[a], a)
        lo, hi, beta = 0.0, np.inf, 1.0
        for _ in range(64):
            e = np.exp(-(d - d.min()) * beta)
            s = e.sum()
            p = e / s
            H = np.log(s) + beta * ((d - d.min()) * p).sum()
            if abs(H - target) < 1e-5:
                break
            if H > target:
                lo, beta = beta, beta * 2 if hi == np.inf else (beta + hi) / 2
            else:
                hi, beta = beta, (beta + lo) / 2
        P[a, np.arange(n) != a] = p
    return P


def tsne_2d(x: np.ndarray, perplexity: float = 15.0, iterations: int = 500, seed: int = 0) -> np.ndarray:
    """Exact t-SNE (van der Maaten & Hinton 2008) in numpy: Gaussian affinities at the given
    perplexity (capped at (N − 1) / 3), symmetrised; Student-t similarities in 2-D; gradient
    descent with momentum 0.5 → 0.8, gains, and early exaggeration 12 for the first 100 steps.
    Starts from the PCA layout scaled to sd 1e-4 (deterministic; `seed` adds jitter ~1e-6 to
    separate identical points). For at most TSNE_MAX_POINTS points: about 0.25 s for the page's
    128 (64 queries, 64 keys), 40 s for 1,024 on two CPU cores."""
    x = np.asarray(x, dtype=np.float64)
    N = len(x)
    if N > TSNE_MAX_POINTS:
        raise ValueError(f"exact t-SNE takes at most {TSNE_MAX_POINTS} points, got {N}")
    if N < 4:
        return pca_2d(x)
    sq = (x ** 2).sum(1)
    d2 = np.maximum(sq[:, None] + sq[None, :] - 2 * x @ x.T, 0)
    P = _p_conditional(d2, min(perplexity, (N - 1) / 3))
    P = np.maximum((P + P.T) / (2 * N), 1e-12)
    y = pca_2d(x)
    sd = y[:, 0].std() or 1.0
    y = y / sd * 1e-4 + np.random.default_rng(seed).normal(0, 1e-6, y.shape)
    velocity, gains = np.zeros_like(y), np.ones_like(y)
    for it in range(iterations):
        exaggeration = 12.0 if it < 100 else 1.0
        yy = (y ** 2).sum(1)
        num = 1.0 / (1.0 + yy[:, None] + yy[None, :] - 2 * y @ y.T)
        np.fill_diagonal(num, 0.0)
        Q = np.maximum(num / num.sum(), 1e-12)
        W = (exaggeration * P - Q) * num
        grad = 4 * (np.diag(W.sum(1)) - W) @ y
        gains = np.where(np.sign(grad) != np.sign(velocity), gains + 0.2, gains * 0.8).clip(0.01)
        velocity = (0.5 if it < 250 else 0.8) * velocity - 200.0 * gains * grad
        y = y + velocity
        y -= y.mean(0)
    return y


@dataclass(frozen=True)
class QKMap:
    """Queries and keys of one head in 2-D: `queries[a]` is query a, `keys[b]` key b."""

    queries: np.ndarray  # (n_q, 2)
    keys: np.ndarray  # (n_k, 2)
    method: str  # "pca" | "tsne"
    translated: bool
    explained: tuple[float, float] | None  # PCA: fraction of the variance on each axis


def qk_map(q: np.ndarray, k: np.ndarray, method: str = "pca", translate: bool = False,
           seed: int = 0) -> QKMap:
    """Every query (rows of q) and key (rows of k) projected jointly to 2-D: the stacked rows
    [q; k] go through one PCA (or one t-SNE), so distances between a query and a key are
    comparable. `translate`: AttentionViz's scaling and key translation first (`align_keys`)."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    q = np.asarray(q, dtype=np.float64)
    k = np.asarray(k, dtype=np.float64)
    if translate:
        q, k = align_keys(q, k)
    x = np.vstack([q, k])
    explained = None
    if method == "pca":
        y = pca_2d(x)
        total = ((x - x.mean(0)) ** 2).sum()
        explained = tuple(float((y[:, a] ** 2).sum() / total) if total > 0 else 0.0 for a in range(2))
    else:
        y = tsne_2d(x, seed=seed)
    return QKMap(queries=y[:len(q)], keys=y[len(q):], method=method, translated=translate,
                 explained=explained)


def strongest_keys(probs_row: np.ndarray, top_k: int = 3) -> list[int]:
    """The keys a query attends to most (largest first), only those with weight > 0."""
    row = np.asarray(probs_row, dtype=np.float64)
    order = np.argsort(-row, kind="stable")[:top_k]
    return [int(b) for b in order if row[b] > 0]
