"""Head metrics that are defined for a rectangular pattern (an encoder–decoder's cross-attention:
target queries over source keys), per head (`docs/head-metrics.md`, section 6): entropy (smoothed,
in nats) and its normalised form, confidence, the row table's measures that read the keys alone (`row_table`: a
column, the first source token's; marked keys, the source's separators and punctuation), the mass on the source's
special tokens (sinks), and a monotonic-alignment score for translation: the mass within ±1 source token of the
diagonal path from the first target token at the first source token to the last at the last. The others
(distance, previous token, induction…) are about a text attending to itself, and apply to self-attention only."""

from __future__ import annotations

import numpy as np
import pandas as pd

from mha_viz.metrics.measures import ENTROPY_SMOOTHING  # as for self-attention
from mha_viz.metrics.row_table import TABLE, RowMeasure, RowTable, current

ON_KEYS = ("column", "keys")  # the row table's kinds that read the keys alone, not where the query is


def columns(table: RowTable | None = None) -> dict[str, str]:
    """Each column of the cross table -> what it is, for the table's header help."""
    records = [r for r in (table or current()) if r.kind in ON_KEYS]
    return {
        "entropy": "mean over target tokens of the row's entropy (nats), smoothed",
        "norm_entropy": "entropy ÷ ln(source tokens): 1 uniform, ~0 one source token",
        "confidence": "mean over target tokens of the row's largest weight",
        **{r.name: f"{r.label} among the source tokens: {r.formula}" for r in records},
        "special": "mean attention to the source's special tokens (</s>, <s>…): a sink",
        "alignment": "mean mass within ±1 source token of the diagonal path (monotonic alignment)",
    }


COLUMNS = columns(TABLE)
SELF_ONLY = ("distance", "previous/next token", "induction", "diagonal")


def diagonal_path(n_queries: int, n_keys: int) -> np.ndarray:
    """For each target position i, the source position on the straight path from (0, 0) to
    (n_queries − 1, n_keys − 1), rounded."""
    if n_queries == 1:
        return np.zeros(1, dtype=np.int64)
    return np.rint(np.arange(n_queries) * (n_keys - 1) / (n_queries - 1)).astype(np.int64)


def alignment(attentions: np.ndarray, width: int = 1) -> np.ndarray:
    """(..., n_q, n_k) -> (...): the mean over queries of the mass within ±`width` keys of the
    diagonal path."""
    n_q, n_k = attentions.shape[-2:]
    path = diagonal_path(n_q, n_k)
    near = np.abs(np.arange(n_k)[None, :] - path[:, None]) <= width  # (n_q, n_k)
    return (attentions * near).sum(-1).mean(-1)


def _on_keys(a: np.ndarray, r: RowMeasure, tokens: list[str], special: np.ndarray) -> np.ndarray:
    """(L, H): a column or marked-keys record's mean over the target tokens, on the source keys."""
    n_k = a.shape[-1]
    if r.kind == "column":
        return a[..., r.param].mean(-1) if 0 <= r.param < n_k else np.zeros(a.shape[:2])
    marked = np.asarray(r.keys(tokens, list(special)), dtype=bool)
    return a[..., marked].sum(-1).mean(-1) if marked.any() else np.zeros(a.shape[:2])


def cross_stats(attentions: np.ndarray, key_special: list[bool] | None = None,
                key_tokens: list[str] | None = None) -> dict[str, np.ndarray]:
    """Every metric above for (L, H, n_q, n_k) probabilities: {column: (L, H)}. key_tokens: the source tokens, for
    the records of marked keys (without them, none is marked)."""
    a = np.asarray(attentions, dtype=np.float64)
    n_k = a.shape[-1]
    smooth = (1 - ENTROPY_SMOOTHING) * a + ENTROPY_SMOOTHING / n_k
    entropy = -(smooth * np.log(smooth)).sum(-1).mean(-1)
    special = np.asarray(key_special if key_special is not None else [False] * n_k, dtype=bool)
    tokens = list(key_tokens) if key_tokens is not None else [""] * n_k
    stats = {
        "entropy": entropy,
        "norm_entropy": entropy / np.log(n_k) if n_k > 1 else np.zeros_like(entropy),
        "confidence": a.max(-1).mean(-1),
        **{r.name: _on_keys(a, r, tokens, special) for r in current() if r.kind in ON_KEYS},
        "special": a[..., special].sum(-1).mean(-1) if special.any() else np.zeros(a.shape[:2]),
        "alignment": alignment(a),
    }
    return {name: stats[name] for name in columns()}


def cross_table(cross) -> pd.DataFrame:
    """One row per decoder layer and head of a `seq2seq.CrossAttention`: layer, head and every
    metric of `cross_stats`."""
    stats = cross_stats(cross.attentions, cross.key_special, cross.key_tokens)
    L, H = cross.attentions.shape[:2]
    layers, heads = np.meshgrid(np.arange(L), np.arange(H), indexing="ij")
    return pd.DataFrame({"layer": layers.ravel(), "head": heads.ravel(),
                         **{k: v.astype(np.float32).ravel() for k, v in stats.items()}})
