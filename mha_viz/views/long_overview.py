"""The whole-text overview: every head of a long text as thumbnails, one head's n × n at a time.

For a text longer than the app's token cap: the model runs once with fused attention (lean
capture), then each head's probabilities are recomputed, max-pooled and dropped, so memory
stays at one head's matrix however long the text (up to the model's whole context, or
`MHA_VIZ_MAX_OVERVIEW_TOKENS` on a public server).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from mha_viz.capture.finite import FiniteCheck
from mha_viz.text.tokenize import tokenize
from mha_viz.views.detail import max_pool
from mha_viz_models import LoadedModel


@dataclass
class Overview:
    """Every head of a long text as thumbnails, computed one head at a time (`overview`).

    pooled: float32 (layers, heads, s, s), each head max-pooled to at most s × s cells.
    """

    tokens: list[str]
    pooled: np.ndarray
    model_name: str
    num_input_tokens: int
    num_input_tokens_is_estimate: bool = False  # a long text's total, estimated from the part read

    @property
    def n(self) -> int:
        return len(self.tokens)


def overview(model: LoadedModel, text: str, *, thumb: int = 48, progress=None) -> Overview:
    """Thumbnails of every head for `text` up to the model's whole context (`max_positions`).

    The model runs once with fused attention (lean capture); then each head's probabilities
    are recomputed, pooled to `thumb` × `thumb` and dropped, so at most one head's n × n
    matrix exists at a time. `progress(fraction, message)` is called after each layer.
    Raises NotFiniteError (`mha_viz.capture.finite`) when a head's probabilities hold NaN or infinity.
    """
    toks = tokenize(model, text, whole_text=True)
    progress = progress or (lambda _f, _m: None)
    progress(0.0, f"Running {model.name} on {toks.n} tokens with fused attention…")
    cap = model.capture(torch.tensor([toks.ids]), lean=True, head_outputs=False)
    s = min(thumb, toks.n)
    pooled = np.empty((model.num_layers, model.num_heads, s, s), dtype=np.float32)
    check = FiniteCheck(model)  # a NaN would be pooled into a blank thumbnail
    for layer in range(model.num_layers):
        for head, probs in model.each_head(cap, layer):
            pooled[layer, head] = max_pool(check.see(probs[0], f"attention in layer {layer}").float().cpu().numpy(),
                                           thumb)
        check.verify()
        progress((layer + 1) / model.num_layers, f"Layer {layer + 1} of {model.num_layers} done")
    return Overview(tokens=toks.display, pooled=pooled, model_name=model.name, num_input_tokens=toks.total,
                    num_input_tokens_is_estimate=toks.total_is_estimate)
