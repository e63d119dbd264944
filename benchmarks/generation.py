"""Generation step by step, side by side in one run: ours, Hugging Face's generate, the naive way.

Run: `.venv/bin/python benchmarks/generation.py [--device cpu|cuda|auto] [--quick]` (about 2 minutes
on 2 idle CPU cores, most of it the naive way at 256 new tokens; `--quick`: one round, no 256).

On the bundled `smollm2` (30 × 9 heads, eager attention), a 32-token prompt (a fixed English
paragraph cut by `mha_viz.tokenize(model, text, 32)`), greedy decoding, the same number of new
tokens for all three:

1. ours: `mha_viz.generate(model, prompt, N, stop_at_eos=False)`, KV cache, every head's
   attention recorded row by row into one (layers, heads, n, n) float32 array, with each step's
   probability, top 10 and entropy;
2. Hugging Face: `model.hf_model.generate(ids, attention_mask=ones, max_new_tokens=N,
   min_new_tokens=N, do_sample=False)`, KV cache, no attention returned (the floor: what
   generation costs without watching it);
3. naive: at every step a full eager forward over the whole sequence with
   `output_attentions=True` and no cache, argmax, append; then one forward over the final
   sequence, whose attentions are stacked into the same (layers, heads, n, n) array ours returns
   (ours also runs one step past the last token, for that token's own row).

The three alternate in each round (`--repeat` rounds, median reported; the naive way once at 256
new tokens). Memory: the peak resident size above what the process held just before the call,
read from VmHWM after `echo 5 > /proc/self/clear_refs` (free memory handed back with
malloc_trim first, so a call cannot hide in pages an earlier call left behind); a thread
sampling every 5 ms where clear_refs cannot be written. On CUDA also the peak of
`torch.cuda.max_memory_allocated` above the memory allocated before the call.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
import torch  # noqa: E402
from report import print_verdicts  # noqa: E402 - benchmarks/report.py, beside this script

import mha_viz  # noqa: E402
from mha_viz.budget import resident  # noqa: E402

PARAGRAPH = ("The river wound slowly through the valley, past the old mill and the stone bridge where the "
             "children of the village used to gather on summer evenings to watch the swallows skim the "
             "water and tell each other stories about the mysterious house on the hill.")
PROMPT_TOKENS = 32
TARGET = 1.3  # ours ≤ TARGET × Hugging Face generate
MB = 2**20
VERDICTS: list[tuple[str, str, bool]] = []

# --- memory -------------------------------------------------------------------------------------

RESET_HWM = resident.reset_peak()
MEMORY_METHOD = (("VmHWM after clear_refs" if RESET_HWM else "RSS sampled every 5 ms")
                 + " (above RSS before the call)")


def measured(fn, device: torch.device):
    """(result, seconds, peak resident bytes above the start, peak CUDA bytes above the start or None)."""
    resident.trim()
    cuda = device.type == "cuda"
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        cuda_start = torch.cuda.memory_allocated()
    start = resident.status("VmRSS")
    peak, done, sampler = [start], threading.Event(), None
    if RESET_HWM:
        resident.reset_peak()
    else:
        def sample():
            while not done.is_set():
                peak[0] = max(peak[0], resident.status("VmRSS"))
                time.sleep(0.005)
        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
    t0 = time.perf_counter()
    try:
        out = fn()
        if cuda:
            torch.cuda.synchronize()
        seconds = time.perf_counter() - t0
    finally:
        done.set()
        if sampler is not None:
            sampler.join()
    top = resident.status("VmHWM") if RESET_HWM else max(peak[0], resident.status("VmRSS"))
    gpu = torch.cuda.max_memory_allocated() - cuda_start if cuda else None
    return out, seconds, top - start, gpu


# --- the three ways -----------------------------------------------------------------------------

def ours(model, prompt: str, new: int) -> tuple[list[int], np.ndarray]:
    gen = mha_viz.generate(model, prompt, new, temperature=0.0, stop_at_eos=False)
    return gen.run.token_ids, gen.run.attentions


def hugging_face(model, prompt_ids: list[int], new: int) -> list[int]:
    ids = torch.tensor([prompt_ids], device=model.device)
    with torch.inference_mode():
        out = model.hf_model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=new,
                                      min_new_tokens=new, do_sample=False,
                                      pad_token_id=model.tokenizer.pad_token_id)
    return out[0].tolist()


def naive(model, prompt_ids: list[int], new: int) -> tuple[list[int], np.ndarray]:
    ids = torch.tensor([prompt_ids], device=model.device)
    with torch.inference_mode():
        for _ in range(new):
            out = model.hf_model(input_ids=ids, output_attentions=True, use_cache=False)
            ids = torch.cat([ids, out.logits[:, -1].argmax(-1, keepdim=True)], dim=1)
        out = model.hf_model(input_ids=ids, output_attentions=True, use_cache=False)
        attn = torch.stack([a[0] for a in out.attentions]).float().cpu().numpy()
    return ids[0].tolist(), attn


# --- printing -----------------------------------------------------------------------------------

def row(name: str, *cells: str) -> None:
    print(f"| {name:46s} | " + " | ".join(f"{c:>14s}" for c in cells) + " |")


def header(title: str, *cols: str) -> None:
    print(f"\n| {title:46s} | " + " | ".join(f"{c:>14s}" for c in cols) + " |")
    print(f"|{'-' * 48}|" + "|".join("-" * 16 for _ in cols) + "|")


def verdict(target: str, measured_: str, met: bool) -> None:
    VERDICTS.append((target, measured_, met))


def listed(values) -> str:
    return ", ".join(f"{x:.2f}" for x in values)


def mib(b: int | None) -> str:
    return "" if b is None else f"{b / MB:,.0f} MiB"


# --- the measurements ---------------------------------------------------------------------------

def rounds(fns: dict, repeat: int, device: torch.device) -> dict[str, dict]:
    """Run each of fns once per round, alternating, `repeat` rounds; per name the last result,
    the times and the peaks."""
    res = {name: {"times": [], "rss": [], "gpu": []} for name in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            out, seconds, peak, gpu = measured(fn, device)
            r = res[name]
            r["out"] = out
            r["times"].append(seconds)
            r["rss"].append(peak)
            r["gpu"].append(gpu)
    for r in res.values():
        r["median"] = statistics.median(r["times"])
        r["rss_median"] = int(statistics.median(r["rss"]))
        r["gpu_median"] = None if r["gpu"][0] is None else int(statistics.median(r["gpu"]))
    return res


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=["cpu", "cuda", "auto"], default="auto")
    parser.add_argument("--new", type=int, default=64, help="new tokens for ours vs Hugging Face")
    parser.add_argument("--lengths", type=int, nargs="+", default=[16, 64, 256],
                        help="new tokens for ours vs naive")
    parser.add_argument("--memory", type=int, nargs="+", default=[64, 256], help="lengths with memory rows")
    parser.add_argument("--repeat", type=int, default=5,
                        help="alternating rounds (1 for the naive way past 64)")
    parser.add_argument("--quick", action="store_true", help="one round, no 256 (about a minute)")
    args = parser.parse_args()
    if args.quick:
        args.repeat = 1
        args.lengths = [n for n in args.lengths if n <= 64]
        args.memory = [n for n in args.memory if n <= 64]

    model = mha_viz.load_model("smollm2", device=args.device)
    dev = model.device
    where = (f"CUDA {torch.cuda.get_device_name(dev)}" if dev.type == "cuda"
             else f"CPU, {torch.get_num_threads()} threads, {os.cpu_count()} cores visible")
    print(f"torch {torch.__version__}, device {dev} ({where}); float32, eager attention")
    print(f"model {model.name}: {model.num_layers} layers × {model.num_heads} heads "
          f"({model.num_kv_heads} KV heads)")
    toks = mha_viz.tokenize(model, PARAGRAPH, PROMPT_TOKENS)
    prompt = model.tokenizer.decode(toks.ids)
    check = mha_viz.tokenize(model, prompt)
    assert check.ids == toks.ids, "the cut prompt does not tokenize back to the same ids"
    print(f"prompt: {toks.n} tokens: {prompt!r}")
    print(f"memory: {MEMORY_METHOD}; times: median of {args.repeat} alternating rounds")

    # warm-up: one short call of each (first calls allocate, build kernels, import lazily)
    ours(model, prompt, 4), hugging_face(model, toks.ids, 4), naive(model, toks.ids, 4)

    # 1. ours vs Hugging Face generate (and the naive way) at --new tokens
    n = args.new
    main_res = rounds({"ours": lambda: ours(model, prompt, n),
                       "hf": lambda: hugging_face(model, toks.ids, n),
                       "naive": lambda: naive(model, toks.ids, n)}, args.repeat, dev)
    o, h, v = main_res["ours"], main_res["hf"], main_res["naive"]
    ids_ours, attn_ours = o["out"]
    ids_naive, attn_naive = v["out"]
    same_hf = ids_ours == h["out"]
    same_naive = ids_ours == ids_naive
    same_shape = attn_ours.shape == attn_naive.shape
    diff = float(np.abs(attn_ours - attn_naive).max()) if same_shape else float("inf")
    header(f"{n} new tokens after {toks.n}, greedy", "median", "÷ HF generate", "best", "÷ HF best",
           "per token")
    for label, r in (("Hugging Face generate (KV cache, no attention)", h),
                     ("ours: mha_viz.generate (KV cache, capture)", o),
                     ("naive: full eager forward a step, no cache", v)):
        row(label, f"{r['median'] * 1e3:,.0f} ms", f"{r['median'] / h['median']:.2f}",
            f"{min(r['times']) * 1e3:,.0f} ms", f"{min(r['times']) / min(h['times']):.2f}",
            f"{r['median'] / n * 1e3:,.1f} ms")
    print(f"all times (s): ours {listed(o['times'])}; HF {listed(h['times'])}; naive {listed(v['times'])}")
    paired = statistics.median(a / b for a, b in zip(o["times"], h["times"]))
    print(f"ours ÷ HF generate round by round: {listed(a / b for a, b in zip(o['times'], h['times']))} "
          f"(median {paired:.2f})")
    print(f"same token ids: ours = HF generate: {same_hf}; ours = naive: {same_naive}; "
          f"attentions ours vs naive: max |difference| {diff:.1e} over {attn_ours.shape}")
    print(f"continuation: {model.tokenizer.decode(ids_ours[toks.n:])!r}")
    ratio = o["median"] / h["median"]
    verdict(f"ours ≤ {TARGET} × HF generate ({n} new tokens, median)",
            f"{ratio:.2f} ({o['median']:.2f} s vs {h['median']:.2f} s)", ratio <= TARGET)
    verdict(f"same {n} token ids as HF generate", "identical" if same_hf else "DIFFERENT", same_hf)
    verdict("same ids and attentions as the naive way (≤ 1e-4)",
            f"ids {'identical' if same_naive else 'DIFFERENT'}, "
            f"max diff {diff:.1e}", same_naive and diff <= 1e-4)

    # 2. ours vs naive at each length, memory at args.memory
    results = {n: (o, v)}
    for length in args.lengths:
        if length in results:
            continue
        rep = args.repeat if length <= 64 else 1
        r = rounds({"ours": lambda: ours(model, prompt, length),
                    "naive": lambda: naive(model, toks.ids, length)}, rep, dev)
        if r["ours"]["out"][0] != r["naive"]["out"][0]:
            print(f"warning: ours and naive picked different tokens at {length} new tokens")
        results[length] = (r["ours"], r["naive"])
    cols = [f"{length} new" for length in args.lengths]
    header("ours vs naive (medians; naive once past 64)", *cols)
    row("ours", *(f"{results[k][0]['median']:,.2f} s" for k in args.lengths))
    row("naive", *(f"{results[k][1]['median']:,.2f} s" for k in args.lengths))
    row("speed-up (naive ÷ ours)", *(f"{results[k][1]['median'] / results[k][0]['median']:,.1f}×"
                                      for k in args.lengths))
    for k in args.lengths:
        final = PROMPT_TOKENS + k
        row(f"one float32 copy of the attentions, n = {final}" if k == args.lengths[0] else f"  n = {final}",
            *(mib(model.num_layers * model.num_heads * final * final * 4) if j == k else ""
              for j in args.lengths))
    mem = [k for k in args.lengths if k in args.memory]
    if mem:
        for i, label in ((0, "ours"), (1, "naive")):
            row(f"peak RSS above start: {label}",
                *(mib(results[k][i]["rss_median"]) if k in mem else "" for k in args.lengths))
        if dev.type == "cuda":
            row("peak CUDA memory above start: ours",
                *(mib(results[k][0]["gpu_median"]) if k in mem else "" for k in args.lengths))
            row("peak CUDA memory above start: naive",
                *(mib(results[k][1]["gpu_median"]) if k in mem else "" for k in args.lengths))
    for k in args.lengths:
        a, b = results[k]
        verdict(f"ours faster than naive ({k} new tokens)", f"{b['median'] / a['median']:.1f}× faster",
                a["median"] < b["median"])

    print_verdicts(VERDICTS, where=where)


if __name__ == "__main__":
    main()
