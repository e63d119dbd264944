"""What becomes of a write after the layer that made it: a layer that multiplies the whole stream as it ends (Gemma
4's `layer_scalar`, a learned number a layer) scales every write made before it, so a head's write reaches the last
layer's stream multiplied by the scalars of its own layer and of every layer after it (`later_factors`)."""

from __future__ import annotations

import torch
from torch import nn

from mha_viz_models.reading.stream import block_of

SCALAR = "layer_scalar"  # the attribute of a layer that multiplies the stream it returns


def _scalar(block: nn.Module) -> float:
    value = getattr(block, SCALAR, None)
    one = isinstance(value, torch.Tensor) and value.numel() == 1
    return float(value.detach().float().reshape(-1)[0]) if one else 1.0


def later_factors(hf_model: nn.Module, attentions: list[nn.Module]) -> list[float]:
    """For each attention module (one a layer, in the order the model runs them), the product of the stream scalars
    of the layer that holds it and of every later layer of the same list: 1.0 where no layer scales the stream."""
    names = {id(m): n for n, m in hf_model.named_modules()}
    factors = []
    for module in attentions:
        block = block_of(hf_model, module)
        holder, _, index = names[id(block)].rpartition(".")
        layers = hf_model.get_submodule(holder) if holder else hf_model
        factor = 1.0
        for later in list(layers.children())[int(index):]:
            factor *= _scalar(later)
        factors.append(factor)
    return factors
