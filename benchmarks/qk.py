"""Why a head looks where it looks (issue 40), timed side by side in one run: `mha_viz.circuits.qk_terms` (one
query–key pair) and `mha_viz.circuits.qk_pattern_terms` (the whole head) for a last-layer head of SmolLM2 at 128
and 512 tokens, each against one forward pass of the same text (`LoadedModel.fused_forward`), and
`composition_scores` and `copying_scores` once per model (MiniLM, SmolLM2).

Targets: one pair's terms in at most 2 forward passes' time, the whole head's in at most 5.
Each timing is the median of `--repeat` rounds, alternating.

Run: `.venv/bin/python benchmarks/qk.py [--repeat 5] [--device cpu]`.
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

import torch  # noqa: E402
from report import print_verdicts  # noqa: E402 - benchmarks/report.py, beside this script

import mha_viz  # noqa: E402
from mha_viz.corpus.inputs import SAMPLE_PATH  # noqa: E402

PAIR_X, PATTERN_X = 2.0, 5.0


def text_of(model, n: int) -> str:
    """A text of at least n tokens from the bundled sample (cut to n by max_tokens)."""
    text = SAMPLE_PATH.read_text().replace("\n", " ")
    while mha_viz.text.count_tokens(model, text) < n:
        text = text + " " + text
    return text


def rounds(fns: dict, repeat: int) -> dict[str, float]:
    """The median time of each function, the functions alternating within each round."""
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}


def terms(device: str, repeat: int) -> list[tuple[str, str, bool | None]]:
    model = mha_viz.load_model("smollm2", device=device)
    layer, head = model.num_layers - 1, 4
    verdicts = []
    for n in (128, 512):
        text = text_of(model, n)
        ids = torch.tensor([mha_viz.tokenize(model, text, max_tokens=n).ids])
        one = mha_viz.circuits.qk_terms(model, text, layer, head, n - 1, n // 2, max_tokens=n)  # warm: the layout, once
        t = rounds({
            "forward": lambda: model.fused_forward(ids),
            "pair": lambda: mha_viz.circuits.qk_terms(model, text, layer, head, n - 1, n // 2, max_tokens=n),
            "pattern": lambda: mha_viz.circuits.qk_pattern_terms(model, text, layer, head, max_tokens=n),
        }, repeat)
        whole = mha_viz.circuits.qk_pattern_terms(model, text, layer, head, max_tokens=n)
        print(f"SmolLM2, {n} tokens, layer {layer} head {head}: forward {t['forward'] * 1e3:.0f} ms, pair "
              f"{t['pair'] * 1e3:.0f} ms ({len(one.query_parts)} × {len(one.key_parts)} terms, error {one.error:.1e}), "
              f"whole head {t['pattern'] * 1e3:.0f} ms (error {whole.error:.1e})")
        pair_x, pattern_x = t["pair"] / t["forward"], t["pattern"] / t["forward"]
        verdicts += [(f"qk_terms ≤ {PAIR_X:g} × forward, SmolLM2 {n} tok ({device})", f"{pair_x:.2f} ×",
                      pair_x <= PAIR_X),
                     (f"qk_pattern_terms ≤ {PATTERN_X:g} × forward, SmolLM2 {n} tok", f"{pattern_x:.2f} ×",
                      pattern_x <= PATTERN_X)]
    return verdicts


def weights(device: str) -> list[tuple[str, str, bool | None]]:
    verdicts = []
    for name in ("minilm", "smollm2"):
        model = mha_viz.load_model(name, device=device)
        for fn in (mha_viz.circuits.composition_scores, mha_viz.circuits.copying_scores):
            start = time.perf_counter()
            try:
                fn(model)
                took = f"{(time.perf_counter() - start) * 1e3:.0f} ms"
            except mha_viz.InputError as exc:
                took = f"refused: {str(exc)[:60]}"
            verdicts.append((f"{fn.__name__}, {name} (once per model)", took, None))
    return verdicts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    torch.set_num_threads(max(1, torch.get_num_threads()))
    print_verdicts(terms(args.device, args.repeat) + weights(args.device), where=args.device)


if __name__ == "__main__":
    main()
