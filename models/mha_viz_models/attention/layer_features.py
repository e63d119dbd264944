"""What a Llama relative's attention layer adds to q, k, the mask or the softmax, read from the
Hugging Face module and its config: the keyword arguments of `MultiHeadAttention` that make our
MHA compute that layer (`llama_features`), and the features it cannot compute (`llama_refusals`).

Layers without RoPE (SmolLM3's and Llama 4's `no_rope_layers`, Cohere 2's global layers), the
RoPE layouts of Cohere and GPT-OSS, q/k norms over every head at once (OLMo 2), learned sink
logits (GPT-OSS), and Llama 4's chunks, L2 q/k norm and query temperature.
"""

from __future__ import annotations

from torch import nn

__all__ = ["ROPE_LAYOUTS", "llama_features", "llama_refusals", "norm_width"]

# RoPE layouts other than Llama's halves (`mha_viz_models.attention.rotary`), by model type; Llama 4's complex
# angles are told by their type
ROPE_LAYOUTS = {"cohere": "pairs", "cohere2": "pairs", "gpt_oss": "halves_once"}
NOPE_GLOBAL = ("cohere2",)  # model types whose full-attention (not sliding) layers have no RoPE
# Llama relatives' features our MHA does not compute (a model with any is refused)
EXTRAS = ("q_layernorm", "k_layernorm")


def norm_width(original: nn.Module, name: str) -> int | None:
    """The width the module's q_norm or k_norm normalises over (its weight's last dimension), or
    None when it has none (or no weight)."""
    weight = getattr(getattr(original, name, None), "weight", None)
    return None if weight is None else int(weight.shape[-1])


def _flat_norms(original: nn.Module, d_k: int) -> bool:
    """Whether q_norm and k_norm both normalise a whole projection, every head at once (OLMo 2)."""
    widths = [norm_width(original, a) for a in ("q_norm", "k_norm")]
    if None in widths:
        return False
    outs = [original.q_proj.out_features, original.k_proj.out_features]
    return all(w == out != d_k for w, out in zip(widths, outs))


def _has_rope(original: nn.Module, config) -> bool:
    if not getattr(original, "use_rope", True):  # SmolLM3, Llama 4: config.no_rope_layers[layer] == 0
        return False
    return not (config.model_type in NOPE_GLOBAL and getattr(original, "sliding_window", None) is None)


def _is_llama4(config) -> bool:
    return config.model_type.startswith("llama4")


def llama_features(original: nn.Module, config, d_k: int) -> dict:
    """`MultiHeadAttention` keyword arguments for what this layer adds to Llama's attention:
    rope (its layout, or None on a NoPE layer), norm_over_heads, rotated_norm, temperature,
    sinks and chunk (per-head q/k norms, soft-capping and windows are read by the adapter)."""
    if config is None:
        return {}
    rope = ROPE_LAYOUTS.get(config.model_type, "halves") if _has_rope(original, config) else None
    features: dict = {"rope": rope, "norm_over_heads": _flat_norms(original, d_k)}
    if _is_llama4(config):
        features["rotated_norm"] = getattr(original, "qk_norm", None)  # only on its RoPE layers
        if rope is None and getattr(original, "attn_temperature_tuning", False):
            features["temperature"] = (original.floor_scale, original.attn_scale)
    sinks = getattr(original, "sinks", None)
    if isinstance(sinks, nn.Parameter):
        features["sinks"] = sinks  # the model's own parameter, (H,)
    types, idx = getattr(config, "layer_types", None), getattr(original, "layer_idx", None)
    if types is not None and idx is not None and types[idx] == "chunked_attention":
        features["chunk"] = config.attention_chunk_size
    return features


def llama_refusals(original: nn.Module, config, d_k: int) -> list[str]:
    """The features of this Llama-relative module that our MHA does not compute, each named."""
    refused = [attr for attr in EXTRAS if hasattr(original, attr)]
    if not _flat_norms(original, d_k):
        refused += [f"a {a} over {norm_width(original, a)} values (neither one head's {d_k} nor the "
                    "whole projection's)" for a in ("q_norm", "k_norm")
                    if norm_width(original, a) not in (None, d_k)]
    if hasattr(original, "qk_norm") and not _is_llama4(config):
        refused.append("a q/k norm after RoPE (qk_norm) of an unknown kind")
    sinks = getattr(original, "sinks", None)
    if sinks is not None and tuple(sinks.shape) != (config.num_attention_heads,):
        refused.append(f"sink logits of shape {tuple(sinks.shape)} (one per head is known)")
    return refused
