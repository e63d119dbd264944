"""The teaching walkthrough's first visit as the pages now record it against the first 64 tokens only (a benchmark,
not a test; issue 52). Before, the Teaching and Queries and keys pages ran the model over the text's first 64
tokens; now they read a window anywhere in the text: a decoder's text is recorded up to the window's end (its
later tokens are hidden from the window), an encoder's whole, and a long run's walkthrough reads the spill its
scan made (not timed here).

Run: `.venv/bin/python benchmarks/teaching_window.py [--rounds 3]` (about a minute on 2 cores). Prints, for
MiniLM at 512 tokens and SmolLM2 at 256 (what benchmarks/pages.py opens), the median of each way, alternating in
one process, and their ratios: the recording, one head's walkthrough and the figures of steps 3–6, with the
window at the text's start and at its end."""

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

import mha_viz  # noqa: E402 - after the path
from mha_viz.features.teaching import figures as teach_figures  # noqa: E402
from mha_viz.views import teaching  # noqa: E402

SETUPS = (("minilm", 512), ("smollm2", 256))
STEPS = ("scores", "scaled", "masked", "probs")


def first_visit(model, text: str, tokens: int, start: int) -> float:
    """Record `tokens` of the text, walk one head through the window from `start`, draw steps 3–6: seconds."""
    t = time.perf_counter()
    rec = teaching.record(model, text, tokens)
    w = teaching.walkthrough(model, text, model.layer_ids[-1], 0, recording=rec, start=start)
    teach_figures.step_figures(w, STEPS)
    return time.perf_counter() - t


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    text = " ".join([(ROOT / "mha_viz" / "corpus" / "sample.txt").read_text()] * 4)
    print("| setup | before: first 64 tokens | now, window at the start | ratio | now, window at the end | ratio |\n"
          "|---|---|---|---|---|---|")
    for name, n in SETUPS:
        model = mha_viz.load_model(name, device="cpu")
        # what the pages record now (`ui.analysis`): a decoder up to the window's end, an encoder every token
        ways = {"before": (64, 0), "start": (64 if model.is_causal else n, 0), "end": (n, n)}
        first_visit(model, text, n, 0)  # warm: the first call pays for imports and the adapters
        times: dict[str, list[float]] = {way: [] for way in ways}
        for _ in range(args.rounds):
            for way, (tokens, start) in ways.items():
                times[way].append(first_visit(model, text, tokens, start))
        med = {way: statistics.median(t) for way, t in times.items()}
        ratio = {way: med[way] / med["before"] for way in med}
        print(f"| {name}, {n} tokens | {med['before']:.3f} s | {med['start']:.3f} s | {ratio['start']:.2f} "
              f"| {med['end']:.3f} s | {ratio['end']:.2f} |")

if __name__ == "__main__":
    main()
