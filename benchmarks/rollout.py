"""Attention rollout in its precision (float32, `metrics.across_layers.DTYPE`) against float64, on one run of
SmolLM2 (30 layers, a long run past 1 GiB of heads), side by side: a benchmark, not a test.

Run: `.venv/bin/python benchmarks/rollout.py [--tokens 4096] [--rounds 3]` (about 2 minutes at 4,096 tokens
on 2 CPU cores).

The run is made once; then each round computes rollout in both precisions, alternating which goes first, so
that a busy machine weighs on both alike. Printed: each precision's median seconds, the ratio float32 ÷
float64, the largest difference between the two results and each result's size.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402 - after the path above
import torch  # noqa: E402
from pages import long_text  # noqa: E402 - benchmarks/pages.py, beside this script

import mha_viz  # noqa: E402
from mha_viz.metrics import across_layers  # noqa: E402

PRECISIONS = {"float32": torch.float32, "float64": torch.float64}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=4096)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    os.environ["MHA_VIZ_MAX_TOKENS"] = str(args.tokens)
    model = mha_viz.load_model("smollm2", device="cpu")
    run = mha_viz.analyze(model, long_text(args.tokens), max_tokens=args.tokens)
    print(f"SmolLM2, {run.n} tokens, {run.num_layers} layers ({'dense' if run.is_dense else 'long'} run)")
    times: dict[str, list[float]] = {name: [] for name in PRECISIONS}
    results: dict[str, np.ndarray] = {}
    for rnd in range(args.rounds):
        for name in (list(PRECISIONS) if rnd % 2 == 0 else list(PRECISIONS)[::-1]):
            results.pop(name, None)  # one result held at a time beside the other's
            start = time.perf_counter()
            results[name] = across_layers.rollout(run, dtype=PRECISIONS[name])
            times[name].append(time.perf_counter() - start)
    medians = {name: statistics.median(v) for name, v in times.items()}
    for name, v in times.items():
        print(f"{name}: median {medians[name]:.2f} s ({', '.join(f'{t:.2f}' for t in v)}), "
              f"{results[name].nbytes / 2**30:.2f} GiB")
    print(f"float32 ÷ float64: {medians['float32'] / medians['float64']:.2f}; largest difference "
          f"{np.abs(results['float32'] - results['float64']).max():.2e}")


if __name__ == "__main__":
    main()
