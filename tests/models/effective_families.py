"""Random-init folders of every family with non-softmax token-mixing layers that transformers ships (hybrids, and
Mamba, Mamba-2, Falcon-Mamba, RWKV and xLSTM, made of such layers alone), saved as a user's model with this suite's
tokenizer: what tests/models/test_effective_attention.py and the tests of models read as effective attention alone
load."""

from __future__ import annotations

import torch

from tests.helpers import byte_bpe_tokenizer

BASE = dict(vocab_size=400, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, pad_token_id=0, bos_token_id=1, eos_token_id=2)
SSM = dict(mamba_n_heads=8, mamba_d_head=16, mamba_n_groups=2, mamba_d_state=16, mamba_expand=2, mamba_chunk_size=16)
GDN = dict(linear_num_value_heads=4, linear_num_key_heads=2, linear_key_head_dim=8, linear_value_head_dim=8)
N = 150  # tokens: three chunks of the delta rule's 64, ten of the SSD layers' 16


def _mamba2():
    from transformers import Mamba2Config, Mamba2ForCausalLM
    return Mamba2ForCausalLM, Mamba2Config(vocab_size=400, hidden_size=64, num_hidden_layers=2, num_heads=8,
                                           head_dim=16, expand=2, n_groups=2, state_size=16, chunk_size=16,
                                           pad_token_id=0, bos_token_id=1, eos_token_id=2)


def _bamba():
    from transformers import BambaConfig, BambaForCausalLM
    return BambaForCausalLM, BambaConfig(**BASE, **SSM, attn_layer_indices=[1])


def _falcon_h1():  # its μP multipliers on in_proj's output, and its gated norm after the gate
    from transformers import FalconH1Config, FalconH1ForCausalLM
    return FalconH1ForCausalLM, FalconH1Config(**BASE, **SSM, head_dim=16, mamba_d_ssm=128, mamba_rms_norm=True,
                                               ssm_multipliers=[0.5, 1.5, 0.7, 1.2, 0.9])


def _granitemoehybrid():
    from transformers import GraniteMoeHybridConfig, GraniteMoeHybridForCausalLM
    return GraniteMoeHybridForCausalLM, GraniteMoeHybridConfig(**BASE, **SSM, layer_types=["mamba", "attention"],
                                                               num_local_experts=2, num_experts_per_tok=1)


def _nemotron_h():
    from transformers import NemotronHConfig, NemotronHForCausalLM
    base = {k: v for k, v in BASE.items() if k != "num_hidden_layers"}
    return NemotronHForCausalLM, NemotronHConfig(**base, layers_block_type=["mamba", "attention"], mamba_num_heads=8,
                                                 mamba_head_dim=16, n_groups=2, ssm_state_size=16, chunk_size=16,
                                                 head_dim=16)


def _zamba2():
    from transformers import Zamba2Config, Zamba2ForCausalLM
    return Zamba2ForCausalLM, Zamba2Config(**BASE, mamba_d_state=16, mamba_headdim=16, mamba_ngroups=2, n_mamba_heads=8,
                                           chunk_size=16, layers_block_type=["mamba", "hybrid"])


def _qwen3_next():
    from transformers import Qwen3NextConfig, Qwen3NextForCausalLM
    return Qwen3NextForCausalLM, Qwen3NextConfig(**BASE, **GDN, head_dim=16, full_attention_interval=2, num_experts=2,
                                                 num_experts_per_tok=1, moe_intermediate_size=32,
                                                 shared_expert_intermediate_size=32)


def _qwen3_5():
    from transformers import Qwen3_5ForCausalLM, Qwen3_5TextConfig
    return Qwen3_5ForCausalLM, Qwen3_5TextConfig(**BASE, **GDN, head_dim=16, full_attention_interval=2)


def _kimi_linear():
    from transformers import KimiLinearConfig, KimiLinearForCausalLM
    return KimiLinearForCausalLM, KimiLinearConfig(
        **{**BASE, "num_key_value_heads": 4}, moe_intermediate_size=32, kv_lora_rank=16, qk_rope_head_dim=8,
        qk_nope_head_dim=8, v_head_dim=8, num_experts=2, num_experts_per_tok=1, linear_head_dim=8, linear_num_heads=4,
        layer_types=["linear_attention", "full_attention"], mlp_layer_types=["dense", "dense"])


def _mamba():
    from transformers import MambaConfig, MambaForCausalLM
    return MambaForCausalLM, MambaConfig(vocab_size=400, hidden_size=32, num_hidden_layers=2, state_size=8, expand=2,
                                         pad_token_id=0, bos_token_id=1, eos_token_id=2)


def _falcon_mamba():  # weightless RMSNorms on Δ, B and C
    from transformers import FalconMambaConfig, FalconMambaForCausalLM
    return FalconMambaForCausalLM, FalconMambaConfig(vocab_size=400, hidden_size=32, num_hidden_layers=2, state_size=8,
                                                     expand=2, pad_token_id=0, bos_token_id=1, eos_token_id=2)


def _jamba():  # RMSNorms with weights on Δ, B and C
    from transformers import JambaConfig, JambaForCausalLM
    return JambaForCausalLM, JambaConfig(**{**BASE, "hidden_size": 32}, attn_layer_period=2, attn_layer_offset=1,
                                         expert_layer_period=2, num_experts=2, mamba_d_state=8, mamba_expand=2)


def _minimax():
    from transformers import MiniMaxConfig, MiniMaxForCausalLM
    return MiniMaxForCausalLM, MiniMaxConfig(**BASE, head_dim=16, num_local_experts=2, num_experts_per_tok=1,
                                             block_size=32, layer_types=["linear_attention", "full_attention"])


def _recurrent_gemma():
    from transformers import RecurrentGemmaConfig, RecurrentGemmaForCausalLM
    return RecurrentGemmaForCausalLM, RecurrentGemmaConfig(**{**BASE, "num_key_value_heads": 4}, lru_width=64,
                                                           block_types=["recurrent", "attention"],
                                                           attention_window_size=32)


def _lfm2():
    from transformers import Lfm2Config, Lfm2ForCausalLM
    return Lfm2ForCausalLM, Lfm2Config(**BASE, layer_types=["conv", "full_attention"], conv_bias=True)


def _rwkv():
    from transformers import RwkvConfig, RwkvForCausalLM
    return RwkvForCausalLM, RwkvConfig(vocab_size=400, hidden_size=32, num_hidden_layers=2, attention_hidden_size=32,
                                       intermediate_size=64, context_length=256, pad_token_id=0, bos_token_id=1,
                                       eos_token_id=2)


def _xlstm():  # N = 150 tokens: two chunks of its kernel's 64, the rest by its recurrent kernel
    from transformers import xLSTMConfig, xLSTMForCausalLM
    return xLSTMForCausalLM, xLSTMConfig(vocab_size=400, hidden_size=64, num_blocks=2, num_heads=8, use_bias=True,
                                         pad_token_id=0, bos_token_id=1, eos_token_id=2)


FAMILIES = {"mamba2": _mamba2, "bamba": _bamba, "falcon_h1": _falcon_h1, "granitemoehybrid": _granitemoehybrid,
            "nemotron_h": _nemotron_h, "zamba2": _zamba2, "qwen3_next": _qwen3_next, "qwen3_5": _qwen3_5,
            "kimi_linear": _kimi_linear, "lfm2": _lfm2, "mamba": _mamba, "falcon_mamba": _falcon_mamba, "jamba": _jamba,
            "minimax": _minimax, "recurrent_gemma": _recurrent_gemma, "rwkv": _rwkv,
            "xlstm": _xlstm}
KIND = {"qwen3_next": "gated_deltanet", "qwen3_5": "gated_deltanet", "kimi_linear": "kda", "lfm2": "short_conv",
        "mamba": "mamba1", "falcon_mamba": "mamba1", "jamba": "mamba1", "minimax": "lightning",
        "recurrent_gemma": "rg_lru", "rwkv": "rwkv", "xlstm": "mlstm"}


def save_random(name: str, out) -> str:
    """A seeded random-init model of `name` with this suite's tokenizer, every weight moved by Gaussian
    noise (zero-initialised output projections and unit norms would hide a wrong factor) and the SSD
    layers' Δ brought to ≈ 0.13 (their init makes Δ large, so that A is nearly diagonal)."""
    cls, config = FAMILIES[name]()
    tok = byte_bpe_tokenizer()
    config.vocab_size = len(tok)
    torch.manual_seed(5)
    model = cls(config)
    with torch.no_grad():
        for pname, p in model.named_parameters():
            if pname.endswith("dt_bias") and not name.startswith(("qwen", "kimi")):
                p.copy_(-2.0 + 0.3 * torch.randn_like(p))
            elif not pname.endswith(("A_log", "dt_bias", ".D")):
                p.add_(0.05 * torch.randn_like(p))
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return str(out)
