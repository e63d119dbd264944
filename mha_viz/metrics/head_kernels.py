"""The head table's per-head sums (`docs/head-metrics.md`, section 1) as one compiled pass over each head's
(n, n) pattern: row entropies, row maxima, distance, diagonals, first column, [SEP]-like and
punctuation mass, and the worst row's mass inside its segment. Heads go to threads in ranges
(see compiled.py); `head_stats` turns the sums into the table's columns."""

from __future__ import annotations

import numba
import numpy as np

from mha_viz.metrics.compiled import JIT, log32, run_all, split
from mha_viz.metrics.measures import ENTROPY_SMOOTHING

# The columns of `pattern_sums`' output, named once: the head-table measures this pass computes
# (in the catalogue's order, `measures.METRICS`), then the worst row's mass inside its segment
# and the head's total mass; then one column per target (the head's attention summed over the
# target's (row, column) pairs). The loop writes each column through the index named after it
# below: module-level ints, which Numba compiles in as constants (this file's hash names the
# cache folder, compiled.py, so a change here recompiles).
MEASURED = ("entropy", "norm_entropy", "confidence", "distance", "self", "prev", "next", "first", "sep", "punct")
SUMS = (*MEASURED, "in_segment", "total")
ENTROPY = SUMS.index("entropy")
NORM_ENTROPY = SUMS.index("norm_entropy")
CONFIDENCE = SUMS.index("confidence")
DISTANCE = SUMS.index("distance")
SELF = SUMS.index("self")
PREV = SUMS.index("prev")
NEXT = SUMS.index("next")
FIRST = SUMS.index("first")
SEP = SUMS.index("sep")
PUNCT = SUMS.index("punct")
IN_SEGMENT = SUMS.index("in_segment")
TOTAL = SUMS.index("total")
TARGETS = len(SUMS)  # the first target's column
_TINY = np.float32(1e-30)  # masked entries count 1e-30·ln(1e-30) ≈ −7e-29: nothing


@numba.njit(**JIT)
def _heads(att, h0, h1, causal, sep, punct, seg, rows, cols, starts, keep, spread, out):
    """out[h] = the SUMS of head h for h in [h0, h1), att (N, n, n) float32; seg (n,) the
    segment of each token, or empty for one segment; then, for target t, the sum of
    att[h, rows[k], cols[k]] over k in [starts[t], starts[t + 1]). The entropy is that of
    keep·A + spread/k on the k visible keys (float32; measures.ENTROPY_SMOOTHING, an argument
    rather than a global: Numba's cache would not see a change in another file)."""
    n = att.shape[1]
    smooth = np.empty(n, np.float32)
    same = np.empty(n, np.float32)
    lanes = np.empty(16, np.float32)
    segmented = seg.size == n
    for h in range(h0, h1):
        ent = 0.0
        norm = 0.0
        norm_rows = 0
        conf = 0.0
        dist = 0.0
        sep_mass = 0.0
        punct_mass = 0.0
        total = 0.0
        in_seg = np.inf
        for r in range(n):
            k = r + 1 if causal else n  # keys row r may see
            if segmented:
                for c in range(n):
                    same[c] = np.float32(1.0) if seg[c] == seg[r] else np.float32(0.0)
            floor = spread / np.float32(k)
            for c in range(n):
                x = keep * att[h, r, c] + (floor if c < k else np.float32(0.0))
                smooth[c] = x if x > _TINY else _TINY
            zero = np.float32(0.0)
            row_ent, d, s, p, t, g = zero, zero, zero, zero, zero, zero  # float32 within a row
            for c in range(n):
                a = att[h, r, c]
                row_ent -= smooth[c] * log32(smooth[c])
                d += a * np.float32(abs(r - c))
                s += a * sep[c]
                p += a * punct[c]
                t += a
            if segmented:
                for c in range(n):
                    g += att[h, r, c] * same[c]
            # the row's maximum in 16 lanes: a max-reduction loop does not vectorise, this does
            lanes[:] = att[h, r, 0]
            whole = n - n % 16
            for c0 in range(0, whole, 16):
                for lane in range(16):
                    a = att[h, r, c0 + lane]
                    lanes[lane] = a if a > lanes[lane] else lanes[lane]
            top = lanes[0]
            for lane in range(16):
                top = lanes[lane] if lanes[lane] > top else top
            for c in range(whole, n):
                top = att[h, r, c] if att[h, r, c] > top else top
            ent += row_ent
            if k > 1:
                norm += row_ent / np.log(k)
                norm_rows += 1
            conf += top
            dist += d
            sep_mass += s
            punct_mass += p
            total += t
            in_seg = min(in_seg, g)
        diag = 0.0
        prev = 0.0
        nxt = 0.0
        first = 0.0
        for r in range(n):
            diag += att[h, r, r]
            first += att[h, r, 0]
            if r > 0:
                prev += att[h, r, r - 1]
            if r < n - 1:
                nxt += att[h, r, r + 1]
        out[h, ENTROPY] = ent / n
        out[h, NORM_ENTROPY] = norm / norm_rows if norm_rows > 0 else np.nan
        out[h, CONFIDENCE] = conf / n
        out[h, DISTANCE] = dist / n
        out[h, SELF] = diag / n
        out[h, PREV] = prev / n
        out[h, NEXT] = nxt / n
        out[h, FIRST] = first / n
        out[h, SEP] = sep_mass / n
        out[h, PUNCT] = punct_mass / n
        out[h, IN_SEGMENT] = in_seg if segmented else 0.0
        out[h, TOTAL] = total
        for target in range(starts.size - 1):
            hit = 0.0
            for k in range(starts[target], starts[target + 1]):
                hit += att[h, rows[k], cols[k]]
            out[h, TARGETS + target] = hit


def pattern_sums(att: np.ndarray, causal: bool, sep: np.ndarray, punct: np.ndarray,
                 seg: np.ndarray | None, targets: list, threads: int) -> np.ndarray:
    """(N, len(SUMS) + len(targets)) float64 for att (N, n, n) float32 C-contiguous; sep and
    punct (n,) 0/1 masks of the key columns, seg (n,) segment indices or None, targets a list of
    (rows, cols) index arrays."""
    N = att.shape[0]
    out = np.full((N, len(SUMS) + len(targets)), np.nan)  # a column the loop does not write stays NaN
    seg = np.empty(0, np.int64) if seg is None else np.ascontiguousarray(seg, dtype=np.int64)
    sep, punct = np.ascontiguousarray(sep, np.float32), np.ascontiguousarray(punct, np.float32)
    rows = np.concatenate([np.asarray(i, np.int64) for i, _ in targets] + [np.empty(0, np.int64)])
    cols = np.concatenate([np.asarray(j, np.int64) for _, j in targets] + [np.empty(0, np.int64)])
    starts = np.cumsum([0] + [len(i) for i, _ in targets]).astype(np.int64)
    keep, spread = np.float32(1 - ENTROPY_SMOOTHING), np.float32(ENTROPY_SMOOTHING)
    run_all(_heads, [(att, h0, h1, causal, sep, punct, seg, rows, cols, starts, keep, spread, out)
                     for h0, h1 in split(N, threads)])
    return out


def compile_now() -> None:
    """Compile (or load from Numba's cache) the loop on a tiny input (the app's preload)."""
    att = np.full((1, 2, 2), 0.5, np.float32)
    target = (np.array([1]), np.array([0]))
    pattern_sums(att, False, np.zeros(2), np.zeros(2), np.zeros(2), [target], 1)
    pattern_sums(att, True, np.zeros(2), np.zeros(2), None, [], 1)
