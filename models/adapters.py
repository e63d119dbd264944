"""Drop-in replacements that make a loaded Hugging Face model compute attention with our MHA.

Each adapter takes the place of one self-attention module, keeps the trained weights (the same
parameters where the layout allows, a transposed copy for GPT-2's fused Conv1D), accepts the
arguments the surrounding Hugging Face layer passes, and returns `(output, probabilities)` as
the original did. Families are recognised by structure, not by name, so that close relatives
(RoBERTa, ELECTRA, Mistral, Qwen2, Qwen3, Gemma, Gemma 2...) work too; what the relatives add to
q, k or the scores (per-head q/k norms, logit soft-capping, sliding windows) is our MHA's too.

`FAMILIES` is the registry, in order of precedence: each `Family` has a tag ("ours", "bert",
"gpt2", "llama"), a recogniser, a builder of its adapter and the accessor of the layer that
applies W_O. Adding a family means writing its `Adapter` subclass and registering one `Family`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import torch
from torch import nn

from .errors import UnsupportedArchitecture
from .mha import MultiHeadAttention

__all__ = [
    "Adapter", "BertFamilyAttention", "FAMILIES", "Family", "GPT2FamilyAttention", "LlamaFamilyAttention",
    "UnsupportedArchitecture", "family_of", "find_attention", "install_local_attention", "make_adapter",
    "output_projection", "register",
]


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


class Adapter(nn.Module):
    """A self-attention layer computed by our MHA (`self.mha`), returning (output, probabilities).
    `need_weights = False` makes the layer run PyTorch's fused attention and return no
    probabilities (lean capture recomputes the ones it needs)."""

    need_weights = True
    mha: MultiHeadAttention


class BertFamilyAttention(Adapter):
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
        q, k, v = self.mha.project_self(hidden_states)  # (B, h, n, d_k), (B, h, n, d_k), (B, h, n, d_v)
        k, v = _update_cache(past_key_values, k, v, self.layer_idx)
        z, probs = self.mha.attend(q, k, v, attn_mask=attention_mask, need_weights=self.need_weights,
                                   is_causal=_is_causal_fallback(attention_mask, self.causal))
        out = self.mha.merge(z)  # (B, n, d_model)
        return self.layer_norm(self.output_dropout(out) + hidden_states), probs


class GPT2FamilyAttention(Adapter):
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
        q, k, v = self.mha.project_self(hidden_states)  # (B, h, n, d_k), (B, h, n, d_k), (B, h, n, d_v)
        k, v = _update_cache(past_key_values, k, v, self.layer_idx)
        z, probs = self.mha.attend(q, k, v, attn_mask=attention_mask, need_weights=self.need_weights,
                                   is_causal=_is_causal_fallback(attention_mask, True))
        return self.resid_dropout(self.mha.merge(z)), probs


def _per_head_norm(original: nn.Module, name: str, d_k: int) -> nn.Module | None:
    """The module's q_norm or k_norm when it normalises each head's d_k values (Qwen3, Gemma 3),
    else None (checked by `_llama_refuse`: a norm over every head at once is refused)."""
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


class LlamaFamilyAttention(Adapter):
    """Replaces a Llama-style attention (q/k/v/o_proj, RoPE from `position_embeddings`,
    grouped-query attention), with what its relatives add: per-head q/k norms (Qwen3), logit
    soft-capping and a query pre-attention scalar (Gemma 2), sliding windows (Mistral, Gemma 2,
    Qwen2/3)."""

    def __init__(self, original: nn.Module, num_heads: int, num_kv_heads: int, config=None) -> None:
        super().__init__()
        d_k = original.q_proj.out_features // num_heads
        self.mha = MultiHeadAttention.from_linears(
            original.q_proj, original.k_proj, original.v_proj, original.o_proj,
            num_heads=num_heads, num_kv_heads=num_kv_heads, scale=original.scaling,
            dropout=float(getattr(original, "attention_dropout", 0.0)),
            q_norm=_per_head_norm(original, "q_norm", d_k), k_norm=_per_head_norm(original, "k_norm", d_k),
            softcap=getattr(original, "attn_logit_softcapping", None),
            window=layer_window(original, config),
        )
        self.layer_idx = original.layer_idx

    def forward(self, hidden_states, position_embeddings=None, attention_mask=None,
                past_key_values=None, **kwargs):
        # position_embeddings: RoPE's (cos, sin), (B, n, d_k) each, turned into q and k
        q, k, v = self.mha.project_self(hidden_states, position_embeddings)  # (B, h|G|G, n, d_k)
        k, v = _update_cache(past_key_values, k, v, self.layer_idx)
        z, probs = self.mha.attend(q, k, v, attn_mask=attention_mask, need_weights=self.need_weights,
                                   is_causal=_is_causal_fallback(attention_mask, True))
        return self.mha.merge(z), probs


# --- the registry --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Family:
    """One kind of self-attention module mha-viz can read and replace.

    recognise(module): whether `module` is one (by structure, not by class name).
    build(module, config, causal): our adapter over its weights.
    output_projection(module): the layer that applies W_O (its input is the heads' outputs z side by side).
    refuse(module, config): the features of this module or config our MHA does not compute
        (a model with any is refused when its attention is to be replaced).
    """

    tag: str
    recognise: Callable[[nn.Module], bool]
    build: Callable[[nn.Module, Any, bool], Adapter]
    output_projection: Callable[[nn.Module], nn.Module]
    refuse: Callable[[nn.Module, Any], list[str]] = lambda _module, _config: []


FAMILIES: dict[str, Family] = {}  # by tag, in order of precedence: the first that recognises a module wins


def register(family: Family) -> Family:
    """Add a family to `FAMILIES` (after those registered before it)."""
    FAMILIES[family.tag] = family
    return family


def _is_bert(module: nn.Module) -> bool:
    if not (hasattr(module, "self") and hasattr(module, "output")):
        return False
    return all(hasattr(module.self, a) for a in ("query", "key", "value")) and \
        hasattr(module.output, "LayerNorm") and not getattr(module, "is_cross_attention", False)


def _is_gpt2(module: nn.Module) -> bool:
    # GPT-2 itself: a fused Conv1D (d, 3d) and the attributes the adapter reads. Relatives with
    # c_attn but another layout (GPTBigCode's multi-query Linear, OpenAI-GPT) are not.
    if not (hasattr(module, "c_attn") and hasattr(module, "c_proj")):
        return False
    weight = getattr(module.c_attn, "weight", None)
    return (type(module.c_attn).__name__ == "Conv1D" and weight is not None and weight.dim() == 2
            and weight.shape[1] == 3 * weight.shape[0]
            and all(hasattr(module, a) for a in ("embed_dim", "scaling", "layer_idx", "attn_dropout"))
            and not getattr(module, "is_cross_attention", False))


def _is_llama(module: nn.Module) -> bool:
    return all(hasattr(module, a) for a in ("q_proj", "k_proj", "v_proj", "o_proj", "scaling", "layer_idx"))


# Features of Llama relatives that our MHA does not compute; a model with any of them is refused.
_LLAMA_EXTRAS = ("sinks", "q_layernorm", "k_layernorm")


def _llama_refuse(module: nn.Module, config) -> list[str]:
    d_k = module.q_proj.out_features // config.num_attention_heads
    norms = [f"{a} over every head at once" for a in ("q_norm", "k_norm")
             if getattr(module, a, None) is not None and _per_head_norm(module, a, d_k) is None]
    return [a for a in _LLAMA_EXTRAS if hasattr(module, a)] + norms


register(Family(  # ours already: models.toy's layers, or an adapter installed before
    "ours", recognise=lambda m: isinstance(m, Adapter) and hasattr(m, "mha"),
    build=lambda m, _config, _causal: m, output_projection=lambda m: m.mha.w_o,
))
register(Family(
    "bert", recognise=_is_bert,
    build=lambda m, config, causal: BertFamilyAttention(m, config.num_attention_heads, causal),
    output_projection=lambda m: m.output.dense,
))
register(Family(
    "gpt2", recognise=_is_gpt2,
    build=lambda m, config, _causal: GPT2FamilyAttention(m, config.num_attention_heads),
    output_projection=lambda m: m.c_proj,
))
register(Family(
    "llama", recognise=_is_llama,
    build=lambda m, config, _causal: LlamaFamilyAttention(
        m, config.num_attention_heads,
        getattr(config, "num_key_value_heads", None) or config.num_attention_heads, config),
    output_projection=lambda m: m.o_proj, refuse=_llama_refuse,
))


def family_of(module: nn.Module) -> str | None:
    """The tag of the first family in `FAMILIES` that recognises `module`, or None."""
    return next((tag for tag, fam in FAMILIES.items() if fam.recognise(module)), None)


def find_attention(model: nn.Module) -> list[tuple[nn.Module, str, nn.Module, str]]:
    """Every self-attention module of `model` in the order the model runs them (layer 0 first),
    as (parent, attribute name, module, family tag). Raises UnsupportedArchitecture when nothing
    is recognised or the model uses an attention feature that our MHA does not compute (sinks,
    a q/k norm over every head at once)."""
    config = model.config
    found: list[tuple[nn.Module, str, nn.Module, str]] = []
    names: list[str] = []
    for name, module in model.named_modules():
        family = family_of(module)
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
    first = {}  # the first module of each family found
    for _, _, module, family in found:
        first.setdefault(family, module)
    extras = [e for family, module in first.items() for e in FAMILIES[family].refuse(module, config)]
    if extras:
        raise UnsupportedArchitecture(
            f"'{config.model_type}' attention uses {', '.join(extras)}, which our MHA does not "
            "compute. Use Hugging Face's attention for this model."
        )
    return found


def make_adapter(module: nn.Module, family: str, config, *, causal: bool) -> Adapter:
    """Our MHA around one original attention module of family `family` (same parameters;
    GPT-2: a copy); a module that is ours already ("ours") is its own adapter."""
    adapter = FAMILIES[family].build(module, config, causal)
    if adapter is not module:
        adapter.train(module.training)
    return adapter


def output_projection(module: nn.Module, family: str) -> nn.Module:
    """The layer that applies W_O; its input is the concatenation of the heads' outputs z."""
    return FAMILIES[family].output_projection(module)


def install_local_attention(model: nn.Module, *, causal: bool) -> list[Adapter]:
    """Replace every self-attention of `model` with an adapter around our MHA, in place.

    Returns the adapters in the order the model runs them (layer 0 first); raises
    UnsupportedArchitecture as `find_attention` does.
    """
    adapters: list[Adapter] = []
    for parent, attr, module, family in find_attention(model):
        adapter = make_adapter(module, family, model.config, causal=causal)
        setattr(parent, attr, adapter)
        adapters.append(adapter)
    return adapters
