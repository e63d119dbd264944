"""Where a compressed layer's rows go (DeepSeek-V4, issue 89): each head's mean share of a query's attention on the
tokens, on the compressed memory entries and on its learned sink, from the run's own capture
(`capture.memory_columns`). A head that reads the distant past through the memory shows it here; its heatmap over the
tokens alone does not."""

from __future__ import annotations

import numpy as np
import pandas as pd

from mha_viz.capture import memory_columns


def memory_split(run) -> pd.DataFrame:
    """One row a head of every layer: layer (the model's number), head, kind (the layer's memory: "compressed
    sparse", "heavily compressed", or "" for a layer without), entries (how many), and the means over the rows of
    tokens, memory and sink (each row's three shares sum to 1). Raises ValueError for a run that holds no entries
    (another model, hidden tokens, a long run)."""
    if not memory_columns.has_memory(run):
        raise ValueError("this run holds no compressed memory entries (a DeepSeek-V4 model's, captured with every "
                         "token shown)")
    parts = np.stack([memory_columns.shares(run, layer).mean(-1) for layer in range(run.num_layers)])  # (L, 3, H)
    found = [memory_columns.of(run, layer) for layer in range(run.num_layers)]
    H = run.num_heads
    return pd.DataFrame({
        "layer": np.repeat(run.layer_ids, H), "head": np.tile(np.arange(H), run.num_layers),
        "kind": np.repeat(["" if f is None else f.layout.name for f in found], H),
        "entries": np.repeat([0 if f is None else len(f.labels) for f in found], H),
        "tokens": parts[:, 0].ravel(), "memory": parts[:, 1].ravel(), "sink": parts[:, 2].ravel()})
