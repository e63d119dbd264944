"""Every head of a run a block of query rows at a time, for the measures that sum over rows (JS and cosine
between heads, rollout's head mean, two runs compared): the rows of several readers (`AttentionRun.source`:
every layer of one run, or one layer of two runs) handed over side by side on the same query rows, so that
no head's n × n is ever whole, whether the run holds every head (views of its array) or recomputes them (a
long run: each layer's input projected once, however many blocks follow).
"""

from __future__ import annotations

from typing import Iterator

import numpy as np
import torch

from mha_viz.capture.arrays import tensor_view

# float32 rows of every head read side by side per block: large enough that each block's pairwise pass (JS's
# compiled loops start their threads per call) costs little beside its work; measured on SmolLM2 at 512 tokens
BLOCK_BYTES = 128 * 2**20


def block_rows(heads: int, n: int, block_bytes: int | None = None) -> int:
    """Query rows per block so that `heads` heads' rows over n keys take about `block_bytes` (BLOCK_BYTES)."""
    return max(1, min(n, (block_bytes or BLOCK_BYTES) // (4 * max(1, heads) * max(1, n))))


def aligned(readers: list[Iterator[tuple[int, np.ndarray]]], start: int, stop: int,
            rows: int) -> Iterator[tuple[int, list[np.ndarray]]]:
    """(first row, [float32 (h_k, b, n) of each reader]) for the rows start … stop − 1 in blocks of at most
    `rows`, each reader's blocks (`head_rows.Blocks` iterators over those rows, of any size) cut and joined
    to the same query rows."""
    pending: list[list[np.ndarray]] = [[] for _ in readers]
    have = [0] * len(readers)
    first = start
    while first < stop:
        want = min(rows, stop - first)
        out = []
        for k, reader in enumerate(readers):
            while have[k] < want:
                _, got = next(reader)
                pending[k].append(got)
                have[k] += got.shape[1]
            joined = pending[k][0] if len(pending[k]) == 1 else np.concatenate(pending[k], axis=1)
            out.append(joined[:, :want])
            rest = joined[:, want:]
            pending[k] = [rest] if rest.shape[1] else []
            have[k] -= want
        yield first, out
        first += want


def every_layer(run, rows: int | None = None) -> Iterator[tuple[int, list[np.ndarray]]]:
    """(first row, [float32 (heads, b, n) of each layer]): every head of every layer on the same query rows, a
    block at a time (`block_rows` of them all by default, the rows split evenly between the blocks). A long run
    projects each layer's input once for the whole pass (every layer's reader stays open)."""
    n = run.n
    rows = block_rows(run.num_layers * run.num_heads, n) if rows is None else rows
    rows = -(-n // -(-n // rows))  # as many blocks, of even sizes: each block's pass has a cost of its own
    readers = [run.source(layer, None, 0, n) for layer in range(run.num_layers)]
    yield from aligned(readers, 0, n, rows)


def head_mean(run, layer: int, dtype: torch.dtype = torch.float64) -> np.ndarray:
    """(n, n) in `dtype`: the mean over heads of one layer's probabilities, a block of rows at a time (heads
    summed in float32, within ~1e-8 of a float64 sum). Each block over only the keys its rows may see
    (`AttentionRun.spans`): a causal long run's block is not widened to every key first (SmolLM2 at 4,096
    tokens: 0.30 s → 0.20 s a layer, the same values)."""
    n = run.n
    out = torch.zeros((n, n), dtype=dtype)
    for first, k0, part in run.spans(layer, None, 0, n):
        out[first:first + part.shape[1], k0:k0 + part.shape[2]] = tensor_view(part).sum(0)
    return out.div_(run.num_heads).numpy()


def kept_source(run, kept: np.ndarray, empty_below: float):
    """A `head_rows.Blocks` reader of `run` without its tokens other than `kept` (sorted positions), on both
    axes, each kept row divided by what it keeps over the kept keys (rows keeping less than `empty_below`
    left 0), as `sinks.drop_tokens` makes them, a block of the run's rows at a time."""
    kept = np.asarray(kept)

    def blocks(layer: int, heads: list[int] | None, start: int, stop: int) -> Iterator[tuple[int, np.ndarray]]:
        first_old = int(kept[start])
        for first, rows in run.source(layer, heads, first_old, int(kept[stop - 1]) + 1):
            pick = np.flatnonzero(np.isin(np.arange(first, first + rows.shape[1]), kept[start:stop]))
            if not len(pick):
                continue
            block = rows[:, pick][:, :, kept]  # (h, b', m)
            total = block.sum(-1, dtype=np.float64)
            gone = total < empty_below
            scale = np.where(gone, 0.0, 1.0 / np.where(gone, 1.0, total)).astype(np.float32)
            yield int(np.searchsorted(kept, first + pick[0])), block * scale[..., None]
    return blocks
