"""Every head's thumbnail, max-pooled to at most size × size cells: what the Model view's grid and the report's
overview draw. A dense run pools its array (`detail.max_pool`); a long run has them from its scan
(`run.summary.pooled`, pooled on the same bins: PyTorch's adaptive max-pool, cell a covering rows
⌊a·n/s⌋ … ⌈(a+1)·n/s⌉ − 1, `scan.kept.Thumbnails`), so that no view builds every head to draw them."""

from __future__ import annotations

import numpy as np

from mha_viz.views import detail

THUMB = 48  # cells a side: the scan's (`mha_viz.scan`'s thumb), the Model view's and the report's


def thumbnails(run, size: int = THUMB) -> np.ndarray:
    """float32 (layers, heads, s, s), s = min(size, n): each head of `run` max-pooled. A long run's come from its
    scan when pooled to this size; another size builds every head (`run.attentions`: admitted by its bytes, or
    `DenseRefused`)."""
    scan = None if run.is_dense else run.summary
    if scan is not None and scan.pooled.shape[-1] == min(size, run.n):
        return scan.pooled
    return detail.max_pool(run.attentions, size)
