"""The compiled pass of the row measures (`row_kernels.BlockSums`), written from a row table (`row_table`): the
loop of `row_kernels` with each record's sums put in its place, one line a record, so that the table's measures
are summed in the same pass over a row as the entropy (measured as fast as the loop written by hand; a loop over
the records inside it would not vectorise). The text is written once per table into the compiled loops' cache
folder and imported from there (`written`), where Numba keeps what it compiles from it.
"""

from __future__ import annotations

from mha_viz.metrics.row_table import SUMS_BEYOND, SUMS_FIRST, RowTable
from mha_viz.metrics.written import imported

TEMPLATE = r'''# The loop written from a row table by `mha_viz.metrics.row_loop` (do not edit: it is written
# again when the table changes). The columns of the sums: the built-in ones first, then each record's, then
# beyond the sink.
import numba
import numpy as np

from mha_viz.compiled import JIT, bits_float, log32

ENT, NORM, NORM_ROWS, CONF, TOTAL = 0, 1, 2, 3, 4
BEYOND_AT = @BEYOND_AT@
R_IN_SEG, R_SINK, R_NORM, R_NORM_ROWS, R_ROWS = 0, 1, 2, 3, 4
_TINY = np.float32(1e-30)  # masked entries count 1e-30·ln(1e-30) ≈ −7e-29: nothing


@numba.njit(inline="always", **JIT)
def beyond_row(row, i, key_start, n, skip, seen, last_valid, outside, t, keep, spread, empty, choice, seg,
               segmented, acc@MASK_WINDOWS@):
    """Add query row i to acc (the table's row_beyond sums). `row` holds its keys key_start … key_start + w − 1 (t
    their sum; those up to last_valid visible, `outside` more visible keys elsewhere, where A = 0); mask<q>_w
    those keys' masks (the table's key masks); seg (n,) each token's segment (used when `segmented`). The sink: the
    first `skip` keys
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
    e, g = zero, zero
@BEYOND_INIT@
    for c in range(c0, stop):
        a = row[c]
        x = keep * a * inv + floor
        x = x if x > _TINY else _TINY
        e -= x * log32(x)
@BEYOND_PER_KEY@
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
@BEYOND_AFTER@


@numba.njit(**JIT)
def _rows(A, h0, h1, r0, r1, start, key_start, n, causal, skip, ids, seg, keep, spread, min_weight, empty, choice,
          row_cells, cell_start, cell_stop, sums, cells, keys, weights, rest@MASKS@@MATCHES@):
    """Heads h0 … h1 − 1, rows r0 … r1 − 1 of block A (H, b, w): add to sums (H, 24) and cells (H, s, s); write keys,
    weights (H, n, k) and rest (H, n) at the rows' positions; mask<q> (n,): the table's key masks, match<q> (n,): its
    ids shifted by each match record's parameter. Three loops a row over the keys it may see (a
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
    A_bits = A.view(np.int32)  # the probabilities' bits (`bits_float` reads one back)
    tw = np.empty(k_top, np.float32)
    tk = np.empty(k_top, np.int32)
    looked = np.empty(s, np.bool_)  # the cells read for the kept keys (of this row)
@WINDOWS@
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
            ent, t = zero, zero
@INIT@
            for c in range(stop):
                a = row[c]
                x = keep * a + floor
                x = x if x > _TINY else _TINY
                ent -= x * log32(x)
                t += a
@PER_KEY@
            outside = key_start if causal else n - w  # visible keys outside the block: A = 0, Â = floor
            beyond_row(row, i, key_start, n, skip, seen, last_valid, outside, t, keep, spread, empty, choice, seg,
                       segmented, beyond@MASK_WINDOWS@)
            row_ent = np.float64(ent) - outside * np.float64(floor) * np.log(np.float64(floor))
            sums[h, ENT] += row_ent
            if seen > 1:
                sums[h, NORM] += row_ent / np.log(seen)
                sums[h, NORM_ROWS] += 1.0
            sums[h, TOTAL] += t
@AFTER@
            # each cell's maximum over its own keys (0 outside the block): over the floats' bits as integers, which
            # order as the floats do where they are not negative, in a slice (an index the compiler knows is not
            # negative): this loop vectorises, a float maximum does not (0.08 against 0.38 ns a key)
            bits = A_bits[h, r]
            top = zero
            for cell in range(s):
                lo = max(cell_start[cell], key_start) - key_start
                hi = min(cell_start[cell + 1] - key_start, stop)
                most = np.int32(0)
                if hi > lo:
                    own = bits[lo:hi]
                    for c in range(own.shape[0]):
                        most = max(most, own[c])
                best = bits_float(most)
                part[cell] = best
                top = best if best > top else top
            sums[h, CONF] += top
            # the kept keys, heaviest first (an earlier key first on a tie): the cells read in the order of their
            # maximum (the earliest of equal ones first), until one could not enter the keys kept so far
            m = 0
            looked[:] = False
            while k_top > 0:
                pick = -1
                for cell in range(s):
                    if not looked[cell] and part[cell] >= min_weight and (pick < 0 or part[cell] > part[pick]):
                        pick = cell
                if pick < 0:
                    break
                looked[pick] = True
                lo = max(cell_start[pick], key_start) - key_start
                if m == k_top and (part[pick] < tw[k_top - 1] or (part[pick] == tw[k_top - 1]
                                                                 and key_start + lo > tk[k_top - 1])):
                    break
                hi = min(cell_start[pick + 1] - key_start, stop)
                for c in range(lo, hi):
                    a = row[c]
                    key = key_start + c
                    if a >= min_weight and (m < k_top or a > tw[k_top - 1]
                                            or (a == tw[k_top - 1] and key < tk[k_top - 1])):
                        p = m if m < k_top else k_top - 1
                        while p > 0 and (tw[p - 1] < a or (tw[p - 1] == a and tk[p - 1] > key)):
                            tw[p], tk[p] = tw[p - 1], tk[p - 1]
                            p -= 1
                        tw[p], tk[p] = a, key
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
'''

_loops: dict[tuple, object] = {}


def source(table: RowTable) -> str:
    """The loop's text for `table`."""
    first = len(SUMS_FIRST)  # the built-in sums before the records' (ENT … TOTAL in the template)
    col = {r.name: first + k for k, r in enumerate(table.records)}
    beyond_at = first + len(table.records)
    beyond_col = {r.name: len(SUMS_BEYOND) + k for k, r in enumerate(table.beyond)}  # after R_IN_SEG … R_ROWS
    masks = [r.name for r in table.key_masks]
    init, per_key, after = [], [], []
    for k, r in enumerate(table.records):
        if r.kind == "distance":
            per_key.append(f"v{k} += a * np.float32(abs(i - key_start - c))")
        elif r.kind == "keys":
            per_key.append(f"v{k} += a * mask{masks.index(r.name)}_w[c]")
        elif r.kind == "match":
            q = table.matches.index(r.param)
            per_key.append(f"v{k} += a if (match{q}_w[c] == me and c - {r.param} < i - key_start) else zero")
        if r.kind in ("distance", "keys", "match"):
            init.append(f"v{k} = zero")
            after.append(f"sums[h, {col[r.name]}] += v{k}")
        elif r.kind == "offset":
            after += [f"c = i + ({r.param}) - key_start", "if 0 <= c < w:", f"    sums[h, {col[r.name]}] += row[c]"]
        else:  # "column"
            after += [f"c = {r.param} - key_start", "if 0 <= c < w:", f"    sums[h, {col[r.name]}] += row[c]"]
    b_init, b_per_key, b_after = [], [], []
    for k, r in enumerate(table.beyond):
        at = beyond_col[r.name]
        if r.kind == "keys":
            b_init.append(f"b{k} = zero")
            b_per_key.append(f"b{k} += a * mask{masks.index(r.name)}_w[c]")
            b_after.append(f"acc[{at}] += b{k} * inv")
        else:  # "offset"
            p = r.param
            b_after += [f"c = i + ({p}) - key_start", f"if i + ({p}) >= skip and 0 <= c < w and i + ({p}) < n:",
                        f"    acc[{at}] += row[c] * inv"]
    windows = [f"mask{q}_w = mask{q}[key_start:key_start + w]" for q in range(len(masks))]
    windows += [f"match{q}_w = match{q}[key_start:key_start + w]" for q in range(len(table.matches))]

    def lines(code: list[str], indent: int) -> str:
        return "\n".join(" " * indent + line for line in code) if code else " " * indent + "pass"
    text = TEMPLATE
    for mark, value in (("@BEYOND_AT@", str(beyond_at)),
                        ("@MASK_WINDOWS@", "".join(f", mask{q}_w" for q in range(len(masks)))),
                        ("@MASKS@", "".join(f", mask{q}" for q in range(len(masks)))),
                        ("@MATCHES@", "".join(f", match{q}" for q in range(len(table.matches)))),
                        ("@BEYOND_INIT@", lines(b_init, 4)), ("@BEYOND_PER_KEY@", lines(b_per_key, 8)),
                        ("@BEYOND_AFTER@", lines(b_after, 4)), ("@WINDOWS@", lines(windows, 4)),
                        ("@INIT@", lines(init, 12)), ("@PER_KEY@", lines(per_key, 16)), ("@AFTER@", lines(after, 12))):
        text = text.replace(mark, value)
    return text


def loop(table: RowTable):
    """The compiled `_rows` for `table`: written, imported and kept once per table (and per process)."""
    key = table.key()
    found = _loops.get(key)
    if found is None:
        found = _loops[key] = imported(source(table), "row_loop")._rows
    return found
