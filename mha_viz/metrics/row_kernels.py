"""A long text's block of query rows reduced in one compiled pass (the CPU's way of `mha_viz.scan`):
for every head and row, the head table's sums (`docs/head-metrics.md`, section 1, as in
head_kernels.py), the row's heaviest keys and the thumbnails' cells. The block's probabilities are
read once, a row at a time while it is in the cache: a torch operation per measure reads the whole
block from memory again each time. Rows go to threads in ranges, each with its own sums and cells,
which `BlockSums.finish` adds up (compiled.py)."""

from __future__ import annotations

import numba
import numpy as np

from mha_viz.capture.sinks import EMPTY_BELOW
from mha_viz.metrics.compiled import JIT, log32, run_all, split
from mha_viz.metrics.head_kernels import R_IN_SEG, ROW_BEYOND, beyond_row
from mha_viz.metrics.head_stats import STAT_NAMES
from mha_viz.metrics.measures import CHOICE_KEYS, ENTROPY_SMOOTHING

# The columns of the sums, in the order the loop writes them (module-level ints: compiled in); the sums
# beyond the sink (the first key, and a learned sink's share) are head_kernels' `beyond_row`'s, from BEYOND_AT on
ROW_SUMS = ("entropy", "norm_entropy", "norm_rows", "confidence", "distance", "self", "prev", "next", "first",
            "sep", "punct", "total", "duplicate_score", "induction_score", *ROW_BEYOND)
ENT, NORM, NORM_ROWS, CONF, DIST, SELF, PREV, NEXT, FIRST, SEP, PUNCT, TOTAL, DUP, IND, BEYOND_AT = range(15)
IN_SEG = BEYOND_AT + R_IN_SEG
_TINY = np.float32(1e-30)


@numba.njit(**JIT)
def _rows(A, h0, h1, r0, r1, start, key_start, n, causal, sep, punct, ids, before, seg, keep, spread, min_weight,
          empty, choice, row_cells, cell_start, cell_stop, sums, cells, keys, weights, rest):
    """Heads h0 … h1 − 1, rows r0 … r1 − 1 of block A (H, b, w): add to sums (H, 24) and cells (H, s, s); write keys,
    weights (H, n, k) and rest (H, n) at the rows' positions. Three loops a row: the sums (vectorised),
    each cell's maximum (16 lanes: a max-reduction loop does not vectorise, this does), and the kept
    keys, read only in the cells whose maximum could enter them; and, for a row that keeps at least `empty`
    beyond the first key (the sink), a fourth over the keys after it (head_kernels' measures beyond the sink)."""
    w = A.shape[2]
    k_top = keys.shape[2]
    s = cells.shape[1]
    segmented = seg.size == n
    zero = np.float32(0.0)
    part = np.empty(s, np.float32)  # each cell's maximum over its own keys, cell_start[c] … cell_start[c + 1] − 1
    lanes = np.empty(16, np.float32)
    tw = np.empty(k_top, np.float32)
    tk = np.empty(k_top, np.int32)
    sep_w, punct_w = sep[key_start:key_start + w], punct[key_start:key_start + w]
    ids_w, before_w = ids[key_start:key_start + w], before[key_start:key_start + w]
    for h in range(h0, h1):
        beyond = sums[h, BEYOND_AT:]
        for r in range(r0, r1):
            row = A[h, r]
            i = start + r
            seen = i + 1 if causal else n  # keys row i may see
            floor = spread / np.float32(seen)
            last_valid = i - key_start if causal else w - 1  # keys c ≤ last_valid are among them
            me = ids[i]
            ent, t, d, sp, pu, dup, ind = zero, zero, zero, zero, zero, zero, zero
            for c in range(w):
                a = row[c]
                x = keep * a + (floor if c <= last_valid else zero)
                x = x if x > _TINY else _TINY
                ent -= x * log32(x)
                t += a
                d += a * np.float32(abs(i - key_start - c))
                sp += a * sep_w[c]
                pu += a * punct_w[c]
                dup += a if (ids_w[c] == me and c < i - key_start) else zero
                ind += a if (before_w[c] == me and c <= i - key_start) else zero
            outside = key_start if causal else n - w  # visible keys outside the block: A = 0, Â = floor
            beyond_row(row, i, key_start, n, 1, seen, last_valid, outside, t, keep, spread, empty, choice, sep_w,
                       punct_w, seg, segmented, beyond)
            row_ent = np.float64(ent) - outside * np.float64(floor) * np.log(np.float64(floor))
            sums[h, ENT] += row_ent
            if seen > 1:
                sums[h, NORM] += row_ent / np.log(seen)
                sums[h, NORM_ROWS] += 1.0
            sums[h, DIST] += d
            sums[h, SEP] += sp
            sums[h, PUNCT] += pu
            sums[h, TOTAL] += t
            sums[h, DUP] += dup
            sums[h, IND] += ind
            for column, shift in ((SELF, 0), (PREV, -1), (NEXT, 1)):
                c = i + shift - key_start
                if 0 <= c < w:
                    sums[h, column] += row[c]
            if key_start == 0:
                sums[h, FIRST] += row[0]
            # each cell's maximum over its own keys (0 outside the block)
            top = zero
            for cell in range(s):
                lo = max(cell_start[cell], key_start) - key_start
                hi = min(cell_start[cell + 1], key_start + w) - key_start
                best = zero
                if hi > lo:
                    lanes[:] = zero
                    whole = lo + (hi - lo) - (hi - lo) % 16
                    for c0 in range(lo, whole, 16):
                        for lane in range(16):
                            a = row[c0 + lane]
                            lanes[lane] = a if a > lanes[lane] else lanes[lane]
                    for lane in range(16):
                        best = lanes[lane] if lanes[lane] > best else best
                    for c in range(whole, hi):
                        best = row[c] if row[c] > best else best
                part[cell] = best
                top = best if best > top else top
            sums[h, CONF] += top
            # the kept keys, heaviest first: only cells whose maximum could still enter them
            m = 0
            for cell in range(s):
                if part[cell] < min_weight or (m == k_top and part[cell] <= tw[k_top - 1]):
                    continue
                lo = max(cell_start[cell], key_start) - key_start
                hi = min(cell_start[cell + 1], key_start + w) - key_start
                for c in range(lo, hi):
                    a = row[c]
                    if a >= min_weight and (m < k_top or a > tw[k_top - 1]):
                        p = m if m < k_top else k_top - 1
                        while p > 0 and tw[p - 1] < a:
                            tw[p], tk[p] = tw[p - 1], tk[p - 1]
                            p -= 1
                        tw[p], tk[p] = a, key_start + c
                        m = m + 1 if m < k_top else m
            kept = zero
            for q in range(k_top):
                weights[h, i, q] = tw[q] if q < m else zero
                keys[h, i, q] = tk[q] if q < m else -1
                kept += tw[q] if q < m else zero
            rest[h, i] = t - kept
            # the thumbnails' cells (adaptive pooling: cell c covers cell_start[c] … cell_stop[c] − 1,
            # at most one key more than its own)
            for cell in range(s):
                best = part[cell]
                edge = cell_stop[cell] - 1 - key_start
                if cell_stop[cell] > cell_start[cell + 1] and 0 <= edge < w:
                    best = row[edge] if row[edge] > best else best
                for rc in range(row_cells[i, 0], row_cells[i, 1] + 1):
                    cells[h, rc, cell] = best if best > cells[h, rc, cell] else cells[h, rc, cell]


class BlockSums:
    """One layer's sums, kept keys and cells over the blocks added (`add`), for an n-token text."""

    def __init__(self, heads: int, n: int, *, causal: bool, sep, punct, ids, before, seg, top_k: int,
                 min_weight: float, thumb: int, threads: int, out: tuple | None = None) -> None:
        """out: (keys (H, n, k) int32, weights (H, n, k) float32, rest (H, n) float32) to write into
        (a scan's arrays for this layer), else made here."""
        self.n, self.causal, self.threads = n, causal, threads
        self.text = (np.ascontiguousarray(sep, np.float32), np.ascontiguousarray(punct, np.float32),
                     np.ascontiguousarray(ids, np.int32), np.ascontiguousarray(before, np.int32),
                     np.empty(0, np.int64) if seg is None else np.ascontiguousarray(seg, np.int64))
        s = min(thumb, n)
        edges = np.arange(s)
        starts, stops = (edges * n) // s, -((-(edges + 1) * n) // s)  # adaptive pooling's cells
        positions = np.arange(n)
        # each position's first and last cell (neighbouring cells may share one position)
        lo = np.searchsorted(stops, positions, side="right")
        hi = np.searchsorted(starts, positions, side="right") - 1
        self.row_cells = np.ascontiguousarray(np.stack([lo, hi], 1), np.int64)
        self.cell_start = np.append(starts, n).astype(np.int64)  # (s + 1,): cell c's own keys end where c + 1's start
        self.cell_stop = stops.astype(np.int64)
        self.sums = np.zeros((threads, heads, len(ROW_SUMS)))
        if seg is not None:
            self.sums[:, :, IN_SEG] = np.inf
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
            _rows(*self._arguments(A, start, key_start, part, 0, H, 0, b))
            return
        # rows to threads; a block of few rows (many heads at long n) goes to threads by heads instead
        parts = ([(0, H, r0, r1) for r0, r1 in split(b, self.threads)] if b >= 4 * self.threads
                 else [(h0, h1, 0, b) for h0, h1 in split(H, self.threads)])
        run_all(_rows, [self._arguments(A, start, key_start, t, *ranges) for t, ranges in enumerate(parts)])

    def _arguments(self, A: np.ndarray, start: int, key_start: int, t: int, h0: int, h1: int, r0: int, r1: int
                   ) -> tuple:
        return (A, h0, h1, r0, r1, start, key_start, self.n, self.causal, *self.text, self.keep, self.spread,
                self.min_weight, self.empty, CHOICE_KEYS, self.row_cells, self.cell_start, self.cell_stop,
                self.sums[t], self.cells[t], self.keys, self.weights, self.rest)

    def finish(self) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """({name of ROW_SUMS: (H,) float64}, the cells (H, s, s)): the threads' parts added up."""
        sums = self.sums.sum(0)
        sums[:, IN_SEG] = self.sums[:, :, IN_SEG].min(0)
        return {name: sums[:, i] for i, name in enumerate(ROW_SUMS)}, self.cells.max(0)


def compile_now() -> None:
    """Compile (or load from Numba's cache) the loop on a tiny input (the app's preload)."""
    for seg, causal in ((None, True), (np.zeros(2, np.int64), False)):
        sums = BlockSums(1, 2, causal=causal, sep=np.zeros(2), punct=np.zeros(2), ids=np.zeros(2), before=-np.ones(2),
                         seg=seg, top_k=2, min_weight=0.0, thumb=2, threads=1)
        sums.add(np.full((1, 2, 2), 0.5, np.float32), 0, 0)


def measures_from_sums(sums: dict[str, np.ndarray], n: int) -> dict[str, np.ndarray]:
    """The head table's pattern measures (`head_stats.STAT_NAMES`, (H,) each) from the ROW_SUMS of all n
    rows: the means over the rows; the detector scores as shares of the whole attention (the
    previous-token target is the prev diagonal); in_segment the worst kept row's beyond the sink (0 for one
    segment); the measures beyond the sink as means over the rows kept (NaN with none)."""
    out = {name: sums[name] / n for name in ("entropy", "confidence", "distance", "self", "prev", "next", "first",
                                             "sep", "punct")}
    with np.errstate(invalid="ignore", divide="ignore"):
        out["norm_entropy"] = np.where(sums["norm_rows"] > 0, sums["norm_entropy"] / sums["norm_rows"], np.nan)
        total = sums["total"]
        for name, hit in (("prev_token_score", "prev"), ("duplicate_score", "duplicate_score"),
                          ("induction_score", "induction_score")):
            out[name] = np.where(total > 0, sums[hit] / np.where(total > 0, total, 1.0), 0.0)
    out["in_segment"] = np.where(np.isfinite(sums["in_segment"]), sums["in_segment"], 0.0)
    out["sink"] = sums["sink"] / n
    with np.errstate(invalid="ignore", divide="ignore"):  # no row beyond the sink: NaN
        rows = np.where(sums["beyond_rows"] > 0, sums["beyond_rows"], np.nan)
        for name in ("beyond_self", "beyond_prev", "beyond_next", "beyond_sep", "beyond_punct"):
            out[name] = sums[name] / rows
        out["beyond_norm_entropy"] = np.where(sums["beyond_norm_rows"] > 0,
                                              sums["beyond_norm_entropy"] / sums["beyond_norm_rows"], np.nan)
    return {name: out[name] for name in STAT_NAMES}
