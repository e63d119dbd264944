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


@numba.njit(**JIT)
def _heads(att, h0, h1, causal, skip, choice, empty, sep, punct, seg, rows, cols, starts, keep, spread, out):
    """out[h] = the SUMS of head h for h in [h0, h1), att (N, n, n) float32; seg (n,) the
    segment of each token, or empty for one segment; then, for target t, the sum of
    att[h, rows[k], cols[k]] over k in [starts[t], starts[t + 1]). The entropy is that of
    keep·A + spread/k on the k visible keys (float32; measures.ENTROPY_SMOOTHING, an argument
    rather than a global: Numba's cache would not see a change in another file).

    Beyond the sink: `skip` (1, or 0 for a run whose first token is hidden) leading keys are the
    sink; row i ≥ skip is kept when it sees at least `choice` keys beyond them and keeps at least
    `empty` there, and divided by that
    mass (B_i); the beyond measures are means over the kept rows (NaN with none), the beyond
    entropy that of keep·B + spread/(k − skip) on the k − skip visible keys after the sink."""
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
        sink = 0.0
        b_norm = 0.0
        b_norm_rows = 0
        b_self, b_prev, b_next, b_sep, b_punct = 0.0, 0.0, 0.0, 0.0, 0.0
        b_rows = 0
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
            row_ent, d, s, p, t = zero, zero, zero, zero, zero  # float32 within a row
            for c in range(n):
                a = att[h, r, c]
                row_ent -= smooth[c] * log32(smooth[c])
                d += a * np.float32(abs(r - c))
                s += a * sep[c]
                p += a * punct[c]
                t += a
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
            # the sink: the first key's mass (when it is the sink) and what the row gave no key (a
            # learned sink); an empty row (all zeros, after hiding tokens) gave nothing to either
            lost = np.float32(1.0) - t if t > zero else zero
            sink += (att[h, r, 0] if skip > 0 else zero) + (lost if lost > zero else zero)
            # beyond the sink: the row without its first `skip` keys, renormalised
            kb = k - skip
            if r < skip or kb < choice:
                continue
            beyond = zero
            for c in range(skip, n):
                beyond += att[h, r, c]
            if beyond < empty:
                continue
            inv = np.float32(1.0) / beyond
            floor_b = spread / np.float32(kb)
            e_b, s_b, p_b, g_b = zero, zero, zero, zero
            for c in range(skip, n):
                a = att[h, r, c]
                x = keep * a * inv + (floor_b if c < k else zero)
                x = x if x > _TINY else _TINY
                e_b -= x * log32(x)
                s_b += a * sep[c]
                p_b += a * punct[c]
            if segmented:
                for c in range(skip, n):
                    g_b += att[h, r, c] * same[c]
                in_seg = min(in_seg, g_b * inv)
            b_rows += 1
            if kb > 1:
                b_norm += e_b / np.log(kb)
                b_norm_rows += 1
            b_sep += s_b * inv
            b_punct += p_b * inv
            b_self += att[h, r, r] * inv
            if r - 1 >= skip:
                b_prev += att[h, r, r - 1] * inv
            if r + 1 < n:
                b_next += att[h, r, r + 1] * inv
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
        out[h, SINK] = sink / n
        kept = np.float64(b_rows) if b_rows > 0 else np.nan  # no row beyond the sink: NaN
        out[h, B_NORM] = b_norm / b_norm_rows if b_norm_rows > 0 else np.nan
        out[h, B_SELF] = b_self / kept
        out[h, B_PREV] = b_prev / kept
        out[h, B_NEXT] = b_next / kept
        out[h, B_SEP] = b_sep / kept
        out[h, B_PUNCT] = b_punct / kept
        out[h, IN_SEGMENT] = in_seg if segmented and b_rows > 0 else 0.0
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
