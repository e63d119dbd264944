"""Which attention modules mha-viz reads, and how: every family, registered in order of precedence
in `FAMILIES` (`mha_viz_models.families.registry`, whose names this module re-exports). Each `Family`
has a tag ("ours" for our own layers, then "bert", "gpt2", "llama"…: the table in
docs/architecture.md lists them all), a recogniser (by structure, not by class name, so that close
relatives work too: RoBERTa, ELECTRA, Mistral, Qwen2, Qwen3, Gemma, Gemma 2, OLMo 2, SmolLM3,
GPT-OSS, Cohere 2, Llama 4…), a builder of its adapter (`mha_viz_models.families.adapters`), the accessor of
the layer that applies W_O (whose input is the heads' outputs z side by side: every per-head
feature reads it) and the features it refuses.
Adding a family is one `Family` here (and, for a new layout, an adapter or a rows function),
plus its test in tests/models/test_family_features.py and the docs' table regenerated (the
checklist: docs/architecture.md, "Adding a family").
"""

from __future__ import annotations

from torch import nn

from mha_viz_models.attention.heads import ValuePath
from mha_viz_models.attention.layer_features import llama_refusals
from mha_viz_models.errors import UnsupportedArchitecture
from mha_viz_models.families import compressed, shared_kv
from mha_viz_models.families.adapters import (
    Adapter,
    BertFamilyAttention,
    FusedQKVAttention,
    GPT2FamilyAttention,
    GPTJFamilyAttention,
    LlamaFamilyAttention,
    Seq2SeqAttention,
    T5FamilyAttention,
    blocked_rows,
    grouped_rows,
    interleaved_rows,
)
from mha_viz_models.families.registry import (
    FAMILIES,
    KINDS,
    Family,
    family_of,
    family_table,
    find_attention,
    found_attention,
    heads_unread,
    install_local_attention,
    make_adapter,
    output_projection,
    refused,
    register,
    stand_in_refusal,
    supported_models,
    value_path,
)

__all__ = [
    "FAMILIES", "KINDS", "Family", "UnsupportedArchitecture", "family_of", "family_table", "find_attention",
    "found_attention", "heads_unread",
    "install_local_attention", "make_adapter", "output_projection", "refused", "register", "stand_in_refusal",
    "supported_models", "value_path",
]


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
    # projections that are linear layers (Moshi's wrap theirs in a module of its own: not read)
    return _has(module, ("q_proj", "k_proj", "v_proj", "o_proj")) and all(
        hasattr(module, a) for a in ("scaling", "layer_idx"))


def _llama_refuse(module: nn.Module, config) -> list[str]:
    d_k = getattr(module, "head_dim", None) or module.q_proj.out_features // config.num_attention_heads
    if module.q_proj.out_features == 2 * config.num_attention_heads * d_k:  # q_proj writes each head's query and gate
        return ["a sigmoid gate on each head's output (q_proj writes a query and a gate per head)"]
    # what our MHA does not compute of a Llama relative (`mha_viz_models.attention.layer_features`)
    return llama_refusals(module, config, d_k)


register(Family(  # ours already: mha_viz_models.toy.model's layers, or an adapter installed before
    "ours", recognise=lambda m: isinstance(m, Adapter) and hasattr(m, "mha"),
    build=lambda m, _config, _causal: m, output_projection=lambda m: m.mha.w_o,
))
register(Family(
    "bert", recognise=_is_bert,
    build=lambda m, config, causal: BertFamilyAttention(m, config.num_attention_heads, causal),
    output_projection=lambda m: m.output.dense,
    names="BERT, RoBERTa, XLM-R, ELECTRA", kind="encoder"
))
register(Family(
    "gpt2", recognise=_is_gpt2,
    build=lambda m, config, _causal: GPT2FamilyAttention(m, config.num_attention_heads),
    output_projection=lambda m: m.c_proj,
    names="GPT-2", kind="decoder"
))
def _separate_values(w_v: nn.Module, w_o: nn.Module, config) -> ValuePath:
    """Values from a separate W_V (B, n, G · d_v), d_v read off W_O's input (H · d_v)."""
    d_v = w_o.in_features // config.num_attention_heads
    return ValuePath(w_v, w_v.out_features // d_v, d_v)


register(Family(  # before Llama, whose names its layers that make keys have: Hugging Face's attention runs
    "shared_kv", recognise=shared_kv.is_shared_kv, build=refused, output_projection=lambda m: m.o_proj,
    refuse=shared_kv.refusals, values=shared_kv.values, names="Gemma 3n, Gemma 4", kind="decoder"
))
register(Family(  # every head's attention, over the tokens and its compressed memory entries; no head's output
    "compressed", recognise=compressed.is_compressed, build=refused, output_projection=lambda m: m.o_a_proj,
    refuse=lambda _m, _config: [compressed.STAND_IN], names="DeepSeek-V4", kind="decoder", unread=compressed.UNREAD
))
register(Family(
    "llama", recognise=_is_llama,
    build=lambda m, config, _causal: LlamaFamilyAttention(
        m, config.num_attention_heads, _kv_heads(config), config),
    output_projection=lambda m: m.o_proj, refuse=_llama_refuse,
    values=lambda m, config: _separate_values(m.v_proj, m.o_proj, config),
    names=("Llama, SmolLM2, SmolLM3, Mistral, Mixtral, Qwen2, Qwen3, Gemma, Gemma 2, Gemma 3, Granite, OLMo 2, "
           "GPT-OSS, Cohere 2, Llama 4, Jamba, Qwen3-Next"), kind="decoder"
))


def _has(module: nn.Module, names: tuple[str, ...]) -> bool:
    return all(isinstance(getattr(module, n, None), nn.Linear) for n in names)


OPT_NAMES = ("q_proj", "k_proj", "v_proj", "out_proj")
DISTILBERT_NAMES = ("q_lin", "k_lin", "v_lin", "out_lin")


def _is_opt(module: nn.Module) -> bool:
    # OPT's decoder self-attention (BART's family has the same names, in encoder–decoders, which
    # are read apart: refused here)
    return _has(module, OPT_NAMES) and hasattr(module, "scaling") and not getattr(module, "is_cross_attention", False) \
        and getattr(getattr(module, "config", None), "model_type", "opt") == "opt"


def _is_albert(module: nn.Module) -> bool:
    # ALBERT: BERT's attention flattened onto one module, shared by every layer of a group
    return _has(module, ("query", "key", "value", "dense")) and all(
        hasattr(module, a) for a in ("LayerNorm", "output_dropout", "attention_dropout", "scaling"))


def _is_gptj(module: nn.Module) -> bool:
    return _has(module, OPT_NAMES) and all(hasattr(module, a) for a in ("embed_positions", "rotary_dim", "scale_attn"))


def _is_bart(module: nn.Module) -> bool:
    # BART, Marian, mBART, Pegasus: the same module in the encoder, the decoder and as cross-attention
    return _has(module, OPT_NAMES) and all(
        hasattr(module, a) for a in ("scaling", "is_decoder", "is_causal", "num_heads"))


def _is_t5(module: nn.Module) -> bool:
    return _has(module, ("q", "k", "v", "o")) and all(
        hasattr(module, a)
        for a in ("n_heads", "has_relative_attention_bias", "compute_bias", "is_decoder", "is_causal"))


def _is_distilbert(module: nn.Module) -> bool:
    return _has(module, DISTILBERT_NAMES) and hasattr(module, "n_heads")


def _is_neox(module: nn.Module) -> bool:
    fused, out = getattr(module, "query_key_value", None), getattr(module, "dense", None)
    return type(fused) is nn.Linear and isinstance(out, nn.Linear) and fused.out_features == 3 * out.in_features \
        and all(hasattr(module, a) for a in ("rotary_ndims", "scaling", "layer_idx"))


def _is_phi3(module: nn.Module) -> bool:
    fused, out = getattr(module, "qkv_proj", None), getattr(module, "o_proj", None)
    return isinstance(fused, nn.Linear) and isinstance(out, nn.Linear) and \
        all(hasattr(module, a) for a in ("scaling", "layer_idx", "num_key_value_heads"))


def _is_falcon(module: nn.Module) -> bool:
    fused, out = getattr(module, "query_key_value", None), getattr(module, "dense", None)
    return isinstance(fused, nn.Linear) and isinstance(out, nn.Linear) and all(
        hasattr(module, a) for a in ("multi_query", "new_decoder_architecture", "num_kv_heads", "inv_norm_factor"))


def _falcon_layout(module: nn.Module):
    """(rows function, KV heads) of a Falcon attention's fused q, k, v."""
    if module.new_decoder_architecture:
        return grouped_rows, module.num_kv_heads
    if module.multi_query:
        return blocked_rows, 1  # [q_0 … q_{h−1}, k, v]: one key/value head for all
    return interleaved_rows, module.num_heads


def _falcon(module: nn.Module, config) -> Adapter:
    rows, kv = _falcon_layout(module)
    return FusedQKVAttention(module, module.query_key_value, module.dense, rows, module.num_heads, kv, config,
                             scale=module.inv_norm_factor)


def _is_modernbert(module: nn.Module) -> bool:
    return _has(module, ("Wqkv", "Wo")) and all(hasattr(module, a) for a in ("head_dim", "sliding_window"))


def _modernbert(module: nn.Module, config) -> Adapter:
    # its local layers see |i − j| <= local_attention // 2; the module's sliding_window is that + 1
    window = module.sliding_window - 1 if module.sliding_window else None
    heads = config.num_attention_heads
    return FusedQKVAttention(module, module.Wqkv, module.Wo, blocked_rows, heads, heads, config,
                             scale=module.head_dim ** -0.5, causal=False, window=window)


def _is_deberta(module: nn.Module) -> bool:
    # DeBERTa-v2/v3's attention: `.self` the disentangled attention, `.output.dense` W_O
    sa, out = getattr(module, "self", None), getattr(module, "output", None)
    return sa is not None and _has(sa, ("query_proj", "key_proj", "value_proj")) and hasattr(sa, "pos_att_type") \
        and isinstance(getattr(out, "dense", None), nn.Linear)


def _is_mla(module: nn.Module) -> bool:
    # DeepSeek-V2/V3's multi-head latent attention: keys and values from a shared latent
    return _has(module, ("kv_a_proj_with_mqa", "kv_b_proj", "o_proj")) and all(
        hasattr(module, a) for a in ("qk_nope_head_dim", "v_head_dim", "qk_rope_head_dim"))


def _mla_values(module: nn.Module, config) -> ValuePath:
    """kv_b_proj writes, for each head, [k_nope (qk_nope_head_dim) | v (v_head_dim)]."""
    return ValuePath(module.kv_b_proj, config.num_attention_heads, module.v_head_dim, offset=module.qk_nope_head_dim)


def _deberta_refuse(module: nn.Module, _config) -> list[str]:
    terms = [t for t in module.self.pos_att_type if t in ("c2p", "p2c")]
    return ["DeBERTa's disentangled attention (content-to-position and position-to-content scores over "
            f"relative positions: {', '.join(terms) or 'none set'}, scale 1/√(d·{1 + len(terms)}))"]


MLA = ("multi-head latent attention (MLA: each head's keys and values expanded from one shared latent, "
       "with a rotary key part shared by every head)")


def _kv_heads(config) -> int:
    return getattr(config, "num_key_value_heads", None) or config.num_attention_heads


register(Family(
    "neox", recognise=_is_neox,
    build=lambda m, config, _causal: FusedQKVAttention(
        m, m.query_key_value, m.dense, interleaved_rows, config.num_attention_heads, config.num_attention_heads,
        config),
    output_projection=lambda m: m.dense,
    names="GPT-NeoX, Pythia", kind="decoder"
))
register(Family(
    "phi3", recognise=_is_phi3,
    build=lambda m, config, _causal: FusedQKVAttention(
        m, m.qkv_proj, m.o_proj, blocked_rows, config.num_attention_heads, _kv_heads(config), config),
    output_projection=lambda m: m.o_proj,
    names="Phi-3", kind="decoder"
))


register(Family(
    "falcon", recognise=_is_falcon, build=lambda m, config, _causal: _falcon(m, config),
    output_projection=lambda m: m.dense,
    refuse=lambda _m, config: ["ALiBi position biases"] if getattr(config, "alibi", False) else [],
    names="Falcon", kind="decoder"
))
register(Family(  # our MHA refused by name; its heads' outputs and values are read off its own modules
    "deberta", recognise=_is_deberta, build=refused, output_projection=lambda m: m.output.dense,
    refuse=_deberta_refuse, values=lambda m, config: _separate_values(m.self.value_proj, m.output.dense, config),
    names="DeBERTa-v2, DeBERTa-v3", kind="encoder"
))


def _is_lfm2(module: nn.Module) -> bool:
    # LFM2's attention layers (between its short convolutions): per-head q/k layer norms, out_proj
    return _has(module, ("q_proj", "k_proj", "v_proj", "out_proj")) and all(
        hasattr(module, a) for a in ("q_layernorm", "k_layernorm", "layer_idx"))


register(Family(
    "lfm2", recognise=_is_lfm2, build=refused, output_projection=lambda m: m.out_proj,
    values=lambda m, config: _separate_values(m.v_proj, m.out_proj, config),
    refuse=lambda _m, _config: ["LFM2's attention (q_layernorm and k_layernorm, its own calling convention)"],
    names="LFM2", kind="decoder"
))
register(Family(  # our MHA refused by name; its heads' outputs and values are read off its own modules
    "mla", recognise=_is_mla, build=refused, output_projection=lambda m: m.o_proj, values=_mla_values,
    refuse=lambda _m, _config: [MLA], names="DeepSeek-V2, DeepSeek-V3, DeepSeek-V3.2, GLM-5", kind="decoder",
))
register(Family(
    "modernbert", recognise=_is_modernbert, build=lambda m, config, _causal: _modernbert(m, config),
    output_projection=lambda m: m.Wo,
    names="ModernBERT", kind="encoder"
))
register(Family(
    "albert", recognise=_is_albert,
    build=lambda m, config, causal: BertFamilyAttention(m, config.num_attention_heads, causal, flat=True),
    output_projection=lambda m: m.dense,
    names="ALBERT", kind="encoder"
))
register(Family(
    "gptj", recognise=_is_gptj, build=lambda m, config, _causal: GPTJFamilyAttention(m, config.num_attention_heads),
    output_projection=lambda m: m.out_proj,
    names="GPT-J", kind="decoder"
))
register(Family(
    "opt", recognise=_is_opt,
    build=lambda m, config, _causal: LlamaFamilyAttention(
        m, config.num_attention_heads, config.num_attention_heads, config, names=OPT_NAMES),
    output_projection=lambda m: m.out_proj,
    names="OPT", kind="decoder"
))
register(Family(
    "bart", recognise=_is_bart, build=lambda m, _config, _causal: Seq2SeqAttention(m),
    output_projection=lambda m: m.out_proj,
    names="BART, Marian, mBART, Pegasus", kind="encoder–decoder"
))
register(Family(
    "t5", recognise=_is_t5, build=lambda m, _config, _causal: T5FamilyAttention(m),
    output_projection=lambda m: m.o,
    names="T5", kind="encoder–decoder"
))
register(Family(
    "distilbert", recognise=_is_distilbert,
    build=lambda m, config, causal: LlamaFamilyAttention(
        m, config.num_attention_heads, config.num_attention_heads, config, names=DISTILBERT_NAMES, causal=causal),
    output_projection=lambda m: m.out_lin,
    names="DistilBERT", kind="encoder"
))
