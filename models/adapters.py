"""Drop-in replacements that make a loaded Hugging Face model compute attention with our MHA.

Each adapter takes the place of one self-attention module, keeps the trained weights (the same
parameters where the layout allows, a transposed copy for GPT-2's fused Conv1D), accepts the
arguments the surrounding Hugging Face layer passes, and returns `(output, probabilities)` as
the original did. Families are recognised by structure, not by name, so that close relatives
(RoBERTa, ELECTRA, Mistral without sliding windows, Qwen2...) work too.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from .mha import MultiHeadAttention, apply_rotary


class UnsupportedArchitecture(ValueError):
    """The model has no self-attention that our MHA knows how to replace."""


def _update_cache(cache: Any, k: torch.Tensor, v: torch.Tensor, layer_idx: int | None):
    """Append k, v (B, G, n, d) to a Hugging Face cache; returns the keys and values to attend to."""
    if cache is None:
        return k, v
    cache = getattr(cache, "self_attention_cache", cache)  # EncoderDecoderCache holds two
    return cache.update(k, v, layer_idx)


def _is_causal_fallback(attention_mask: torch.Tensor | None, causal: bool) -> bool:
    # Hugging Face passes a materialised causal mask to eager attention; if it ever passes
    # none, a decoder must still not look ahead.
    return causal and attention_mask is None


class _Adapter(nn.Module):
    """Common to the adapters: `need_weights = False` makes the layer run PyTorch's fused
    attention and return no probabilities (lean capture recomputes the ones it needs)."""

    need_weights = True


class BertFamilyAttention(_Adapter):
    """Replaces a BERT-style `XAttention` (`.self` with query/key/value, `.output` with
    dense/dropout/LayerNorm): MHA, then LayerNorm(dropout(W_O·) + residual)."""

    def __init__(self, original: nn.Module, num_heads: int, causal: bool) -> None:
        super().__init__()
        sa, out = original.self, original.output
        self.mha = MultiHeadAttention.from_linears(
            sa.query, sa.key, sa.value, out.dense, num_heads=num_heads, scale=sa.scaling,
            dropout=sa.dropout.p,
        )
        self.output_dropout = out.dropout
        self.layer_norm = out.LayerNorm
        self.layer_idx = getattr(sa, "layer_idx", None)
        self.causal = causal

    def forward(self, hidden_states, attention_mask=None, encoder_hidden_states=None,
                encoder_attention_mask=None, past_key_values=None, **kwargs):
        q = self.mha.project_q(hidden_states)  # (B, h, n, d_k)
        k, v = self.mha.project_kv(hidden_states, hidden_states)  # (B, h, n, d_k)
        k, v = _update_cache(past_key_values, k, v, self.layer_idx)
        z, probs = self.mha.attend(q, k, v, attn_mask=attention_mask, need_weights=self.need_weights,
                                   is_causal=_is_causal_fallback(attention_mask, self.causal))
        out = self.mha.merge(z)  # (B, n, d_model)
        return self.layer_norm(self.output_dropout(out) + hidden_states), probs


class GPT2FamilyAttention(_Adapter):
    """Replaces GPT-2's attention: fused Conv1D c_attn (x @ W + b, W of shape (d, 3d)) split
    into W_Q, W_K, W_V as nn.Linear (weight = Wᵀ); c_proj becomes W_O."""

    def __init__(self, original: nn.Module, num_heads: int) -> None:
        super().__init__()
        d = original.embed_dim
        w, b = original.c_attn.weight.detach(), original.c_attn.bias.detach()  # (d, 3d), (3d,)
        linears = []
        for i in range(3):
            lin = nn.Linear(d, d, device=w.device, dtype=w.dtype)
            with torch.no_grad():
                lin.weight.copy_(w[:, i * d:(i + 1) * d].T)  # (d_out, d_in)
                lin.bias.copy_(b[i * d:(i + 1) * d])
            linears.append(lin)
        w_o = nn.Linear(d, d, device=w.device, dtype=w.dtype)
        with torch.no_grad():
            w_o.weight.copy_(original.c_proj.weight.T)
            w_o.bias.copy_(original.c_proj.bias)
        self.mha = MultiHeadAttention.from_linears(
            *linears, w_o, num_heads=num_heads, scale=original.scaling, dropout=original.attn_dropout.p,
        )
        self.resid_dropout = original.resid_dropout
        self.layer_idx = original.layer_idx

    def forward(self, hidden_states, past_key_values=None, attention_mask=None, **kwargs):
        q = self.mha.project_q(hidden_states)  # (B, h, n, d_k)
        k, v = self.mha.project_kv(hidden_states, hidden_states)  # (B, h, n, d_k)
        k, v = _update_cache(past_key_values, k, v, self.layer_idx)
        z, probs = self.mha.attend(q, k, v, attn_mask=attention_mask, need_weights=self.need_weights,
                                   is_causal=_is_causal_fallback(attention_mask, True))
        return self.resid_dropout(self.mha.merge(z)), probs


class LlamaFamilyAttention(_Adapter):
    """Replaces a Llama-style attention (q/k/v/o_proj, RoPE from `position_embeddings`,
    grouped-query attention)."""

    def __init__(self, original: nn.Module, num_heads: int, num_kv_heads: int) -> None:
        super().__init__()
        self.mha = MultiHeadAttention.from_linears(
            original.q_proj, original.k_proj, original.v_proj, original.o_proj,
            num_heads=num_heads, num_kv_heads=num_kv_heads, scale=original.scaling,
            dropout=float(getattr(original, "attention_dropout", 0.0)),
        )
        self.layer_idx = original.layer_idx

    def forward(self, hidden_states, position_embeddings=None, attention_mask=None,
                past_key_values=None, **kwargs):
        q = self.mha.project_q(hidden_states)  # (B, h, n, d_k)
        k, v = self.mha.project_kv(hidden_states, hidden_states)  # (B, G, n, d_k)
        if position_embeddings is not None:
            cos, sin = position_embeddings  # (B, n, d_k) each
            q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
        k, v = _update_cache(past_key_values, k, v, self.layer_idx)
        z, probs = self.mha.attend(q, k, v, attn_mask=attention_mask, need_weights=self.need_weights,
                                   is_causal=_is_causal_fallback(attention_mask, True))
        return self.mha.merge(z), probs


# Features of Llama relatives that our MHA does not compute; a model with any of them is refused.
_LLAMA_EXTRAS = ("q_norm", "k_norm", "sinks", "q_layernorm", "k_layernorm")
_CONFIG_EXTRAS = ("sliding_window", "attn_logit_softcapping", "use_sliding_window")


def _family(module: nn.Module) -> str | None:
    if isinstance(module, _Adapter) and hasattr(module, "mha"):
        return "mha"  # ours already (models.toy's layers, or an adapter installed before)
    if hasattr(module, "self") and hasattr(module, "output"):
        sa = module.self
        if all(hasattr(sa, a) for a in ("query", "key", "value")) and hasattr(module.output, "LayerNorm"):
            return None if getattr(module, "is_cross_attention", False) else "bert"
    if hasattr(module, "c_attn") and hasattr(module, "c_proj"):
        # GPT-2 itself: a fused Conv1D (d, 3d) and the attributes the adapter reads. Relatives
        # with c_attn but another layout (GPTBigCode's multi-query Linear, OpenAI-GPT) are not.
        weight = getattr(module.c_attn, "weight", None)
        gpt2 = (type(module.c_attn).__name__ == "Conv1D" and weight is not None and weight.dim() == 2
                and weight.shape[1] == 3 * weight.shape[0]
                and all(hasattr(module, a) for a in ("embed_dim", "scaling", "layer_idx", "attn_dropout")))
        return "gpt2" if gpt2 and not getattr(module, "is_cross_attention", False) else None
    if all(hasattr(module, a) for a in ("q_proj", "k_proj", "v_proj", "o_proj", "scaling", "layer_idx")):
        return "llama"
    return None


def find_attention(model: nn.Module) -> list[tuple[nn.Module, str, nn.Module, str]]:
    """Every self-attention module of `model` in the order the model runs them (layer 0 first),
    as (parent, attribute name, module, family). Raises UnsupportedArchitecture when nothing is
    recognised or the model uses an attention feature (sliding windows, q/k norms, logit
    soft-capping, sinks) that our MHA does not compute."""
    config = model.config
    found: list[tuple[nn.Module, str, nn.Module, str]] = []
    names: list[str] = []
    for name, module in model.named_modules():
        family = _family(module)
        if family is None or any(name.startswith(f + ".") for f in names):
            continue  # not attention, or inside an attention module already found
        parent_name, _, attr = name.rpartition(".")
        found.append((model.get_submodule(parent_name) if parent_name else model, attr, module, family))
        names.append(name)
    if not found:
        raise UnsupportedArchitecture(
            f"Our MHA cannot stand in for the attention of '{config.model_type}' models: it knows "
            "BERT-family, GPT-2 and Llama-family attention. Use Hugging Face's attention instead."
        )
    if any(f[3] == "llama" for f in found):
        extras = [a for a in _LLAMA_EXTRAS if hasattr(found[0][2], a)]
        extras += [a for a in _CONFIG_EXTRAS if getattr(config, a, None) not in (None, False)]
        if extras:
            raise UnsupportedArchitecture(
                f"'{config.model_type}' attention uses {', '.join(extras)}, which our MHA does not "
                "compute. Use Hugging Face's attention for this model."
            )
    return found


def make_adapter(module: nn.Module, family: str, config, *, causal: bool) -> nn.Module:
    """Our MHA around one original attention module (same parameters; GPT-2: a copy); a
    module that is ours already ("mha") is its own adapter."""
    if family == "mha":
        return module
    num_heads = config.num_attention_heads
    if family == "bert":
        adapter = BertFamilyAttention(module, num_heads, causal)
    elif family == "gpt2":
        adapter = GPT2FamilyAttention(module, num_heads)
    else:
        adapter = LlamaFamilyAttention(module, num_heads, getattr(config, "num_key_value_heads", None) or num_heads)
    adapter.train(module.training)
    return adapter


def output_projection(module: nn.Module, family: str) -> nn.Module:
    """The layer that applies W_O; its input is the concatenation of the heads' outputs z."""
    if hasattr(module, "mha"):
        return module.mha.w_o
    return {"bert": lambda: module.output.dense, "gpt2": lambda: module.c_proj,
            "llama": lambda: module.o_proj}[family]()


def install_local_attention(model: nn.Module, *, causal: bool) -> list[nn.Module]:
    """Replace every self-attention of `model` with an adapter around our MHA, in place.

    Returns the adapters in the order the model runs them (layer 0 first); raises
    UnsupportedArchitecture as `find_attention` does.
    """
    adapters: list[nn.Module] = []
    for parent, attr, module, family in find_attention(model):
        adapter = make_adapter(module, family, model.config, causal=causal)
        setattr(parent, attr, adapter)
        adapters.append(adapter)
    return adapters
