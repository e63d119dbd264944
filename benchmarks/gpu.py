"""Captures on a GPU (issue 28), side by side in one run (a benchmark, not a test; CI never runs it):

1. Llama-3.2-1B's shape (16 layers × 32 heads, 8 KV heads, d 2048), random init, at 512, 2,048
   and 4,096 tokens: the fused forward (SDPA), `mha_viz.analyze`, and Hugging Face's eager capture
   with the copy to the host (`output_attentions=True`, then `.cpu()` of every layer); one layer's
   probabilities copied to pageable and to pinned memory (GiB/s); float32 against bfloat16 (time,
   peak GPU memory, largest difference of the probabilities).
2. BERT-base's shape (12 × 12, d 768) at 512 tokens: the fused forward against `analyze`.
3. Llama-3.1-8B's shape (32 × 32 heads, 8 KV heads, d 4096) in bfloat16, loaded with
   max_memory={0: "24GiB", "cpu": …}: it loads within the budget, `analyze` at 2,048 tokens, and the
   Model view's figure draws (`mha_viz.figures.model_grid`).

Weights do not change the cost: random-init twins of the configurations, saved to a temporary
folder and loaded through `mha_viz.load_model` as a user's folder would be. Without a GPU the
same runs use a small shape on the CPU (`--small`), and the GPU targets read "not measured".

Run: `.venv/bin/python benchmarks/gpu.py [--sizes 512,2048,4096] [--repeat 3] [--small] [--skip-8b]`.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
import torch  # noqa: E402
from report import print_verdicts  # noqa: E402 - benchmarks/report.py, beside this script

import mha_viz  # noqa: E402
from tests.helpers import byte_bpe_tokenizer  # noqa: E402 - a tokenizer made here (no hub)

GiB = 2**30
LLAMA_1B = dict(hidden_size=2048, intermediate_size=8192, num_hidden_layers=16, num_attention_heads=32,
                num_key_value_heads=8, head_dim=64, vocab_size=128256, rope_theta=500000.0, tie_word_embeddings=True)
LLAMA_8B = dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
                num_key_value_heads=8, head_dim=128, vocab_size=128256, rope_theta=500000.0)
SMALL = dict(hidden_size=256, intermediate_size=512, num_hidden_layers=4, num_attention_heads=8,
             num_key_value_heads=2, head_dim=32, vocab_size=1000)
BERT_BASE = dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072)
WORDS = ("the cat sat on a mat while seven old dogs ran past quietly because nobody asked them to stop "
         "and the river kept flowing under every bridge of that small town").split()


def sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def best(fn, repeat: int) -> tuple[float, object]:
    """(the fastest of `repeat` calls, the last one's result); one result alive at a time."""
    times, out = [], None
    for _ in range(repeat):
        out = None  # a 32 GiB run is freed before the next is made
        sync()
        start = time.perf_counter()
        out = fn()
        sync()
        times.append(time.perf_counter() - start)
    return min(times), out


def text_of(n: int) -> str:
    rng = np.random.default_rng(n)
    return " ".join(rng.choice(WORDS, size=3 * n))  # more tokens than n: analyze cuts it to n


def save_llama(shape: dict, folder: Path, dtype: torch.dtype, device: str) -> Path:
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(max_position_embeddings=8192, **shape)
    torch.manual_seed(0)
    with torch.device(device):  # initialised where it is fastest, saved, dropped
        model = LlamaForCausalLM(config).to(dtype)
    model.save_pretrained(folder)
    byte_bpe_tokenizer().save_pretrained(folder)
    del model
    torch.cuda.empty_cache() if torch.cuda.is_available() else None
    return folder


def save_bert(folder: Path) -> Path:
    from transformers import BertConfig, BertModel

    tok = byte_bpe_tokenizer()
    torch.manual_seed(0)
    BertModel(BertConfig(vocab_size=len(tok), max_position_embeddings=512, **BERT_BASE)).save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def ids_of(model, n: int) -> torch.Tensor:
    return torch.tensor([mha_viz.tokenize(model, text_of(n), max_tokens=n).ids], device=model.device)


def hf_capture_with_copy(model, ids) -> float:
    """Hugging Face's way: every layer's probabilities returned, then copied to the host."""
    with model.lock, torch.inference_mode():
        out = model.hf_model(input_ids=ids, output_attentions=True, use_cache=False)
        host = [a.float().cpu() for a in out.attentions]
    return sum(h.numel() for h in host)


def copy_rates(model, ids) -> tuple[float, float]:
    """GiB/s of one layer's probabilities copied from the GPU to fresh pageable memory, and to
    pinned memory through `mha_viz.capture.transfer` (staging buffers kept)."""
    cap = model.capture(ids, lean=True)
    probs = model.recompute(cap, 0)[0].float()
    size = probs.numel() * 4 / GiB
    pageable, _ = best(lambda: probs.cpu(), 2)
    pinned, _ = best(lambda: mha_viz.capture.transfer.to_host([probs]), 2)
    return size / pageable, size / pinned


def peak(fn):
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    out = fn()
    sync()
    return out, (torch.cuda.max_memory_allocated() / GiB if torch.cuda.is_available() else float("nan"))


def largest_difference(a: np.ndarray, b: np.ndarray) -> float:
    return max(float(np.abs(a[i] - b[i]).max()) for i in range(a.shape[0]))  # a layer at a time


def llama_rows(folder: Path, sizes: list[int], repeat: int, device: str, gpu: bool, small: bool,
               verdicts: list[tuple[str, str, bool]]) -> None:
    """Section 1: the Llama shape in float32 and bfloat16 (both models freed on return)."""
    full = mha_viz.load_model(folder, device=device)
    half = mha_viz.load_model(folder, device=device, dtype="bfloat16")
    print("\n| tokens | fused forward s | analyze s | ÷ fused | HF eager + copy s | pageable GiB/s | pinned GiB/s "
          "| bf16 analyze s | peak GiB f32 / bf16 | largest |Δp| bf16 |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for n in sizes:
        ids = ids_of(full, n)
        fused, _ = best(lambda: full.fused_forward(ids), repeat)
        text = text_of(n)
        (t_an, run), peak_full = peak(lambda: best(lambda: mha_viz.analyze(full, text, max_tokens=n), repeat))
        ways = {lean: best(lambda: mha_viz.analyze(full, text, max_tokens=n, lean=lean), repeat)[0]
                for lean in (True, False) if lean or n <= 2048}  # eager holds every layer on the GPU
        print(f"  n={n}: analyze lean {ways[True]:.3f} s, eager {ways.get(False, float('nan')):.3f} s", flush=True)
        hf = float("nan")
        if n <= 2048:  # HF's tuple and its host copies: 2 × 32 GiB at 4,096 tokens
            hf, _ = best(lambda: hf_capture_with_copy(full, ids), 1)
        pageable, pinned = copy_rates(full, ids) if gpu else (float("nan"), float("nan"))
        (t_half, run_half), peak_half = peak(lambda: best(lambda: mha_viz.analyze(half, text, max_tokens=n),
                                                          repeat))
        gap = largest_difference(run.attentions, run_half.attentions)
        del run_half
        print(f"| {n:,} | {fused:.3f} | {t_an:.3f} | {t_an / fused:.1f} × | {hf:.3f} | {pageable:.1f} | {pinned:.1f} | "
              f"{t_half:.3f} | {peak_full:.1f} / {peak_half:.1f} | {gap:.1e} |", flush=True)
        if not small and n == 2048:
            verdicts.append(("analyze at 2,048 tokens ≤ 3 × the fused forward (1B, f32)", f"{t_an / fused:.1f} ×",
                             t_an <= 3 * fused))
        if not small and n == 4096:
            verdicts.append(("analyze at 4,096 tokens ≤ 3 s (1B, f32)", f"{t_an:.2f} s", t_an <= 3.0))
        verdicts.append((f"bfloat16 within 2e-2 of float32 at {n:,} tokens", f"{gap:.1e}", gap <= 2e-2))
        del run


def bert_rows(folder: Path, repeat: int, device: str, small: bool, profile: bool,
              verdicts: list[tuple[str, str, bool]]) -> None:
    """Section 2: BERT-base's shape at 512 tokens (the model freed on return)."""
    bert = mha_viz.load_model(folder, device=device)
    n = 512
    ids = ids_of(bert, n)
    fused, _ = best(lambda: bert.fused_forward(ids), repeat)
    text = text_of(n)
    t_an, _ = best(lambda: mha_viz.analyze(bert, text, max_tokens=n), repeat)
    ways = {lean: best(lambda: mha_viz.analyze(bert, text, max_tokens=n, lean=lean), repeat)[0]
            for lean in (True, False)}
    t_tok, _ = best(lambda: mha_viz.tokenize(bert, text, max_tokens=n), repeat)
    print(f"\nBERT-base at {n} tokens: fused forward {fused:.4f} s, analyze {t_an:.4f} s ({t_an / fused:.1f} ×; "
          f"lean {ways[True]:.4f} s, eager {ways[False]:.4f} s; tokenize alone {t_tok:.4f} s)")
    if profile:
        import cProfile
        import pstats

        prof = cProfile.Profile()
        prof.enable()
        mha_viz.analyze(bert, text, max_tokens=n)
        sync()
        prof.disable()
        pstats.Stats(prof).sort_stats("tottime").print_stats(15)
    if not small:
        verdicts.append(("BERT-base analyze at 512 tokens ≤ 5 × the fused forward", f"{t_an / fused:.1f} ×",
                         t_an <= 5 * fused))


def llama_8b_rows(tmp: Path, device: str, verdicts: list[tuple[str, str, bool]]) -> None:
    """Section 3: Llama-3.1-8B's shape in bfloat16 within a 24 GiB GPU budget."""
    start = time.perf_counter()
    folder = save_llama(LLAMA_8B, tmp / "llama8b", torch.bfloat16, device)
    made = time.perf_counter() - start
    torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    big = mha_viz.load_model(folder, dtype="bfloat16", max_memory={0: "24GiB", "cpu": "100GiB"})
    loaded = time.perf_counter() - start
    weights = torch.cuda.memory_allocated() / GiB
    text = text_of(2048)
    t_an, run = best(lambda: mha_viz.analyze(big, text, max_tokens=2048), 1)
    top = torch.cuda.max_memory_allocated() / GiB
    from mha_viz import figures

    fig = figures.model_grid(run)
    drawn = len(fig.to_json())
    print(f"\nLlama-3.1-8B shape, bfloat16, max_memory 24 GiB on GPU 0: made and saved in {made:.0f} s, loaded in "
          f"{loaded:.0f} s on {big.device_text}; weights on the GPU {weights:.1f} GiB; analyze at 2,048 tokens "
          f"{t_an:.2f} s, peak GPU memory {top:.1f} GiB; Model view figure {drawn / 2**10:.0f} KiB of JSON")
    verdicts.append(("8B shape in bf16 within a 24 GiB GPU budget, analyses 2,048 tokens, Model view draws",
                     f"peak {top:.1f} GiB, {t_an:.1f} s, figure {drawn / 2**10:.0f} KiB",
                     top <= 24 and drawn > 0 and run.n == 2048))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="512,2048,4096")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--small", action="store_true", help="a small shape (the default without a GPU)")
    ap.add_argument("--skip-8b", action="store_true")
    ap.add_argument("--profile", action="store_true", help="where BERT-base's analysis spends its time (cProfile)")
    args = ap.parse_args()
    gpu = torch.cuda.is_available()
    small = args.small or not gpu
    device = "cuda" if gpu else "cpu"
    sizes = [int(s) for s in args.sizes.split(",")] if not small else [128, 256]
    where = torch.cuda.get_device_name() if gpu else "CPU (small shape: the GPU targets are not measured)"
    print(f"device: {where}; torch {torch.__version__}; shape: {'small' if small else 'Llama-3.2-1B'}")
    tmp = Path(tempfile.mkdtemp(prefix="mha-viz-gpu-bench-"))
    verdicts: list[tuple[str, str, bool]] = []
    # one section at a time: each one's models are freed when it returns, before the next loads its own
    llama_rows(save_llama(SMALL if small else LLAMA_1B, tmp / "llama", torch.float32, device), sizes, args.repeat,
               device, gpu, small, verdicts)
    bert_rows(save_bert(tmp / "bert"), args.repeat, device, small, args.profile, verdicts)
    if gpu and not small and not args.skip_8b:
        llama_8b_rows(tmp, device, verdicts)
    print_verdicts(verdicts, target_width=70, where=where)


if __name__ == "__main__":
    main()
