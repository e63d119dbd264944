"""Inside one head: one query against one key (BertViz's neuron view) and every query and key of
the head in one 2-D map (AttentionViz).

`neuron(w, i, j)` takes a `teaching.Walkthrough` (the head's real q, k after RoPE where the model
uses it) and returns q_i, k_j, their element-wise product, its sum (the score q_i · k_j), the
score × scale (1/√d_k) and the softmax over query i's whole row, computed from the same q · k
sums with the causal mask for decoders (and, past the walkthrough's window, the keys outside it as
one term): that row equals the captured attention probabilities.

`qk_map(q, k)` projects the n queries and n keys jointly to 2-D (PCA by default, scikit-learn's
exact t-SNE as an option). With `translate=True` it first applies AttentionViz's key translation
and scaling, which change no attention weight:
  1. scaling: q ← α q, k ← k / α with α = √(mean‖k‖ / mean‖q‖), so queries and keys have the
     same mean norm (every product q · k is unchanged);
  2. translation: k ← k + (mean q − mean k), so the keys' mean equals the queries' mean (each
     score of query i moves by the constant q_i · c, which a row's softmax ignores).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mha_viz.views.teaching import Walkthrough, walkthrough

METHODS = ("pca", "tsne")
# scikit-learn's exact t-SNE: its Barnes-Hut (the default) fitted the query/key map's 128 points
# worse (KL 8 to 13 % higher) and, on two busy CPU cores, took 7 to 65 s where exact took 2 s
# (benchmarks/embedding.py --barnes-hut)
TSNE_METHOD = "exact"
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
    start: int = 0  # the walkthrough window's first token: i and j are positions start + i, start + j of the text

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
    hidden = np.isneginf(w.masked[i])  # the walkthrough's own mask: causal, a sliding window, a chunk
    row = np.where(hidden, -np.inf, row)
    # terms of the softmax outside the window's keys: GPT-OSS's sink, and the keys outside the window folded
    extra = [float(t) for t in (w.sink, None if w.outside_masked is None else w.outside_masked[i])
             if t is not None and np.isfinite(t)]
    top = max([row[~hidden].max(), *extra])
    e = np.exp(row - top)
    probs = e / (e.sum() + sum(np.exp(t - top) for t in extra))  # each extra term takes its share
    score = float(product.sum())
    return Neuron(tokens=list(w.tokens), layer=w.layer, head=w.head, kv_head=w.kv_head, i=i, j=j,
                  rope=w.rope, is_causal=w.is_causal, scale=float(w.scale), q=q, k=K[j].copy(),
                  product=product, score=score, scaled=scaled, row_scaled=row, row_probs=probs,
                  masked=bool(hidden[j]), start=w.start)


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


def fit_tsne(x: np.ndarray, perplexity: float = 15.0, iterations: int = 1000, seed: int = 0):
    """scikit-learn's t-SNE of the rows of x (N ≥ 4), fitted: its `embedding_` (N, 2),
    `kl_divergence_` and `n_iter_`. Perplexity capped at (N − 1) / 3; started from the PCA layout
    and seeded, so the same x gives the same map."""
    from sklearn.manifold import TSNE  # seconds to import: only when a t-SNE is asked for

    x = np.asarray(x, dtype=np.float64)
    if len(x) > TSNE_MAX_POINTS:
        raise ValueError(f"exact t-SNE takes at most {TSNE_MAX_POINTS} points, got {len(x)}")
    return TSNE(perplexity=min(perplexity, (len(x) - 1) / 3), max_iter=iterations, init="pca",
                method=TSNE_METHOD, random_state=seed).fit(x)


def tsne_2d(x: np.ndarray, perplexity: float = 15.0, iterations: int = 1000, seed: int = 0) -> np.ndarray:
    """The rows of x (N, d) as a t-SNE map (N, 2) (`fit_tsne`); fewer than 4 points: `pca_2d`."""
    x = np.asarray(x, dtype=np.float64)
    if len(x) < 4:
        return pca_2d(x)
    return fit_tsne(x, perplexity, iterations, seed).embedding_


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
