"""Long inputs, side by side in one run, every target of issue 4 with its verdict.

Run: `.venv/bin/python benchmarks/long_inputs.py` (about 8 minutes on 2 cores; the BertViz
rows need the packages in benchmarks/requirements.txt, and are skipped without them).
`--context 0` skips the whole-context overview of smollm2 (the longest part).

Measured: the bytes of the Plotly figure JSON that Streamlit sends (ours) and of the HTML that
`bertviz.model_view(..., html_action="return")` builds; times as the best of a few runs in this
one process; memory as the peak resident size above what the process held just before the
step (sampled every 10 ms), which includes the probabilities that a step returns.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402
from report import print_verdicts  # noqa: E402 - benchmarks/report.py, beside this script

import mha_viz  # noqa: E402
from mha_viz import metrics  # noqa: E402
from mha_viz.drawing import heads as head_figures  # noqa: E402
from mha_viz.views import detail  # noqa: E402

WORDS = ("the cat sat on the mat and the dog looked at it while rain fell on the old house by "
         "the river ").split()
MB = 1e6
VERDICTS: list[tuple[str, str, bool]] = []


def text_of(n: int) -> str:
    return " ".join(WORDS[i % len(WORDS)] for i in range(n))


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def best(fn, repeat: int = 3) -> float:
    fn()
    return min(timed(fn)[1] for _ in range(repeat))


def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def peak_above(fn):
    """(result, seconds, peak resident bytes above the start) of fn()."""
    start, peak, done = rss(), [0], threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], rss())
            time.sleep(0.01)
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        out, seconds = timed(fn)
    finally:
        done.set()
        sampler.join()
    return out, seconds, max(peak[0], rss()) - start


def row(name: str, value: str, ref: str = "") -> None:
    print(f"| {name:62s} | {value:>22s} | {ref:>14s} |")


def header(title: str) -> None:
    print(f"\n| {title:62s} | {'value':>22s} | {'÷ reference':>14s} |")
    print(f"|{'-' * 64}|{'-' * 24}|{'-' * 16}|")


def verdict(target: str, measured: str, met: bool) -> None:
    VERDICTS.append((target, measured, met))


def plain_forward(model, ids) -> None:
    with torch.inference_mode():
        model.hf_model(input_ids=ids)


def views_ready(model, text: str, n: int) -> None:
    """What the app does for a new sentence before its views can be drawn: capture, the head
    table (metrics), the overview and the head detail it opens on."""
    run = mha_viz.analyze(model, text, max_tokens=n)
    metrics.head_table(run, model.head_weights())
    head_figures.model_grid(run).to_json()
    head = head_figures.head_heatmap if run.n <= detail.FULL_DETAIL_TOKENS else head_figures.head_pooled
    head(run, 0, 0).to_json()


def bertviz_model_view(run):
    try:
        from bertviz import model_view
    except ImportError:
        return None
    attention = tuple(torch.from_numpy(run.attentions[layer][None]) for layer in range(run.num_layers))
    html, seconds = timed(lambda: model_view(attention, run.tokens, html_action="return"))
    return len(html.data.encode()), seconds


def minilm_rows(lengths: list[int]) -> None:
    model = mha_viz.load_model("minilm", device="cpu")
    for n in lengths:
        minilm_length(model, n)  # its run is freed on return, before the next length's


def minilm_length(model, n: int) -> None:
    header(f"minilm (6 × 12 heads), n = {n}")
    run = mha_viz.analyze(model, text_of(n), max_tokens=n)
    bv = bertviz_model_view(run)
    if bv:
        row("BertViz model view: HTML", f"{bv[0] / MB:,.1f} MB", "1")
        row("BertViz model view: build time", f"{bv[1]:,.2f} s", "1")
    grid, t = timed(lambda: head_figures.model_grid(run).to_json())
    share = len(grid) / bv[0] if bv else None
    row("ours: overview of all heads, figure JSON", f"{len(grid) / 1e3:,.0f} KB",
        f"{share:.5f}" if bv else "")
    row("ours: overview build time", f"{t:,.2f} s", f"{t / bv[1]:.4f}" if bv else "")
    verdict(f"overview ≤ 1.5 MB (minilm, n = {n})", f"{len(grid) / 1e3:,.0f} KB", len(grid) <= 1.5 * MB)
    if bv and n == 512:
        verdict("overview ≤ 3 % of BertViz's model view at n = 512", f"{share:.3%}", share <= 0.03)
    for label, make in (("every token", lambda: head_figures.head_heatmap(run, 0, 0)),
                        ("blocks", lambda: head_figures.head_pooled(run, 0, 0)),
                        ("words", lambda: head_figures.head_words(run, 0, 0))):
        size = len(make().to_json())
        row(f"ours: one head in detail ({label}), figure JSON", f"{size / 1e3:,.0f} KB")
        if n == 512:
            verdict(f"head detail ({label}) ≤ 1 MB at n = 512", f"{size / 1e3:,.0f} KB", size <= MB)
    ids = torch.tensor([run.token_ids])
    plain = best(lambda: plain_forward(model, ids))
    ready = best(lambda: views_ready(model, run.text, n))
    row("plain eager forward (no capture)", f"{plain * 1e3:,.0f} ms", "1")
    row("sentence → views ready (capture, table, overview, head)", f"{ready * 1e3:,.0f} ms",
        f"{ready / plain:.2f}")
    if n == 512:
        limit = 1.5 * plain + 0.3
        verdict("views ready ≤ 1.5 × plain forward + 0.3 s (minilm, n = 512)",
                f"{ready * 1e3:,.0f} ms ≤ {limit * 1e3:,.0f} ms", ready <= limit)
    eager = best(lambda: model.capture(ids), 2)
    lean = best(lambda: model.capture(ids, lean=True), 2)
    row("eager capture (all probabilities)", f"{eager * 1e3:,.0f} ms", "1")
    row("lean capture (fused attention, layer inputs kept)", f"{lean * 1e3:,.0f} ms", f"{lean / eager:.2f}")
    if n == 512:
        verdict("lean capture faster than eager capture (minilm, n = 512)", f"{eager / lean:.2f}× faster",
                lean < eager)


def smollm2_analyze(small, n: int) -> torch.Tensor:
    """The analyses of smollm2 at n tokens (every layer, then two); returns the token ids. The runs
    are freed on return, before the captures."""
    text = text_of(n)
    header(f"smollm2 (30 × 9 heads, GQA), n = {n}")
    run, seconds, peak = peak_above(lambda: mha_viz.analyze(small, text, max_tokens=n))
    one_copy = run.attentions.nbytes
    row("analyze (lean by default at this size): time", f"{seconds:,.1f} s")
    row("analyze: peak memory above the model", f"{peak / 1e9:,.2f} GB", f"{peak / one_copy:.2f}")
    row("one float32 copy of the attentions", f"{one_copy / 1e9:,.2f} GB", "1")
    verdict(f"capture at n = {run.n} (smollm2) holds at most one float32 copy",
            f"peak {peak / 1e9:.2f} GB, {peak / one_copy:.2f} copies", peak < 2 * one_copy)
    grid, t = timed(lambda: head_figures.model_grid(run).to_json())
    row("ours: overview of all heads, figure JSON", f"{len(grid) / 1e3:,.0f} KB")
    row("ours: overview build time", f"{t:,.2f} s")
    verdict(f"overview ≤ 1.5 MB (smollm2, n = {run.n})", f"{len(grid) / 1e3:,.0f} KB", len(grid) <= 1.5 * MB)
    row("ours: one head in detail (blocks), figure JSON",
        f"{len(head_figures.head_pooled(run, 0, 0).to_json()) / 1e3:,.0f} KB")
    layers = [0, 1]
    _, seconds, peak = peak_above(lambda: mha_viz.analyze(small, text, max_tokens=n, layers=layers))
    row(f"analyze layers {layers} only: time / peak above the model",
        f"{seconds:,.1f} s / {peak / 1e9:,.2f} GB", f"{peak / one_copy:.2f}")
    return torch.tensor([run.token_ids])


def smollm2_rows(n: int, context: int) -> None:
    small = mha_viz.load_model("smollm2", device="cpu")
    ids = smollm2_analyze(small, n)
    eager = best(lambda: small.capture(ids), 1)
    lean = best(lambda: small.capture(ids, lean=True), 1)
    row("eager capture (all probabilities)", f"{eager:,.1f} s", "1")
    row("lean capture", f"{lean:,.1f} s", f"{lean / eager:.2f}")
    verdict(f"lean capture faster than eager (smollm2, n = {n})", f"{eager / lean:.2f}× faster", lean < eager)
    if context:
        header(f"smollm2 whole context: overview of every head at n = {context}")
        fractions: list[float] = []
        ov, seconds, peak = peak_above(lambda: mha_viz.views.overview(
            small, text_of(context), progress=lambda f, _m: fractions.append(f)))
        grid = head_figures.grid_figure(ov.pooled).to_json()
        head_matrix = ov.n * ov.n * 4
        row("tokens", f"{ov.n:,}")
        row("time (one forward, then one head at a time)", f"{seconds:,.0f} s")
        row("peak memory above the model", f"{peak / 1e9:,.2f} GB")
        row("one head's n × n float32 matrix", f"{head_matrix / 1e9:,.2f} GB")
        row("all heads' probabilities, if held (they are not)",
            f"{small.num_layers * small.num_heads * head_matrix / 1e9:,.0f} GB")
        row("overview figure JSON", f"{len(grid) / 1e3:,.0f} KB")
        row("progress updates", f"{len(fractions)}")
        verdict(f"whole-context overview (n = {ov.n}) ≤ 2 GB above the model, with progress",
                f"{peak / 1e9:.2f} GB, {len(fractions)} updates", peak <= 2e9 and len(fractions) > 1)


def mha_rows(repeat: int) -> None:
    from mha_vs_torch import measure
    header("our MultiHeadAttention ÷ torch (d_model 768, 12 heads)")
    for label, ours, ref in measure(repeat):
        ratio = ours / ref
        row(label, f"{ours * 1e3:,.2f} ms", f"{ratio:.2f}")
        if "bare" not in label:
            verdict(f"MHA {label} ≤ 1.1 × torch", f"{ratio:.2f}", ratio <= 1.1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[128, 512], help="minilm lengths")
    parser.add_argument("--long", type=int, default=2048, help="smollm2 length (0: skip)")
    parser.add_argument("--context", type=int, default=8192, help="smollm2 whole-context length (0: skip)")
    parser.add_argument("--repeat", type=int, default=7, help="alternating rounds for MHA ÷ torch")
    args = parser.parse_args()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, "
          f"{'CUDA ' + torch.cuda.get_device_name() if torch.cuda.is_available() else 'CPU only'}")
    mha_rows(args.repeat)
    minilm_rows(args.lengths)
    if args.long:
        smollm2_rows(args.long, args.context)
    print_verdicts(VERDICTS, target_width=72, value_width=30)


if __name__ == "__main__":
    main()
