"""A derived long run's summary (`Scan`: head table, thumbnails, each row's kept keys) and, for hidden tokens,
what hiding cost (each head's sink mass, the rows left empty), from one pass over its rows: every layer's
rows a block at a time, each block reduced by the scan's own compiled reduction (`row_kernels.BlockSums`, what
`mha_viz.scan` runs on the CPU), so that the summary is the scan's of the transformed rows. A run whose first
token is hidden has no sink left but a learned one (`row_measures.first_is_sink`, the dense head table's rule):
its reduction skips no key for the sink. Cost: every head's rows read once (a long run's rows recomputed,
`budget.seconds.read_seconds`) and reduced once.
"""

from __future__ import annotations

from typing import Callable, Iterator

import numpy as np
import pandas as pd

from mha_viz.compiled import thread_count
from mha_viz.metrics.head_stats import pattern_columns
from mha_viz.metrics.row_kernels import BlockSums
from mha_viz.metrics.row_measures import TextFacts, measures_from_sums
from mha_viz.progress import Progress, report
from mha_viz.scan.result import Scan

# one layer's blocks: (first row, float32 (H, b, m) every head, float64 (H, b) lost to hidden keys or None,
# bool (H, b) rows left empty or None)
LayerBlocks = Callable[[int], Iterator[tuple[int, np.ndarray, np.ndarray | None, np.ndarray | None]]]


def summarise(blocks: LayerBlocks, like: Scan, *, tokens: list[str], token_ids: list[int], special: list[bool],
              layers: int, heads: int, first_is_sink: bool, hiding: bool,
              progress: Progress | None = None) -> tuple[Scan, np.ndarray, np.ndarray]:
    """(the scan of the rows `blocks(layer)` hands over, sink mass (L, H) float32, empty rows (L, H, m) bool)
    for an m-token text; `like`: the base run's scan (its top_k, min_weight, thumbnail size, layer ids,
    facts). The mass and empty rows are zeros unless `hiding`."""
    m, k = len(tokens), like.top_k
    thumb = like.pooled.shape[-1]  # min(the scan's size, the base's n): the same cells over m ≤ n tokens
    facts = TextFacts.of(tokens, token_ids, special, causal=like.is_causal, skip=int(first_is_sink))
    keys = np.full((layers, heads, m, k), -1, np.int32)
    weights, rest = np.zeros((layers, heads, m, k), np.float32), np.zeros((layers, heads, m), np.float32)
    mass, empty = np.zeros((layers, heads), np.float32), np.zeros((layers, heads, m), bool)
    stats, cells = [], []
    for layer in range(layers):
        sums = BlockSums(heads, facts, top_k=k, min_weight=like.min_weight, thumb=thumb, threads=thread_count(),
                         out=(keys[layer], weights[layer], rest[layer]))
        lost_sum = np.zeros(heads)
        for first, block, lost, gone in blocks(layer):
            sums.add(np.ascontiguousarray(block, dtype=np.float32), first, 0)
            if hiding:
                lost_sum += lost.sum(-1)
                empty[layer, :, first:first + block.shape[1]] = gone
        found, pooled = sums.finish()
        stats.append(measures_from_sums(found, m, facts.table))
        cells.append(pooled)
        mass[layer] = lost_sum / m
        report(progress, (layer + 1) / layers, f"Layer {layer + 1} of {layers} done")
    table = pd.DataFrame(pattern_columns({name: np.stack([s[name] for s in stats]) for name in stats[0]},
                                         like.layer_ids, m))
    scan = Scan(tokens=list(tokens), token_ids=list(token_ids), special_mask=list(special),
                model_name=like.model_name, layer_ids=list(like.layer_ids), is_causal=like.is_causal, table=table,
                pooled=np.stack(cells), keys=keys, weights=weights, rest_mass=rest, top_k=k,
                min_weight=like.min_weight, num_input_tokens=like.num_input_tokens,
                num_input_tokens_is_estimate=like.num_input_tokens_is_estimate, precision=like.precision)
    return scan, mass, empty
