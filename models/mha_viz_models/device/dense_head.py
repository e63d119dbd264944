"""A causal LM's head reads a dense copy of a strided half-precision input. With `logits_to_keep=1` on a batch of
sequences (real patching's grid and its positions: one sequence a head or a position) the model hands its LM head
the last row of each sequence, a view whose rows lie a whole sequence apart (one sequence's last row, as the
estimate and generation ask for, is contiguous already). PyTorch's CPU matmul then broadcasts the weight to a
batched product, and in bfloat16 it first copies that broadcast weight whole: SmolLM2's head (49,152 × 576) on 9
sequences took 1.05 s a call, against 5 ms on the same rows made contiguous (float32: 35 ms against 19 ms; 2
cores). Real patching of SmolLM2 runs that head 30 times: it took 32 s in bfloat16 against 6 s in float32.

A copy of those rows is a few KiB (one row of d_model a sequence). In half precision only: in float32 the strided
product is not copied (35 ms against 19 ms), and it computes each sequence's row as a one-row product does, so real
patching's batched grid stays equal to one forward per head (a batched product over the rows rounds them otherwise:
up to 6e-5 of a restored fraction on a random-init model whose metric barely moves)."""

from __future__ import annotations

import torch
from torch import nn

from mha_viz_models.device.precision import HALF
from mha_viz_models.output_head import output_head


def _dense(_module: nn.Module, args: tuple):
    x = args[0] if args else None
    if isinstance(x, torch.Tensor) and x.dtype in HALF and not x.is_contiguous():
        return (x.contiguous(), *args[1:])
    return None


def dense_head_input(model: nn.Module) -> None:
    """Give `model`'s output embeddings (its LM head, where it has one) a forward pre-hook that makes a strided
    half-precision input contiguous. Called once on each model built (the load, the random twin)."""
    head = output_head(model)
    if isinstance(head, nn.Module):
        head.register_forward_pre_hook(_dense)
