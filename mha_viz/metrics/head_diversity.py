"""The diversity D of sets of heads (`docs/head-metrics.md`, section 2), per layer and overall, beside a baseline."""

from __future__ import annotations

import numpy as np
import pandas as pd


def diversity(similarity: np.ndarray) -> float:
    """D = 1/(h(h-1)) Σ_{i≠j} (1 - |s_ij|) for an (h, h) similarity in [-1, 1]: 0 when all
    heads are identical, 1 when they are mutually orthogonal."""
    s = np.asarray(similarity, dtype=np.float64)
    h = s.shape[0]
    if h < 2:
        return float("nan")
    off = ~np.eye(h, dtype=bool)
    return float((1 - np.abs(s[off])).sum() / (h * (h - 1)))


def layer_diversity(similarity: np.ndarray, num_layers: int, num_heads: int) -> np.ndarray:
    """D within each layer's heads, (L,), from an (L·H, L·H) similarity in [-1, 1]."""
    s = np.asarray(similarity).reshape(num_layers, num_heads, num_layers, num_heads)
    return np.array([diversity(s[layer, :, layer, :]) for layer in range(num_layers)])


def diversity_table(similarity: np.ndarray, baseline: np.ndarray | None, num_layers: int,
                    num_heads: int, layer_ids: list[int] | None = None) -> pd.DataFrame:
    """Diversity D per layer and over all heads, beside the same measure on the model at random
    initialisation. Both matrices are similarities in [-1, 1] (see `as_similarity`).
    layer_ids: the model's layer number of each row (default 0, 1, …)."""
    names = list(range(num_layers)) if layer_ids is None else layer_ids
    rows = [f"layer {layer}" for layer in names] + ["all heads"]
    table = pd.DataFrame({"heads": rows})
    for column, sim in (("D", similarity), ("D_random_init", baseline)):
        if sim is None:
            continue
        table[column] = list(layer_diversity(sim, num_layers, num_heads)) + [diversity(sim)]
    return table
