"""The settings of our `MultiHeadAttention`, one small frozen dataclass per variant of the layer.

- `Shape`: the textbook layer of Vaswani et al. (2017), and all a plain MHA needs: `Shape(512, 8)`.
- `Positions`: how positions enter q and k (RoPE's layout, Llama 4's query temperature).
- `Visibility`: which keys a query sees besides the causal mask (sliding windows, Llama 4's chunks).
- `Extras`: what Llama's relatives add to q, k and the softmax (q/k norms, soft-capping, sinks).

Each field's default is the textbook's, so that a layer names only what it changes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from mha_viz_models.attention.rotary import LAYOUTS

__all__ = ["Extras", "Positions", "Shape", "Visibility"]


def _set(config, name: str, value) -> None:
    object.__setattr__(config, name, value)  # a default filled in by a frozen dataclass's __post_init__


@dataclass(frozen=True)
class Shape:
    """The layer's sizes, its projections' biases, the scale of its scores and the dropout on its
    probabilities. None fills in the textbook's value, so the fields read back complete."""

    d_model: int  # width of the query input and of the output
    num_heads: int  # h query heads
    num_kv_heads: int | None = None  # G key/value heads, query head i reads KV head i // (h / G); None: h; 1: MQA
    d_k: int | None = None  # width of each head's queries and keys; None: d_model // h
    d_v: int | None = None  # width of each head's values; None: d_k
    d_kv_in: int | None = None  # width of the key/value input (cross-attention); None: d_model
    bias: bool = True  # whether W_Q, W_K, W_V and W_O have a bias
    scale: float | None = None  # multiplier of the scores; None: 1 / sqrt(d_k)
    dropout: float = 0.0  # on the probabilities, in training only

    def __post_init__(self) -> None:
        kv = self.num_heads if self.num_kv_heads is None else self.num_kv_heads
        if self.num_heads < 1 or kv < 1 or self.num_heads % kv:
            raise ValueError(f"num_kv_heads ({kv}) must divide num_heads ({self.num_heads})")
        d_k = self.d_model // self.num_heads if self.d_k is None else self.d_k
        _set(self, "num_kv_heads", kv)
        _set(self, "d_k", d_k)
        _set(self, "d_v", d_k if self.d_v is None else self.d_v)
        _set(self, "d_kv_in", self.d_model if self.d_kv_in is None else self.d_kv_in)
        _set(self, "scale", 1.0 / math.sqrt(d_k) if self.scale is None else float(self.scale))


@dataclass(frozen=True)
class Positions:
    """How positions enter q and k (`mha_viz_models.attention.rotary`)."""

    # the layout of the RoPE angles the layer is handed (rotary.LAYOUTS; complex angles are told by their type),
    # or None: a layer without RoPE (NoPE) that is handed them all the same (SmolLM3's, Llama 4's, Cohere 2's)
    rope: str | None = "halves"
    # (floor_scale, attn_scale) of Llama 4's query temperature on its NoPE layers (rotary.query_temperature)
    temperature: tuple[float, float] | None = None

    def __post_init__(self) -> None:
        if self.rope not in (*LAYOUTS, None):
            raise ValueError(f"rope must be one of {LAYOUTS} or None; got {self.rope!r}")
        if self.temperature is not None:
            _set(self, "temperature", tuple(map(float, self.temperature)))


@dataclass(frozen=True)
class Visibility:
    """Which keys a query sees besides the causal mask (`mha_viz_models.attention.visibility`);
    0 reads as None."""

    # a sliding window: under the causal mask query i also stops seeing keys j <= i - window (Mistral, Gemma 2's
    # and Qwen's sliding layers); without it (an encoder's local layers, ModernBERT) it sees |i - j| <= window only
    window: int | None = None
    chunk: int | None = None  # chunked attention (Llama 4): query i sees keys j with j // chunk == i // chunk only

    def __post_init__(self) -> None:
        _set(self, "window", int(self.window) if self.window else None)
        _set(self, "chunk", int(self.chunk) if self.chunk else None)


@dataclass(frozen=True, eq=False)
class Extras:
    """What Llama's relatives add to q, k and the softmax. The norms and the sinks are the trained
    model's own modules and parameter, held, not copied. 0 soft-capping reads as None."""

    q_norm: nn.Module | None = None  # a norm of each head's q before RoPE (Qwen3, Gemma 3: RMSNorm over d_k)
    k_norm: nn.Module | None = None  # the same for k
    norm_over_heads: bool = False  # q_norm and k_norm normalise the whole projection before the split (OLMo 2)
    rotated_norm: nn.Module | None = None  # a norm of each head's q and k after RoPE (Llama 4's L2 norm)
    softcap: float | None = None  # Gemma 2: scaled scores become softcap · tanh(s / softcap) before the mask
    sinks: torch.Tensor | None = None  # (h,) learned sink logits (GPT-OSS): one more key column, then dropped

    def __post_init__(self) -> None:
        _set(self, "softcap", float(self.softcap) if self.softcap else None)
