"""A derived long run's summary (`Scan`: head table, thumbnails, each row's kept keys) and, for hidden tokens,
what hiding cost (each head's sink mass, the rows left empty), from one pass over its rows: every layer's
rows a block at a time, each block reduced by the scan's own compiled reduction (`row_kernels.BlockSums`, what
`mha_viz.scan` runs on the CPU), so that the summary is the scan's of the transformed rows.

The scan's reduction takes the first key for the sink. A run whose first token is hidden has no sink left but
a learned one (`head_stats.first_is_sink`: the dense head table's rule); its sink mass and measures beyond the
sink come from a second reduction of the same blocks read as keys 1 … m of an (m + 1)-token text whose key 0
no row attends to: there, beyond the sink is every real key, each row sees as many as it does, and the real
keys' masks are passed shifted by one. The other measures, the thumbnails and the kept keys come from the
first. Cost: every head's rows read once (a long run's rows recomputed, `cost_prompt.read_seconds`) and
reduced once (twice with the first token hidden).
"""

from __future__ import annotations

from typing import Callable, Iterator

import numpy as np
import pandas as pd

from mha_viz.metrics.compiled import thread_count
from mha_viz.metrics.head_kernels import BEYOND
from mha_viz.metrics.head_stats import key_masks, pattern_columns, segments, token_keys
from mha_viz.metrics.row_kernels import BlockSums, measures_from_sums
from mha_viz.progress import report
from mha_viz.scan.result import Scan

# what the second reduction gives where the first token is hidden: the measures that depend on the sink
FROM_SHIFTED = (*BEYOND, "in_segment")

# one layer's blocks: (first row, float32 (H, b, m) every head, float64 (H, b) lost to hidden keys or None,
# bool (H, b) rows left empty or None)
LayerBlocks = Callable[[int], Iterator[tuple[int, np.ndarray, np.ndarray | None, np.ndarray | None]]]


class _Text:
    """What the reduction reads off the tokens: their masks and ids, as the scan's `TextFacts` has them."""

    def __init__(self, tokens: list[str], token_ids: list[int], special: list[bool]) -> None:
        self.sep, self.punct = key_masks(tokens, special)
        self.ids = np.asarray(token_keys(token_ids, tokens), dtype=np.int64)
        self.before = np.concatenate([[-1], self.ids[:-1]]).astype(np.int64)
        self.seg = segments(special)

    def sums(self, heads: int, *, causal: bool, top_k: int, min_weight: float, thumb: int, out=None,
             shifted: bool = False) -> BlockSums:
        """The scan's reducer of one layer; `shifted`: for keys 1 … m of an (m + 1)-token text."""
        def pad(a, fill):
            return None if a is None else (np.concatenate([[fill], a]) if shifted else a)
        n = len(self.ids) + int(shifted)
        return BlockSums(heads, n, causal=causal, sep=pad(self.sep, 0.0), punct=pad(self.punct, 0.0),
                         ids=pad(self.ids, -2), before=pad(self.before, -1), seg=pad(self.seg, -1), top_k=top_k,
                         min_weight=min_weight, thumb=thumb, threads=thread_count(), out=out)


def summarise(blocks: LayerBlocks, like: Scan, *, tokens: list[str], token_ids: list[int], special: list[bool],
              layers: int, heads: int, first_is_sink: bool, hiding: bool,
              progress: Callable[[float, str], None] | None = None) -> tuple[Scan, np.ndarray, np.ndarray]:
    """(the scan of the rows `blocks(layer)` hands over, sink mass (L, H) float32, empty rows (L, H, m) bool)
    for an m-token text; `like`: the base run's scan (its top_k, min_weight, thumbnail size, layer ids,
    facts). The mass and empty rows are zeros unless `hiding`."""
    m, k = len(tokens), like.top_k
    thumb = like.pooled.shape[-1]  # min(the scan's size, the base's n): the same cells over m ≤ n tokens
    text = _Text(tokens, token_ids, special)
    keys = np.full((layers, heads, m, k), -1, np.int32)
    weights, rest = np.zeros((layers, heads, m, k), np.float32), np.zeros((layers, heads, m), np.float32)
    mass, empty = np.zeros((layers, heads), np.float32), np.zeros((layers, heads, m), bool)
    stats, cells = [], []
    for layer in range(layers):
        make = dict(causal=like.is_causal, top_k=k, min_weight=like.min_weight, thumb=thumb)
        sums = text.sums(heads, out=(keys[layer], weights[layer], rest[layer]), **make)
        shifted = None if first_is_sink else text.sums(heads, shifted=True, **make)
        lost_sum = np.zeros(heads)
        for first, block, lost, gone in blocks(layer):
            block = np.ascontiguousarray(block, dtype=np.float32)
            sums.add(block, first, 0)
            if shifted is not None:  # the same rows as rows first + 1 … over keys 1 … m
                shifted.add(block, first + 1, 1)
            if hiding:
                lost_sum += lost.sum(-1)
                empty[layer, :, first:first + block.shape[1]] = gone
        found, pooled = sums.finish()
        measures = measures_from_sums(found, m)
        if shifted is not None:
            beyond = measures_from_sums(shifted.finish()[0], m)
            measures.update((name, beyond[name]) for name in FROM_SHIFTED)
        stats.append(measures)
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
