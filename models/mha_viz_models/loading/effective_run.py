"""The run of a model made of effective layers alone (`loading.effective_only`: Mamba, Mamba-2, Falcon-Mamba,
RWKV, xLSTM): each layer's effective attention A (`mha_viz_models.effective`) as the weights every page draws, each
row of |A| divided by its sum, captured in one forward with the model's output (`capture`), or, for a long run of a
model whose every layer is read by rows (Mamba-2: `by_rows`), a block of rows at a time (`row_blocks`)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import torch

from mha_viz_models.effective import selective, wkv
from mha_viz_models.effective.kinds import each_layer, mixing_layers, reads_by_rows
from mha_viz_models.effective.layer import EffectiveLayer, NotExact, row_step
from mha_viz_models.errors import ModelLoadError
from mha_viz_models.reading.records import Capture


def row_weights(first: int, block: np.ndarray) -> np.ndarray:
    """(groups, b, w) float32: rows first … first + b − 1 of |A| (a block of `EffectiveLayer.blocks`, over the keys
    0 … w − 1), each divided by its sum (float64); a row of zeros is put on its own token."""
    a = np.abs(block, dtype=np.float32)
    total = a.sum(-1, dtype=np.float64, keepdims=True)
    empty = total[..., 0] == 0
    if empty.any():
        groups, rows = np.nonzero(empty)
        a[groups, rows, first + rows] = 1.0
        total[empty] = 1.0
    a /= total
    return a


def weights(layer: EffectiveLayer) -> np.ndarray:
    """(groups, n, n) float32: each row of |A| (the aggregated blocks where the layer's matrix is per channel)
    divided by its sum (`row_weights`)."""
    return np.concatenate([row_weights(first, block) for first, block in layer.blocks()], axis=1)


def by_rows(loaded) -> bool:
    """Whether every layer of `loaded` gives its matrix's rows a block at a time (Mamba-2's SSD), so that a long run
    holds one block of rows, not a layer's n × n matrices."""
    found = mixing_layers(loaded.hf_model)
    return bool(found) and all(kind is not None and reads_by_rows(kind) for *_rest, kind in found)


def row_blocks(loaded, token_ids, *, only: int | None = None
               ) -> Iterator[tuple[int, Iterator[tuple[int, np.ndarray]]]]:
    """Every layer's weights (or layer `only`'s) as (layer, its blocks (first row, (groups, b, first + b) float32:
    each row of |A| over the keys it sees, divided by its sum)), from one forward of `token_ids` (run at the call,
    under the model's lock): each layer's blocks made as the caller reaches them, by rows where its kind can
    (`by_rows`). ModelLoadError for a layer not read exactly."""
    ids = torch.as_tensor([list(token_ids)], device=loaded.device)
    with loaded.lock:
        try:
            layers = each_layer(loaded.hf_model, ids, None if only is None else [only], by_rows=True,
                                channel_means=True)
        except NotExact as exc:
            raise ModelLoadError(str(exc)) from exc
    return ((layer.layer, ((first, row_weights(first, block[..., :first + block.shape[1]]))
                           for first, block in layer.blocks())) for layer in layers)


def capture(loaded, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> Capture:
    """One forward of `loaded` (a model of effective layers alone) on one sequence: every layer's `weights` as
    (1, groups, n, n) tensors, the output (its logits) and the last hidden state; no head outputs."""
    if input_ids.shape[0] != 1:
        raise ValueError("a model read as effective attention is captured one sequence at a time")
    outputs: list = []
    with loaded.lock:
        try:
            layers = [torch.from_numpy(weights(layer))[None]
                      for layer in each_layer(loaded.hf_model, input_ids, outputs=outputs, channel_means=True)]
        except NotExact as exc:
            raise ModelLoadError(str(exc)) from exc
    out = outputs[0]
    return Capture(out.hidden_states[-1], tuple(layers), None, out, attention_mask=attention_mask)


def layer_bytes(loaded, n: int) -> int:
    """What making one layer's effective attention holds on n tokens beside the run (`capture` makes one layer at a
    time and keeps its weights alone): its matrices (a Mamba or RWKV layer's: one block of its channels at a time, d_k
    of them, and the blocks' means; a Mamba-2 layer's: one a head) in float32 twice (made, then handed out), and as
    much again in its chunks' float64 work."""
    per_channel = selective.NAME in loaded.effective or wkv.NAME in loaded.effective
    groups = loaded.d_k + loaded.num_heads if per_channel else loaded.num_heads  # a block's channels, the means
    return 16 * groups * n * n


def block_bytes(loaded, n: int) -> int:
    """What one block of a layer read by rows holds (`row_blocks`): its rows of every group over n keys in float32,
    as made and as divided by their sums."""
    return 8 * loaded.num_heads * row_step(loaded.num_heads, n) * n


def taps_bytes(loaded, n: int) -> int:
    """What the forward's hooks keep of every layer on n tokens until its rows are made (`row_blocks`): each kind's
    `kept_floats` a token (float32), where it says; else its values' width."""
    return 4 * n * sum(getattr(kind, "kept_floats", lambda _m: loaded.num_heads * loaded.d_k)(module)
                       for *_rest, module, kind in mixing_layers(loaded.hf_model) if kind is not None)
