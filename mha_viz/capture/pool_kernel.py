"""A head pooled onto a grid of blocks (`head_rows.pooled_head`: the whole head of a long run drawn as at most
128 × 128 blocks) as one compiled pass over each block of rows: every cell read once for both the block's maximum and
its sum, the key blocks split among threads (`compiled.run_all`), each writing its own columns of the grid.

NumPy took 0.40 s a head at 8,192 tokens of SmolLM2, two thirds of it in `reduceat` over each block's rows twice
(maximum, then sum) and the float64 copy the sum was taken of, and `ufunc.at` to fold the rows into the grid.
"""

from __future__ import annotations

import numba
import numpy as np

from mha_viz.compiled import JIT, run_all, split, thread_count


@numba.njit(**JIT)
def _pool_columns(rows, row_block, starts, stops, b0, b1, top, total):
    """Key blocks b0 … b1 − 1 of `rows` (r, n) float32, row i falling in the grid's row `row_block[i]`: each cell's
    maximum into `top` (B, B) float32, its sum into `total` (B, B) float64."""
    for i in range(rows.shape[0]):
        a = row_block[i]
        for b in range(b0, b1):
            most = np.float32(0.0)
            s = np.float32(0.0)
            for j in range(starts[b], stops[b]):
                x = rows[i, j]
                most = max(most, x)
                s += x
            top[a, b] = max(top[a, b], most)
            total[a, b] += s


def pool_rows(rows: np.ndarray, first: int, edges: np.ndarray, top: np.ndarray, total: np.ndarray) -> None:
    """Fold rows first … first + r − 1 of a head, `rows` (r, n) float32 ≥ 0, into the grid whose query and key
    blocks are edges[a] … edges[a + 1] − 1: each block's maximum into `top` (B, B) float32 (start it at zeros), its
    sum into `total` (B, B) float64. Several calls at once must write different grids."""
    rows = np.ascontiguousarray(rows, dtype=np.float32)
    edges = np.asarray(edges, dtype=np.int64)
    row_block = (np.searchsorted(edges, np.arange(first, first + rows.shape[0]), side="right") - 1).astype(np.int64)
    starts, stops = edges[:-1], edges[1:]
    parts = split(len(starts), thread_count())
    run_all(_pool_columns, [(rows, row_block, starts, stops, b0, b1, top, total) for b0, b1 in parts])


def compile_now() -> None:
    """Compile (or load from Numba's cache) the loop on a tiny input (the app's preload)."""
    top, total = np.zeros((2, 2), np.float32), np.zeros((2, 2), np.float64)
    pool_rows(np.full((2, 3), 0.5, np.float32), 0, np.array([0, 1, 3]), top, total)
