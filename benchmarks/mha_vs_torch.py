"""Our MultiHeadAttention beside PyTorch's, in one run, with ratios.

Run: `.venv/bin/python benchmarks/mha_vs_torch.py [--repeat 5]`.
With weights: ours (need_weights=True) against torch.nn.MultiheadAttention(need_weights=True,
average_attn_weights=False). Without: ours (need_weights=False, which calls
F.scaled_dot_product_attention) against torch.nn.MultiheadAttention(need_weights=False) and
against the bare fused kernel on the same q, k, v. Same weights, inference mode, best of
`--repeat` alternating timings of a few calls each.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from mha_viz_models import MultiHeadAttention  # noqa: E402
from mha_viz_models.attention.config import Shape  # noqa: E402


def twins(d_model: int, heads: int) -> tuple[MultiHeadAttention, torch.nn.MultiheadAttention]:
    """Our module and PyTorch's with the same weights."""
    torch.manual_seed(0)
    ref = torch.nn.MultiheadAttention(d_model, heads, batch_first=True).eval()
    ours = MultiHeadAttention(Shape(d_model, heads)).eval()
    w_q, w_k, w_v = ref.in_proj_weight.chunk(3)
    b_q, b_k, b_v = ref.in_proj_bias.chunk(3)
    with torch.no_grad():
        for lin, w, b in ((ours.w_q, w_q, b_q), (ours.w_k, w_k, b_k), (ours.w_v, w_v, b_v),
                          (ours.w_o, ref.out_proj.weight, ref.out_proj.bias)):
            lin.weight.copy_(w)
            lin.bias.copy_(b)
    return ours, ref


def side_by_side(a, b, repeat: int, calls: int) -> tuple[float, float]:
    """Best time per call of a and of b, measured alternately so that both see the same
    machine (a shared VM's speed drifts by tens of per cent from one second to the next)."""
    a(), b()
    best_a = best_b = float("inf")
    for _ in range(repeat):
        for fn, which in ((a, "a"), (b, "b")):
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            t = (time.perf_counter() - t0) / calls
            if which == "a":
                best_a = min(best_a, t)
            else:
                best_b = min(best_b, t)
    return best_a, best_b


def measure(repeat: int) -> list[tuple[str, float, float]]:
    """(case, ours seconds, torch seconds) for each case, at (8, 128) and (1, 1024)."""
    results = []
    d_model, heads = 768, 12
    for batch, n in ((8, 128), (1, 1024)):
        ours, ref = twins(d_model, heads)
        x = torch.randn(batch, n, d_model)
        calls = 20 if n <= 128 else 5
        with torch.inference_mode():
            out_ours, p_ours = ours(x)
            out_ref, p_ref = ref(x, x, x, need_weights=True, average_attn_weights=False)
            assert torch.allclose(out_ours, out_ref, atol=1e-4) and torch.allclose(p_ours, p_ref, atol=1e-5)
            cases = {
                "with weights": (lambda: ours(x), lambda: ref(x, x, x, need_weights=True, average_attn_weights=False)),
                "without weights vs nn.MHA": (lambda: ours(x, need_weights=False),
                                              lambda: ref(x, x, x, need_weights=False)),
            }
            q = ours.project_q(x)
            k, v = ours.project_kv(x, x)
            cases["attention only vs bare SDPA"] = (
                lambda: ours.attend(q, k, v, need_weights=False),
                lambda: F.scaled_dot_product_attention(q, k, v))
            for name, (a, b) in cases.items():
                t_ours, t_ref = side_by_side(a, b, repeat, calls)
                results.append((f"B={batch} n={n}: {name}", t_ours, t_ref))
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, float32, CPU")
    print(f"| {'case':38s} | {'ours ms':>8s} | {'torch ms':>8s} | {'ours ÷ torch':>12s} |")
    print(f"|{'-' * 40}|{'-' * 10}|{'-' * 10}|{'-' * 14}|")
    for label, t_ours, t_ref in measure(args.repeat):
        print(f"| {label:38s} | {t_ours * 1e3:8.2f} | {t_ref * 1e3:8.2f} | {t_ours / t_ref:12.2f} |")


if __name__ == "__main__":
    main()
