"""The compiled backend of the row measures (`row_measures`): a block of query rows reduced in one pass on the
CPU: for every head and row, the sums of ROW_SUMS, and for a long text's scan the row's heaviest keys and the
thumbnails' cells. The block's probabilities are read once, a row at a time while it is in the cache: a torch
operation per measure reads the whole block from memory again each time. Heads (or rows) go to threads in
ranges, each with its own sums and cells, which `BlockSums.finish` adds up (compiled.py). The head table hands a
whole (n, n) matrix over as one block, without kept keys and with one thumbnail cell."""

from __future__ import annotations

import numba
import numpy as np

from mha_viz.capture.sinks import EMPTY_BELOW
from mha_viz.compiled import JIT, log32, run_all, split
from mha_viz.metrics.measures import CHOICE_KEYS, ENTROPY_SMOOTHING
from mha_viz.metrics.row_measures import ROW_BEYOND, ROW_SUMS, TextFacts

# The columns of the sums (module-level ints: compiled in); the sums beyond the sink (the first key, and a
# learned sink's share) are `beyond_row`'s, from BEYOND_AT on, at its R_ indices
ENT, NORM, NORM_ROWS, CONF, DIST, SELF, PREV, NEXT, FIRST, SEP, PUNCT, TOTAL, DUP, IND, BEYOND_AT = (
    ROW_SUMS.index(name) for name in ("entropy", "norm_entropy", "norm_rows", "confidence", "distance", "self", "prev",
                                      "next", "first", "sep", "punct", "total", "duplicate_score", "induction_score",
                                      ROW_BEYOND[0]))
R_IN_SEG, R_SINK, R_NORM, R_NORM_ROWS, R_SELF, R_PREV, R_NEXT, R_SEP, R_PUNCT, R_ROWS = range(len(ROW_BEYOND))
IN_SEG = BEYOND_AT + R_IN_SEG
_TINY = np.float32(1e-30)  # masked entries count 1e-30·ln(1e-30) ≈ −7e-29: nothing


@numba.njit(inline="always", **JIT)
def beyond_row(row, i, key_start, n, skip, seen, last_valid, outside, t, keep, spread, empty, choice, sep_w,
               punct_w, seg, segmented, acc):
    """Add query row i to acc (ROW_BEYOND's sums). `row` holds its keys key_start … key_start + w − 1 (t their
    sum; those up to last_valid visible, `outside` more visible keys elsewhere, where A = 0); sep_w, punct_w
    those keys' masks; seg (n,) each token's segment (used when `segmented`). The sink: the first `skip` keys
    (1, or 0 when the first token is hidden; in `row` when key_start is 0, else before it) and what the row
    gave no key (a learned sink's share; an empty row gave none). Row i ≥ skip is kept when it sees at least
    `choice` keys after the sink and keeps at least `empty` there, and divided by that mass (B); its entropy
    is that of keep·B + spread/(seen − skip) on the seen − skip visible keys after the sink (float32 within
    the row). Only the visible keys are read: the others are 0 (and would add 1e-30·ln(1e-30) each)."""
    zero = np.float32(0.0)
    w = row.shape[0]
    # the first key of `row` after the sink, 0 or 1 as literals: a start that the compiler cannot tell is not
    # negative makes each `row[c]` wrap around, and the loops below gather (2-3 times slower)
    c0 = 1 if key_start == 0 and skip > 0 else 0
    stop = min(w, last_valid + 1)
    inside = min(c0, w)  # the sink's keys in `row`
    first = zero
    for c in range(inside):
        first += row[c]
    lost = np.float32(1.0) - t if t > zero else zero
    acc[R_SINK] += first + (lost if lost > zero else zero)
    kb = seen - skip  # keys after the sink row i may see
    if i < skip or kb < choice:
        return
    beyond = zero
    for c in range(c0, stop):
        beyond += row[c]
    if beyond < empty:
        return
    inv = np.float32(1.0) / beyond
    floor = spread / np.float32(kb)
    e, sp, pu, g = zero, zero, zero, zero
    for c in range(c0, stop):
        a = row[c]
        x = keep * a * inv + floor
        x = x if x > _TINY else _TINY
        e -= x * log32(x)
        sp += a * sep_w[c]
        pu += a * punct_w[c]
    if segmented:
        for c in range(c0, stop):
            g += row[c] if seg[key_start + c] == seg[i] else zero
        acc[R_IN_SEG] = min(acc[R_IN_SEG], g * inv)
    row_ent = np.float64(e)
    hidden = outside - (skip - inside)  # visible keys after the sink outside `row` (B = 0, B̂ = floor)
    if hidden > 0:
        row_ent -= hidden * np.float64(floor) * np.log(np.float64(floor))
    acc[R_ROWS] += 1.0
    if kb > 1:
        acc[R_NORM] += row_ent / np.log(kb)
        acc[R_NORM_ROWS] += 1.0
    acc[R_SEP] += sp * inv
    acc[R_PUNCT] += pu * inv
    for column, shift in ((R_SELF, 0), (R_PREV, -1), (R_NEXT, 1)):
        c = i + shift - key_start
        if i + shift >= skip and 0 <= c < w and i + shift < n:
            acc[column] += row[c] * inv



@numba.njit(**JIT)
def _rows(A, h0, h1, r0, r1, start, key_start, n, causal, skip, sep, punct, ids, before, seg, keep, spread,
          min_weight, empty, choice, row_cells, cell_start, cell_stop, sums, cells, keys, weights, rest):
    """Heads h0 … h1 − 1, rows r0 … r1 − 1 of block A (H, b, w): add to sums (H, 24) and cells (H, s, s); write keys,
    weights (H, n, k) and rest (H, n) at the rows' positions. Three loops a row over the keys it may see (a
    causal row's others are 0 and add nothing): the sums (vectorised), each cell's maximum (16 lanes: a
    max-reduction loop does not vectorise, this does), and the kept keys, read only in the cells whose maximum
    could enter them; and, for a row that keeps at least `empty` beyond its first `skip` keys (the sink), a
    fourth over the keys after them (`beyond_row`)."""
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
            stop = min(w, last_valid + 1)
            me = ids[i]
            ent, t, d, sp, pu, dup, ind = zero, zero, zero, zero, zero, zero, zero
            for c in range(stop):
                a = row[c]
                x = keep * a + floor
                x = x if x > _TINY else _TINY
                ent -= x * log32(x)
                t += a
                d += a * np.float32(abs(i - key_start - c))
                sp += a * sep_w[c]
                pu += a * punct_w[c]
                dup += a if (ids_w[c] == me and c < i - key_start) else zero
                ind += a if (before_w[c] == me and c <= i - key_start) else zero
            outside = key_start if causal else n - w  # visible keys outside the block: A = 0, Â = floor
            beyond_row(row, i, key_start, n, skip, seen, last_valid, outside, t, keep, spread, empty, choice, sep_w,
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
                hi = min(cell_start[cell + 1] - key_start, stop)
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
            for cell in range(s if k_top > 0 else 0):
                if part[cell] < min_weight or (m == k_top and part[cell] <= tw[k_top - 1]):
                    continue
                lo = max(cell_start[cell], key_start) - key_start
                hi = min(cell_start[cell + 1] - key_start, stop)
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
                if cell_stop[cell] > cell_start[cell + 1] and 0 <= edge < stop:
                    best = row[edge] if row[edge] > best else best
                for rc in range(row_cells[i, 0], row_cells[i, 1] + 1):
                    cells[h, rc, cell] = best if best > cells[h, rc, cell] else cells[h, rc, cell]


class BlockSums:
    """One layer's sums, kept keys and cells over the blocks added (`add`), for the text `facts` describes."""

    def __init__(self, heads: int, facts: TextFacts, *, top_k: int = 0, min_weight: float = 0.0, thumb: int = 1,
                 threads: int = 1, out: tuple | None = None) -> None:
        """top_k, min_weight: each row's `top_k` heaviest keys of weight ≥ `min_weight` are kept (none: 0);
        thumb: the thumbnails' size; out: (keys (H, n, k) int32, weights (H, n, k) float32, rest (H, n) float32)
        to write into (a scan's arrays for this layer), else made here."""
        n = facts.n
        self.n, self.causal, self.skip, self.threads = n, facts.causal, facts.skip, threads
        self.text = (np.ascontiguousarray(facts.sep, np.float32), np.ascontiguousarray(facts.punct, np.float32),
                     np.ascontiguousarray(facts.ids, np.int32), np.ascontiguousarray(facts.before, np.int32),
                     np.empty(0, np.int64) if facts.seg is None else np.ascontiguousarray(facts.seg, np.int64))
        s = max(1, min(thumb, n))
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
        if facts.seg is not None:
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
        # heads to threads (each head's rows cost the same); rows when there are fewer heads than threads
        parts = ([(h0, h1, 0, b) for h0, h1 in split(H, self.threads)] if H >= self.threads or b < 4 * self.threads
                 else [(0, H, r0, r1) for r0, r1 in split(b, self.threads)])
        run_all(_rows, [self._arguments(A, start, key_start, t, *ranges) for t, ranges in enumerate(parts)])

    def _arguments(self, A: np.ndarray, start: int, key_start: int, t: int, h0: int, h1: int, r0: int, r1: int
                   ) -> tuple:
        return (A, h0, h1, r0, r1, start, key_start, self.n, self.causal, self.skip, *self.text, self.keep,
                self.spread, self.min_weight, self.empty, CHOICE_KEYS, self.row_cells, self.cell_start,
                self.cell_stop, self.sums[t], self.cells[t], self.keys, self.weights, self.rest)

    def finish(self) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """({name of ROW_SUMS: (H,) float64}, the cells (H, s, s)): the threads' parts added up."""
        sums = self.sums.sum(0)
        sums[:, IN_SEG] = self.sums[:, :, IN_SEG].min(0)
        return {name: sums[:, i] for i, name in enumerate(ROW_SUMS)}, self.cells.max(0)


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
