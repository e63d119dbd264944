"""What one head's views read from a run, a block of query rows at a time (`AttentionRun.source`): chosen
queries over chosen keys, words merged, each query's strongest key. A dense run's rows are views of its
array and a long run's are recomputed, so that a view of a long text never holds every head whole; each
equals `views.detail` applied to the dense head (tests/models/test_long_head_views.py)."""

from __future__ import annotations

import numpy as np
import torch

from mha_viz.capture.arrays import tensor_view
from mha_viz.views import detail


def _positions(values, n: int, what: str) -> np.ndarray:
    out = np.asarray(list(values), dtype=int)
    if out.size == 0:
        raise ValueError("pick at least one query and one key")
    if out.min() < 0 or out.max() >= n:
        raise IndexError(f"token positions must lie in 0..{n - 1} ({what})")
    return out


def cells(run, layer: int, head: int, rows, cols) -> np.ndarray:
    """float32 (len(rows), len(cols)): the queries `rows` (in the given order) over the keys `cols` of one head
    (`detail.subset` of the dense head), reading only the query rows from the first chosen to the last."""
    rows, cols = _positions(rows, run.n, "queries"), _positions(cols, run.n, "keys")
    order = np.argsort(rows, kind="stable")
    ranked = rows[order]
    out = np.empty((rows.size, cols.size), dtype=np.float32)
    for first, block in run.source(layer, [head], int(ranked[0]), int(ranked[-1]) + 1):
        lo, hi = np.searchsorted(ranked, [first, first + block.shape[1]])
        out[order[lo:hi]] = block[0][ranked[lo:hi] - first][:, cols]
    return out


def window(run, layer: int, head: int, start: int, stop: int) -> np.ndarray:
    """float32 (stop − start, stop − start): tokens start … stop − 1 on both axes of one head."""
    span = range(start, stop)
    return cells(run, layer, head, span, span)


def word_level(run, layer: int, head: int) -> np.ndarray:
    """float32 (W, W): `detail.word_level` of the head (for a query word, the mean over its pieces of the
    summed weight on each key word's pieces), summed a block of query rows at a time."""
    groups = detail.word_groups(run.word_ids)
    sizes = np.array([len(g) for g in groups])
    word_of = torch.from_numpy(np.repeat(np.arange(len(groups)), sizes))  # each token's word
    total = torch.zeros((len(groups), len(groups)), dtype=torch.float32)  # a cell sums a word's few pieces
    for first, block in run.source(layer, [head], 0, run.n):
        rows = tensor_view(np.ascontiguousarray(block[0]))  # (b, n)
        keys_summed = torch.zeros((rows.shape[0], len(groups))).index_add_(1, word_of, rows)  # (b, W), threaded
        total.index_add_(0, word_of[first:first + rows.shape[0]], keys_summed)  # a word split by blocks adds twice
    return (total / torch.from_numpy(sizes[:, None].astype(np.float32))).numpy()


def strongest_keys(run, layer: int, head: int, stop: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(key, weight) of each query row 0 … stop − 1 (default every row): the row's heaviest key (the first
    on a tie, as `argmax` of the dense head) and its weight."""
    stop = run.n if stop is None else min(stop, run.n)
    best = np.empty(stop, dtype=int)
    weight = np.empty(stop, dtype=np.float32)
    for first, block in run.source(layer, [head], 0, stop):
        rows = block[0]
        top = rows.argmax(axis=1)
        best[first:first + rows.shape[0]] = top
        weight[first:first + rows.shape[0]] = rows[np.arange(rows.shape[0]), top]
    return best, weight
