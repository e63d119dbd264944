"""The CPU side of the JS matrix (metrics/js.py) as compiled loops: one pass over a column
chunk of the patterns makes the in-band eigen-features and adds the exact terms of the entries
where a head is outside the band, without the (N, M) temporaries that tensor code needs.

`band_pass` runs one call per thread over disjoint column ranges (see compiled.py).
"""

from __future__ import annotations

import numba
import numpy as np

from mha_viz.compiled import HALF, JIT, ONE, log32, run_all, split

SUB = 256  # columns per block inside _band_columns: (N, SUB) float32 stays in L2 for N up to ~1,000


@numba.njit(**JIT)
def _band_columns(att, smooth, floor, c0, e0, e1, w, coef, scale, bias, lo, hi, Z, D):
    """Columns c0 + [e0, e1) of the patterns p = smooth·att + floor (att (N, M)):
    Z[i, k·w + e] = √c_e·[head i in band]·y_k(t_ie) (y_k = Σ_a coef[k, a] t^a) and, for every
    column with a head outside the band, D[i, j] += (1 − ½[j outside])·g(p_ie, p_je) for each
    outside head i (js.py's _outside). Columns go in blocks of SUB that stay in the core's cache
    from the mean over heads to the last exact term."""
    N = att.shape[0]
    R = coef.shape[0]
    block = np.empty((N, SUB), np.float32)
    flag = np.empty((N, SUB), np.bool_)
    mean = np.empty(SUB, np.float32)
    inv_c = np.empty(SUB, np.float32)
    root_c = np.empty(SUB, np.float32)
    any_out = np.empty(SUB, np.bool_)
    t = np.empty(SUB, np.float32)
    weight = np.empty(SUB, np.float32)
    q = np.empty(N, np.float32)
    half_qlq = np.empty(N, np.float32)
    wj = np.empty(N, np.float32)
    for b0 in range(e0, e1, SUB):
        span = min(e1, b0 + SUB) - b0
        mean[:span] = 0.0
        any_out[:span] = False
        for i in range(N):
            for e in range(span):
                x = att[i, c0 + b0 + e] * smooth + floor
                block[i, e] = x
                mean[e] += x
        for e in range(span):
            c = mean[e] / np.float32(N)
            inv_c[e] = ONE / c
            root_c[e] = np.sqrt(c)
        for i in range(N):
            for e in range(span):
                ratio = block[i, e] * inv_c[e]
                out = (ratio < lo) | (ratio > hi)
                flag[i, e] = out
                any_out[e] |= out
                t[e] = ratio * scale + bias
                weight[e] = np.float32(0.0) if out else root_c[e]
            for k in range(R):  # Horner on registers, degree 10 written out so that it vectorises
                a0, a1, a2, a3, a4, a5 = coef[k, 0], coef[k, 1], coef[k, 2], coef[k, 3], coef[k, 4], coef[k, 5]
                a6, a7, a8, a9, a10 = coef[k, 6], coef[k, 7], coef[k, 8], coef[k, 9], coef[k, 10]
                base = k * w + b0
                for e in range(span):
                    x = t[e]
                    y = a10 * x + a9
                    y = y * x + a8
                    y = y * x + a7
                    y = y * x + a6
                    y = y * x + a5
                    y = y * x + a4
                    y = y * x + a3
                    y = y * x + a2
                    y = y * x + a1
                    Z[i, base + e] = weight[e] * (y * x + a0)
        for e in range(span):
            if not any_out[e]:
                continue
            for j in range(N):
                q[j] = block[j, e]
                wj[j] = HALF if flag[j, e] else ONE
                half_qlq[j] = HALF * q[j] * log32(q[j])
            for i in range(N):
                if not flag[i, e]:
                    continue
                qi, hi_ = q[i], half_qlq[i]
                for j in range(N):
                    m = HALF * (qi + q[j])
                    D[i, j] += wj[j] * (hi_ + half_qlq[j] - m * log32(m))

KERNEL_DEGREE = 10  # of the polynomials _band_columns evaluates (js.DEGREE)


def band_pass(att: np.ndarray, smooth: float, floor: float, c0: int, c1: int, coef: np.ndarray,
              scale: float, bias: float, lo: float, hi: float, Z: np.ndarray, D: list, threads: int) -> None:
    """Fill Z[:, :R·w] (w = c1 − c0) for the chunk [c0, c1) of p = smooth·att + floor and add
    its outside terms to the per-thread accumulators D (float64 (N, N) each), splitting the
    columns over `threads`."""
    if coef.shape[1] != KERNEL_DEGREE + 1:
        raise ValueError(f"the compiled pass evaluates degree {KERNEL_DEGREE}; got {coef.shape[1] - 1}")
    w = c1 - c0
    args = (np.float32(scale), np.float32(bias), np.float32(lo), np.float32(hi))
    smooth, floor = np.float32(smooth), np.float32(floor)
    run_all(_band_columns, [(att, smooth, floor, c0, e0, e1, w, coef, *args, Z, D[k])
                            for k, (e0, e1) in enumerate(split(w, threads))])


@numba.njit(**JIT)
def _exact_rows(att, smooth, floor, rows, sls, plogp, mass):
    """For the heads i in `rows`: sls[i, j] += Σ_e s ln s with s = p_ie + p_je for every j > i,
    plogp[i] += Σ_e p_ie ln p_ie and mass[i] += Σ_e p_ie, over every column of
    p = smooth·att + floor, in blocks of SUB columns held in cache."""
    N, M = att.shape
    block = np.empty((N, SUB), np.float32)
    for b0 in range(0, M, SUB):
        span = min(M, b0 + SUB) - b0
        for h in range(N):
            for e in range(span):
                block[h, e] = att[h, b0 + e] * smooth + floor
        for i in rows:
            own = np.float32(0.0)
            total = np.float32(0.0)
            for e in range(span):
                x = block[i, e]
                own += x * log32(x)
                total += x
            plogp[i] += own
            mass[i] += total
            for j in range(i + 1, N):
                acc = np.float32(0.0)
                for e in range(span):
                    x = block[i, e] + block[j, e]
                    acc += x * log32(x)
                sls[i, j] += acc


def exact_pass(att: np.ndarray, smooth: float, floor: float, threads: int):
    """(sls, plogp, mass) of `_exact_rows` over every head: (N, N) float64 upper triangle,
    (N,), (N,). Heads go to threads interleaved (i, i + T, …), which balances the triangle."""
    N = att.shape[0]
    sls, plogp, mass = np.zeros((N, N)), np.zeros(N), np.zeros(N)
    smooth, floor = np.float32(smooth), np.float32(floor)
    run_all(_exact_rows, [(att, smooth, floor, np.arange(t, N, threads, dtype=np.int64), sls, plogp, mass)
                          for t in range(min(threads, N))])
    return sls, plogp, mass


def compile_now() -> None:
    """Compile (or load from Numba's cache) the loops on tiny inputs, so that the first JS
    matrix a user asks for does not wait for the compiler (the app's preload calls this)."""
    att = np.full((2, 8), 0.125, np.float32)
    att[0, 0] = 1.0  # one head far outside the band: the exact terms run too
    coef = np.zeros((1, KERNEL_DEGREE + 1), np.float32)
    band_pass(att, 1.0, 0.0, 0, 8, coef, 1.0, 0.0, 0.5, 2.0, np.empty((2, 8), np.float32),
              [np.zeros((2, 2))], 1)
    exact_pass(att, 1.0, 0.0, 1)
