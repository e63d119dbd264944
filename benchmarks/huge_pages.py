"""NumPy's arrays on huge pages (its default on Linux: madvise(MADV_HUGEPAGE) from 4 MiB on) against ordinary pages
(`mha_viz.settings.NO_HUGE_PAGES`, what `mha-viz` gives its server and `ray_engine` its actors), side by side in one
run.

Run: `.venv/bin/python benchmarks/huge_pages.py [--model smollm2] [--tokens 1024] [--rounds 2]` (about 2 minutes on
2 idle cores).

Each case is a fresh process (NumPy reads NUMPY_MADVISE_HUGEPAGE once, when imported); the cases alternate, `--rounds`
times. A process loads the model, analyses a few tokens once, then, `--pause` seconds apart (a server's requests are
seconds apart, and a host that takes a guest's free memory back does so within seconds), fills a fresh array of the
size of the every-head array and times `--runs` dense analyses of `--tokens` tokens.

On this project's 2-core virtual machine (stop 121, SmolLM2 at 1,024 tokens, every head 1.1 GB, 2 rounds): the fill
12.7-12.8 s on huge pages against 0.43-0.64 s (23.9 × the median), the analysis 8.3-11.4 s against 4.6-5.7 s
(1.82 ×). On a machine whose memory stays with it, expect the two about equal.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TEXT = "The old lighthouse stood at the edge of the harbour for more than a hundred years. " * 200


def child(model_name: str, tokens: int, runs: int, pause: float) -> None:
    import numpy as np

    import mha_viz

    model = mha_viz.load_model(model_name, device="cpu")
    mha_viz.analyze(model, TEXT, max_tokens=16, dense=True)
    size = model.num_layers * model.num_heads * tokens * tokens
    time.sleep(pause)
    start = time.perf_counter()
    array = np.empty(size, np.float32)
    array[:] = 1
    print(f"RESULT fill {time.perf_counter() - start:.3f}", flush=True)
    del array
    for _ in range(runs):
        time.sleep(pause)
        start = time.perf_counter()
        run = mha_viz.analyze(model, TEXT, max_tokens=tokens, dense=True)
        print(f"RESULT analysis {time.perf_counter() - start:.3f}", flush=True)
        del run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="smollm2")
    parser.add_argument("--tokens", type=int, default=1024)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--pause", type=float, default=5.0)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.model, args.tokens, args.runs, args.pause)
        return
    cases = {"huge pages (NumPy's default)": "1", "ordinary pages (the app's)": "0"}
    got: dict[str, dict[str, list[float]]] = {name: {"fill": [], "analysis": []} for name in cases}
    for _ in range(args.rounds):
        for name, value in cases.items():
            env = {**os.environ, "HF_HUB_OFFLINE": "1", "NUMPY_MADVISE_HUGEPAGE": value}
            out = subprocess.run([sys.executable, __file__, "--child", "--model", args.model, "--tokens",
                                  str(args.tokens), "--runs", str(args.runs), "--pause", str(args.pause)],
                                 cwd=ROOT, env=env, capture_output=True, text=True, check=True).stdout
            for line in out.splitlines():
                if line.startswith("RESULT "):
                    _, kind, seconds = line.split()
                    got[name][kind].append(float(seconds))
    print(f"{args.model}, {args.tokens} tokens, {args.rounds} rounds of {args.runs} analyses, {args.pause:g} s apart")
    for kind in ("fill", "analysis"):
        medians = {name: statistics.median(got[name][kind]) for name in cases}
        for name in cases:
            times = got[name][kind]
            print(f"  {kind:8s} {name:30s} median {medians[name]:6.2f} s  (min {min(times):.2f}, max {max(times):.2f})")
        huge, plain = medians.values()
        print(f"  {kind:8s} huge pages / ordinary: {huge / plain:.2f} ×")


if __name__ == "__main__":
    main()
