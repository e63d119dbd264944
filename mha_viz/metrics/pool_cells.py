"""The cells of a thumbnail: n positions max-pooled to `size` cells as PyTorch's adaptive max-pool pools them (cell a
covers positions ⌊a·n/s⌋ … ⌈(a+1)·n/s⌉ − 1, so neighbouring cells may share a position), for the backends that pool
a long text's rows as they pass (`row_kernels`, `row_triton`, `scan.kept`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class PoolCells:
    """starts, stops (size,): each cell's first position and last + 1; first, last (n,): each position's first and
    last cell."""
    starts: np.ndarray
    stops: np.ndarray
    first: np.ndarray
    last: np.ndarray

    @classmethod
    def of(cls, n: int, size: int) -> "PoolCells":
        """n positions in min(size, n) cells (at least 1)."""
        s = max(1, min(size, n))
        edges = np.arange(s)
        starts, stops = (edges * n) // s, -((-(edges + 1) * n) // s)
        positions = np.arange(n)
        return cls(starts, stops, np.searchsorted(stops, positions, side="right"),
                   np.searchsorted(starts, positions, side="right") - 1)
