"""The head table's per-head sums (`docs/head-metrics.md`, section 1) as one compiled pass over each head's
(n, n) pattern: row entropies, row maxima, distance, diagonals, first column, [SEP]-like and
punctuation mass, the sink mass, the same measures beyond the sink (each row without the sink's
keys, renormalised) and the worst such row's mass inside its segment. Heads go to threads in ranges
(see compiled.py); `head_stats` turns the sums into the table's columns."""

from __future__ import annotations

import numba
import numpy as np

from mha_viz.capture.sinks import EMPTY_BELOW
from mha_viz.metrics.compiled import JIT, log32, run_all, split
from mha_viz.metrics.measures import CHOICE_KEYS, ENTROPY_SMOOTHING

# The columns of `pattern_sums`' output, named once: the head-table measures this pass computes
# (in the catalogue's order, `measures.METRICS`), then the worst row's mass inside its segment
# and the head's total mass; then one column per target (the head's attention summed over the
# target's (row, column) pairs). The loop writes each column through the index named after it
# below: module-level ints, which Numba compiles in as constants (this file's hash names the
# cache folder, compiled.py, so a change here recompiles).
MEASURED = ("entropy", "norm_entropy", "confidence", "distance", "self", "prev", "next", "first", "sep", "punct")
BEYOND = ("sink", "beyond_norm_entropy", "beyond_self", "beyond_prev", "beyond_next", "beyond_sep", "beyond_punct")
SUMS = (*MEASURED, *BEYOND, "in_segment", "total")
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
SINK = SUMS.index("sink")
B_NORM = SUMS.index("beyond_norm_entropy")
B_SELF = SUMS.index("beyond_self")
B_PREV = SUMS.index("beyond_prev")
B_NEXT = SUMS.index("beyond_next")
B_SEP = SUMS.index("beyond_sep")
B_PUNCT = SUMS.index("beyond_punct")
IN_SEGMENT = SUMS.index("in_segment")
TOTAL = SUMS.index("total")
TARGETS = len(SUMS)  # the first target's column
_TINY = np.float32(1e-30)  # masked entries count 1e-30·ln(1e-30) ≈ −7e-29: nothing
# What `beyond_row` adds up over a head's rows, at these indices of its `acc` (row_kernels' ROW_SUMS ends with
# them): the worst kept row's mass inside its segment (a minimum: start it at inf), then sums over the rows
ROW_BEYOND = ("in_segment", "sink", "beyond_norm_entropy", "beyond_norm_rows", "beyond_self", "beyond_prev",
              "beyond_next", "beyond_sep", "beyond_punct", "beyond_rows")
R_IN_SEG, R_SINK, R_NORM, R_NORM_ROWS, R_SELF, R_PREV, R_NEXT, R_SEP, R_PUNCT, R_ROWS = range(len(ROW_BEYOND))
# the measures beyond the sink that are means over the kept rows: (column of SUMS, index in ROW_BEYOND)
_MEANS = tuple((SUMS.index(name), ROW_BEYOND.index(name)) for name in ROW_BEYOND[R_SELF:R_ROWS])


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
def _heads(att, h0, h1, causal, skip, choice, empty, sep, punct, seg, rows, cols, starts, keep, spread, out):
    """out[h] = the SUMS of head h for h in [h0, h1), att (N, n, n) float32; seg (n,) the
    segment of each token, or empty for one segment; then, for target t, the sum of
    att[h, rows[k], cols[k]] over k in [starts[t], starts[t + 1]). The entropy is that of
    keep·A + spread/k on the k visible keys (float32; measures.ENTROPY_SMOOTHING, an argument
    rather than a global: Numba's cache would not see a change in another file).

    Beyond the sink (`beyond_row`): `skip` (1, or 0 for a run whose first token is hidden) leading
    keys are the sink; the beyond measures are means over the kept rows (NaN with none)."""
    n = att.shape[1]
    smooth = np.empty(n, np.float32)
    lanes = np.empty(16, np.float32)
    acc = np.empty(len(ROW_BEYOND))
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
        acc[:] = 0.0
        acc[R_IN_SEG] = np.inf
        for r in range(n):
            k = r + 1 if causal else n  # keys row r may see
            floor = spread / np.float32(k)
            for c in range(k):  # the visible keys (a causal row's others are 0 and add nothing)
                x = keep * att[h, r, c] + floor
                smooth[c] = x if x > _TINY else _TINY
            zero = np.float32(0.0)
            row_ent, d, s, p, t = zero, zero, zero, zero, zero  # float32 within a row
            for c in range(k):
                a = att[h, r, c]
                row_ent -= smooth[c] * log32(smooth[c])
                d += a * np.float32(abs(r - c))
                s += a * sep[c]
                p += a * punct[c]
                t += a
            # the row's maximum over its visible keys in 16 lanes: a max-reduction loop does not vectorise, this does
            lanes[:] = att[h, r, 0]
            whole = k - k % 16
            for c0 in range(0, whole, 16):
                for lane in range(16):
                    a = att[h, r, c0 + lane]
                    lanes[lane] = a if a > lanes[lane] else lanes[lane]
            top = lanes[0]
            for lane in range(16):
                top = lanes[lane] if lanes[lane] > top else top
            for c in range(whole, k):
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
            beyond_row(att[h, r], r, 0, n, skip, k, k - 1, 0, t, keep, spread, empty, choice, sep, punct, seg,
                       segmented, acc)
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
        out[h, SINK] = acc[R_SINK] / n
        kept = acc[R_ROWS] if acc[R_ROWS] > 0 else np.nan  # no row beyond the sink: NaN
        out[h, B_NORM] = acc[R_NORM] / acc[R_NORM_ROWS] if acc[R_NORM_ROWS] > 0 else np.nan
        for column, j in _MEANS:
            out[h, column] = acc[j] / kept
        out[h, IN_SEGMENT] = acc[R_IN_SEG] if segmented and acc[R_ROWS] > 0 else 0.0
        out[h, TOTAL] = total
        for target in range(starts.size - 1):
            hit = 0.0
            for k in range(starts[target], starts[target + 1]):
                hit += att[h, rows[k], cols[k]]
            out[h, TARGETS + target] = hit


def pattern_sums(att: np.ndarray, causal: bool, sep: np.ndarray, punct: np.ndarray,
                 seg: np.ndarray | None, targets: list, threads: int, *, skip: int = 1) -> np.ndarray:
    """(N, len(SUMS) + len(targets)) float64 for att (N, n, n) float32 C-contiguous; sep and
    punct (n,) 0/1 masks of the key columns, seg (n,) segment indices or None, targets a list of
    (rows, cols) index arrays; skip: 1 when the first key is the sink, 0 when there is none."""
    N = att.shape[0]
    out = np.full((N, len(SUMS) + len(targets)), np.nan)  # a column the loop does not write stays NaN
    seg = np.empty(0, np.int64) if seg is None else np.ascontiguousarray(seg, dtype=np.int64)
    sep, punct = np.ascontiguousarray(sep, np.float32), np.ascontiguousarray(punct, np.float32)
    rows = np.concatenate([np.asarray(i, np.int64) for i, _ in targets] + [np.empty(0, np.int64)])
    cols = np.concatenate([np.asarray(j, np.int64) for _, j in targets] + [np.empty(0, np.int64)])
    starts = np.cumsum([0] + [len(i) for i, _ in targets]).astype(np.int64)
    keep, spread = np.float32(1 - ENTROPY_SMOOTHING), np.float32(ENTROPY_SMOOTHING)
    empty = np.float32(EMPTY_BELOW)
    run_all(_heads, [(att, h0, h1, causal, int(skip), CHOICE_KEYS, empty, sep, punct, seg, rows, cols, starts, keep,
                      spread, out) for h0, h1 in split(N, threads)])
    return out


def compile_now() -> None:
    """Compile (or load from Numba's cache) the loop on a tiny input (the app's preload)."""
    att = np.full((1, 2, 2), 0.5, np.float32)
    target = (np.array([1]), np.array([0]))
    pattern_sums(att, False, np.zeros(2), np.zeros(2), np.zeros(2), [target], 1)
    pattern_sums(att, True, np.zeros(2), np.zeros(2), None, [], 1, skip=0)
