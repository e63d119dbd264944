"""The fast JS matrix (mha_viz/metrics/js.py) against a plain float64 reference, within its bound."""

from __future__ import annotations

import math

import numba
import numpy as np
import pytest
import torch

from mha_viz import compiled, metrics
from mha_viz.capture.run import AttentionRun
from mha_viz.metrics import js as fast_js

TOLERANCE = 1e-4  # nats, on every entry (issue 15)


def reference_js(att: np.ndarray) -> np.ndarray:
    """`docs/head-metrics.md`, section 2, written out: smooth, JS of every pair of rows with natural
    logs, mean over rows."""
    L, H, n, _ = att.shape
    heads = att.reshape(L * H, n, n).astype(np.float64) * 0.999 + 0.001 / n
    out = np.zeros((L * H, L * H))
    for i in range(L * H):
        for j in range(L * H):
            p, q = heads[i], heads[j]
            m = 0.5 * (p + q)
            rows = 0.5 * (p * np.log(p / m)).sum(1) + 0.5 * (q * np.log(q / m)).sum(1)
            out[i, j] = rows.mean()
    return out


def run_of(att: np.ndarray, causal: bool = False) -> AttentionRun:
    n = att.shape[-1]
    return AttentionRun(tokens=[f"t{i}" for i in range(n)], attentions=att.astype(np.float32), is_causal=causal)


def normalise(scores: np.ndarray, causal: bool) -> np.ndarray:
    """Softmax over keys (masked above the diagonal when causal): rows sum to 1."""
    n = scores.shape[-1]
    if causal:
        scores = np.where(np.tril(np.ones((n, n), bool)), scores, -np.inf)
    e = np.exp(scores - scores.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def patterns(kind: str, heads: int, n: int, causal: bool, rng) -> np.ndarray:
    """(1, heads, n, n) attention of one flavour."""
    shape = (1, heads, n, n)
    if kind == "near_uniform":  # random-init models: scores with a small spread
        return normalise(0.3 * rng.standard_normal(shape), causal)
    if kind == "peaked":  # trained models: scores spread over many orders of magnitude
        return normalise(6.0 * rng.standard_normal(shape), causal)
    if kind == "one_hot":
        att = np.zeros(shape)
        for h in range(heads):
            for i in range(n):
                att[0, h, i, rng.integers(0, i + 1 if causal else n)] = 1.0
        return att
    if kind == "zeros":  # exact zeros in half the keys of every row
        scores = rng.standard_normal(shape)
        scores[rng.random(shape) < 0.5] = -np.inf
        scores[..., 0] = 0.0  # every row keeps a key
        return normalise(scores, causal)
    if kind == "mixed":  # mostly near-uniform heads, with planted one-hot, copy and zero-mass outliers
        att = normalise(0.3 * rng.standard_normal(shape), causal)
        att[0, 1] = patterns("one_hot", 1, n, causal, rng)[0, 0]
        att[0, 2] = att[0, 0]  # an identical pair: JS 0
        att[0, 3, :, : n // 2] *= 3.0
        att[0, 3] = att[0, 3] / att[0, 3].sum(-1, keepdims=True)
        return att
    raise ValueError(kind)


@pytest.fixture(params=[(-1.0, True), (None, True), (2.0, True), (None, False), (2.0, False)],
                ids=["all_exact", "default", "all_band", "default_tensor", "all_band_tensor"])
def path(request, monkeypatch):
    """Force the exact blocked loop, leave the choice to the code, or force the band path; the
    band path compiled (the CPU's) or as tensor operations (another device's), with column
    chunks small enough that most cases cross several of them."""
    exact_above, compiled = request.param
    if exact_above is not None:
        monkeypatch.setattr(fast_js, "EXACT_ABOVE", exact_above)
    monkeypatch.setattr(fast_js, "COMPILED_ON_CPU", compiled)
    monkeypatch.setattr(fast_js, "FEATURE_BYTES", 4 * fast_js.RANK * 5 * 1500)  # 1,500 columns for 5 heads
    return request.param


CASES = [(kind, heads, n, causal) for kind in ("near_uniform", "peaked", "one_hot", "zeros", "mixed")
         for causal in (False, True) for heads, n in ((5, 2), (5, 17), (4, 64))]
CASES += [("near_uniform", 4, 300, False), ("near_uniform", 3, 600, True), ("mixed", 4, 600, False),
          ("peaked", 3, 600, False)]


@pytest.mark.parametrize("kind,heads,n,causal", CASES)
def test_fast_js_matches_reference(kind, heads, n, causal, path):
    rng = np.random.default_rng(hash((kind, heads, n, causal)) % 2**32)
    att = patterns(kind, heads, n, causal, rng)
    fast = metrics.head_similarity(run_of(att, causal), "js")
    ref = reference_js(att)
    np.fill_diagonal(ref, 0.0)
    assert fast.dtype == np.float64 and fast.shape == ref.shape
    assert np.abs(fast - ref).max() <= TOLERANCE
    assert np.array_equal(fast, fast.T) and (np.diag(fast) == 0).all() and (fast >= 0).all()


def test_band_path_error_is_well_inside_the_bound():
    """Near-uniform heads at n = 600 go through the polynomial: its error is far below 1e-4."""
    rng = np.random.default_rng(3)
    att = patterns("near_uniform", 3, 600, False, rng)
    err = np.abs(metrics.head_similarity(run_of(att), "js") - reference_js(att) * (1 - np.eye(3))).max()
    assert err <= fast_js.ERROR_BOUND + 1e-5


def test_psi_interpolation_error_bound():
    """ε = max |ψ − Ψ| on the band, on a grid 100× finer than the module's plus a Lipschitz margin."""
    lo, hi = 1 / fast_js.RATIO - 1, fast_js.RATIO - 1
    x = np.linspace(lo, hi, 2_000_001)
    t = (2 * x - lo - hi) / (hi - lo)
    err = np.polynomial.polynomial.polyval(t, fast_js.POWER_COEF) - fast_js.psi(x)
    # between grid points |E| grows by at most step/2·max|E'|, and max|E'| ≤ grid max + step·max|E''|
    # with E'' = 1/(1 + x) − Ψ''(x), |1/(1 + x)| ≤ 2 on the band
    poly = np.polynomial.polynomial
    d1, d2 = poly.polyder(fast_js.POWER_COEF), poly.polyder(fast_js.POWER_COEF, 2)
    k = 2 / (hi - lo)  # dt/dx
    e1 = 1 + np.log1p(x) - poly.polyval(t, d1) * k
    e2_max = 2 + np.abs(poly.polyval(t, d2)).max() * k * k
    step = (hi - lo) / 2_000_000
    assert np.abs(err).max() + step / 2 * (np.abs(e1).max() + step * e2_max) <= 1e-5
    assert fast_js.PSI_ERROR <= 1e-5


def test_dropped_eigenforms_bound():
    """δ = sup over the band² of the dropped eigenforms, on a finer grid plus a Lipschitz margin."""
    t = np.linspace(-1, 1, 4001)
    y = np.vander(t, fast_js.DEGREE + 1, increasing=True) @ fast_js.DROPPED_EIGVEC
    dropped = (y * fast_js.DROPPED_LAMBDA) @ y.T
    dy = np.vander(t, fast_js.DEGREE, increasing=True) @ (
        np.arange(1, fast_js.DEGREE + 1)[:, None] * fast_js.DROPPED_EIGVEC[1:])
    slope = 2 * (np.abs(fast_js.DROPPED_LAMBDA) * np.abs(y).max(0) * np.abs(dy).max(0)).sum()
    assert np.abs(dropped).max() + slope * (2 / 4000) <= fast_js.DROP_ERROR * 1.05
    assert 2 * fast_js.PSI_ERROR + fast_js.DROP_ERROR * 1.05 <= 4e-5  # the bound in js.py's docstring


def test_known_values():
    """Identical heads → 0; disjoint one-hot rows → close to ln 2 (smoothing keeps it below)."""
    n = 50
    att = np.zeros((1, 3, n, n))
    att[0, 0, :, 0] = 1.0
    att[0, 1, :, 0] = 1.0
    att[0, 2, :, 1] = 1.0
    js = metrics.head_similarity(run_of(att), "js")
    assert js[0, 1] == pytest.approx(0.0, abs=1e-6)
    assert 0.98 * math.log(2) < js[0, 2] < math.log(2)


@numba.njit
def _logs(x, out):
    for j in range(x.size):
        out[j] = compiled.log32(x[j])


def test_log32_matches_numpy():
    """The compiled loops' series logarithm: within 2e-7 relative of float64 ln on the values the
    patterns take (smoothing floors down to 1e-9, masses up to 1, the 1e-30 clamp of empty
    entries) and at powers of two and around √2, where the series switches."""
    x = np.concatenate([np.geomspace(1e-9, 1.0, 200_001), 2.0 ** np.arange(-30, 1), [1e-30, 3.0, 1e3],
                        np.sqrt(2.0) * np.array([1 - 1e-7, 1, 1 + 1e-7])]).astype(np.float32)
    out = np.empty_like(x)
    _logs(x, out)
    exact = np.log(x.astype(np.float64))
    assert np.all(np.abs(out - exact) <= 2e-7 * np.maximum(np.abs(exact), 1.0))


def test_worst_case_band_input_at_full_chunk_width(monkeypatch):
    """A pattern built to make the polynomial's error largest (a linear program picks the mix of
    in-band (x_i, x_j) pairs that maximises it, rows still summing to 1), for few heads at a long
    input, so that the compiled pass takes its widest column chunks (millions of columns): the
    error stays within the proven bound plus float32 rounding on every path."""
    from scipy.optimize import linprog

    psi = fast_js.psi
    grid = np.linspace(-0.49, 0.99, 60)
    a, b = (v.ravel() for v in np.meshgrid(grid, grid, indexing="ij"))
    t = lambda x: (2 * x - fast_js._LO - fast_js._HI) / (fast_js._HI - fast_js._LO)  # noqa: E731
    coef = fast_js.COEF.astype(np.float64)
    ya, yb = np.polynomial.polynomial.polyval(t(a), coef.T), np.polynomial.polynomial.polyval(t(b), coef.T)
    sign = np.r_[np.ones(fast_js.POSITIVE), -np.ones(len(coef) - fast_js.POSITIVE)]
    err = 0.5 * psi(a) + 0.5 * psi(b) - psi(0.5 * (a + b)) - sign @ (ya * yb)
    rows = np.vstack([np.ones_like(a), a, b])
    weights = max((linprog(sign * err, A_eq=rows, b_eq=[1, 0, 0], bounds=(0, None)).x for sign in (1, -1)),
                  key=lambda w: abs(err @ w))  # the mix whose mean error is largest in size
    assert abs(err @ weights) > 0.5 * fast_js.ERROR_BOUND  # close to the proven bound
    n, heads = 1200, 3
    counts = np.floor(weights * n).astype(int)
    counts[np.argmax(counts)] += n - counts.sum()
    xa, xb = np.repeat(a, counts), np.repeat(b, counts)
    xa, xb = xa - xa.mean(), xb - xb.mean()  # rows sum to 1 exactly
    rng = np.random.default_rng(0)
    att = np.empty((1, heads, n, n))
    for i in range(n):
        perm = rng.permutation(n)
        pa, pb = (1 + xa[perm]) / n, (1 + xb[perm]) / n
        for h, p in enumerate((pa, pb, (heads / n - pa - pb) / (heads - 2))):
            att[0, h, i] = (p - 0.001 / n) / 0.999
    ref = reference_js(att)
    np.fill_diagonal(ref, 0.0)
    assert ref[0, 1] > 0.01  # the two planted heads differ
    run = run_of(att)
    for exact_above, compiled_on_cpu in ((2.0, True), (2.0, False), (-1.0, True)):
        monkeypatch.setattr(fast_js, "EXACT_ABOVE", exact_above)
        monkeypatch.setattr(fast_js, "COMPILED_ON_CPU", compiled_on_cpu)
        got = metrics.head_similarity(run, "js")
        # the proven bound plus float32 rounding (1e-5 allowed; products of millions of columns
        # summed in float32 gave 6.8e-5 here before they were cut to GRAM_COLUMNS)
        assert np.abs(got - ref).max() <= fast_js.ERROR_BOUND + 1e-5, (exact_above, compiled_on_cpu)


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_compiled_and_tensor_paths_agree(threads, monkeypatch):
    """The compiled pass (any thread count, chunks and blocks of columns cut anywhere) gives the
    tensor path's sums: same features, same outside terms, to float32 rounding."""
    rng = np.random.default_rng(threads)
    att = torch.from_numpy(patterns("mixed", 9, 70, False, rng).reshape(9, -1).astype(np.float32))
    monkeypatch.setattr(fast_js, "thread_count", lambda: threads)
    monkeypatch.setattr(fast_js, "FEATURE_BYTES", 4 * fast_js.RANK * 9 * 1000)  # 5 chunks, ragged last
    monkeypatch.setattr(fast_js, "EXACT_ABOVE", 2.0)
    compiled = fast_js.js_matrix(att, 70)
    monkeypatch.setattr(fast_js, "COMPILED_ON_CPU", False)
    tensor = fast_js.js_matrix(att, 70)
    assert float((compiled - tensor).abs().max()) <= 1e-6
    assert float(compiled.max()) > 0.01  # the planted heads differ
