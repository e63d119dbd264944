"""Small random-init configs of the families most tests load (GPT-2, BERT, Llama with GQA, Gemma 2
with soft-capped scores, Gemma 3, OLMo 2, Qwen3): `BUILDERS[name]()` is (the model class, its config)."""

from __future__ import annotations


def _gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel
    return GPT2LMHeadModel, GPT2Config(n_positions=64, n_embd=64, n_layer=3, n_head=4)


def _bert():
    from transformers import BertConfig, BertForMaskedLM
    return BertForMaskedLM, BertConfig(hidden_size=64, num_hidden_layers=3, num_attention_heads=4,
                                       intermediate_size=128, max_position_embeddings=64)


def _llama():
    from transformers import LlamaConfig, LlamaForCausalLM
    return LlamaForCausalLM, LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=3,
                                         num_attention_heads=8, num_key_value_heads=2, max_position_embeddings=128)


def _gemma3():
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig
    return Gemma3ForCausalLM, Gemma3TextConfig(
        hidden_size=64, intermediate_size=128, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2,
        head_dim=16, max_position_embeddings=128, sliding_window=8, query_pre_attn_scalar=16)


def _olmo2():
    from transformers import Olmo2Config, Olmo2ForCausalLM
    return Olmo2ForCausalLM, Olmo2Config(hidden_size=64, intermediate_size=128, num_hidden_layers=3,
                                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)


def _qwen3():
    from transformers import Qwen3Config, Qwen3ForCausalLM
    return Qwen3ForCausalLM, Qwen3Config(hidden_size=64, intermediate_size=128, num_hidden_layers=3,
                                         num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                                         max_position_embeddings=128)


def _gemma2():  # soft-capped scores: the terms split the score before the cap
    from transformers import Gemma2Config, Gemma2ForCausalLM
    return Gemma2ForCausalLM, Gemma2Config(
        hidden_size=64, intermediate_size=128, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2,
        head_dim=16, max_position_embeddings=128, sliding_window=8, query_pre_attn_scalar=24,
        attn_logit_softcapping=5.0)


BUILDERS = {"gpt2": _gpt2, "bert": _bert, "llama": _llama, "gemma2": _gemma2, "gemma3": _gemma3, "olmo2": _olmo2,
            "qwen3": _qwen3}
