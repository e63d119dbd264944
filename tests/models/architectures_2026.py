"""Tiny random-init configurations of the architectures researchers bring in 2025–2026 whose
attention differs from the families of `test_family_features`: DeBERTa-v2 (disentangled relative
attention), OLMo 2 (q/k RMSNorm over every head at once, post-norm blocks), SmolLM3 (no RoPE on
every fourth layer), GPT-OSS (learned per-head sink logits, sliding layers), Cohere 2 (interleaved
rotary on sliding layers, none on its global ones), DeepSeek-V3 (multi-head latent attention),
Llama 4 (chunked attention, no RoPE on every fourth layer), DeepSeek-V3.2 and GLM-5 (an indexer's sparse picks),
Gemma 3n (later layers reuse an earlier layer's keys and values; a norm over each head's values), and the
hybrids Qwen3-Next (gated softmax attention, Gated DeltaNet between), Jamba (Mamba between) and LFM2 (short
convolutions between), and Falcon-H1 and Zamba2 (Mamba-2 in the same layers as attention).
Each is 4 layers (DeBERTa 2), 4 heads of 16, saved with a byte-level BPE tokenizer by
`build`; heads are peaked (q/k weights scaled up) so that a wrong scale, norm or mask cannot hide
in near-uniform rows."""

from __future__ import annotations

from tests.helpers import save_peaked

SHARP = 6.0
# OLMo 2's q/k norms undo a scaled projection: their weight sets how peaked its heads are. 1.75
# keeps rows' maxima near 0.6 while a fused (SDPA) run's rounding, amplified by peaked heads
# through the layers, stays well below 1e-5 in the last layer's probabilities (lean capture)
NORM_SHARP = {"olmo2": 1.75, "gemma3n": 1.0}  # Gemma 3n scores q·k unscaled: norms of 1 peak its rows enough
WINDOW = 8  # sliding windows and Llama 4's chunks: the test text is longer
SHARPENED = ("q_proj.weight", "k_proj.weight", "query_proj.weight", "key_proj.weight", "q_b_proj.weight",
             "kv_b_proj.weight")


def common(**kw) -> dict:
    """The small shape every config here shares (4 layers, 4 heads, 2 KV heads, d_model 64), `kw` on top."""
    base = dict(vocab_size=400, hidden_size=64, intermediate_size=128, num_hidden_layers=4, num_attention_heads=4,
                num_key_value_heads=2, head_dim=16, max_position_embeddings=128, pad_token_id=0, bos_token_id=1,
                eos_token_id=2)
    return {**base, **kw}


def _olmo2():
    from transformers import Olmo2Config, Olmo2ForCausalLM
    return Olmo2ForCausalLM, Olmo2Config(**common())


def _smollm3():
    from transformers import SmolLM3Config, SmolLM3ForCausalLM
    return SmolLM3ForCausalLM, SmolLM3Config(**common(no_rope_layer_interval=2))  # layers 1 and 3: no RoPE


def _gpt_oss():
    from transformers import GptOssConfig, GptOssForCausalLM
    return GptOssForCausalLM, GptOssConfig(**common(num_local_experts=2, num_experts_per_tok=1, sliding_window=WINDOW))


def _cohere2():
    from transformers import Cohere2Config, Cohere2ForCausalLM
    return Cohere2ForCausalLM, Cohere2Config(**common(
        sliding_window=WINDOW, layer_types=["sliding_attention"] * 3 + ["full_attention"]))


def _deepseek_v3():
    from transformers import DeepseekV3Config, DeepseekV3ForCausalLM
    return DeepseekV3ForCausalLM, DeepseekV3Config(**common(
        head_dim=8, num_key_value_heads=4, kv_lora_rank=16, q_lora_rank=24, qk_rope_head_dim=8, qk_nope_head_dim=8,
        v_head_dim=12, n_routed_experts=2, num_experts_per_tok=1, first_k_dense_replace=2, moe_intermediate_size=32,
        n_group=1, topk_group=1))


SPARSE_TOP_K = 6  # the indexer's keys a query keeps (DeepSeek-V3.2, GLM-5): fewer than the test text's tokens


def _mla_sparse(**kw) -> dict:
    """DeepSeek-V3.2's and GLM-5's shared shape: DeepSeek-V3's MLA, and an indexer that keeps each query's
    SPARSE_TOP_K highest-scoring keys (`indexed_attention` layers)."""
    return common(head_dim=8, num_key_value_heads=4, kv_lora_rank=16, q_lora_rank=24, qk_rope_head_dim=8,
                  qk_nope_head_dim=8, v_head_dim=12, n_routed_experts=2, num_experts_per_tok=1, first_k_dense_replace=2,
                  moe_intermediate_size=32, n_group=1, topk_group=1, index_topk=SPARSE_TOP_K, index_head_dim=16,
                  index_n_heads=2, **kw)


def _deepseek_v32():
    from transformers import DeepseekV32Config, DeepseekV32ForCausalLM
    return DeepseekV32ForCausalLM, DeepseekV32Config(**_mla_sparse())


def _glm_moe_dsa():
    from transformers import GlmMoeDsaConfig, GlmMoeDsaForCausalLM
    # layers 1 and 3 reuse the picks of the layer before ("shared")
    return GlmMoeDsaForCausalLM, GlmMoeDsaConfig(**_mla_sparse(indexer_types=["full", "shared"] * 2))


def _gemma3n():
    """Gemma 3n's text model: layers 2 and 3 make no keys or values and reuse those of the last earlier layer of their
    type (layer 0 sliding, layer 1 full); its AltUp streams, LAuReL and per-layer inputs kept small."""
    from transformers import Gemma3nForCausalLM, Gemma3nTextConfig
    return Gemma3nForCausalLM, Gemma3nTextConfig(**common(
        layer_types=["sliding_attention", "full_attention"] * 2, sliding_window=WINDOW, num_kv_shared_layers=2,
        hidden_size_per_layer_input=8, vocab_size_per_layer_input=400, laurel_rank=4, altup_num_inputs=2,
        activation_sparsity_pattern=[0.0] * 4))


def _llama4():
    from transformers import Llama4ForCausalLM, Llama4TextConfig
    return Llama4ForCausalLM, Llama4TextConfig(**common(
        attention_chunk_size=WINDOW, num_local_experts=2, intermediate_size_mlp=128, no_rope_layers=None,
        floor_scale=4, attn_scale=0.5))  # the query temperature of its NoPE layer grows within the test text


def _deberta():
    from transformers import DebertaV2Config, DebertaV2ForMaskedLM
    return DebertaV2ForMaskedLM, DebertaV2Config(
        vocab_size=400, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        max_position_embeddings=128, relative_attention=True, pos_att_type=["c2p", "p2c"], position_buckets=16,
        pad_token_id=0)


def _qwen3_next():
    from transformers import Qwen3NextConfig, Qwen3NextForCausalLM
    return Qwen3NextForCausalLM, Qwen3NextConfig(**common(
        full_attention_interval=2, num_experts=2, num_experts_per_tok=1, moe_intermediate_size=32,
        shared_expert_intermediate_size=32, linear_num_value_heads=4, linear_num_key_heads=2, linear_key_head_dim=8,
        linear_value_head_dim=8))


def _jamba():
    from transformers import JambaConfig, JambaForCausalLM
    return JambaForCausalLM, JambaConfig(**common(
        attn_layer_period=2, attn_layer_offset=1, expert_layer_period=2, num_experts=2, mamba_d_state=8,
        mamba_expand=2))


def _lfm2():
    from transformers import Lfm2Config, Lfm2ForCausalLM
    return Lfm2ForCausalLM, Lfm2Config(**common(layer_types=["conv", "full_attention"] * 2))


def _minimax():  # lightning attention returns weights of its own (its blocks' state): not the softmax layers'
    from transformers import MiniMaxConfig, MiniMaxForCausalLM
    return MiniMaxForCausalLM, MiniMaxConfig(**common(num_local_experts=2, num_experts_per_tok=1, block_size=32,
                                                      layer_types=["linear_attention", "full_attention"] * 2))


def _falcon_h1():  # every layer: attention heads and Mamba-2 heads side by side; its μP multipliers away from 1
    from transformers import FalconH1Config, FalconH1ForCausalLM
    return FalconH1ForCausalLM, FalconH1Config(**common(
        mamba_n_heads=8, mamba_d_head=16, mamba_n_groups=2, mamba_d_state=16, mamba_expand=2, mamba_chunk_size=16,
        mamba_d_ssm=128, key_multiplier=0.39, attention_in_multiplier=0.8, attention_out_multiplier=0.9375,
        ssm_multipliers=[0.5, 1.5, 0.7, 1.2, 0.9]))


def _zamba2():  # Mamba-2 layers; in layers 1 and 3 a shared attention block (one, run twice) before the Mamba-2
    from transformers import Zamba2Config, Zamba2ForCausalLM
    return Zamba2ForCausalLM, Zamba2Config(**common(
        mamba_d_state=16, mamba_headdim=16, mamba_ngroups=2, n_mamba_heads=8, chunk_size=16,
        layers_block_type=["mamba", "hybrid"] * 2))


BUILDERS = {"olmo2": _olmo2, "smollm3": _smollm3, "gpt_oss": _gpt_oss, "cohere2": _cohere2,
            "deepseek_v3": _deepseek_v3, "llama4": _llama4, "deberta": _deberta, "deepseek_v32": _deepseek_v32,
            "glm_moe_dsa": _glm_moe_dsa, "gemma3n": _gemma3n}
# softmax attention in layers 1 and 3
HYBRIDS = {"qwen3_next": _qwen3_next, "jamba": _jamba, "lfm2": _lfm2, "minimax": _minimax}
# softmax attention and another token mixer in one layer: Falcon-H1's every layer, Zamba2's layers 1 and 3
BOTH = {"falcon_h1": _falcon_h1, "zamba2": _zamba2}


def build(name: str, out, *, sharp: float = SHARP) -> str:
    """A random-init model `name` of BUILDERS, HYBRIDS or BOTH with peaked heads, saved with its tokenizer to
    `out`."""
    cls, config = {**BUILDERS, **HYBRIDS, **BOTH}[name]()
    return save_peaked(cls, config, out, sharpened=SHARPENED, scale=sharp, norm=NORM_SHARP.get(name, sharp))


# DeepSeek-V4 (compressed memory, issue 89): not among BUILDERS, whose tests read every head's output (its are not)
V4_KINDS = ["sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention",
            "compressed_sparse_attention"]
V4_RATES = {"compressed_sparse_attention": 4, "heavily_compressed_attention": 16}
V4_TOP_K = 3  # the compressed sparse layers' indexer: the memory entries a query keeps
V4_TEXT = "The cat sat on the mat and the dog ran to the park, then the cat sat on the mat again. " * 2  # > 2 × 16


def build_deepseek_v4(out) -> str:
    """A random-init DeepSeek-V4 (a sliding layer, then compressed sparse, heavily compressed and compressed sparse
    ones at the rates V4_RATES) with peaked heads, saved with its tokenizer to `out`."""
    from transformers import DeepseekV4Config, DeepseekV4ForCausalLM
    config = DeepseekV4Config(**common(
        num_key_value_heads=1, q_lora_rank=24, o_groups=2, o_lora_rank=16, qk_rope_head_dim=8, n_routed_experts=2,
        num_experts_per_tok=1, moe_intermediate_size=32, index_topk=V4_TOP_K, index_head_dim=16, index_n_heads=2,
        sliding_window=WINDOW, layer_types=V4_KINDS, compress_rates=V4_RATES, mlp_layer_types=["moe"] * 4))
    return save_peaked(DeepseekV4ForCausalLM, config, out, sharpened=SHARPENED, scale=2.0, norm=2.0)
