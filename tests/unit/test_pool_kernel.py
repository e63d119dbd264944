"""A head pooled onto a grid of blocks by the compiled pass (`capture.pool_kernel.pool_rows`, what a long run's
`pooled_head` folds each block of rows with) against NumPy's block max and mean of the whole matrix, written out
here cell by cell: blocks of uneven widths, rows handed over in blocks that straddle the grid's rows, the key blocks
split among several threads, causal rows read only up to themselves, rows handed over on only the keys they span (a
long run's blocks as computed: a causal block stops at its last row, a window starts late), and a planted cell that
must stay the maximum of its block."""

from __future__ import annotations

import numpy as np
import pytest

from mha_viz.capture import pool_kernel
from mha_viz.views import detail


def _reference(a: np.ndarray, edges: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    size = len(edges) - 1
    top, mean = np.zeros((size, size)), np.zeros((size, size))
    for i in range(size):
        for j in range(size):
            cell = a[edges[i]:edges[i + 1], edges[j]:edges[j + 1]].astype(np.float64)
            top[i, j], mean[i, j] = cell.max(), cell.mean()
    return top, mean


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("n, size, rows_at_once", [(203, 16, 7), (64, 64, 5), (50, 8, 50)])
def test_the_compiled_pool_is_the_block_max_and_mean(monkeypatch, causal, threads, n, size, rows_at_once):
    monkeypatch.setattr(pool_kernel, "thread_count", lambda: threads)
    rng = np.random.default_rng(n)
    a = rng.random((n, n), dtype=np.float32)
    a = np.tril(a) if causal else a  # causal rows: zeros above the diagonal
    a /= a.sum(-1, keepdims=True)
    a[n // 2, n // 5] = 3.0  # planted: the largest cell of the matrix
    edges = detail.block_edges(n, size)
    assert len(set(np.diff(edges))) > 1 or n % size == 0  # uneven widths where n does not divide
    top = np.zeros((len(edges) - 1,) * 2, np.float32)
    total = np.zeros((len(edges) - 1,) * 2, np.float64)
    for first in range(0, n, rows_at_once):  # blocks of rows that straddle the grid's rows
        pool_kernel.pool_rows(a[first:first + rows_at_once], first, edges, top, total, causal=causal)
    want_top, want_mean = _reference(a, edges)
    widths = np.diff(edges)
    np.testing.assert_allclose(top, want_top, rtol=1e-6, atol=0)
    np.testing.assert_allclose(total / (widths[:, None] * widths[None, :]), want_mean, rtol=1e-5, atol=1e-9)
    bi, bj = (np.searchsorted(edges, x, "right") - 1 for x in (n // 2, n // 5))
    assert np.argwhere(top == top.max()).tolist() == [[bi, bj]]


def test_the_grid_keeps_what_was_folded_before():
    """Rows folded in two calls give what one call over all of them gives: each call adds to the sums and keeps the
    larger maximum."""
    rng = np.random.default_rng(1)
    a = rng.random((40, 40), dtype=np.float32)
    edges = detail.block_edges(40, 6)
    grids = []
    for cuts in ([0, 40], [0, 13, 40]):
        top, total = np.zeros((6, 6), np.float32), np.zeros((6, 6), np.float64)
        for s, e in zip(cuts[:-1], cuts[1:]):
            pool_kernel.pool_rows(a[s:e], s, edges, top, total)
        grids.append((top, total))
    np.testing.assert_array_equal(grids[0][0], grids[1][0])
    np.testing.assert_allclose(grids[0][1], grids[1][1], rtol=1e-6)


def test_a_causal_fold_reads_no_key_after_its_row():
    """What lies after a row's own position is left out (a causal head holds zeros there): planted there, it is
    not seen, while the same fold without `causal` sees it."""
    a = np.tril(np.full((12, 12), 0.1, np.float32))
    a[2, 9] = 5.0  # after row 2's own position
    edges = detail.block_edges(12, 3)
    seen = []
    for causal in (True, False):
        top, total = np.zeros((3, 3), np.float32), np.zeros((3, 3), np.float64)
        pool_kernel.pool_rows(a, 0, edges, top, total, causal=causal)
        seen.append(top.max())
    assert seen == [pytest.approx(0.1), 5.0]


@pytest.mark.parametrize("causal", [False, True])
def test_rows_over_only_the_keys_they_span_pool_as_the_whole_rows(causal):
    """Each block of rows handed over on its keys k0 … k1 − 1 only (k1 its last row's key when causal, k0 a window's
    start): the grid is the block max and mean of the whole matrix, which holds 0 outside those keys; a cell planted
    at a block's first spanned key (k0 > 0) stays its block's maximum."""
    n, size, step, window = 90, 7, 11, 25
    rng = np.random.default_rng(3)
    a = rng.random((n, n), dtype=np.float32) * 0.01
    spans = []
    for first in range(0, n, step):
        last = min(first + step, n)
        k0, k1 = max(0, first - window), (last if causal else n)
        a[first:last, :k0] = 0.0  # what a block does not span is 0
        a[first:last, k1:] = 0.0
        spans.append((first, last, k0, k1))
    if causal:
        a = np.tril(a)
    first, last, k0, _k1 = spans[4]
    assert k0 > 0
    a[first + 1, k0] = 2.0  # planted at a block's first spanned key
    edges = detail.block_edges(n, size)
    top, total = np.zeros((size, size), np.float32), np.zeros((size, size), np.float64)
    for first, last, k0, k1 in spans:
        pool_kernel.pool_rows(np.ascontiguousarray(a[first:last, k0:k1]), first, edges, top, total, causal=causal,
                              key_start=k0)
    want_top, want_mean = _reference(a, edges)
    widths = np.diff(edges)
    np.testing.assert_allclose(top, want_top, rtol=1e-6, atol=0)
    np.testing.assert_allclose(total / (widths[:, None] * widths[None, :]), want_mean, rtol=1e-5, atol=1e-9)
    first, _last, k0, _k1 = spans[4]
    bi, bj = (np.searchsorted(edges, x, "right") - 1 for x in (first + 1, k0))
    assert np.argwhere(top == top.max()).tolist() == [[bi, bj]]


def test_rows_outside_the_grid_are_refused():
    """The compiled loop reads and writes without checks: rows past the grid, or keys past it, never reach it."""
    edges = detail.block_edges(10, 3)
    top, total = np.zeros((3, 3), np.float32), np.zeros((3, 3), np.float64)
    for rows, first, k0 in ((np.ones((2, 10), np.float32), 9, 0), (np.ones((2, 11), np.float32), 0, 0),
                            (np.ones((2, 10), np.float32), -1, 0), (np.ones((2, 8), np.float32), 0, 3),
                            (np.ones((2, 8), np.float32), 0, -1)):
        with pytest.raises(ValueError, match="do not fall in a grid"):
            pool_kernel.pool_rows(rows, first, edges, top, total, key_start=k0)
    assert not top.any() and not total.any()
