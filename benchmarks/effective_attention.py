"""The exact effective attention (`mha_viz_models.effective`) beside the model's own forward pass.

Run: `.venv/bin/python benchmarks/effective_attention.py [--tokens 2048] [--repeat 1]`.
Two random-init shapes, each timed in this one process (best of `--repeat`): a Mamba-2 (Mamba-2
130M's layer: d_model 768, 24 heads of 64, state 128, one group, chunks of 256; 2 layers) and a
gated-DeltaNet hybrid (Qwen3-Next's linear-attention layer at d_model 1024: 16 value heads and 8
key heads of 128, chunks of 64; 4 layers, one of them softmax). For each: the forward pass alone,
`effective_layers` (that forward with its hooks, then every layer's matrix), and their ratio; the
issue's target is ≤ 3 × the forward at 2,048 tokens on the CPU.
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

from mha_viz_models.effective import effective_layers  # noqa: E402


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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=2048)
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, n = {args.tokens}")
    for build in (mamba2, gated_deltanet):
        torch.manual_seed(0)
        label, model = build()
        model.eval()
        ids = torch.randint(3, 1000, (1, args.tokens), generator=torch.Generator().manual_seed(1))
        with torch.no_grad():
            model(input_ids=ids[:, :64], use_cache=False)  # warm-up
            forward = best_of(lambda: model(input_ids=ids, use_cache=False), args.repeat)
        effective = best_of(lambda: effective_layers(model, ids), args.repeat)
        print(f"{label}: forward {forward:.2f} s, effective attention {effective:.2f} s, "
              f"ratio {effective / forward:.1f} × (target ≤ 3 ×)")


if __name__ == "__main__":
    main()
