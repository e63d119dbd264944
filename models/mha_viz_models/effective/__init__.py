"""The exact effective attention of token-mixing layers that are not softmax attention.

Each such layer is linear in a value-like vector v: output_t = finish_t(Σ_s A[g, t, s] · v_s + skip_t).
`effective_layers` runs the model once with forward hooks on each layer's submodules and returns one
`EffectiveLayer` per layer: its matrix A, its values, and its separate parts (skip, gate, norm, output
projection). One module per kind: `ssd` (Mamba-2), `delta` (gated DeltaNet, Kimi Delta Attention),
`short_conv` (LFM2), `selective` (Mamba-1). A kind that cannot be made exact is refused (`NotExact`).
The formulas: docs/effective-attention.md."""

from __future__ import annotations

from mha_viz_models.effective.kinds import KINDS, each_layer, effective_layers, mixing_layers, reconstruct
from mha_viz_models.effective.layer import EffectiveLayer, NotExact

__all__ = ["KINDS", "EffectiveLayer", "NotExact", "each_layer", "effective_layers", "mixing_layers", "reconstruct"]
