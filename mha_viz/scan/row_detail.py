"""One query's exact row over every key at a level of detail (`row_detail`): when a row has more keys than
a chart has pixels, each bar stands for a run of neighbouring keys and shows the heaviest of them (a sharp
link is never averaged away), with the bar's sum beside it, so that the bars' sums are the row's. The row's
heaviest keys are listed exactly (`top_keys`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

BARS = 600  # at most this many bars: about one per pixel of a page's chart


@dataclass(frozen=True)
class RowDetail:
    """Keys start … stop − 1 of one row, in bars of neighbouring keys: bar b holds keys starts[b] …
    stops[b] − 1; peak: the heaviest weight among them, at key peak_key; mass: their sum (float64)."""

    starts: np.ndarray
    stops: np.ndarray
    peak: np.ndarray
    peak_key: np.ndarray
    mass: np.ndarray

    @property
    def keys_per_bar(self) -> int:
        """The most keys one bar stands for (1: every key its own bar)."""
        return int((self.stops - self.starts).max())


def row_detail(row: np.ndarray, start: int = 0, stop: int | None = None, bars: int = BARS) -> RowDetail:
    """Keys `start` … `stop` − 1 (default every key) of `row` (n,) in at most `bars` bars of neighbouring keys,
    as even as whole keys allow."""
    row = np.asarray(row)
    stop = len(row) if stop is None else int(stop)
    if not 0 <= start < stop <= len(row) or bars < 1:
        raise ValueError(f"keys {start} … {stop - 1} in {bars} bars: not within a row of {len(row)} keys")
    edges = np.unique(np.linspace(start, stop, min(bars, stop - start) + 1).round().astype(np.int64))
    starts, stops = edges[:-1], edges[1:]
    part = row[start:stop]
    peak_key = np.array([a + int(np.argmax(row[a:b])) for a, b in zip(starts, stops)], dtype=np.int64)
    mass = np.add.reduceat(part.astype(np.float64), starts - start)
    return RowDetail(starts, stops, row[peak_key].astype(np.float64), peak_key, mass)


def top_keys(row: np.ndarray, count: int = 10) -> tuple[np.ndarray, np.ndarray]:
    """(keys, weights) of the row's `count` heaviest keys, heaviest first (the lower key first on a tie)."""
    order = np.argsort(-np.asarray(row, dtype=np.float64), kind="stable")[:count]
    return order, np.asarray(row)[order]
