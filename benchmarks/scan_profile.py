"""Where a long run's time goes, operation by operation: `mha_viz.analyze(dense=False)` (one scan) and the Head
view's next click (another head's block view), each under PyTorch's profiler, on any device; then the same scan
under cProfile, for the Python functions around the operations. A short run first warms the kernels and the
compiled loops, as the app's preload does.

Run: `.venv/bin/python benchmarks/scan_profile.py [--n 2048]`; on a GPU
`--device cuda --shape 1b --n 8192` (benchmarks/scan.py's random-init Llama shapes). `--top` rows a table.
"""

from __future__ import annotations

import cProfile
import os
import pstats
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from long_run import timed as synced  # noqa: E402 - benchmarks/long_run.py, beside this script
from scan import model_of, model_parser, text_of  # noqa: E402 - benchmarks/scan.py, beside this script
from torch.profiler import ProfilerActivity, profile  # noqa: E402

import mha_viz  # noqa: E402
from mha_viz.metrics import row_kernels  # noqa: E402
from mha_viz.views import detail  # noqa: E402


def profiled(what: str, fn, device: str, top: int):
    """fn() under PyTorch's profiler: its wall time and the operations that took the most of it."""
    cuda = device.startswith("cuda")
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities) as prof:
        out, seconds = synced(fn, device)
    print(f"\n## {what}: {seconds:.2f} s\n", flush=True)
    sort = "self_cuda_time_total" if cuda else "self_cpu_time_total"
    print(prof.key_averages().table(sort_by=sort, row_limit=top, max_name_column_width=48), flush=True)
    if cuda:  # the host side too: what the GPU waits on
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=top // 2,
                                        max_name_column_width=48), flush=True)
    return out


def main() -> None:
    parser = model_parser(__doc__.splitlines()[0])
    parser.add_argument("--top", type=int, default=20, help="rows of each table")
    args = parser.parse_args()
    model = model_of(args)
    text = text_of(args.n * 2)
    row_kernels.compile_now()
    synced(lambda: mha_viz.analyze(model, text_of(512), max_tokens=256, dense=False), args.device)  # warm-up
    print(f"{model.name} ({model.num_layers} layers × {model.num_heads} heads, {model.precision}) on {args.device}, "
          f"n = {args.n}", flush=True)
    run = profiled("analyze (a long run: one scan)", lambda: mha_viz.analyze(model, text, max_tokens=args.n,
                                                                              dense=False), args.device, args.top)
    edges = detail.block_edges(run.n, 128)
    profiled("Head view: another head, its block view",
             lambda: run.pooled_head(run.num_layers // 2, 1, edges), args.device, args.top)
    stats = cProfile.Profile()
    stats.enable()
    _, seconds = synced(lambda: mha_viz.analyze(model, text, max_tokens=args.n, dense=False), args.device)
    stats.disable()
    print(f"\n## analyze under cProfile: {seconds:.2f} s (the functions with the most time of their own)\n")
    pstats.Stats(stats).sort_stats("tottime").print_stats(args.top)


if __name__ == "__main__":
    main()
