"""Long inputs, side by side in one run: what is sent to the browser (ours against BertViz's
model view on the same model and text) and how long capture takes (eager against lean).

Run: `.venv/bin/python benchmarks/long_inputs.py [--lengths 128 512] [--long 2048]`
(BertViz rows need the packages in benchmarks/requirements.txt; without them they are skipped).
Sizes are the bytes of the Plotly figure JSON that Streamlit sends (ours) and of the HTML that
`bertviz.model_view(..., html_action="return")` builds.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

import mha_viz  # noqa: E402
from mha_viz import figures  # noqa: E402

WORDS = ("the cat sat on the mat and the dog looked at it while rain fell on the old house by "
         "the river ").split()


def text_of(n: int) -> str:
    return " ".join(WORDS[i % len(WORDS)] for i in range(n))


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def best(fn, repeat: int = 3) -> float:
    fn()
    return min(timed(fn)[1] for _ in range(repeat))


def plain_forward(model, ids) -> None:
    with torch.inference_mode():
        model.hf_model(input_ids=ids)


def views_ready(model, text: str, n: int) -> None:
    """What the app does for a new sentence before the first views can be drawn: capture,
    the head table, the overview and the head detail it opens on."""
    from mha_viz import detail, metrics

    run = mha_viz.analyze(model, text, max_tokens=n)
    metrics.head_table(run, model.head_weights())
    figures.model_grid(run).to_json()
    head = figures.head_heatmap if run.n <= detail.FULL_DETAIL_TOKENS else figures.head_pooled
    head(run, 0, 0).to_json()


def bertviz_model_view(run):
    try:
        from bertviz import model_view
    except ImportError:
        return None
    attention = tuple(torch.from_numpy(run.attentions[l][None]) for l in range(run.num_layers))
    html, seconds = timed(lambda: model_view(attention, run.tokens, html_action="return"))
    return len(html.data.encode()), seconds


def row(name, value, unit, ref=None):
    ratio = f"{value / ref:.4f}" if ref else ""
    print(f"| {name:58s} | {value:>12,.0f} {unit:5s} | {ratio:>9s} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[128, 512])
    parser.add_argument("--long", type=int, default=2048, help="smollm2 length for the long rows (0: skip)")
    args = parser.parse_args()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    model = mha_viz.load_model("minilm", device="cpu")
    print(f"\n| {'minilm (6 × 12 heads)':58s} | {'value':>18s} | {'÷ BertViz':>9s} |")
    print(f"|{'-' * 60}|{'-' * 20}|{'-' * 11}|")
    for n in args.lengths:
        run = mha_viz.analyze(model, text_of(n), max_tokens=n)
        bv = bertviz_model_view(run)
        if bv:
            row(f"n={run.n}: BertViz model view HTML", bv[0], "B", bv[0])
            row(f"n={run.n}: BertViz model view build time", bv[1] * 1000, "ms", bv[1] * 1000)
        grid, t = timed(lambda: figures.model_grid(run).to_json())
        row(f"n={run.n}: our overview (all heads), figure JSON", len(grid), "B", bv[0] if bv else None)
        row(f"n={run.n}: our overview build time", t * 1000, "ms", bv[1] * 1000 if bv else None)
        for label, make in (("every token", lambda: figures.head_heatmap(run, 0, 0)),
                            ("blocks", lambda: figures.head_pooled(run, 0, 0)),
                            ("words", lambda: figures.head_words(run, 0, 0))):
            size = len(make().to_json())
            row(f"n={run.n}: our head detail ({label}), figure JSON", size, "B")
        ids = torch.tensor([run.token_ids])
        plain = best(lambda: plain_forward(model, ids))
        ready = best(lambda: views_ready(model, run.text, n))
        row(f"n={run.n}: plain eager forward (no capture)", plain * 1000, "ms")
        row(f"n={run.n}: sentence -> views ready (capture, table, overview, head)", ready * 1000, "ms")
        print(f"|   target 1.5 × forward + 0.3 s = {(1.5 * plain + 0.3) * 1000:.0f} ms: "
              f"{'met' if ready <= 1.5 * plain + 0.3 else 'NOT met'}")
        _, eager = timed(lambda: model.capture(ids))
        _, eager = timed(lambda: model.capture(ids))
        _, lean = timed(lambda: model.capture(ids, lean=True))
        row(f"n={run.n}: eager capture (all probabilities)", eager * 1000, "ms")
        row(f"n={run.n}: lean capture (fused attention, inputs kept)", lean * 1000, "ms")
        print(f"|   lean speed-up over eager: {eager / lean:.2f}×")
    if args.long:
        small = mha_viz.load_model("smollm2", device="cpu")
        run = mha_viz.analyze(small, text_of(args.long), max_tokens=args.long)
        print(f"\n| {'smollm2 (30 × 9 heads), n=' + str(run.n):58s} | {'value':>18s} | {'':9s} |")
        print(f"|{'-' * 60}|{'-' * 20}|{'-' * 11}|")
        grid, t = timed(lambda: figures.model_grid(run).to_json())
        row("our overview (all heads), figure JSON", len(grid), "B")
        row("our overview build time", t * 1000, "ms")
        row("our head detail (blocks), figure JSON", len(figures.head_pooled(run, 0, 0).to_json()), "B")
        row("attentions held (float32)", run.attentions.nbytes, "B")
        ids = torch.tensor([run.token_ids])
        del run
        _, eager = timed(lambda: small.capture(ids))
        _, lean = timed(lambda: small.capture(ids, lean=True))
        row("eager capture", eager * 1000, "ms")
        row("lean capture", lean * 1000, "ms")
        print(f"|   lean speed-up over eager: {eager / lean:.2f}×")


if __name__ == "__main__":
    main()
