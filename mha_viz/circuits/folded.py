"""A model's per-head weights with every norm's scale folded in (`folded_weights`): what its composition and copying
scores are computed from (`circuits.composition`), the weights alone."""

from __future__ import annotations

from collections.abc import Iterator

import torch

from mha_viz_models import LoadedModel
from mha_viz_models.errors import UnsupportedArchitecture
from mha_viz_models.reading import readout
from mha_viz_models.reading.readout import LAYER, Norm
from mha_viz_models.reading.stream import LayerLayout, layout

F64 = torch.float64


def read_through(norm: Norm | None, w: torch.Tensor) -> torch.Tensor:
    """Matrices w (..., d, k) that read the stream through `norm`, its scale folded in (`Norm.reading`)."""
    return w if norm is None else norm.reading(w)


def write_through(norm: Norm | None, w: torch.Tensor) -> torch.Tensor:
    """Matrices w (..., k, d) whose rows are written into the stream through `norm`: w C diag(γ)."""
    return w if norm is None else norm.frozen(w, torch.ones((), dtype=w.dtype))


def _qk_norm(norm: Norm | None, w: torch.Tensor, lay: LayerLayout) -> torch.Tensor:
    """W_Q or W_K (heads, d, d_k) with its q/k norm's scale folded into the columns (the norm's σ is a
    scalar a position): per head (Qwen3, Gemma 3), or a slice each of one over all heads (OLMo 2)."""
    if norm is None or norm.kind == readout.NONE:
        return w
    heads, _, d_k = w.shape
    scale = norm.scale.to(w)
    if scale.numel() == d_k:
        return (w - w.mean(-1, keepdim=True) if norm.kind == LAYER else w) * scale
    if norm.kind == LAYER or scale.numel() != heads * d_k:
        raise UnsupportedArchitecture(f"Layer {lay.layer}'s q/k norm ({norm.kind} over {scale.numel()} values) "
                                      "cannot be folded into each head's weights.")
    return w * scale.reshape(heads, 1, d_k)


def folded_weights(model: LoadedModel) -> list[dict[str, torch.Tensor]]:
    """Each attention layer's per-head weights, float64 on the CPU, with every norm's scale folded in as
    TransformerLens's `fold_ln` does: the input norm's into W_Q, W_K, W_V (centred too for a LayerNorm),
    the q/k norms' into W_Q's and W_K's columns, a post-attention norm's into W_O (Gemma 2 and 3, OLMo 2).
    W_Q (H, d, d_k), W_K (G, d, d_k), W_V (G, d, d_v), W_O (H, d_v, d). Biases and RoPE are left out.
    A post-norm model (BERT) reads the stream directly: its weights are the raw ones.
    Raises UnsupportedArchitecture (from `stream.layout`) where the stream cannot be read so."""
    return list(folded_layers(model))


def folded_layers(model: LoadedModel) -> Iterator[dict[str, torch.Tensor]]:
    """`folded_weights` one layer at a time, each folded when asked for: a computation that may be stopped
    between layers holds none it will not use."""
    lays = layout(model)
    w = model.head_weights()
    for lay in lays:
        i, fit = lay.layer, lay.input_fit
        q = _qk_norm(lay.q_norm, read_through(fit, w["W_Q"][i].to(F64)), lay)
        k = _qk_norm(lay.k_norm, read_through(fit, w["W_K"][i].to(F64)), lay)
        yield {"W_Q": q, "W_K": k, "W_V": read_through(fit, w["W_V"][i].to(F64)),
               "W_O": write_through(lay.post_norm, w["W_O"][i].to(F64))}
