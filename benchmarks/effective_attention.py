"""The exact effective attention (`mha_viz_models.effective`) beside the model's own forward pass.

Run: `.venv/bin/python benchmarks/effective_attention.py [--tokens 2048] [--repeat 1] [--only NAME,...]`.
Random-init shapes, each timed in this one process (best of `--repeat`): a Mamba-2 (Mamba-2 130M's layer:
d_model 768, 24 heads of 64, state 128, one group, chunks of 256; 2 layers) and a gated-DeltaNet hybrid
(Qwen3-Next's linear-attention layer at d_model 1024: 16 value heads and 8 key heads of 128, chunks of 64;
4 layers, one of them softmax), the issue's two targets (≤ 3 × the forward at 2,048 tokens on the CPU); then one
small shape of every other kind (Kimi Delta Attention, lightning attention, short convolutions, Mamba-1, RG-LRU;
the per-channel kinds at 256 channels: their matrices are channels × n², 4 GiB at 2,048 tokens). For each: the
forward pass alone, `effective_layers` (that forward with its hooks, then every layer's matrix) and its ratio, and
the same layers read by rows (`by_rows=True`, each layer's blocks made and let go, as the app's summary reads them)
and its ratio.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
from metrics_vs_forward import best_of  # noqa: E402 - beside this script

from mha_viz_models.effective import each_layer, effective_layers  # noqa: E402


def mamba2():
    from transformers import Mamba2Config, Mamba2ForCausalLM
    return "Mamba-2 (2 layers, 24 heads × 64, state 128)", Mamba2ForCausalLM(Mamba2Config(
        vocab_size=1000, hidden_size=768, num_hidden_layers=2, num_heads=24, head_dim=64, expand=2, n_groups=1,
        state_size=128, chunk_size=256))


def gated_deltanet():
    from transformers import Qwen3NextConfig, Qwen3NextForCausalLM
    return "gated DeltaNet (Qwen3-Next shape, 3 of 4 layers, 16 heads × 128)", Qwen3NextForCausalLM(Qwen3NextConfig(
        vocab_size=1000, hidden_size=1024, intermediate_size=2048, num_hidden_layers=4, num_attention_heads=8,
        num_key_value_heads=2, head_dim=128, full_attention_interval=4, num_experts=4, num_experts_per_tok=2,
        moe_intermediate_size=512, shared_expert_intermediate_size=512, linear_num_value_heads=16,
        linear_num_key_heads=8, linear_key_head_dim=128, linear_value_head_dim=128))


def kda():
    from transformers import KimiLinearConfig, KimiLinearForCausalLM
    return "Kimi Delta Attention (1 of 2 layers, 16 heads × 128)", KimiLinearForCausalLM(KimiLinearConfig(
        vocab_size=1000, hidden_size=1024, intermediate_size=2048, num_hidden_layers=2, num_attention_heads=8,
        num_key_value_heads=8, moe_intermediate_size=256, kv_lora_rank=64, qk_rope_head_dim=32, qk_nope_head_dim=64,
        v_head_dim=64, num_experts=2, num_experts_per_tok=1, linear_head_dim=128, linear_num_heads=16,
        layer_types=["linear_attention", "full_attention"], mlp_layer_types=["dense", "dense"], pad_token_id=0))


def lightning():
    from transformers import MiniMaxConfig, MiniMaxForCausalLM
    return "lightning attention (MiniMax shape, 1 of 2 layers, 16 heads × 64)", MiniMaxForCausalLM(MiniMaxConfig(
        vocab_size=1000, hidden_size=1024, intermediate_size=2048, num_hidden_layers=2, num_attention_heads=16,
        num_key_value_heads=4, head_dim=64, num_local_experts=2, num_experts_per_tok=1, block_size=256,
        layer_types=["linear_attention", "full_attention"], pad_token_id=0))


def short_conv():
    from transformers import Lfm2Config, Lfm2ForCausalLM
    return "short convolution (LFM2 shape at 256 channels, 1 of 2 layers)", Lfm2ForCausalLM(Lfm2Config(
        vocab_size=1000, hidden_size=256, intermediate_size=512, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, layer_types=["conv", "full_attention"], pad_token_id=0))


def mamba1():
    from transformers import MambaConfig, MambaForCausalLM
    return "Mamba-1 (256 channels, state 16, 1 layer)", MambaForCausalLM(MambaConfig(
        vocab_size=1000, hidden_size=128, num_hidden_layers=1, state_size=16, expand=2, pad_token_id=0))


def rglru():
    from transformers import RecurrentGemmaConfig, RecurrentGemmaForCausalLM
    return "RG-LRU (RecurrentGemma shape at 256 channels, 1 of 2 layers)", RecurrentGemmaForCausalLM(
        RecurrentGemmaConfig(vocab_size=1000, hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                             num_attention_heads=4, num_key_value_heads=4, lru_width=256,
                             block_types=["recurrent", "attention"], attention_window_size=256, pad_token_id=0))


SHAPES = {"mamba2": mamba2, "gated_deltanet": gated_deltanet, "kda": kda, "lightning": lightning,
          "short_conv": short_conv, "mamba1": mamba1, "rglru": rglru}


def _by_rows(model, ids) -> None:
    """Every layer read by rows, each block made and let go (as the app's summary reads them)."""
    for layer in each_layer(model, ids, by_rows=True):
        for _first, _rows in layer.blocks():
            pass


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=2048)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--only", default=",".join(SHAPES), help="comma-separated: " + ", ".join(SHAPES))
    args = ap.parse_args()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, n = {args.tokens}")
    for build in (SHAPES[name] for name in args.only.split(",")):
        torch.manual_seed(0)
        label, model = build()
        model.eval()
        ids = torch.randint(3, 1000, (1, args.tokens), generator=torch.Generator().manual_seed(1))
        with torch.no_grad():
            model(input_ids=ids[:, :64], use_cache=False)  # warm-up
            forward = best_of(lambda: model(input_ids=ids, use_cache=False), args.repeat)
        effective = best_of(lambda: effective_layers(model, ids), args.repeat)
        rows = best_of(lambda: _by_rows(model, ids), args.repeat)
        print(f"{label}: forward {forward:.2f} s, effective attention {effective:.2f} s, "
              f"ratio {effective / forward:.1f} × (target ≤ 3 ×); by rows {rows:.2f} s, {rows / forward:.1f} ×")


if __name__ == "__main__":
    main()
