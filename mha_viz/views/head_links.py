"""One head's links for any run (`links`): each query's kept keys and their weights, by the rule the scan keeps
them (`mha_viz.scan`: a row's `TOP_K` heaviest keys of weight ≥ `MIN_WEIGHT`, heaviest first, the lower key
first on a tie; key −1 and weight 0 where fewer qualify) and the row's attention outside them. A long run's are
its scan's (`run.summary.top`, `rest`); a dense run's are computed from its rows by the same rule, so that the
token strip, the heaviest links and the distance histogram drawn from them are the same
for both kinds (tests/models/test_head_links.py)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

TOP_K = 8  # as `mha_viz.scan`'s top_k and min_weight (a test checks the two agree)
MIN_WEIGHT = 0.005


@dataclass(frozen=True, eq=False)  # arrays: compared by identity
class HeadLinks:
    """One head's kept keys. keys: int32 (n, top_k); weights: float32 (n, top_k); rest: float32 (n,), each
    row's attention outside its kept keys. `layer` is the run's row of the head, `layer_ids[layer]` its number.
    `top` and `rest_of` read as a `Scan`'s do, for this one head."""

    tokens: list[str]
    layer_ids: list[int]
    layer: int
    head: int
    keys: np.ndarray
    weights: np.ndarray
    rest: np.ndarray
    min_weight: float

    @property
    def n(self) -> int:
        return len(self.tokens)

    @property
    def top_k(self) -> int:
        return self.keys.shape[1]

    @property
    def layer_name(self) -> int:
        return self.layer_ids[self.layer]

    def _check(self, layer: int, head: int) -> None:
        if (layer, head) != (self.layer, self.head):
            raise IndexError(f"these are the links of head ({self.layer}, {self.head}), not ({layer}, {head})")

    def top(self, layer: int, head: int) -> tuple[np.ndarray, np.ndarray]:
        """(keys, weights), as `Scan.top` of this head."""
        self._check(layer, head)
        return self.keys, self.weights

    def rest_of(self, layer: int, head: int) -> np.ndarray:
        """(n,), as `Scan.rest` of this head."""
        self._check(layer, head)
        return self.rest


def kept_keys(rows: np.ndarray, top_k: int = TOP_K, min_weight: float = MIN_WEIGHT) -> tuple[np.ndarray, np.ndarray]:
    """(keys int32, weights float32), both (b, top_k): each row of `rows` (b, n) reduced by the scan's rule."""
    rows = np.asarray(rows, dtype=np.float32)
    b, n = rows.shape
    k = min(top_k, n)
    best = np.argpartition(-rows, k - 1, axis=1)[:, :k] if k < n else np.broadcast_to(np.arange(n), (b, n))
    w = np.take_along_axis(rows, best, 1)
    order = np.lexsort((best, -w), axis=-1)  # heaviest first, the lower key first on a tie
    best, w = np.take_along_axis(best, order, 1), np.take_along_axis(w, order, 1)
    kept = w >= np.float32(min_weight)
    keys = np.full((b, top_k), -1, np.int32)
    weights = np.zeros((b, top_k), np.float32)
    keys[:, :k] = np.where(kept, best, -1)
    weights[:, :k] = np.where(kept, w, 0.0)
    return keys, weights


def _scan_of(source):
    """The scan whose kept keys are `source`'s: a `Scan` itself, or a run's summary over the same tokens (a
    long run's, or a long run's with tokens hidden or the lens on: the scan of its own rows)."""
    if hasattr(source, "rest_mass"):
        return source
    summary = getattr(source, "summary", None)
    return summary if hasattr(summary, "rest_mass") and summary.n == source.n else None


def links(source, layer: int, head: int, *, top_k: int = TOP_K, min_weight: float = MIN_WEIGHT) -> HeadLinks:
    """The links of head (`layer` row, `head`) of `source`: a `HeadLinks` (returned as it is), a `Scan`, or
    an `AttentionRun` (a long run's from its scan; a dense run's from its rows, a block at a time, with
    `top_k` and `min_weight`)."""
    if isinstance(source, HeadLinks):
        source.top(layer, head)  # the head asked for is its own
        return source
    scan = _scan_of(source)
    if scan is not None:
        keys, weights = scan.top(layer, head)
        return HeadLinks(list(scan.tokens), list(scan.layer_ids), layer, head, keys, weights, scan.rest(layer, head),
                         float(scan.min_weight))
    n = source.n
    keys = np.empty((n, top_k), np.int32)
    weights = np.empty((n, top_k), np.float32)
    rest = np.empty(n, np.float32)
    for first, block in source.source(layer, [head], 0, n):
        stop = first + block.shape[1]
        keys[first:stop], weights[first:stop] = kept_keys(block[0], top_k, min_weight)
        rest[first:stop] = block[0].sum(-1, dtype=np.float32) - weights[first:stop].sum(-1)
    return HeadLinks(list(source.tokens), list(source.layer_ids), layer, head, keys, weights, rest, float(min_weight))
