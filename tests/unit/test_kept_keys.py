"""Each row's kept keys and the thumbnails' cells of the compiled pass (`row_kernels.BlockSums`), against a sort and a
max-pool written here: the `top_k` heaviest keys of weight ≥ `min_weight`, heaviest first and the earlier key first
among equal weights, and every cell the maximum of its keys. The rows are made of a few levels, so that many of their
weights are equal and the keys that tie for the last place kept lie in other cells than the heaviest ones (the pass
reads the cells in the order of their maximum and stops at the first one that cannot enter)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mha_viz.metrics import row_table
from mha_viz.metrics.row_kernels import BlockSums
from mha_viz.metrics.row_measures import TextFacts

H, TOP, FLOOR, THUMB = 2, 3, 0.02, 9


def _rows(n: int, seed: int, window: int | None) -> np.ndarray:
    """(H, n, n) float32 causal rows of levels 0 … 4 over each row's total: exact ties (the same integer over the
    same total is the same float), none after the row nor (`window`) more than `window` − 1 keys before it."""
    rng = np.random.default_rng(seed)
    levels = rng.choice([0, 0, 1, 1, 2, 3, 4], size=(H, n, n)).astype(np.float64)
    seen = np.tril(np.ones((n, n), bool))
    if window is not None:
        seen &= ~np.tril(np.ones((n, n), bool), -window)
    levels[:, ~seen] = 0
    levels[:, np.arange(n), np.arange(n)] += 1  # every row sees itself
    return (levels / levels.sum(-1, keepdims=True)).astype(np.float32)


def _expected_keys(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(keys (H, n, TOP) −1 where fewer, weights 0 there, rest): sorted by weight down, then key up."""
    h, n, _ = rows.shape
    keys, weights = np.full((h, n, TOP), -1, np.int32), np.zeros((h, n, TOP), np.float32)
    for a in range(h):
        for i in range(n):
            row = rows[a, i]
            order = [j for j in np.lexsort((np.arange(n), -row)) if row[j] >= np.float32(FLOOR)][:TOP]
            keys[a, i, :len(order)], weights[a, i, :len(order)] = order, row[order]
    return keys, weights, rows.sum(-1, dtype=np.float64) - weights.sum(-1, dtype=np.float64)


@pytest.mark.parametrize("n, window, step, seed", [(90, None, 7, 0), (90, 20, 11, 1), (61, None, 61, 2),
                                                   (130, 33, 5, 3)])
def test_the_kept_keys_and_cells_are_a_sort_and_a_max_pool(n, window, step, seed):
    rows = _rows(n, seed, window)
    facts = TextFacts.of(["t"] * n, list(range(n)), [False] * n, causal=True)
    assert facts.table is row_table.TABLE
    sums = BlockSums(H, facts, top_k=TOP, min_weight=FLOOR, thumb=THUMB)
    for first in range(0, n, step):
        last = min(n, first + step)
        k0 = 0 if window is None else max(0, first - window + 1)
        sums.add(np.ascontiguousarray(rows[:, first:last, k0:last]), first, k0)
    _, cells = sums.finish()
    keys, weights, rest = _expected_keys(rows)
    np.testing.assert_array_equal(sums.keys, keys)
    np.testing.assert_array_equal(sums.weights, weights)
    np.testing.assert_allclose(sums.rest, rest, atol=2e-6)
    pooled = torch.nn.functional.adaptive_max_pool2d(torch.from_numpy(rows), THUMB).numpy()
    np.testing.assert_array_equal(cells, pooled)


def test_a_tie_for_the_last_place_goes_to_the_earlier_key_in_a_later_cell_read():
    """Planted: keys 5 and 50 weigh 0.3 (cells 0 and 5 of 10 keys), key 12 weighs 0.2 and key 70 0.2 too: with two
    kept, both 0.3s; with three, key 12 before key 70, although cell 7 (key 70) holds nothing heavier than cell 1."""
    n = 90
    row = np.full(n, 0.3 / (n - 4), np.float32)
    row[[5, 50]], row[[12, 70]] = 0.3, 0.2
    rows = np.zeros((1, n, n), np.float32)
    rows[0, n - 1] = row
    facts = TextFacts.of(["t"] * n, list(range(n)), [False] * n, causal=True)
    for top, want in ((2, [5, 50]), (3, [5, 50, 12])):
        sums = BlockSums(1, facts, top_k=top, min_weight=0.1, thumb=THUMB)
        sums.add(rows[:, n - 1:], n - 1, 0)
        assert sums.keys[0, n - 1].tolist() == want
