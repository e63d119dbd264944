"""Falcon-H1's μP multipliers around its attention, folded into the attention's own projections when a model
loads: its decoder layer multiplies the attention's input by `attention_in_multiplier` and its output by
`attn_out_multiplier`. Folded, W_Q, W_K and W_V read the normed stream as it is and W_O writes what reaches the
residual stream, so every reading of a head (what it writes, its direct logit attribution, the score terms of
*why this key*, composition) is the model's without a factor of its own. The model computes the same function:
(m·x) W = x (m W), and (x W + b) m = x (m W) + m b, up to the rounding of the weights in their precision (exact
for a power of two; in half precision within its own rounding)."""

from __future__ import annotations

import torch
from torch import nn

# (the decoder layer's attribute, the attention's projections that take the factor, whether their biases do too)
FOLDS = (("attention_in_multiplier", ("q_proj", "k_proj", "v_proj"), False),
         ("attn_out_multiplier", ("o_proj",), True))


def fold_multipliers(model: nn.Module) -> int:
    """Fold each decoder layer's multipliers of FOLDS into its `self_attn`'s projections, in place, and set the
    layer's to 1. Returns how many factors were folded. A layer whose projections are not resident (accelerate's
    offload keeps them on the meta device) is left as it is: its heads' writes then lack the factor."""
    folded = 0
    for layer in model.modules():
        attention = getattr(layer, "self_attn", None)
        for name, projections, with_bias in FOLDS:
            factor = getattr(layer, name, None)
            if attention is None or not isinstance(factor, (int, float)) or float(factor) == 1.0:
                continue
            linears = [getattr(attention, p, None) for p in projections]
            if any(not isinstance(lin, nn.Linear) or lin.weight.device.type == "meta" for lin in linears):
                continue
            with torch.no_grad():
                for lin in linears:
                    lin.weight.mul_(float(factor))
                    if with_bias and lin.bias is not None:
                        lin.bias.mul_(float(factor))
            setattr(layer, name, 1.0)
            folded += 1
    return folded
