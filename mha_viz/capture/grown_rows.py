"""The rows of a long generation (`generation.generate` when every head's array over the final sequence
would pass MHA_VIZ_DENSE_MB): each row the KV cache computed, from the last prompt token's on (the one
that chose the first new token), kept as recorded, ragged (row q holds its q + 1 keys: T + 1 rows a
head, never n × n); the rows before them from a long run (`mha_viz.scan.long_run`) of the tokens they
need, asked for once, on first need (`Earlier`). `GrownRows` reads both as one `head_rows.Blocks`, so
`AttentionRun.rows`, `layer_rows`, `column` and `pooled_head` work over prompt + generation alike.
"""

from __future__ import annotations

import threading
from typing import Callable, Iterator

import numpy as np

from mha_viz.capture import head_rows


def recorded_bytes(layers: int, heads: int, num_prompt: int, new: int) -> int:
    """Bytes of the rows a long generation keeps: rows num_prompt − 1 … num_prompt − 1 + new of every
    head, row q of q + 1 float32 keys."""
    return 4 * layers * heads * (new + 1) * (2 * num_prompt + new) // 2


class Recorded:
    """Every head's row of each position from `first` on, float32 (layers, heads, q + 1), as recorded."""

    def __init__(self, first: int) -> None:
        self.first, self.rows = first, []

    def add(self, row: np.ndarray) -> None:
        if row.shape[-1] != self.first + len(self.rows) + 1:
            raise ValueError(f"row of {row.shape[-1]} keys at position {self.first + len(self.rows)}")
        self.rows.append(row)

    def row(self, q: int) -> np.ndarray:
        """float32 (layers, heads, q + 1): query position q's rows."""
        return self.rows[q - self.first]


class Earlier:
    """The Blocks of the rows before a generation's recorded ones, made by `make` when first asked for
    (a long run's scan), once, whichever snapshot asks."""

    def __init__(self, make: Callable[[], head_rows.Blocks]) -> None:
        self.make, self.blocks, self.lock = make, None, threading.Lock()

    def __call__(self) -> head_rows.Blocks:
        with self.lock:
            if self.blocks is None:
                self.blocks = self.make()
            return self.blocks


class GrownRows:
    """A `head_rows.Blocks` reader over the first n tokens of a long generation: rows before
    `recorded.first` from `earlier()` (rows of fewer keys are widened with zeros: causal), the
    others from `recorded`."""

    def __init__(self, recorded: Recorded, n: int, earlier: Callable[[], head_rows.Blocks]) -> None:
        self.recorded, self.n, self.earlier = recorded, n, earlier

    def __call__(self, layer: int, heads: list[int] | None, start: int,
                 stop: int) -> Iterator[tuple[int, np.ndarray]]:
        first, n = self.recorded.first, self.n
        pick = slice(None) if heads is None else list(heads)
        if start < first:
            for q, rows in self.earlier()(layer, heads, start, min(stop, first)):
                if rows.shape[-1] < n:
                    rows = np.concatenate([rows, np.zeros((*rows.shape[:-1], n - rows.shape[-1]), np.float32)], -1)
                yield q, rows
        start = max(start, first)
        if start >= stop:
            return
        h = self.recorded.row(start)[layer, pick].shape[0]
        step = max(1, head_rows.BLOCK_BYTES // (4 * n * h))
        for q0 in range(start, stop, step):
            q1 = min(q0 + step, stop)
            out = np.zeros((h, q1 - q0, n), np.float32)
            for q in range(q0, q1):
                out[:, q - q0, :q + 1] = self.recorded.row(q)[layer, pick]
            yield q0, out
