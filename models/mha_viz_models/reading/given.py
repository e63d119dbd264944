"""A layer's attention output handed to the model in place of its own attention: a run that already computes every
layer's probabilities a block at a time (a long scan) computes their product with the values too, and the model's
attention modules take that output instead of computing their fused attention again (the same q·kᵀ and softmax a
second time, about a third of a long forward).

Hugging Face's attention modules call the function their config names (`AttentionInterface`); `GIVEN` is ours:
it returns the output handed for that call (`hand`, from a pre-hook of the layer's attention module, whose own
forward or an inner module's then calls the function, on the same thread), and refuses a call none was handed for (a
model that asked for given outputs gets one for every layer, or a mistake would pass silently). What is handed may
be a maker instead (`Maker`): called with the module's own queries, keys and values, it makes the output from them, so
a run that needs them does not project them a second time.
"""

from __future__ import annotations

import threading
from typing import Callable

import torch
from torch import nn

GIVEN = "mha_viz_given"

_handed = threading.local()  # .output: the next call's output (B, H, n, d_v), on the thread that runs the forward
_registering = threading.Lock()
_registered = False


def register() -> None:
    """Name `GIVEN` among transformers' attention functions (with SDPA's masks, which it ignores), once."""
    global _registered
    with _registering:
        if _registered:
            return
        from transformers import AttentionInterface
        from transformers.masking_utils import AttentionMaskInterface, sdpa_mask
        AttentionInterface.register(GIVEN, _given_attention)
        AttentionMaskInterface.register(GIVEN, sdpa_mask)
        _registered = True


def takes_outputs(modules: list[nn.Module]) -> bool:
    """Whether every module of `modules` computes its attention through the function its config names (transformers'
    interface), so that a given output replaces it."""
    return bool(modules) and all("ALL_ATTENTION_FUNCTIONS" in getattr(type(m).forward, "__globals__", {})
                                 for m in modules)


# maker(query (B, H, n, d_k), key (B, G, n, d_k), value (B, G, n, d_v), the call's keyword arguments): the output
Maker = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, dict], torch.Tensor]


def hand(output: torch.Tensor | Maker) -> None:
    """`output` (B, H, n, d_v), before W_O, for the next attention call on this thread, or what makes it from that
    call's queries, keys and values (RoPE and any norm applied, as the module computed them: `Maker`)."""
    _handed.output = output


def forget() -> None:
    """Drop what was handed on this thread and not taken (a run that stopped on an error)."""
    _handed.output = None


def _given_attention(module: nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                     attention_mask, **kwargs) -> tuple[torch.Tensor, None]:
    out, _handed.output = getattr(_handed, "output", None), None
    if out is None:
        raise RuntimeError(f"{type(module).__name__} was run with given attention outputs, but none was handed "
                           f"for this call.")
    if callable(out):
        out = out(query, key, value, kwargs)
    want = (query.shape[0], query.shape[1], query.shape[2], value.shape[-1])
    if tuple(out.shape) != want:
        raise RuntimeError(f"{type(module).__name__} was handed an attention output of shape {tuple(out.shape)}, "
                           f"not {want}.")
    return out.to(query.dtype).transpose(1, 2).contiguous(), None  # (B, n, H, d_v), as SDPA's function returns
