"""The CPU side of the JS matrix (metrics/js.py) as compiled loops: one pass over a column
chunk of the patterns makes the in-band eigen-features and adds the exact terms of the entries
where a head is outside the band, without the (N, M) temporaries that tensor code needs.

Numba compiles these on first use (about a second, then cached on disk beside this file or in
Numba's user cache); they release the GIL, and `band_pass` runs one call per thread over
disjoint column ranges, so several sessions may call it at once. The loops are written so the
compiler vectorises them: the logarithm is `fast_log`, branch-free, because the library log is
a scalar call.
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor

import numba
import numpy as np

LN2 = np.float32(math.log(2.0))
SQRT2 = np.float32(math.sqrt(2.0))
_ONE, _HALF = np.float32(1.0), np.float32(0.5)
# 2·atanh series coefficients: ln f = 2s(1 + s²/3 + s⁴/5 + …), s = (f − 1)/(f + 1), |s| ≤ 0.172
_C3, _C5, _C7, _C9 = (np.float32(1.0 / k) for k in (3, 5, 7, 9))


@numba.njit(nogil=True, fastmath=True, cache=True)
def fast_log(x, out):
    """out[:] = ln x for positive normal float32 x, to about 1e-7 relative (float32 rounding;
    the series remainder is below 1e-9): x = f·2^e with f in [√½, √2), then the atanh series."""
    bits = x.view(np.int32)
    mant = out.view(np.int32)
    for j in range(x.size):
        mant[j] = (bits[j] & 0x007FFFFF) | 0x3F800000  # f in [1, 2), exponent below
    for j in range(x.size):
        e = np.float32(((bits[j] >> 23) & 0xFF) - 127)
        f = out[j]
        big = f > SQRT2
        f = f * _HALF if big else f
        e = e + _ONE if big else e
        s = (f - _ONE) / (f + _ONE)
        s2 = s * s
        out[j] = e * LN2 + np.float32(2.0) * s * (_ONE + s2 * (_C3 + s2 * (_C5 + s2 * (_C7 + s2 * _C9))))

SUB = 256  # columns per block inside _band_columns: (N, SUB) float32 stays in L2 for N up to ~1,000


@numba.njit(nogil=True, fastmath=True, cache=True)
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
    m = np.empty(N, np.float32)
    log_m = np.empty(N, np.float32)
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
            inv_c[e] = _ONE / c
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
                wj[j] = _HALF if flag[j, e] else _ONE
            fast_log(q, half_qlq)
            for j in range(N):
                half_qlq[j] = _HALF * q[j] * half_qlq[j]
            for i in range(N):
                if not flag[i, e]:
                    continue
                qi, hi_ = q[i], half_qlq[i]
                for j in range(N):
                    m[j] = _HALF * (qi + q[j])
                fast_log(m, log_m)
                for j in range(N):
                    D[i, j] += wj[j] * (hi_ + half_qlq[j] - m[j] * log_m[j])

DEGREE = 10  # of the polynomials _band_columns evaluates (js.DEGREE)
_POOL = ThreadPoolExecutor(max_workers=8, thread_name_prefix="mha-viz-js")


def band_pass(att: np.ndarray, smooth: float, floor: float, c0: int, c1: int, coef: np.ndarray,
              scale: float, bias: float, lo: float, hi: float, Z: np.ndarray, D: list, threads: int) -> None:
    """Fill Z[:, :R·w] (w = c1 − c0) for the chunk [c0, c1) of p = smooth·att + floor and add
    its outside terms to the per-thread accumulators D (float64 (N, N) each), splitting the
    columns over `threads`."""
    if coef.shape[1] != DEGREE + 1:
        raise ValueError(f"the compiled pass evaluates degree {DEGREE}; got {coef.shape[1] - 1}")
    w = c1 - c0
    cuts = np.linspace(0, w, threads + 1).astype(np.int64)
    args = (np.float32(scale), np.float32(bias), np.float32(lo), np.float32(hi))
    smooth, floor = np.float32(smooth), np.float32(floor)
    jobs = [_POOL.submit(_band_columns, att, smooth, floor, c0, int(cuts[k]), int(cuts[k + 1]), w, coef, *args, Z, D[k])
            for k in range(threads) if cuts[k + 1] > cuts[k]]
    for job in jobs:
        job.result()


def compile_now() -> None:
    """Compile (or load from Numba's cache) both loops on tiny inputs, so that the first JS
    matrix a user asks for does not wait for the compiler (the app's preload calls this)."""
    att = np.full((2, 8), 0.125, np.float32)
    att[0, 0] = 1.0  # one head far outside the band: the exact terms run too
    coef = np.zeros((1, DEGREE + 1), np.float32)
    band_pass(att, 1.0, 0.0, 0, 8, coef, 1.0, 0.0, 0.5, 2.0, np.empty((2, 8), np.float32),
              [np.zeros((2, 2))], 1)
