"""The run of a model made of effective layers alone (`loading.effective_only`: Mamba, Mamba-2, Falcon-Mamba,
RWKV): each layer's effective attention A (`mha_viz_models.effective`) as the weights every page draws, each row of
|A| divided by its sum, captured in one forward with the model's output."""

from __future__ import annotations

import numpy as np
import torch

from mha_viz_models.effective import selective, wkv
from mha_viz_models.effective.kinds import each_layer
from mha_viz_models.effective.layer import EffectiveLayer, NotExact
from mha_viz_models.errors import ModelLoadError
from mha_viz_models.reading.records import Capture


def weights(layer: EffectiveLayer) -> np.ndarray:
    """(groups, n, n) float32: each row of |A| (the aggregated blocks where the layer's matrix is per channel)
    divided by its sum; a row of zeros is put on its own token."""
    rows = np.concatenate([block for _first, block in layer.blocks()], axis=1)  # (groups, n, n)
    a = np.abs(rows.astype(np.float64))
    total = a.sum(-1, keepdims=True)
    empty = total[..., 0] == 0
    if empty.any():
        a[empty] = np.eye(a.shape[-1])[np.nonzero(empty)[1]]
        total = a.sum(-1, keepdims=True)
    return (a / total).astype(np.float32)


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
