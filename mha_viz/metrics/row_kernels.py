"""The compiled backend of the row measures (`row_measures`): a block of query rows reduced in one pass on the
CPU: for every head and row, the sums of the row table (its loop written from the table by `row_loop`), and for a
long text's scan the row's heaviest keys and the thumbnails' cells. The block's probabilities are read once, a row
at a time while it is in the cache: a torch operation per measure reads the whole block from memory again each
time. Heads (or rows) go to threads in
ranges, each with its own sums and cells, which `BlockSums.finish` adds up (compiled.py). The head table hands a
whole (n, n) matrix over as one block, without kept keys and with one thumbnail cell."""

from __future__ import annotations

import numpy as np

from mha_viz.capture.sinks import EMPTY_BELOW
from mha_viz.compiled import run_all, split
from mha_viz.metrics.measures import CHOICE_KEYS, ENTROPY_SMOOTHING
from mha_viz.metrics.pool_cells import PoolCells
from mha_viz.metrics.row_loop import loop
from mha_viz.metrics.row_measures import TextFacts


class BlockSums:
    """One layer's sums, kept keys and cells over the blocks added (`add`), for the text `facts` describes."""

    def __init__(self, heads: int, facts: TextFacts, *, top_k: int = 0, min_weight: float = 0.0, thumb: int = 1,
                 threads: int = 1, out: tuple | None = None) -> None:
        """top_k, min_weight: each row's `top_k` heaviest keys of weight ≥ `min_weight` are kept (none: 0);
        thumb: the thumbnails' size; out: (keys (H, n, k) int32, weights (H, n, k) float32, rest (H, n) float32)
        to write into (a scan's arrays for this layer), else made here."""
        n, table = facts.n, facts.table
        self.n, self.causal, self.skip, self.threads, self.table = n, facts.causal, facts.skip, threads, table
        self.loop = loop(table)  # written from the table (`row_loop`)
        self.text = (np.ascontiguousarray(facts.ids, np.int32),
                     np.empty(0, np.int64) if facts.seg is None else np.ascontiguousarray(facts.seg, np.int64))
        self.masks = tuple(np.ascontiguousarray(m, np.float32) for m in facts.masks)
        self.matched = tuple(np.ascontiguousarray(m, np.int32) for m in facts.matched)
        pool = PoolCells.of(n, thumb)
        s = len(pool.starts)
        self.row_cells = np.ascontiguousarray(np.stack([pool.first, pool.last], 1), np.int64)
        self.cell_start = np.append(pool.starts, n).astype(np.int64)  # (s + 1,): cell c's own keys end where c + 1's
        self.cell_stop = pool.stops.astype(np.int64)
        self.sums = np.zeros((threads, heads, len(table.row_sums)))
        self.in_segment = table.row_sums.index("in_segment")
        if facts.seg is not None:
            self.sums[:, :, self.in_segment] = np.inf
        self.cells = np.zeros((threads, heads, s, s), np.float32)
        if out is None:
            out = (np.full((heads, n, top_k), -1, np.int32), np.zeros((heads, n, top_k), np.float32),
                   np.zeros((heads, n), np.float32))
        self.keys, self.weights, self.rest = out
        self.keep, self.spread = np.float32(1 - ENTROPY_SMOOTHING), np.float32(ENTROPY_SMOOTHING)
        self.min_weight = np.float32(min_weight)
        self.empty = np.float32(EMPTY_BELOW)

    def add(self, A: np.ndarray, start: int, key_start: int, part: int | None = None) -> None:
        """Add block A (H, b, w) float32, C-contiguous: rows start … start + b − 1, keys key_start … part: reduce
        the whole block on the calling thread into sums and cells of its own, number `part` < `threads` (each
        of `threads` workers adding whole blocks at once, `scan.run`); None: the block split over `threads`
        threads."""
        H, b = A.shape[:2]
        if part is not None:
            self.loop(*self._arguments(A, start, key_start, part, 0, H, 0, b))
            return
        # heads to threads (each head's rows cost the same); rows when there are fewer heads than threads
        parts = ([(h0, h1, 0, b) for h0, h1 in split(H, self.threads)] if H >= self.threads or b < 4 * self.threads
                 else [(0, H, r0, r1) for r0, r1 in split(b, self.threads)])
        run_all(self.loop, [self._arguments(A, start, key_start, t, *ranges) for t, ranges in enumerate(parts)])

    def _arguments(self, A: np.ndarray, start: int, key_start: int, t: int, h0: int, h1: int, r0: int, r1: int
                   ) -> tuple:
        return (A, h0, h1, r0, r1, start, key_start, self.n, self.causal, self.skip, *self.text, self.keep,
                self.spread, self.min_weight, self.empty, CHOICE_KEYS, self.row_cells, self.cell_start,
                self.cell_stop, self.sums[t], self.cells[t], self.keys, self.weights, self.rest, *self.masks,
                *self.matched)

    def finish(self) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """({name of the table's row_sums: (H,) float64}, the cells (H, s, s)): the threads' parts added up."""
        sums = self.sums.sum(0)
        sums[:, self.in_segment] = self.sums[:, :, self.in_segment].min(0)
        return {name: sums[:, i] for i, name in enumerate(self.table.row_sums)}, self.cells.max(0)


def compile_now() -> None:
    """Compile (or load from Numba's cache) the loop on a tiny input (the app's preload), for a block that can be
    written and for one that cannot: the app's runs are read-only (shared by the sessions), which Numba compiles
    apart (3.5–5 s on the first Head metrics of a new version, before this)."""
    for special, causal in (([True, False], True), ([True, True, False, True], False)):
        facts = TextFacts.of(["a"] * len(special), [], special, causal=causal)
        for writeable in (True, False):
            block = np.full((1, facts.n, facts.n), 1 / facts.n, np.float32)
            block.setflags(write=writeable)
            BlockSums(1, facts, top_k=2, thumb=2).add(block, 0, 0)
