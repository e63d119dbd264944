"""JS divergence of every pair of smoothed attention patterns, fast and with a proven error bound.

For heads i, j and one entry e of the patterns (smoothed: p = (1 − s)·A + s/n, s = JS_SMOOTHING), the entry's
share of n·JS is g(p, q) = ½ p ln p + ½ q ln q − m ln m with m = (p + q)/2; JS_ij is the sum of g
over the n² entries divided by n (the mean over rows). Let c_e be the mean over heads of p at
entry e and x = p/c_e − 1. Then g = c_e·G(x_i, x_j) with

    G(a, b) = ½ψ(a) + ½ψ(b) − ψ((a + b)/2),    ψ(x) = (1 + x) ln(1 + x)

(the ln c_e parts are affine in x and cancel). Where both heads are in the band
p/c_e ∈ [1/2, 2], ψ is replaced by Ψ, its Chebyshev interpolant of degree 10 on [−½, 1]. Then
G is a symmetric bilinear form Σ_ab Γ_ab t_i^a t_j^b in powers of the mapped t ∈ [−1, 1];
keeping the 4 of Γ's 11 eigenvalues largest in size, Γ ≈ Σ_k λ_k v_k v_kᵀ, the whole in-band
sum is Σ_k λ_k Y_k Y_kᵀ with Y_k = √c·mask·(v_k·t^·): float32 matrix products, about 4 products
of the (N, N) Gram size over the n² entries (only the blocks on and above the diagonal).
Entries where a head is outside the band are computed exactly (one logarithm per pair and
entry) against every head; if too many are outside (trained, peaked heads spread over orders of
magnitude), the whole matrix is computed exactly, blocked.

On the CPU the features and the exact terms come from one compiled pass over the patterns
(js_kernels.py); on another device (a model's GPU) the same sums are tensor operations
(`_band_tensor`). The tests compare both with a float64 reference.

Error bound (proof). Let ε = max |ψ − Ψ| on [−½, 1] (ε ≈ 1.9e-7, `PSI_ERROR`, checked on a fine
grid with a derivative bound in tests/unit/test_js_fast.py). For an in-band pair at entry e the
replaced term is c_e·(½E(x_i) + ½E(x_j) − E(y)) with E = ψ − Ψ and y = (x_i + x_j)/2 also in
[−½, 1], so it is at most 2ε·c_e in absolute value; the dropped eigenvalues add at most
δ·c_e, δ = sup over t_i, t_j in [−1, 1] of |Σ_dropped λ_k Y_k(t_i) Y_k(t_j)| / c_e
(`DROP_ERROR` ≈ 3.5e-5, checked on a finer grid with a Lipschitz margin in the tests). Summed
over one row's entries this is at most (2ε + δ)·Σ_row c_e = 2ε + δ, because c_e is the mean
over heads and every smoothed row sums to 1. The mean over rows therefore moves by at most
`ERROR_BOUND` = 2ε + δ ≈ 3.6e-5 < 4e-5 nats on every entry of the matrix.
Float32 rounding is not part of the proof (products summed by BLAS in float32, over at most
`GRAM_COLUMNS` columns each; the exact terms use a series logarithm good to about 1e-7
relative): measured, it adds about 2e-6, on natural inputs at n = 512 and on a worst-case input
built for the polynomial at n = 2,048. The tests check the total against a float64 reference:
within 1e-4 everywhere, and within ERROR_BOUND + 1e-5 on that worst case.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from mha_viz.compiled import thread_count
from mha_viz.metrics.gram import GRAM_COLUMNS, gram_upper, symmetric
from mha_viz.metrics.js_kernels import KERNEL_DEGREE, band_pass, exact_pass
from mha_viz.metrics.measures import JS_SMOOTHING

COMPILED_ON_CPU = True  # the compiled pass on the CPU; the tensor path does the same on any device (tests compare both)

RATIO = 2.0  # band: p / c_e in [1 / RATIO, RATIO]
DEGREE = 10
if KERNEL_DEGREE != DEGREE:  # the compiled pass writes its Horner steps out
    raise ImportError(f"js_kernels evaluates degree {KERNEL_DEGREE}, js.py needs {DEGREE}")
_LO, _HI = 1.0 / RATIO - 1.0, RATIO - 1.0
# beyond this share of (head, entry) elements outside the band, the exact pass is cheaper. Measured
# on the CPU (compiled, 144 heads, n = 512): the band path takes 0.24 s + 3.0 s × the share, the
# exact pass 0.65 s at any share; they cross at 0.135.
EXACT_ABOVE = 0.13


def psi(x):
    """ψ(x) = (1 + x) ln(1 + x), the function that JS needs up to affine terms."""
    return (1.0 + x) * np.log1p(x)


def _chebyshev():
    """Ψ as power-series coefficients in t = (2x − lo − hi)/(hi − lo) ∈ [−1, 1]."""
    cheb = np.polynomial.chebyshev.Chebyshev.interpolate(psi, DEGREE, domain=[_LO, _HI])
    return np.polynomial.chebyshev.cheb2poly(cheb.coef)


POWER_COEF = _chebyshev()  # Ψ(x(t)) = Σ_k POWER_COEF[k] t^k
_grid = np.linspace(_LO, _HI, 200001)
PSI_ERROR = float(np.abs(np.polynomial.polynomial.polyval(
    (2 * _grid - _LO - _HI) / (_HI - _LO), POWER_COEF) - psi(_grid)).max())


def _gamma() -> np.ndarray:
    """Γ with G(a, b) = Σ_ab Γ_ab t_a^a t_b^b for G = ½Ψ(t_a) + ½Ψ(t_b) − Ψ((t_a + t_b)/2)."""
    K, b = DEGREE, POWER_COEF
    g = np.zeros((K + 1, K + 1))
    for a in range(K + 1):
        for c in range(K + 1 - a):
            g[a, c] -= b[a + c] * 0.5 ** (a + c) * math.comb(a + c, a)
    g[:, 0] += 0.5 * b
    g[0, :] += 0.5 * b
    return g


def _eigenforms(rank: int):
    """Γ ≈ Σ_k λ_k v_k v_kᵀ over the `rank` eigenvalues largest in size, and the bound δ on
    |Σ_dropped λ_k (v_k·t_a^·)(v_k·t_b^·)| over t_a, t_b in [−1, 1] (on a grid; the test checks
    it on a finer one)."""
    lam, vec = np.linalg.eigh(_gamma())
    keep = np.sort(np.argsort(-np.abs(lam))[:rank])
    drop = np.setdiff1d(np.arange(lam.size), keep)
    y = np.vander(np.linspace(-1, 1, 801), DEGREE + 1, increasing=True) @ vec[:, drop]
    delta = float(np.abs((y * lam[drop]) @ y.T).max())
    return lam[keep], vec[:, keep], lam[drop], vec[:, drop], delta


RANK = 4
LAMBDA, EIGVEC, DROPPED_LAMBDA, DROPPED_EIGVEC, DROP_ERROR = _eigenforms(RANK)
ERROR_BOUND = 2 * PSI_ERROR + DROP_ERROR  # proven bound of the approximation, nats per entry
_MIX = EIGVEC * np.sqrt(np.abs(LAMBDA))  # (K+1, rank): columns √|λ_k| v_k
_MIX_POS = torch.from_numpy(_MIX[:, LAMBDA > 0].copy()).float()  # Γ ≈ M₊M₊ᵀ − M₋M₋ᵀ
_MIX_NEG = torch.from_numpy(_MIX[:, LAMBDA < 0].copy()).float()
POSITIVE = int((LAMBDA > 0).sum())
# the compiled CPU pass: y_k = Σ_a COEF[k, a] t^a, the positive eigenforms first
COEF = np.ascontiguousarray(np.concatenate([_MIX[:, LAMBDA > 0], _MIX[:, LAMBDA < 0]], 1).T, dtype=np.float32)
_SCALE = 2.0 / (_HI - _LO)  # t = ratio·_SCALE + _BIAS maps the band onto [−1, 1]
_BIAS = -_SCALE - (_LO + _HI) / (_HI - _LO)
# GRAM_COLUMNS (metrics/gram.py): BLAS sums each Gram entry over at most that many columns in float32; the
# rounding grows with their number (few heads at long inputs make chunks of millions of columns: 1.1e-4 nats on a
# worst-case input at n = 2,048 for 3 heads; 3.0e-5 with the cut)
FEATURE_BYTES = 64 << 20  # per column chunk of features: few chunks, because Torch's threads spin
# for a while after each matrix product and slow the compiled pass that follows (measured at
# n = 512, 144 heads: 4,096 columns a chunk 0.33 s, 28,000 columns 0.27 s)


def js_matrix(att: torch.Tensor, n: int) -> torch.Tensor:
    """(N, N) float64 mean-over-rows JS of the smoothed patterns p = (1 − JS_SMOOTHING)·att + JS_SMOOTHING/n
    of att (N, M) float32, whose columns are the entries where heads may differ (entries that
    are 0 in every head add 0); each row of n entries of att sums to 1."""
    return js_finish(js_sum(att, n), n)


def js_sum(att: torch.Tensor, n: int) -> torch.Tensor:
    """(N, N) float64 symmetric: Σ g(p_ie, p_je) over the columns e of att (N, M) float32, the patterns
    smoothed as in `js_matrix` for rows of n entries; the diagonal is not meaningful. The sum is over
    entries, so the columns can come a block of query rows at a time (`metrics.row_blocks`): the sums of
    the blocks, then `js_finish`, are `js_matrix` of them all (each block chooses its own way, within
    ERROR_BOUND of the exact sum either way)."""
    N, M = att.shape
    smooth, floor = 1.0 - JS_SMOOTHING, JS_SMOOTHING / n
    sample = att[:, ::max(1, M // 4096)] * smooth + floor  # decide on a sample of entries which way is cheaper
    ratio = sample / sample.mean(0)
    if ((ratio < 1.0 / RATIO) | (ratio > RATIO)).float().mean().item() > EXACT_ABOVE:
        return _exact_sum(att, n)
    if att.device.type == "cpu" and COMPILED_ON_CPU:
        total = _band_compiled(att, smooth, floor)
    else:
        total = _band_tensor(att * smooth + floor)
    return 0.5 * (total + total.T)


def js_finish(total: torch.Tensor, n: int) -> torch.Tensor:
    """The JS matrix from the sums `js_sum` (added over every block of entries): mean over the n rows,
    0 on the diagonal, never below 0."""
    total = total.clone()
    total.fill_diagonal_(0.0)
    return (total / n).clamp_min(0)


def _band_compiled(att: torch.Tensor, smooth: float, floor: float) -> torch.Tensor:
    """`_band_tensor` on the CPU in one compiled pass per column chunk (js_kernels):
    the features go straight into the Gram's operands, the outside terms into one (N, N)
    accumulator per thread. Only the Gram blocks on and above the diagonal are multiplied."""
    N, M = att.shape
    data = att.contiguous().numpy()
    threads = thread_count()
    rank = COEF.shape[0]
    width = min(M, max(1024, FEATURE_BYTES // (4 * rank * N)))
    features = np.empty((N, rank * width), np.float32)
    outside = [np.zeros((N, N)) for _ in range(threads)]
    upper = torch.zeros(N, N, dtype=torch.float64)
    for c0 in range(0, M, width):
        c1 = min(M, c0 + width)
        w = c1 - c0
        band_pass(data, smooth, floor, c0, c1, COEF, _SCALE, _BIAS, 1.0 / RATIO, RATIO, features, outside, threads)
        z = torch.from_numpy(features)[:, :rank * w]  # row k·w + e: eigenform k at entry e
        for g0 in range(0, rank * w, GRAM_COLUMNS):  # float32 sums of at most GRAM_COLUMNS terms
            g1 = min(rank * w, g0 + GRAM_COLUMNS)
            if g0 < POSITIVE * w:
                gram_upper(z[:, g0:min(g1, POSITIVE * w)], upper)
            if g1 > POSITIVE * w:
                gram_upper(z[:, max(g0, POSITIVE * w):g1], upper, alpha=-1.0)
    d = torch.from_numpy(np.sum(outside, axis=0))
    return symmetric(upper) + d + d.T


def _band_tensor(p: torch.Tensor) -> torch.Tensor:
    """The band path as tensor operations (a GPU's way), in column chunks: Σ_e c_e·G(x_i, x_j)
    over the entries where both heads are in the band, by Γ's largest eigenforms, plus the exact
    terms of the entries where a head is outside it (`_outside`, chunk by chunk: nothing of the
    size of the whole input is held)."""
    N, M = p.shape
    K1 = DEGREE + 1
    out = torch.zeros(N, N, dtype=torch.float64, device=p.device)
    width = 2048  # (N, rank·width) float32 features: measured
    for c0 in range(0, M, width):
        c1 = min(M, c0 + width)
        w = c1 - c0
        chunk = p[:, c0:c1]
        c = chunk.mean(0)  # (w,) the entry's mean over heads
        ratio = chunk / c
        inside = (ratio >= 1.0 / RATIO) & (ratio <= RATIO)
        out += _outside(chunk, ~inside)
        t = ratio.mul_(_SCALE).add_(_BIAS)  # in [−1, 1] in the band
        powers = torch.empty(K1, N, w, device=p.device)  # √c_e·[in band]·t^a: the mask and scale ride along
        torch.mul(c.sqrt(), inside, out=powers[0])
        for a in range(1, K1):
            torch.mul(powers[a - 1], t, out=powers[a])
        flat = powers.reshape(K1, N * w).T  # (N·w, K+1)
        for mix, sign in ((_MIX_POS.to(p.device), 1.0), (_MIX_NEG.to(p.device), -1.0)):
            z = (flat @ mix).reshape(N, -1)  # (N, w·r) eigen-features, in any order of (w, r)
            out.add_((z @ z.T).double(), alpha=sign)
    return out


def _outside(p: torch.Tensor, outside: torch.Tensor) -> torch.Tensor:
    """D + Dᵀ with D_ij = Σ_{e: i outside} (1 − ½[j outside])·g(p_ie, p_je), i.e. g summed
    exactly over every entry where at least one of the two heads is outside the band."""
    N, _ = p.shape
    d = torch.zeros(N, N, dtype=torch.float64, device=p.device)
    heads, entries = outside.nonzero(as_tuple=True)  # sorted by head
    piece = 8192  # (N, piece) temporaries
    for k0 in range(0, heads.numel(), piece):
        h, e = heads[k0:k0 + piece], entries[k0:k0 + piece]
        q, pi = p[:, e], p[h, e]  # every head at those entries; the outside head's own value
        m = (q + pi) * 0.5
        g = q * q.log()
        g.add_(pi * pi.log()).mul_(0.5).sub_(m * m.log())
        g.mul_(1.0 - 0.5 * outside[:, e].float())
        d.index_add_(1, h, g.double())  # column i of d gathers the elements of head i
    return d + d.T


def _exact_sum(att: torch.Tensor, n: int) -> torch.Tensor:
    """`js_sum` exactly: Σ g = ½(Σ p ln p + Σ q ln q) − ½ Σ s ln s + ln 2·Σ m with s = p + q,
    one log per pair and entry (N²M/2 logarithms), for p = (1 − JS_SMOOTHING)·att + JS_SMOOTHING/n: on
    the CPU by the compiled pass, elsewhere in tensor column blocks that stay in cache. (Entries left out,
    equal in every head, add exactly 0.)"""
    smooth, eps = 1.0 - JS_SMOOTHING, JS_SMOOTHING / n
    if att.device.type == "cpu" and COMPILED_ON_CPU:
        sls, plogp, mass = (torch.from_numpy(x)
                            for x in exact_pass(att.contiguous().numpy(), smooth, eps, thread_count()))
    else:
        sls, plogp, mass = _exact_sums(att * smooth + eps)
    m_mass = 0.5 * (mass[:, None] + mass[None, :])
    js = 0.5 * (plogp[:, None] + plogp[None, :]) - (0.5 * sls - math.log(2) * m_mass)
    js = torch.triu(js, 1)
    return js + js.T


def _exact_sums(p: torch.Tensor):
    """(Σ s ln s for every pair i < j, Σ p ln p, Σ p) as tensors, blocked."""
    N, M = p.shape
    plogp = (p * p.log()).sum(-1, dtype=torch.float64)  # (N,)
    mass = p.sum(-1, dtype=torch.float64)
    sls = torch.zeros(N, N, dtype=torch.float64, device=p.device)  # Σ s ln s for every pair i < j
    block = 8192  # measured: larger blocks lose cache, smaller ones lose to per-call overhead
    buf, logs = torch.empty(N, block, device=p.device), torch.empty(N, block, device=p.device)
    for c0 in range(0, M, block):
        chunk = p[:, c0:c0 + block].contiguous()
        w = chunk.shape[1]
        for i in range(N - 1):
            s = torch.add(chunk[i + 1:], chunk[i], out=buf[:N - i - 1, :w])
            ls = torch.log(s, out=logs[:N - i - 1, :w])
            sls[i, i + 1:] += torch.linalg.vecdot(s, ls).double()
    return sls, plogp, mass
