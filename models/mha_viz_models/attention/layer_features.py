"""What a Llama relative's attention layer adds to q, k, the mask or the softmax, read from the
Hugging Face module and its config: the settings of `MultiHeadAttention` (`Positions`,
`Visibility`, `Extras`) that make our MHA compute that layer (`llama_features`), and the features
it cannot compute (`llama_refusals`).

Layers without RoPE (SmolLM3's and Llama 4's `no_rope_layers`, Cohere 2's global layers), the
RoPE layouts of Cohere and GPT-OSS, q/k norms over every head at once (OLMo 2), learned sink
logits (GPT-OSS), and Llama 4's chunks, L2 q/k norm and query temperature.
"""

from __future__ import annotations

from torch import nn

from mha_viz_models.attention.config import Extras, Positions, Visibility

__all__ = ["ROPE_LAYOUTS", "layer_window", "llama_features", "llama_refusals", "norm_width", "per_head_norm"]

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


def per_head_norm(original: nn.Module, name: str, d_k: int) -> nn.Module | None:
    """The module's q_norm or k_norm when it normalises each head's d_k values (Qwen3, Gemma 3),
    else None (a norm over other widths is refused by `llama_refusals`)."""
    norm = getattr(original, name, None)
    weight = getattr(norm, "weight", None)
    return norm if norm is not None and weight is not None and weight.shape[-1] == d_k else None


def layer_window(original: nn.Module, config) -> int | None:
    """The sliding window of this attention layer, or None: the module's own `sliding_window`
    (Qwen2, Qwen3, Gemma 2: None on full-attention layers), else the config's layer types, else
    the config's `sliding_window` (Mistral, where every layer slides)."""
    if hasattr(original, "sliding_window"):
        return original.sliding_window or None
    types, idx = getattr(config, "layer_types", None), getattr(original, "layer_idx", None)
    if types is not None and idx is not None:
        return getattr(config, "sliding_window", None) if types[idx] == "sliding_attention" else None
    if getattr(config, "use_sliding_window", True) is False:
        return None
    return getattr(config, "sliding_window", None) or None


def llama_features(original: nn.Module, config, d_k: int) -> dict:
    """The settings of `MultiHeadAttention` for what this layer adds to Llama's attention, as the
    keyword arguments `positions`, `visibility` and `extras` of `MultiHeadAttention.from_linears`:
    RoPE's layout (None on a NoPE layer) and Llama 4's temperature; the sliding window and chunk;
    q/k norms (per head, or over every head at once), Llama 4's norm after RoPE, soft-capping and
    sink logits. Without a config: the per-head norms, soft-capping and window only."""
    norms = [per_head_norm(original, name, d_k) for name in ("q_norm", "k_norm")]
    extras = dict(q_norm=norms[0], k_norm=norms[1], softcap=getattr(original, "attn_logit_softcapping", None))
    window = layer_window(original, config)
    if config is None:
        return {"visibility": Visibility(window=window), "extras": Extras(**extras)}
    rope = ROPE_LAYOUTS.get(config.model_type, "halves") if _has_rope(original, config) else None
    temperature, chunk = None, None
    if _flat_norms(original, d_k):  # over the whole projection (OLMo 2)
        extras.update(q_norm=original.q_norm, k_norm=original.k_norm, norm_over_heads=True)
    if _is_llama4(config):
        extras["rotated_norm"] = getattr(original, "qk_norm", None)  # only on its RoPE layers
        if rope is None and getattr(original, "attn_temperature_tuning", False):
            temperature = (original.floor_scale, original.attn_scale)
    sinks = getattr(original, "sinks", None)
    if isinstance(sinks, nn.Parameter):
        extras["sinks"] = sinks  # the model's own parameter, (H,)
    types, idx = getattr(config, "layer_types", None), getattr(original, "layer_idx", None)
    if types is not None and idx is not None and types[idx] == "chunked_attention":
        chunk = config.attention_chunk_size
    return {"positions": Positions(rope=rope, temperature=temperature),
            "visibility": Visibility(window=window, chunk=chunk), "extras": Extras(**extras)}


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
