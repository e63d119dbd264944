"""What a long text's scan keeps of each block besides the head table's sums (`metrics.row_stats`), by tensor
operations on the block's device (a GPU's way; `metrics.row_kernels.BlockSums` keeps the same on the CPU):
each row's heaviest keys (`TopKeys`) and the thumbnails (`Thumbnails`). A block is (H, b, w) float32: every
head's rows `start` … `start + b − 1` against the keys `key_start` … `key_start + w − 1`."""

from __future__ import annotations

import numpy as np
import torch

from mha_viz.metrics.pool_cells import PoolCells

TOP_K, THUMB = 8, 48  # a scan's default: each row's heaviest keys kept, and a thumbnail's side (`scan.run.scan`)


class TopKeys:
    """Each row's `top_k` heaviest keys with weight ≥ `min_weight`, heaviest first (key −1 and weight
    0 where fewer qualify), and the row's mass outside them, for one layer's heads."""

    def __init__(self, heads: int, n: int, top_k: int, min_weight: float, device) -> None:
        self.top_k, self.min_weight = top_k, min_weight
        self.keys = torch.full((heads, n, top_k), -1, dtype=torch.int32, device=device)
        self.weights = torch.zeros((heads, n, top_k), dtype=torch.float32, device=device)
        self.rest = torch.zeros((heads, n), dtype=torch.float32, device=device)

    def add(self, A: torch.Tensor, start: int, key_start: int, row_sums: torch.Tensor) -> None:
        k = min(self.top_k, A.shape[-1])
        weights, keys = torch.topk(A, k, dim=-1)  # (H, b, k), heaviest first
        kept = weights >= self.min_weight
        weights = torch.where(kept, weights, torch.zeros((), device=A.device))
        stop = start + A.shape[1]
        self.weights[:, start:stop, :k] = weights
        self.keys[:, start:stop, :k] = torch.where(kept, keys + key_start, torch.full((), -1, device=A.device)).int()
        self.rest[:, start:stop] = row_sums - weights.sum(-1)


class Thumbnails:
    """Each head max-pooled to at most `size` × `size` cells, as `views.detail.max_pool` pools a whole
    (n, n) matrix (PyTorch's adaptive max-pool: cell a covers rows ⌊a·n/s⌋ … ⌈(a+1)·n/s⌉ − 1)."""

    def __init__(self, heads: int, n: int, size: int, device) -> None:
        self.n, self.size = n, min(size, n)
        self.cells = torch.zeros((heads, self.size, self.size), dtype=torch.float32, device=device)
        pool = PoolCells.of(n, size)
        self.row_start, self.row_stop = torch.as_tensor(pool.starts), torch.as_tensor(pool.stops)  # (s,)

    def add(self, A: torch.Tensor, start: int, key_start: int) -> None:
        """Rows first (the max over each cell's rows in the block), then keys: the key pooling runs on a
        few rows a cell instead of every row."""
        H, b, w = A.shape
        stop = start + b
        cells = np.flatnonzero((self.row_start.numpy() < stop) & (self.row_stop.numpy() > start))
        down = torch.stack([A[:, max(int(self.row_start[c]), start) - start:min(int(self.row_stop[c]), stop) - start]
                            .amax(1) for c in cells], 1)  # (H, cells, w)
        if w != self.n:  # the keys outside the block's span have probability 0
            down = torch.nn.functional.pad(down, (key_start, self.n - key_start - w))  # (H, cells, n)
        across = down if self.size == self.n else torch.nn.functional.adaptive_max_pool1d(down, self.size)
        lo, hi = int(cells[0]), int(cells[-1]) + 1  # the cells a block of rows meets are consecutive
        self.cells[:, lo:hi] = torch.maximum(self.cells[:, lo:hi], across)
