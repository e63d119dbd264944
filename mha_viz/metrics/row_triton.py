"""The row measures inside the attention kernel (issue 87, section 2): a Triton kernel, written from the row table
(`row_table`) as the compiled loop is (`row_loop`), that computes one layer's attention from its queries, keys and
values in tiles of keys and, beside each head's output, every row's log-sum-exp and its share of every measure of
the table: no head's n × n is ever written. Two passes over the key tiles of each (head, block of query rows): the
first finds the row's log-sum-exp, the second its probabilities, the output P·V and the row's sums. `rows_of`
launches them; `sums_of` adds the rows up as the other backends do (`row_stats.RowStats`, `row_kernels.BlockSums`),
and `row_measures.measures_from_sums` makes the measures.

Masks and scores: causal or bidirectional, a sliding window (the `window` keys up to the row; an encoder's band of
|i − j| ≤ window), chunks (a row sees the keys of its own chunk, Llama 4's chunked attention), learned sinks (one
logit a head in the softmax that is no key: GPT-OSS), soft-capping (cap · tanh(score / cap): Gemma 2), grouped-query
heads (query head h reads KV head h // (H / G)) and padding (keys marked invalid). A block of rows reads only the key
tiles it may see (a causal block's earlier keys, a window's or a chunk's span). Beside the sums, the second pass keeps
each row's `top_k` heaviest keys (merged tile by tile) with the rest of its mass, and the thumbnails' cells (each
cell's largest probability, by atomic maximum). `scan` launches it for each layer on a GPU (`scan.kernel_layer`); on a
CPU, TRITON_INTERPRET=1 runs the kernel on CPU tensors, which is how the tests prove it against the dense reference
and the other backends.
"""

from __future__ import annotations

import math
import os
import re
from typing import NamedTuple

import numpy as np
import torch

from mha_viz.capture.sinks import EMPTY_BELOW
from mha_viz.metrics.measures import CHOICE_KEYS, ENTROPY_SMOOTHING
from mha_viz.metrics.pool_cells import PoolCells
from mha_viz.metrics.row_measures import TextFacts
from mha_viz.metrics.row_table import RowTable
from mha_viz.metrics.written import imported

# the columns of a row's sums the kernel writes before the records': its smoothed entropy, its largest probability,
# its total, the first key's probability, the smoothed entropy beyond the sink (unnormalised rows: B = A / beyond),
# the mass beyond the sink inside the row's own segment, the mass after the sink (summed, not 1 − p0: a sink that
# takes nearly all would leave float32's rounding); then each record's sum, then each beyond record's (over the
# keys after the sink, not yet divided by the mass there)
BUILT_IN = ("entropy", "confidence", "total", "first_key", "beyond_entropy", "in_segment", "beyond_mass")

TILE = 64  # rows and keys of a tile: tl.dot's least is 16; the interpreter's time goes by the tiles, not their size

TEMPLATE = r'''# The kernel written from a row table by `mha_viz.metrics.row_triton` (do not edit: it is written again
# when the table changes).
import triton
import triton.language as tl


@triton.jit
def _lse(Q, K, SINK, VALID, LSE, LSEB, n, group, scale, softcap, window, chunk, skip, s_qh, s_qn, s_kh, s_kn,
         CAUSAL: tl.constexpr, HAS_SINK: tl.constexpr, D: tl.constexpr, DP: tl.constexpr, BM: tl.constexpr,
         BN: tl.constexpr):
    block, h = tl.program_id(0), tl.program_id(1)
    kv = h // group
    rows = block * BM + tl.arange(0, BM)
    dk = tl.arange(0, DP)
    dk = tl.where(dk < D, dk, 0)
    q = tl.load(Q + h * s_qh + rows[:, None] * s_qn + dk[None, :],
                mask=(rows[:, None] < n) & (tl.arange(0, DP)[None, :] < D), other=0.0)
    m = tl.full([BM], float("-inf"), tl.float32)
    l = tl.zeros([BM], tl.float32)
    mb = tl.full([BM], float("-inf"), tl.float32)  # the same over the keys after the sink: their mass, not 1 − p0
    lb = tl.zeros([BM], tl.float32)
    @SPAN@
    for start in range(k_lo, k_hi, BN):
        cols = start + tl.arange(0, BN)
        @SCORES s cols@
        top = tl.maximum(m, tl.max(s, 1))
        safe = tl.where(top == float("-inf"), 0.0, top)
        l = l * tl.exp(m - safe) + tl.sum(tl.exp(s - safe[:, None]), 1)
        m = top
        sb = tl.where(cols[None, :] >= skip, s, float("-inf"))
        top = tl.maximum(mb, tl.max(sb, 1))
        safe = tl.where(top == float("-inf"), 0.0, top)
        lb = lb * tl.exp(mb - safe) + tl.sum(tl.exp(sb - safe[:, None]), 1)
        mb = top
    tl.store(LSEB + h * n + rows, tl.where(lb > 0, mb + tl.log(tl.maximum(lb, 1e-30)), float("-inf")), mask=rows < n)
    if HAS_SINK:
        sink = tl.load(SINK + h)
        top = tl.maximum(m, sink)
        l = l * tl.exp(m - top) + tl.exp(sink - top)
        m = top
    tl.store(LSE + h * n + rows, tl.where(l > 0, m + tl.log(tl.maximum(l, 1e-30)), float("-inf")), mask=rows < n)


@triton.jit
def _rows(Q, K, V, VALID, LSE, LSEB, O, ROWS, IDS, SEG, MASKS, MATCHED, KEYS, WEIGHTS, REST, CELLS, CELL_LO, CELL_HI,
          n, group, scale, softcap, window, chunk, skip, eps, min_weight, S, s_qh, s_qn, s_kh, s_kn, s_vh, s_vn, s_oh,
          s_on, CAUSAL: tl.constexpr, HAS_SEG: tl.constexpr, D: tl.constexpr, DP: tl.constexpr, DV: tl.constexpr,
          DVP: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, NR: tl.constexpr, TOPK: tl.constexpr,
          KP: tl.constexpr, THUMB: tl.constexpr):
    block, h = tl.program_id(0), tl.program_id(1)
    kv = h // group
    rows = block * BM + tl.arange(0, BM)
    live = rows < n
    dk = tl.arange(0, DP)
    dk = tl.where(dk < D, dk, 0)
    dv = tl.arange(0, DVP)
    q = tl.load(Q + h * s_qh + rows[:, None] * s_qn + dk[None, :],
                mask=live[:, None] & (tl.arange(0, DP)[None, :] < D), other=0.0)
    lse = tl.load(LSE + h * n + rows, mask=live, other=0.0)
    none = lse == float("-inf")  # a row that sees no key
    lse = tl.where(none, 0.0, lse)  # no −inf − −inf below: the row's probabilities are all set to 0
    own = tl.load(IDS + rows, mask=live, other=-2)
    seg = tl.load(SEG + rows, mask=live, other=-2)
    seen = tl.zeros([BM], tl.int32) + n  # k_i: the keys row i may see, for the smoothing (as the other backends)
    if CAUSAL:
        seen = tl.minimum(rows + 1, n)
    floor = eps / seen.to(tl.float32)
    kb = seen - skip  # keys after the sink row i may see
    floor_b = eps / tl.where(kb > 0, kb, 1).to(tl.float32)
    # the first key's probability, and so the mass beyond the sink, before the tiles
    first = tl.arange(0, BN)
    @SCORES s0 first@
    p0 = tl.sum(tl.where((first[None, :] == 0) & (s0 > float("-inf")), tl.exp(s0 - lse[:, None]), 0.0), 1)
    p0 = tl.where(none, 0.0, p0)
    lseb = tl.load(LSEB + h * n + rows, mask=live, other=float("-inf"))
    mass_b = tl.where((lseb == float("-inf")) | none, 0.0, tl.exp(tl.where(lseb == float("-inf"), 0.0, lseb) - lse))
    inv_b = 1.0 / tl.maximum(mass_b, 1e-30)
    @SPAN@
    k_end = k_lo + (k_hi - k_lo + BN - 1) // BN * BN  # the tiles read cover keys k_lo … k_end − 1
    # the keys a row may see that no tile reads (masked: probability 0) add the floor's entropy, as those read do
    unread = tl.minimum(k_lo, seen) + tl.maximum(seen - k_end, 0)
    unread_b = tl.maximum(tl.minimum(k_lo, seen) - skip, 0) + tl.maximum(seen - tl.maximum(k_end, skip), 0)
    ent = -unread.to(tl.float32) * floor * tl.log(floor)
    bent = -unread_b.to(tl.float32) * floor_b * tl.log(floor_b)
    acc = tl.zeros([BM, DVP], tl.float32)
    conf = tl.zeros([BM], tl.float32)
    total = tl.zeros([BM], tl.float32)
    inseg = tl.zeros([BM], tl.float32)
    slot = tl.arange(0, KP)
    tw = tl.full([BM, KP], -1.0, tl.float32)  # each row's heaviest keys so far, heaviest first (−1: none yet)
    tk = tl.full([BM, KP], -1, tl.int32)
    r_lo = tl.load(CELL_LO + rows, mask=live, other=0)  # each row's first and last thumbnail cell
    r_hi = tl.load(CELL_HI + rows, mask=live, other=0)
@INIT@
    for start in range(k_lo, k_hi, BN):
        cols = start + tl.arange(0, BN)
        @SCORES s cols@
        p = tl.where(s == float("-inf"), 0.0, tl.exp(s - lse[:, None]))
        v = tl.load(V + kv * s_vh + cols[:, None] * s_vn + tl.where(dv < DV, dv, 0)[None, :],
                    mask=(cols[:, None] < n) & (dv[None, :] < DV), other=0.0)
        acc += tl.dot(p, v, input_precision="ieee")
        inside = cols[None, :] < seen[:, None]  # the keys row i may see: the smoothing's
        x = tl.maximum((1.0 - eps) * p + floor[:, None], 1e-30)
        ent += tl.sum(tl.where(inside, -x * tl.log(x), 0.0), 1)
        conf = tl.maximum(conf, tl.max(p, 1))
        total += tl.sum(p, 1)
        after = inside & (cols[None, :] >= skip)
@PER_TILE@
        if TOPK > 0:  # the tile's keys of weight ≥ min_weight merged into each row's heaviest TOPK
            cand = tl.where((s > float("-inf")) & (p >= min_weight), p, -1.0)
            kth = tl.min(tl.where(slot[None, :] < TOPK, tw, 2.0), 1)  # −1 until TOPK are kept
            if tl.max(tl.max(cand, 1) - kth, 0) > 0:  # some row has a key heavier than its last kept
                nw = tl.full([BM, KP], -1.0, tl.float32)
                nk = tl.full([BM, KP], -1, tl.int32)
                old = tw
                for j in tl.static_range(TOPK):  # the heavier of the tile's and the kept's heaviest left; a tie
                    mc, ic = tl.max(cand, 1), tl.argmax(cand, 1)  # keeps the earlier key, as the CPU's loop
                    mo, io = tl.max(old, 1), tl.argmax(old, 1)
                    new = mc > mo
                    taken_k = tl.sum(tl.where(slot[None, :] == io[:, None], tk, 0), 1)
                    nw = tl.where(slot[None, :] == j, tl.where(new, mc, mo)[:, None], nw)
                    nk = tl.where(slot[None, :] == j, tl.where(new, start + ic, taken_k)[:, None], nk)
                    cand = tl.where(new[:, None] & (tl.arange(0, BN)[None, :] == ic[:, None]), -1.0, cand)
                    old = tl.where((~new)[:, None] & (slot[None, :] == io[:, None]), -1.0, old)
                tw, tk = nw, nk
        if THUMB:  # each thumbnail cell the tile meets: each row's largest probability there, into its cells
            c_lo = tl.load(CELL_LO + cols, mask=cols < n, other=S)
            c_hi = tl.load(CELL_HI + cols, mask=cols < n, other=-1)
            for c in range(tl.min(c_lo, 0), tl.max(c_hi, 0) + 1):
                best = tl.max(tl.where(((c_lo <= c) & (c_hi >= c))[None, :], p, 0.0), 1)
                tl.atomic_max(CELLS + (h * S + r_lo) * S + c, best, mask=live & (best > 0))
                tl.atomic_max(CELLS + (h * S + r_hi) * S + c, best, mask=live & (best > 0) & (r_hi != r_lo))
    tl.store(O + h * s_oh + rows[:, None] * s_on + dv[None, :], acc, mask=live[:, None] & (dv[None, :] < DV))
    base = ROWS + (h * n + rows) * NR
    tl.store(base + 0, ent, mask=live)
    tl.store(base + 1, conf, mask=live)
    tl.store(base + 2, total, mask=live)
    tl.store(base + 3, p0, mask=live)
    tl.store(base + 6, mass_b, mask=live)
    if TOPK > 0:
        got = (tw >= 0) & (slot[None, :] < TOPK)
        at = (h * n + rows)[:, None] * TOPK + slot[None, :]
        put = live[:, None] & (slot[None, :] < TOPK)
        tl.store(KEYS + at, tl.where(got, tk, -1), mask=put)
        tl.store(WEIGHTS + at, tl.where(got, tw, 0.0), mask=put)
        tl.store(REST + h * n + rows, total - tl.sum(tl.where(got, tw, 0.0), 1), mask=live)
@STORE@
'''


# A tile's scores (BM × BN) into {out}, keys {cols}: −inf where masked. Written out where it is used, as `SPAN` is
# (a jit function called from the kernel costs the interpreter its whole language patched again at each call).
SCORES = """\
sc_k = tl.load(K + kv * s_kh + {cols}[:, None] * s_kn + dk[None, :], mask={cols}[:, None] < n, other=0.0)
sc_s = tl.dot(q, tl.trans(sc_k), input_precision="ieee") * scale  # not TF32: float32's own rounding
if softcap > 0:
    sc_s = softcap * (2.0 / (1.0 + tl.exp(-2.0 * sc_s / softcap)) - 1.0)  # cap · tanh(s / cap)
# (BM, BN) from the start: compiled, a variable keeps one shape through its branches (interpreted, it may grow)
sc_ok = (rows[:, None] >= 0) & ({cols}[None, :] < n) & (tl.load(VALID + {cols}, mask={cols} < n, other=0)[None, :] > 0)
if CAUSAL:
    sc_ok = sc_ok & ({cols}[None, :] <= rows[:, None])
if window > 0:
    if CAUSAL:  # p − window < j ≤ p
        sc_ok = sc_ok & ({cols}[None, :] > rows[:, None] - window)
    else:  # an encoder's local band: |p − j| ≤ window
        sc_ok = sc_ok & (tl.abs({cols}[None, :] - rows[:, None]) <= window)
if chunk > 0:
    sc_ok = sc_ok & ({cols}[None, :] // chunk == rows[:, None] // chunk)
{out} = tl.where(sc_ok, sc_s, float("-inf"))
"""

# The keys the block's rows may see, as whole tiles: k_lo (the first tile's first key) … k_hi − 1; the tiles outside
# hold only masked keys and are never read (a causal block's later keys, those before a window or outside the
# block's chunks).
SPAN = """\
sp_first = block * BM
sp_last = sp_first + BM - 1  # the block's last row
k_hi = n + block * 0
if CAUSAL:
    k_hi = tl.minimum(k_hi, sp_last + 1)
    k_lo = tl.where(window > 0, tl.maximum(sp_first - window + 1, 0), 0)
else:
    k_hi = tl.where(window > 0, tl.minimum(k_hi, sp_last + window + 1), k_hi)
    k_lo = tl.where(window > 0, tl.maximum(sp_first - window, 0), 0)
sp_c = tl.maximum(chunk, 1)
k_lo = tl.where(chunk > 0, tl.maximum(k_lo, sp_first // sp_c * sp_c), k_lo)
k_hi = tl.where(chunk > 0, tl.minimum(k_hi, (sp_last // sp_c + 1) * sp_c), k_hi)
k_lo = k_lo // BN * BN
"""


def _expanded(text: str) -> str:
    """TEMPLATE's @SCORES out cols@ and @SPAN@ lines written out, at their lines' indentation."""
    def block(body: str, indent: str) -> str:
        return "\n".join(indent + line if line else line for line in body.splitlines())
    text = re.sub(r"^( *)@SCORES (\w+) (\w+)@$", lambda m: block(SCORES.format(out=m[2], cols=m[3]), m[1]), text,
                  flags=re.M)
    return re.sub(r"^( *)@SPAN@$", lambda m: block(SPAN, m[1]), text, flags=re.M)


def source(table: RowTable) -> str:
    """The kernel's text for `table`: each record's tile expression w (BM × BN) and its sums, in the second pass."""
    masks = [r.name for r in table.key_masks]
    weight = {
        "offset": "(cols[None, :] == rows[:, None] + ({p})).to(tl.float32)",
        "column": "(cols[None, :] == {p}).to(tl.float32)",
        "keys": "tl.load(MASKS + {mask} * n + cols, mask=cols < n, other=0.0)[None, :]",
        "distance": "tl.abs(rows[:, None] - cols[None, :]).to(tl.float32)",
        "match": "((tl.load(MATCHED + {match} * n + cols, mask=cols < n, other=-1)[None, :] == own[:, None])"
                 " & (cols[None, :] - {p} < rows[:, None])).to(tl.float32)",
    }
    init = []
    tile = []
    store = []
    column = len(BUILT_IN)
    for k, r in enumerate(table.records):
        w = weight[r.kind].format(p=r.param, mask=masks.index(r.name) if r.kind == "keys" else 0,
                                  match=table.matches.index(r.param) if r.kind == "match" else 0)
        init.append(f"    r{k} = tl.zeros([BM], tl.float32)")
        tile += [f"        w{k} = {w}", f"        r{k} += tl.sum(p * w{k}, 1)"]
        store.append(f"    tl.store(base + {column}, r{k}, mask=live)")
        column += 1
    for k, r in enumerate(table.beyond):
        index = table.records.index(r)
        init.append(f"    b{k} = tl.zeros([BM], tl.float32)")
        tile.append(f"        b{k} += tl.sum(tl.where(after, p * w{index}, 0.0), 1)")
        store.append(f"    tl.store(base + {column}, b{k}, mask=live)")
        column += 1
    # the smoothed entropy beyond the sink: B = A / (the row's mass after the sink), over its kb keys
    tile += ["        xb = tl.maximum((1.0 - eps) * p * inv_b[:, None] + floor_b[:, None], 1e-30)",
             "        bent += tl.sum(tl.where(after, -xb * tl.log(xb), 0.0), 1)",
             "        if HAS_SEG:",
             "            same = tl.load(SEG + cols, mask=cols < n, other=-3)[None, :] == seg[:, None]",
             "            inseg += tl.sum(tl.where(after & same, p, 0.0), 1)"]
    store += ["    tl.store(base + 4, bent, mask=live)", "    tl.store(base + 5, inseg, mask=live)"]
    text = _expanded(TEMPLATE)
    for mark, lines in (("@INIT@", init), ("@PER_TILE@", tile), ("@STORE@", store)):
        text = text.replace(mark, "\n".join(lines))
    return text


def kernels(table: RowTable):
    """(the first pass, the second) for `table`, written and imported once a table and process: compiled for the GPU,
    or with TRITON_INTERPRET=1 (set before Triton is first imported: its own library's functions are made then)
    run by Triton's interpreter on CPU tensors."""
    module = imported(source(table), "row_triton")
    return module._lse, module._rows


class Pass(NamedTuple):
    """What the kernel gives for one layer (`rows_of`), on the inputs' device."""
    out: torch.Tensor  # (H, n, d_v) float32: the attention output P·V, each head's
    lse: torch.Tensor  # (H, n): each row's log-sum-exp (with the sink's logit)
    rows: torch.Tensor  # (H, n, columns): each row's sums, BUILT_IN, each record's, each beyond record's (`sums_of`)
    keys: torch.Tensor  # (H, n, top_k) int32: each row's heaviest keys of weight ≥ min_weight, heaviest first (−1)
    weights: torch.Tensor  # (H, n, top_k) float32: their weights (0 where none)
    rest: torch.Tensor  # (H, n): each row's mass outside them
    cells: torch.Tensor  # (H, s, s): the thumbnails, each head max-pooled as `scan.kept.Thumbnails` pools


def rows_of(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, facts: TextFacts, *, scale: float | None = None,
            softcap: float = 0.0, window: int = 0, chunk: int = 0, sinks: torch.Tensor | None = None,
            valid: torch.Tensor | None = None, top_k: int = 0, min_weight: float = 0.0, thumb: int = 0,
            block_rows: int | None = None, block_keys: int | None = None) -> Pass:
    """One layer: q (H, n, d), k (G, n, d), v (G, n, d_v) on one device (half precision read in float32) -> its
    `Pass`. sinks: (H,) learned sink logits; valid: (n,) the keys that are not padding (default all); top_k,
    min_weight: each row's `top_k` heaviest keys of weight ≥ `min_weight` are kept (none: 0); thumb: the thumbnails'
    size (none: 0); block_rows, block_keys: the tiles (default TILE)."""
    import triton  # here: the package is the GPU's (and the tests' interpreter's); the app imports this file only there

    H, n, d = q.shape
    G, dv = k.shape[0], v.shape[-1]
    table = facts.table
    dev = q.device
    if dev.type == "cpu" and os.environ.get("TRITON_INTERPRET") != "1":
        raise RuntimeError("The kernel runs on CPU tensors under Triton's interpreter only: set TRITON_INTERPRET=1 "
                           "before Python starts (the tests do).")
    block_rows, block_keys = block_rows or TILE, block_keys or TILE
    first, second = kernels(table)
    scale = 1.0 / math.sqrt(d) if scale is None else float(scale)
    valid = torch.ones(n, dtype=torch.int32, device=dev) if valid is None else valid.to(dev, torch.int32)
    lse = torch.empty((H, n), dtype=torch.float32, device=dev)
    lse_b = torch.empty((H, n), dtype=torch.float32, device=dev)  # over the keys after the sink
    out = torch.empty((H, n, dv), dtype=torch.float32, device=dev)
    columns = len(BUILT_IN) + len(table.records) + len(table.beyond)
    rows = torch.zeros((H, n, columns), dtype=torch.float32, device=dev)
    keys = torch.full((H, n, top_k), -1, dtype=torch.int32, device=dev)
    weights = torch.zeros((H, n, top_k), dtype=torch.float32, device=dev)
    rest = torch.zeros((H, n), dtype=torch.float32, device=dev)
    size = max(0, min(thumb, n))
    cells = torch.zeros((H, size, size), dtype=torch.float32, device=dev)
    pool = PoolCells.of(n, size)
    cell_lo, cell_hi = (torch.as_tensor(c, dtype=torch.int32, device=dev) for c in (pool.first, pool.last))
    ids = torch.as_tensor(facts.ids, dtype=torch.int32, device=dev)
    seg = torch.as_tensor(facts.seg if facts.seg is not None else np.zeros(n), dtype=torch.int32, device=dev)
    masks = torch.as_tensor(facts.masks, dtype=torch.float32, device=dev).reshape(-1).contiguous()
    matched = torch.as_tensor(facts.matched, dtype=torch.int32, device=dev).reshape(-1).contiguous()
    q, k, v = (x.to(torch.float32).contiguous() for x in (q, k, v))  # half precision read in float32
    sink = sinks.to(dev, torch.float32) if sinks is not None else lse  # any tensor when there is none
    grid = (triton.cdiv(n, block_rows), H)
    dp, dvp = max(16, triton.next_power_of_2(d)), max(16, triton.next_power_of_2(dv))  # tl.dot's least
    common = dict(CAUSAL=facts.causal, D=d, DP=dp, BM=block_rows, BN=block_keys)
    first[grid](q, k, sink, valid, lse, lse_b, n, H // G, scale, float(softcap), int(window), int(chunk), facts.skip,
                q.stride(0), q.stride(1), k.stride(0), k.stride(1), HAS_SINK=sinks is not None, **common)
    second[grid](q, k, v, valid, lse, lse_b, out, rows, ids, seg, masks, matched, keys, weights, rest, cells, cell_lo,
                 cell_hi, n, H // G, scale, float(softcap), int(window), int(chunk), facts.skip, ENTROPY_SMOOTHING,
                 float(min_weight), size, q.stride(0), q.stride(1), k.stride(0), k.stride(1), v.stride(0),
                 v.stride(1), out.stride(0), out.stride(1), HAS_SEG=facts.seg is not None, DV=dv, DVP=dvp,
                 NR=columns, TOPK=top_k, KP=max(2, triton.next_power_of_2(max(top_k, 1))), THUMB=size > 0, **common)
    return Pass(out, lse, rows, keys, weights, rest, cells)


def sums_of(rows: torch.Tensor, facts: TextFacts) -> dict[str, np.ndarray]:
    """The table's row_sums (H,) float64 from the kernel's rows (H, n, columns), as the other backends add them."""
    table, n, skip = facts.table, facts.n, facts.skip
    r = rows.double().cpu().numpy()
    i = np.arange(n)
    seen = (i + 1) if facts.causal else np.full(n, n)
    ent, conf, total, p0, bent, inseg, beyond = (r[..., k] for k in range(len(BUILT_IN)))
    wide = seen > 1
    sums = {"entropy": ent.sum(-1), "norm_entropy": np.where(wide, ent / np.log(np.maximum(seen, 2)), 0).sum(-1),
            "norm_rows": np.full(r.shape[0], float(wide.sum())), "confidence": conf.sum(-1), "total": total.sum(-1)}
    for k, rec in enumerate(table.records):
        sums[rec.name] = r[..., len(BUILT_IN) + k].sum(-1)
    lost = np.where(total > 0, np.maximum(1 - total, 0), 0)
    sums["sink"] = (p0 * (skip > 0) + lost).sum(-1)
    kb = seen - skip
    kept = (beyond >= EMPTY_BELOW) & (i >= skip) & (kb >= CHOICE_KEYS)
    inv = np.where(kept, 1 / np.where(kept, beyond, 1), 0)
    wide_b = kept & (kb > 1)
    sums["beyond_norm_entropy"] = np.where(wide_b, bent / np.log(np.maximum(kb, 2)), 0).sum(-1)
    sums["beyond_norm_rows"] = wide_b.sum(-1).astype(float)
    sums["beyond_rows"] = kept.sum(-1).astype(float)
    start = len(BUILT_IN) + len(table.records)
    for k, rec in enumerate(table.beyond):
        sums[f"beyond_{rec.name}"] = (r[..., start + k] * inv).sum(-1)
    sums["in_segment"] = (np.where(kept, inseg * inv, np.inf).min(-1) if facts.seg is not None
                          else np.zeros(r.shape[0]))
    return {name: sums[name] for name in table.row_sums}
