"""What one capture records: each attention layer's input (`LayerInput`), a forward pass's
probabilities, head outputs and values (`Capture`), an encoder–decoder's three attentions
(`Seq2SeqCapture`), and the hook that reads the heads' outputs z off W_O's input."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from mha_viz_models.families.adapters import call_rotary
from mha_viz_models.reading import given
from mha_viz_models.reading.hooks import distinct


@dataclass
class LayerInput:
    """What an attention layer received: hidden states (B, n, d_model) and RoPE (cos, sin)."""

    hidden: torch.Tensor
    position_embeddings: tuple[torch.Tensor, torch.Tensor] | None = None


@dataclass
class Capture:
    """What one forward pass records. attentions: per layer (B, H, n, n), None for a lean
    capture (see `LoadedModel.recompute`); head_outputs: per layer (B, H, n, d_v), the heads'
    outputs z before W_O, or None when the architecture does not expose them. values (eager
    capture with `inputs=True`): per layer, what its value projection W_V wrote, (B, n, G · d_v),
    None for a layer whose W_V is not a layer the model runs once (a fused q, k, v layout). memory (eager capture): per
    layer, the rows over its compressed memory entries (B, H, n, C) (`mha_viz_models.attention.memory`: DeepSeek-V4),
    None for a layer without; None for a model without such layers."""

    hidden: torch.Tensor
    attentions: tuple[torch.Tensor, ...] | None
    head_outputs: tuple[torch.Tensor, ...] | None
    output: object
    layer_inputs: tuple[LayerInput, ...] | None = None
    attention_mask: torch.Tensor | None = None
    values: tuple[torch.Tensor | None, ...] | None = None
    memory: tuple[torch.Tensor | None, ...] | None = None


@dataclass
class Seq2SeqCapture:
    """What one forward pass of an encoder–decoder records: per layer, the encoder's self-
    attention (B, H, n_src, n_src), the decoder's (B, H_dec, n_tgt, n_tgt) and its cross-attention
    (B, H_dec, n_tgt, n_src); and the model's output object (logits over the next target token)."""

    encoder: tuple[torch.Tensor, ...]
    decoder: tuple[torch.Tensor, ...]
    cross: tuple[torch.Tensor, ...]
    output: object


def z_recorder(zs: list, num_heads: int):
    """A forward pre-hook for W_O: its input (B, n, H · d_v) is the heads' outputs side by side."""
    def keep_z(_module, args):
        x = args[0]
        zs.append(x.detach().reshape(x.shape[0], x.shape[1], num_heads, -1).transpose(1, 2))  # (B, H, n, d_v)
    return keep_z


class InputSink:
    """Where `input_hooks` appends when each layer's input is handed on as it arrives instead of kept:
    `call(layer, LayerInput)` in the order the layers run (a lean capture's `on_input`). What the call returns, a
    layer's attention output or None, `append` returns."""

    def __init__(self, call) -> None:
        self.call, self.count = call, 0

    def append(self, item: LayerInput) -> torch.Tensor | None:
        made = self.call(self.count, item)
        self.count += 1
        return made


def input_hooks(attention_modules: list[tuple[nn.Module, str]], inputs: list) -> list:
    """Pre-hooks (one a distinct module: a module shared by layers records each call) that append
    each attention layer's input and RoPE to `inputs`, in the order the layers run; an attention output that
    `inputs.append` returns (an `InputSink`'s call) is handed to that call of the module (`given.hand`)."""
    def keep_input(module, args, kwargs):
        hidden = args[0] if args else kwargs["hidden_states"]
        made = inputs.append(LayerInput(hidden.detach(), call_rotary(module, {**kwargs, "_hidden": hidden})))
        if made is not None:
            given.hand(made)
    return [m.register_forward_pre_hook(keep_input, with_kwargs=True)
            for m in distinct([m for m, _ in attention_modules])]


def first_tensor(out):
    """A layer's output tensor: itself, or the first of the tuple some layers return (I-BERT's QuantLinear: the
    output and its scaling factor)."""
    return out[0] if isinstance(out, tuple) else out


def value_hooks(w_vs: list[nn.Module | None], written: dict) -> list:
    """Forward hooks that append what each layer of `w_vs` that holds values (our adapters' W_V: the
    model's own layers, unless a fused layout made them copies, which never run; or the model's own
    value path, `mha_viz_models.attention.heads.ValuePath`) writes to `written[id(module)]`."""
    def keep(module, _args, out):
        written.setdefault(id(module), []).append(first_tensor(out).detach())  # (B, n, G · d_v)
    return [w.register_forward_hook(keep) for w in distinct([w for w in w_vs if w is not None])]
