"""`effective_attention`: the exact effective attention of every token-mixing layer of a model that
is not softmax attention (Mamba-1, Mamba-2, gated DeltaNet, Kimi Delta Attention, lightning
attention, short convolutions, RG-LRU), from one forward pass. The kernel is
`mha_viz_models.effective`; the formulas: docs/effective-attention.md."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mha_viz.text.tokenize import tokenize
from mha_viz_models.effective import EffectiveLayer, NotExact, effective_layers, reconstruct

__all__ = ["EffectiveAttention", "EffectiveLayer", "NotExact", "effective_attention"]


@dataclass(frozen=True)
class EffectiveAttention:
    """One text's effective attention. layers: one `EffectiveLayer` per non-softmax token-mixing
    layer in the model's layer order (its `layer`, `kind`, `label`, `matrix` (groups, n, n) float32,
    `value_name`, `values` (n, groups, d) and `parts`)."""

    tokens: list[str]
    token_ids: list[int]
    layers: list[EffectiveLayer]

    @property
    def layer_ids(self) -> list[int]:
        return [la.layer for la in self.layers]

    def layer(self, number: int) -> EffectiveLayer:
        for la in self.layers:
            if la.layer == number:
                return la
        raise KeyError(f"Layer {number} is not among this run's layers {self.layer_ids}.")

    def output(self, number: int) -> np.ndarray:
        """The layer's output (n, hidden) rebuilt from its matrix, values and separate parts."""
        return reconstruct(self.layer(number)).numpy()


def effective_attention(model, text: str, *, layers=None, max_tokens: int | None = None) -> EffectiveAttention:
    """The effective attention of `model`'s (a loaded model's) non-softmax token-mixing layers on
    `text` (cut to `max_tokens` as every run is). `layers`: model layer numbers, default all such
    layers. Raises NotExact, naming the reason, for a layer that cannot be made exact."""
    toks = tokenize(model, text, max_tokens)
    with model.lock:
        found = effective_layers(model.hf_model, toks.ids, layers=layers)
    if not found:
        raise NotExact(f"{model.name} has no token-mixing layer besides softmax attention that mha-viz reads.")
    return EffectiveAttention(tokens=list(toks.display), token_ids=list(toks.ids), layers=found)
