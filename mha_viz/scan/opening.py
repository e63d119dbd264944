"""Where a view of a scan opens (`mha_viz.scan`): on a query that keeps keys, chosen from the
scan's own data, so that the first thing a page shows is never "keeps 0 keys" above an empty table.

A long text spreads a broad head's attention thin: at 7,479 tokens no key of SmolLM2's layer 0, head 0
reaches the 0.005 a key needs to be kept, at the last query. The Head view's *Links* opens on the last query
that keeps a key past the first token (the sink every head may park on), else any key."""

from __future__ import annotations

import numpy as np

from mha_viz.scan.result import Scan


def kept_counts(scan: Scan, layer: int, head: int, *, skip_first: bool = False) -> np.ndarray:
    """(n,) int: how many keys each query of this head kept (past the first token with `skip_first`)."""
    keys, _ = scan.top(layer, head)
    return ((keys > 0) if skip_first else (keys >= 0)).sum(-1)


def opening_query(scan: Scan, layer: int, head: int) -> int:
    """The last query of this head that keeps a key past the first token; else the last that keeps any
    key; else the last query."""
    for skip_first in (True, False):
        keeping = np.flatnonzero(kept_counts(scan, layer, head, skip_first=skip_first))
        if keeping.size:
            return int(keeping[-1])
    return scan.n - 1
