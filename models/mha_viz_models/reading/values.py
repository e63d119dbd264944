"""What each key token writes through each head (Kobayashi et al. 2020): f_h(x_j) =
(x_j W_V[G] + b_V[G]) W_O[h], the value of token j carried through head h's rows of the output
projection (W_O's bias belongs to no token). A head's output at query i is Σ_j A[h, i, j] f_h(x_j);
the norms ‖f_h(x_j)‖ turn every attention pattern into contributions (`mha_viz.interventions.attribution`)."""

from __future__ import annotations

import threading
import weakref

import torch
from torch import nn

from mha_viz_models.attention.heads import expand_kv, output_blocks
from mha_viz_models.attention.mha import MultiHeadAttention
from mha_viz_models.device.placement import resident_copy
from mha_viz_models.families.builtin import output_projection
from mha_viz_models.reading.records import Capture

# W_O[h] W_O[h]ᵀ of each MHA (an adapter's, so it goes with its model), made once: it depends on
# the weights only. The lock guards the table, which sessions on different models share.
_GRAMS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_GRAMS_LOCK = threading.Lock()


def head_values(loaded, capture: Capture, layer: int) -> torch.Tensor:
    """f_h(x_j) for every head and key of one layer: (B, H, n, d_model), from the layer's
    recorded input (a lean capture, or an eager one with `inputs=True`)."""
    inp = capture.layer_inputs[layer]
    mha = loaded.layer_adapter(layer).mha
    with loaded.lock, torch.inference_mode():
        v = mha.project_v(inp.hidden)  # (B, G, n, d_v), b_V included; RoPE never turns values
        v = expand_kv(v, mha.num_heads)  # (B, H, n, d_v): query head h reads KV h // (H/G)
        w_o = output_blocks(mha.w_o, mha.num_heads)  # (H, d_v, d_model): head h's rows of W_O
        return torch.einsum("bhnd,hdm->bhnm", v, w_o.to(v.dtype))


def output_gram(w_o: nn.Linear, num_heads: int, dtype: torch.dtype) -> torch.Tensor:
    """W_O[h] W_O[h]ᵀ for every head of an output projection (weight (d_model, H · d_v)): (H, d_v,
    d_v) in `dtype`, made in float64 and rounded once. Kept until W_O changes (its storage or
    version), as the MHA keeps its stacked W_QKV."""
    weight = w_o.weight
    # a weight made in inference mode has no version (and is changed by nothing mha-viz runs)
    key = (weight.data_ptr(), None if weight.is_inference() else weight._version, dtype, num_heads)
    with _GRAMS_LOCK:
        kept = _GRAMS.get(w_o)
        if kept is None or kept[0] != key:
            with torch.inference_mode():
                blocks = output_blocks(w_o, num_heads).double()  # (H, d_v, d_model)
                kept = (key, (blocks @ blocks.transpose(1, 2)).to(dtype))  # (H, d_v, d_v)
            _GRAMS[w_o] = kept
        return kept[1]


def _values(mha: MultiHeadAttention, capture: Capture, layer: int) -> torch.Tensor:
    """v (B, G, n, d_v) of one layer: as its W_V wrote them during the capture, or projected again
    from the layer's recorded input (the same product on the same input: the same numbers)."""
    hidden = capture.layer_inputs[layer].hidden  # (B, n, d_model)
    written = None if capture.values is None else capture.values[layer]  # (B, n, G · d_v) or None
    B, n, _ = hidden.shape
    if written is None or written.shape != (B, n, mha.num_kv_heads * mha.d_v):
        return mha.project_v(hidden)
    return written.view(B, n, mha.num_kv_heads, mha.d_v).transpose(1, 2)


def value_norms(loaded, capture: Capture, layer: int) -> torch.Tensor:
    """‖f_h(x_j)‖₂ for every head and key of one layer: (B, H, n). Computed as the quadratic form
    v (W_O[h] W_O[h]ᵀ) vᵀ of the d_v-wide values (`output_gram`, made once): d_model / d_v
    times cheaper than making f_h(x_j) (12 × for MiniLM), no (n, d_model) product in memory.
    The values are those the capture recorded where it did (`Capture.values`), else projected
    from the layer's recorded input. Where our MHA cannot compute the layer, they are what the
    model's own value path wrote (`LoadedModel.value_path`: DeBERTa's value_proj, the slice of
    DeepSeek's kv_b_proj that holds each head's values) and W_O is the model's own output layer."""
    path = loaded.value_path(layer)
    with loaded.lock, torch.inference_mode():
        if path is not None:
            v = path.split(capture.values[layer])  # (B, G, n, d_v)
            w_o = resident_copy(output_projection(*loaded.attention_modules[layer]))
        else:
            mha = loaded.layer_adapter(layer).mha
            v, w_o = _values(mha, capture, layer), mha.w_o  # (B, G, n, d_v)
        H = loaded.num_heads
        gram = output_gram(w_o, H, v.dtype)  # (H, d_v, d_v)
        group = H // v.shape[1]
        B, G, n, d_v = v.shape
        vg = v.reshape(B, G, 1, n, d_v)  # each KV head's values, for the `group` query heads that read them
        squared = (torch.matmul(vg, gram.reshape(1, G, group, d_v, d_v)) * vg).sum(-1)  # (B, G, group, n)
        return squared.reshape(B, H, n).clamp_min(0).sqrt()


def can_read_values(loaded, capture: Capture) -> bool:
    """Whether `value_norms` can be computed from `capture`: its layers' inputs (our MHA projects the
    values), or the values the model's own value path wrote for every layer."""
    if capture.layer_inputs is not None:
        return True
    return capture.values is not None and all(
        loaded.value_path(layer) is not None and v is not None for layer, v in enumerate(capture.values))
