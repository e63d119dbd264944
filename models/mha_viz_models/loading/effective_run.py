"""The run of a model made of effective layers alone (`loading.effective_only`: Mamba, Mamba-2, Falcon-Mamba,
RWKV, xLSTM): each layer's effective attention A (`mha_viz_models.effective`) as the weights every page draws, each
row of |A| divided by its sum, captured in one forward with the model's output (`capture`), or, for a long run of a
model whose every layer is read by rows (Mamba-2, xLSTM: `by_rows`), a block of rows at a time (`row_blocks`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial

import numpy as np
import torch

from mha_viz_models.effective import selective, wkv
from mha_viz_models.effective.kinds import each_layer, mixing_layers
from mha_viz_models.effective.layer import EffectiveLayer, NotExact, row_step
from mha_viz_models.errors import ModelLoadError
from mha_viz_models.reading.records import Capture


def row_weights(first: int, block: np.ndarray, *, in_place: bool = False) -> np.ndarray:
    """(groups, b, w) float32: rows first … first + b − 1 of |A| (a block of `EffectiveLayer.blocks`, over the keys
    0 … w − 1), each divided by its sum (float64); a row of zeros is put on its own token. in_place: in `block`'s
    own memory (a block made for the caller alone: a layer read by rows)."""
    a = np.abs(block, out=block) if in_place else np.abs(block, dtype=np.float32)
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
    """Whether every layer of `loaded` makes its matrix's blocks of rows each apart (Mamba-2's SSD, xLSTM's mLSTM:
    `row_jobs`), so that a long run holds a block of rows a thread, not a layer's n × n matrices."""
    found = mixing_layers(loaded.hf_model)
    return bool(found) and all(kind is not None and getattr(kind, "ROW_JOBS", False) for *_rest, kind in found)


Jobs = list[tuple[int, int, Callable[[], np.ndarray]]]  # (first row, last row + 1, a call that makes the rows)


def row_blocks(loaded, token_ids, *, only: int | None = None, outputs: list | None = None
               ) -> Iterator[tuple[int, Jobs]]:
    """Every layer's weights (or layer `only`'s) as (layer, its blocks of rows: (first row, last row + 1, a call that
    makes (groups, b, last) float32, each row of |A| over the keys it sees divided by its sum)), from one forward of
    `token_ids` (run at the call, under the model's lock): each block made when called, apart from the others (by
    several threads at once) for a layer with `row_jobs`, the layer whole otherwise. `outputs`: the forward's own
    output is appended to it. ModelLoadError for a layer not read exactly."""
    ids = torch.as_tensor([list(token_ids)], device=loaded.device)
    with loaded.lock:
        try:
            layers = each_layer(loaded.hf_model, ids, None if only is None else [only], by_rows=True,
                                channel_means=True, outputs=outputs)
        except NotExact as exc:
            raise ModelLoadError(str(exc)) from exc
    return ((layer.layer, _jobs(layer)) for layer in layers)


def _jobs(layer: EffectiveLayer) -> Jobs:
    if layer.row_jobs is None:  # made whole: one block
        return [(0, layer.n, partial(weights, layer))]
    return [(first, last, partial(_weighed, first, last, make)) for first, last, make in layer.row_jobs()]


def _weighed(first: int, last: int, make: Callable[[], np.ndarray]) -> np.ndarray:
    return row_weights(first, make()[..., :last], in_place=True)  # a block made for this call alone


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


def sequence_rows(loaded, input_ids: torch.Tensor, last: bool = False) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """One forward of a sequence (1, n) for Generate: (the logits after its last token, each layer's weights (1,
    groups, n, n)); `last`: each layer's last row alone (1, groups, 1, n), made from the block that holds it where
    every layer is read by rows (Mamba-2, xLSTM: a block of rows a step, not the n × n)."""
    if not (last and by_rows(loaded)):
        cap = capture(loaded, input_ids)
        return cap.output.logits[0, -1].float(), [a[:, :, -1:] if last else a for a in cap.attentions]
    outputs: list = []
    rows = [torch.from_numpy(jobs[-1][2]()[:, -1:])[None] for _n, jobs in
            row_blocks(loaded, input_ids[0].tolist(), outputs=outputs)]
    return outputs[0].logits[0, -1].float(), rows


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
