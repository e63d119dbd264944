"""One run for every page at length (issue 52): the first page and each later click of a long run, side by side
with the fused forward over the same tokens, in one run.

Run: `.venv/bin/python benchmarks/long_run.py` (SmolLM2's whole 8,192-token context on the CPU: about 4
minutes on 2 cores); `--n 2048` for a shorter text. On a GPU (`--device cuda`), `--shape 1b|8b` runs a
random-init Llama of that shape in `--dtype` (benchmarks/scan.py builds it).

Rows:
- the fused (SDPA) forward over the same tokens (best of `--repeat`);
- the first page: `mha_viz.analyze` (a long run: one scan, each layer's input kept) and the Model view's
  thumbnails figure;
- each later click, as the pages compute it: another head in the Head view (its block view, streamed), a
  window of 96 rows of it, a token in Token focus (one row of every head, one head's column), the line view's
  rows of a layer, and another head's whole matrix;
- the resident memory of the whole session above the loaded model: the process's high-water mark from the end
  of the baseline's forward, less the resident size after loading (that forward's logits, n × 49,152 floats,
  1.6 GB at 8,192 tokens, are the benchmark's, not the session's: a long run's forward leaves out the LM head).
Clicks are timed cold: each asks for a head or token no earlier click asked for. The load average (other
processes on the machine) is printed before and after: trust the ratios, measured in one run, over the times.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402
from long_inputs import rss  # noqa: E402 - benchmarks/long_inputs.py, beside this script
from report import print_verdicts  # noqa: E402 - benchmarks/report.py, beside this script
from scan import model_of, model_parser, text_of  # noqa: E402 - benchmarks/scan.py, beside this script

import mha_viz  # noqa: E402
from mha_viz.drawing import heads as head_figures  # noqa: E402
from mha_viz.metrics import row_kernels  # noqa: E402
from mha_viz.views import detail  # noqa: E402

GB = 2**30


def high_water() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM"))


def reset_high_water() -> None:
    """The process's high-water mark from now (Linux: clear_refs 5)."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def timed(fn, device: str):
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    out = fn()
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    return out, time.perf_counter() - t0


def clicks(run, device: str) -> list[tuple[str, float]]:
    """(what, seconds) of each later click, each on a head or token not asked for before."""
    L, H, n = run.num_layers, run.num_heads, run.n
    edges = detail.block_edges(n, 128)
    q = n // 2
    steps = [
        ("Head view: another head, its block view", lambda: run.pooled_head(L // 2, 1, edges)),
        ("Head view: a window of 96 rows", lambda: run.rows(L // 2 + 1, 2, q, min(n, q + 96))),
        ("Token focus: one row of every head", lambda: [run.layer_rows(layer, q, q + 1) for layer in range(L)]),
        ("Token focus: one head's column", lambda: run.column(L // 3, 3, q)),
        ("Line view: 64 rows of every head of a layer", lambda: run.layer_rows(L - 1, q, min(n, q + 64))),
        ("one head whole (n × n)", lambda: run.head(L // 4, H - 1)),
    ]
    return [(what, timed(fn, device)[1]) for what, fn in steps]


def main() -> None:
    parser = model_parser(__doc__.splitlines()[0])
    parser.add_argument("--first-target", type=float, default=1.5,
                        help="first page ≤ target × the fused forward (issue 87: 1.5 on the CPU; 2 was issue 52's)")
    parser.add_argument("--click-target", type=float, default=1.0, help="each later click ≤ seconds")
    parser.add_argument("--budget-gb", type=float, default=1.5, help="the session's resident memory above the model")
    args = parser.parse_args()

    model = model_of(args)
    text = text_of(args.n * 2)
    toks = mha_viz.tokenize(model, text, args.n)
    ids = torch.tensor([toks.ids])
    row_kernels.compile_now()  # as the app's preload does
    print(f"load average before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores", flush=True)
    base = rss()  # the loaded model's
    print(f"{model.name} ({model.num_layers} layers × {model.num_heads} heads, {model.precision}) on {args.device}, "
          f"n = {toks.n}, {torch.get_num_threads()} threads; every head whole would be "
          f"{model.attention_bytes(toks.n) / GB:.1f} GiB", flush=True)
    fused = min(timed(lambda: model.fused_forward(ids), args.device)[1] for _ in range(args.repeat))
    print(f"fused forward:                 {fused:7.2f} s", flush=True)
    reset_high_water()  # the session's peak from here (above `base`): not the baseline's logits
    run, analysis = timed(lambda: mha_viz.analyze(model, text, max_tokens=args.n), args.device)
    _, grid = timed(lambda: head_figures.grid_figure(run.summary.pooled, layer_ids=run.layer_ids), args.device)
    first = analysis + grid
    print(f"first page (analyze + grid):   {first:7.2f} s   ({first / fused:.2f} × fused; the grid {grid:.2f} s); "
          f"{'dense' if run.is_dense else 'long'} run", flush=True)
    verdicts = [(f"first page ≤ {args.first_target:g} × the fused forward (n = {toks.n}, {args.device})",
                 f"{first:.1f} s against {fused:.1f} s: {first / fused:.2f} ×", first <= args.first_target * fused)]
    for what, seconds in clicks(run, args.device):
        print(f"{what:46s} {seconds:6.2f} s", flush=True)
        verdicts.append((f"{what} ≤ {args.click_target:g} s", f"{seconds:.2f} s", seconds <= args.click_target))
    if not args.device.startswith("cuda"):
        above = high_water() - base
        print(f"session's peak resident memory above the loaded model: {above / GB:.2f} GiB", flush=True)
        verdicts.append((f"session ≤ {args.budget_gb:g} GB above the model", f"{above / 1e9:.2f} GB",
                         above <= args.budget_gb * 1e9))
    else:
        peak = torch.cuda.max_memory_allocated()
        verdicts.append(("GPU memory allocated at the peak", f"{peak / GB:.1f} GiB", None))
    print(f"load average after: {os.getloadavg()[0]:.1f}", flush=True)
    print_verdicts(verdicts)


if __name__ == "__main__":
    main()
