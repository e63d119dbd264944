"""One head's probabilities a block of query rows at a time, whether the run holds every head (a dense
array) or recomputes the rows it is asked for (a long run, `mha_viz.scan.rows.RowSource`): what
`AttentionRun.rows`, `column`, `pooled_head` and `attentions` read, so that a view of a long text draws
one head without the n × n of every head ever being whole.

A `Blocks` reader is `(layer, heads, start, stop) -> iterator of (first row, float32 (h, b, n))`: the rows
start … stop − 1 of `heads` (a list of the layer's heads; None: every head) in order, every key of each
row. One call of a long run's reader projects the layer's input once, however many blocks it yields.
A `Spans` reader is the same with each block as (first row, first key k0, float32 (h, b, m)): only the keys
k0 … k0 + m − 1 its rows may see, the others 0 (a causal block of rows stops at its last row's key), as computed
and not widened (`RowSource.spans`): what the whole-head views read (`pooled_head`, `column`).
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Callable, Iterator

import numpy as np

from mha_viz import settings
from mha_viz.budget import capture_budget
from mha_viz.capture.pool_kernel import pool_rows
from mha_viz.text.tokenize import InputError

Blocks = Callable[[int, list[int] | None, int, int], Iterator[tuple[int, np.ndarray]]]
Spans = Callable[[int, list[int] | None, int, int], Iterator[tuple[int, int, np.ndarray]]]

BLOCK_BYTES = 16 * 2**20  # the rows of one head a dense reader hands over at a time


class DenseRefused(InputError):
    """Every head's probabilities asked for (`AttentionRun.attentions`) where they would not fit the
    capture budget: the message says the size and what to do instead."""


def dense_blocks(attentions: np.ndarray) -> Blocks:
    """A `Blocks` reader over a dense (layers, heads, n, n) array: views, nothing copied."""
    step = max(1, BLOCK_BYTES // (4 * max(1, attentions.shape[-1])))

    def blocks(layer: int, heads: list[int] | None, start: int, stop: int) -> Iterator[tuple[int, np.ndarray]]:
        pick = slice(None) if heads is None else list(heads)
        rows = max(1, step // (attentions.shape[1] if heads is None else max(1, len(heads))))
        for first in range(start, stop, rows):
            yield first, attentions[layer, pick, first:min(first + rows, stop)]
    return blocks


def spans_of(blocks: Blocks) -> Spans:
    """The `Spans` reader of a `Blocks` one: its own `spans` where it has one (a long run's, `scan.rows.Reader`),
    else its blocks, each spanning every key (a dense array's, a derived run's)."""
    own = getattr(blocks, "spans", None)
    if own is not None:
        return own

    def spans(layer: int, heads: list[int] | None, start: int, stop: int) -> Iterator[tuple[int, int, np.ndarray]]:
        for first, rows in blocks(layer, heads, start, stop):
            yield first, 0, rows
    return spans


def every_head_bytes(layers: int, heads: int, n: int) -> int:
    """Bytes of a dense (layers, heads, n, n) float32 array."""
    return 4 * layers * heads * n * n


def held_densely(layers: int, heads: int, n: int) -> bool:
    """Whether an analysis of n tokens over `layers` × `heads` builds every head's array at once
    (within MHA_VIZ_DENSE_MB), or keeps each layer's input and recomputes rows on demand."""
    return every_head_bytes(layers, heads, n) <= settings.from_env().dense_bytes


_forbidden = threading.Event()  # set by `forbid_dense`: for every thread (AppTest runs pages in its own)


@contextmanager
def forbid_dense():
    """Within this block, asking a long run for every head's array raises AssertionError instead of
    building it: a test's guard that a page reads only the rows it draws."""
    _forbidden.set()
    try:
        yield
    finally:
        _forbidden.clear()


def check_dense(layers: int, heads: int, n: int, model_name: str) -> None:
    """Admit building every head's array of a long run by its bytes, or raise DenseRefused naming the
    size and the length that fits; AssertionError under `forbid_dense`."""
    if _forbidden.is_set():
        raise AssertionError(f"every head's array of {model_name} at {n} tokens was asked for "
                             f"({settings.size_text(every_head_bytes(layers, heads, n))}) under forbid_dense")
    need = every_head_bytes(layers, heads, n)
    fits = int((capture_budget.capture_budget() / (4 * layers * heads)) ** 0.5)
    capture_budget.check(
        need, f"Every head of {model_name} at once, at {n} tokens,",
        f"this part reads every head whole, so it takes at most {fits} tokens of this model here: lower the "
        "token limit in the sidebar (or max_tokens). The Model view, Head view, Token focus and Head metrics "
        "read only the rows they draw, at any length.", error=DenseRefused)


def gather(blocks: Blocks, layer: int, heads: list[int] | None, start: int, stop: int, n: int,
           num_heads: int) -> np.ndarray:
    """float32 (h, stop − start, n): the rows start … stop − 1 of `heads` (None: all `num_heads`)."""
    out = np.empty((num_heads if heads is None else len(heads), stop - start, n), dtype=np.float32)
    for first, rows in blocks(layer, heads, start, stop):
        out[:, first - start:first - start + rows.shape[1]] = rows
    return out


def column(spans: Spans, layer: int, head: int, key: int, n: int, *, causal: bool) -> np.ndarray:
    """float32 (n,): the weight every query gives to `key` (0 for the queries a causal model hides it
    from, or a block of rows does not span), streamed a block of rows at a time."""
    out = np.zeros(n, dtype=np.float32)
    for first, k0, rows in spans(layer, [head], key if causal else 0, n):
        if k0 <= key < k0 + rows.shape[-1]:
            out[first:first + rows.shape[1]] = rows[0, :, key - k0]
    return out


def pooled_head(spans: Spans, layer: int, head: int, edges: np.ndarray, *,
                causal: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(block max, block mean) float32 (B, B) of one head on the grid whose query and key blocks are
    edges[a] … edges[a + 1] − 1, streamed a block of rows at a time (`views.detail.pooled` of a
    dense head gives the same). `causal`: each row's zeros after itself are not read."""
    edges = np.asarray(edges)
    n, size = int(edges[-1]), len(edges) - 1
    widths = np.diff(edges)
    top = np.zeros((size, size), dtype=np.float32)
    total = np.zeros((size, size), dtype=np.float64)
    for first, k0, rows in spans(layer, [head], 0, n):  # one compiled pass a block: its cells' max and sum
        pool_rows(rows[0], first, edges, top, total, causal=causal, key_start=k0)
    return top, (total / (widths[:, None] * widths[None, :])).astype(np.float32)
