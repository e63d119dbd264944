"""A head pooled onto a grid of blocks (`head_rows.pooled_head`: the whole head of a long run drawn as at most
128 × 128 blocks) as one compiled pass over each block of rows: every cell read once for both the block's maximum and
its sum, the key blocks split among threads (`compiled.run_all`), each writing its own columns of the grid.

NumPy took 0.40 s a head at 8,192 tokens of SmolLM2, two thirds of it in `reduceat` over each block's rows twice
(maximum, then sum) and the float64 copy the sum was taken of, and `ufunc.at` to fold the rows into the grid. A
loop reducing each cell in turn did not vectorise (a maximum carried from one element to the next): 1 ns a cell.
Folding each row into one accumulator a column does, and a causal head's zeros after each row are skipped.
"""

from __future__ import annotations

import numba
import numpy as np

from mha_viz.compiled import JIT, run_all, split, thread_count


@numba.njit(**JIT)
def _pool_columns(rows, row_block, starts, stops, b0, b1, top, total, first, causal, key_start):
    """Key blocks b0 … b1 − 1 of `rows` (r, m) float32 over keys key_start … key_start + m − 1 (the others 0), row i
    falling in the grid's row `row_block[i]` (ascending):
    each cell's maximum into `top` (B, B) float32, its sum into `total` (B, B) float64. Each row is folded into
    one accumulator a column (a loop the compiler vectorises: no reduction inside it), and the accumulators into
    the grid once a grid row is done. A `causal` row `first` + i reads no key after itself (zeros there)."""
    lo, hi = starts[b0], stops[b1 - 1]
    most = np.zeros(hi - lo, np.float32)
    sums = np.zeros(hi - lo, np.float32)
    r = rows.shape[0]
    for i in range(r + 1):
        if i == r or (i > 0 and row_block[i] != row_block[i - 1]):  # grid row row_block[i − 1] done
            a = row_block[i - 1]
            for b in range(b0, b1):
                m, s = top[a, b], 0.0
                for j in range(starts[b] - lo, stops[b] - lo):
                    m = max(m, most[j])
                    s += sums[j]
                    most[j] = 0.0
                    sums[j] = 0.0
                top[a, b] = m
                total[a, b] += s
        if i == r:
            break
        end = min(hi, first + i + 1) if causal else hi
        for j in range(max(lo, key_start), min(end, key_start + rows.shape[1])):
            x = rows[i, j - key_start]
            most[j - lo] = max(most[j - lo], x)
            sums[j - lo] += x


def pool_rows(rows: np.ndarray, first: int, edges: np.ndarray, top: np.ndarray, total: np.ndarray, *,
              causal: bool = False, key_start: int = 0) -> None:
    """Fold rows first … first + r − 1 of a head, `rows` (r, m) float32 ≥ 0 over keys key_start … key_start + m − 1
    (the keys it does not span hold 0: `RowSource.spans`' blocks, never widened), into the grid whose query and key
    blocks are edges[a] … edges[a + 1] − 1: each block's maximum into `top` (B, B) float32 (start it at zeros), its
    sum into `total` (B, B) float64. `causal`: row p holds zeros after key p, which are not read. Several calls at
    once must write different grids."""
    rows = np.ascontiguousarray(rows, dtype=np.float32)
    if not rows.shape[0]:
        return
    edges = np.asarray(edges, dtype=np.int64)
    if (edges[0] != 0 or first < 0 or first + rows.shape[0] > edges[-1] or key_start < 0
            or key_start + rows.shape[1] > edges[-1]):  # the loop reads and writes unchecked
        raise ValueError(f"rows {first} … {first + rows.shape[0] - 1} over keys {key_start} … "
                         f"{key_start + rows.shape[1] - 1} do not fall in a grid over {edges[0]} … {edges[-1] - 1}")
    row_block = (np.searchsorted(edges, np.arange(first, first + rows.shape[0]), side="right") - 1).astype(np.int64)
    starts, stops = edges[:-1], edges[1:]
    parts = split(len(starts), thread_count())
    run_all(_pool_columns, [(rows, row_block, starts, stops, b0, b1, top, total, first, causal, key_start)
                            for b0, b1 in parts])


def compile_now() -> None:
    """Compile (or load from Numba's cache) the loop on a tiny input (the app's preload), for rows that can be written
    and for rows that cannot (a held run's, shared by the sessions: Numba compiles them apart)."""
    for writeable in (True, False):
        rows = np.full((2, 3), 0.5, np.float32)
        rows.setflags(write=writeable)
        top, total = np.zeros((2, 2), np.float32), np.zeros((2, 2), np.float64)
        pool_rows(rows, 0, np.array([0, 1, 3]), top, total)
