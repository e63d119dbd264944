"""The memory estimates beside the measured peak, at more sizes than the test: `memory.analysis_need`
(an analysis) and `ablation.gradient_bytes` (a gradient pass of the heads' mask) over the peak resident
size each computation reaches on the CPU, each model measured in a fresh process, its computations and lengths
in turn (`tests.models.memory_probe`: VmHWM after clear_refs, above the process just before the call, the model
loaded and warmed up).

Run: `.venv/bin/python benchmarks/memory_peak.py [--quick]` (about 5 minutes on 2 idle cores; `--quick`:
three sizes each). Memory ratios do not depend on the machine's load; the target is the test's band,
0.7–1.4 ×.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from report import print_verdicts  # noqa: E402 - benchmarks/report.py, beside this script

from tests.models.memory_probe import measure  # noqa: E402 - the models tier's probe (one process a model)

SIZES = {("minilm", "analysis"): (64, 128, 256, 384, 512), ("minilm", "gradient"): (64, 128, 256, 384, 512),
         ("smollm2", "analysis"): (64, 128, 256, 512, 1024, 1536), ("smollm2", "gradient"): (64, 128, 256, 512, 1024)}
QUICK = {("minilm", "analysis"): (128, 256, 512), ("minilm", "gradient"): (128, 256, 512),
         ("smollm2", "analysis"): (256, 512, 1024), ("smollm2", "gradient"): (128, 256, 512)}
BAND = (0.7, 1.4)
MB = 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="three sizes each (the test's)")
    args = parser.parse_args()
    verdicts = []
    print("| model | computation | tokens | estimate (MiB) | peak (MiB) | estimate / peak |\n|---|---|---|---|---|---|")
    table = QUICK if args.quick else SIZES
    measured = {}
    for model in dict.fromkeys(m for m, _ in table):  # one fresh process a model, both computations
        cases = [(path, n) for (m, path), sizes in table.items() if m == model for n in sizes]
        measured[model] = measure(model, cases, timeout=900 * len(cases))
    for (model, path), sizes in table.items():
        for n in sizes:
            got = measured[model][path, n]
            ratio = got["estimate"] / got["peak"]
            print(f"| {model} | {path} | {n} | {got['estimate'] / MB:.1f} | {got['peak'] / MB:.1f} | {ratio:.2f} |",
                  flush=True)
            verdicts.append((f"{model} {path} at {n} tokens: estimate / peak in {BAND[0]}–{BAND[1]}", f"{ratio:.2f}",
                             BAND[0] <= ratio <= BAND[1]))
    print_verdicts(verdicts, where="peak resident size above the loaded model, one process a model")


if __name__ == "__main__":
    main()
