"""Attribution costs (a benchmark, not a test), side by side in one run (issue 22):

1. Patching every head of SmolLM2 on the IOI pair ("When Mary and John went to the store, John
   gave a drink to" / the second name swapped; 270 heads): `attribution.patch_heads` (the heads of
   a layer as one batch: 30 forwards of 9 sequences) against the plain way (one forward per head
   with a hook that swaps that head's slice: 270 forwards), the same numbers within 1e-5.
   Target: batched at most 0.5 × plain.
2. Attribution patching against real patching (issue 30): `attribution.estimate_heads` (one forward
   on each text, one backward pass) against `attribution.patch_heads`, on SmolLM2's IOI pair and on
   toy-induction's repeat: the time as a ratio, the Pearson and Spearman correlations over the
   heads, the largest disagreement, and the estimate's time in forward passes. Targets on
   SmolLM2: the estimate at most 1/5 of real patching's time, a Pearson correlation of at least
   0.9 on the IOI pair.
3. Value norms on MiniLM at 512 tokens: an eager capture that records the layer inputs (and
   what each W_V wrote) and computes ‖f_h(x_j)‖ for every layer, against the same capture
   without them. Target: at most 1.1 ×.
4. Real patching of SmolLM2 in bfloat16 against float32 (`--only precision`), and the LM head's one call on a
   batch's last rows (9 sequences, as `logits_to_keep=1` hands them over: a strided view) against the same rows
   made contiguous, in bfloat16 (what `mha_viz_models.device.dense_head` does at load). Target on the CPU: bfloat16
   patching at most 1.5 × float32's.

Each timing is the median of `--repeat` rounds, both ways alternating. A GPU column is added
when CUDA is available (`--device cuda`).

Run: `.venv/bin/python benchmarks/attribution.py [--repeat 3] [--device cpu]
[--only norms|patching|estimate|precision]`.
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

import numpy as np  # noqa: E402
import torch  # noqa: E402
from report import print_verdicts  # noqa: E402 - benchmarks/report.py, beside this script

import mha_viz  # noqa: E402
from mha_viz import corpus  # noqa: E402
from mha_viz.interventions import attribution, prediction  # noqa: E402
from mha_viz_models.reading import values  # noqa: E402

CLEAN = "When Mary and John went to the store, John gave a drink to"
CORRUPTED = "When Mary and John went to the store, Mary gave a drink to"
PATCH_X, NORMS_X = 0.5, 1.1
ESTIMATE_X, ESTIMATE_R = 0.2, 0.9
HALF_X = 1.5


def timed(fn, repeat: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), out


def plain_patching(model, clean: str, corrupted: str, answer: int, wrong: int) -> np.ndarray:
    """One forward per head, that head's z swapped for the clean one: the way batching replaces."""
    ids_x = torch.tensor([mha_viz.tokenize(model, corrupted).ids], device=model.device)
    cap_c = model.capture(torch.tensor([mha_viz.tokenize(model, clean).ids], device=model.device))
    cap_x = model.capture(ids_x)
    m_c = float(attribution.logit_difference(cap_c.output.logits.float(), answer, wrong)[0])
    m_x = float(attribution.logit_difference(cap_x.output.logits.float(), answer, wrong)[0])
    out = np.zeros((model.num_layers, model.num_heads), dtype=np.float32)
    for layer in range(model.num_layers):
        for head in range(model.num_heads):
            m = attribution.patched_metric(model, ids_x, layer, [head], cap_c.head_outputs[layer][0],
                                           answer, wrong, None)
            out[layer, head] = (float(m[0]) - m_x) / (m_c - m_x)
    return out


def patching(device: str, repeat: int) -> list[tuple[str, str, bool]]:
    model = mha_viz.load_model("smollm2", device=device)
    n = mha_viz.tokenize(model, CLEAN).n
    batched_s, res = timed(lambda: attribution.patch_heads(model, CLEAN, CORRUPTED, " Mary", " John"), repeat)
    plain_s, plain = timed(lambda: plain_patching(model, CLEAN, CORRUPTED, res.answer, res.wrong), max(1, repeat // 2))
    gap = float(np.abs(plain - res.restored).max())
    ratio = batched_s / plain_s
    print(f"patching, smollm2 on {device}, {n} tokens, {model.num_layers * model.num_heads} heads: batched "
          f"{batched_s:.2f} s, plain {plain_s:.2f} s ({ratio:.2f} ×); largest difference {gap:.1e}; m_clean "
          f"{res.m_clean:.2f}, m_corrupted {res.m_corrupted:.2f}")
    return [(f"patching batched ≤ {PATCH_X} × plain ({device})", f"{ratio:.2f} × ({batched_s:.2f} / {plain_s:.2f} s)",
             ratio <= PATCH_X),
            (f"patching batched = plain within 1e-5 ({device})", f"{gap:.1e}", gap <= 1e-5)]


def precision(device: str, repeat: int) -> list[tuple[str, str, bool]]:
    models = {dtype: mha_viz.load_model("smollm2", device=device, dtype=dtype) for dtype in ("float32", "bfloat16")}
    times: dict[str, list[float]] = {dtype: [] for dtype in models}
    for round_ in range(repeat + 1):  # the two precisions alternating; round 0 warms both
        for dtype, model in models.items():
            start = time.perf_counter()
            attribution.patch_heads(model, CLEAN, CORRUPTED, " Mary", " John")
            if round_:
                times[dtype].append(time.perf_counter() - start)
    seconds = {dtype: statistics.median(t) for dtype, t in times.items()}
    head = models["bfloat16"].hf_model.get_output_embeddings()
    rows = torch.randn(9, 14, head.in_features, dtype=torch.bfloat16, device=head.weight.device)[:, -1:]  # strided
    with torch.inference_mode():
        strided_s, _ = timed(lambda: torch.nn.functional.linear(rows, head.weight), repeat)
        dense_s, _ = timed(lambda: torch.nn.functional.linear(rows.contiguous(), head.weight), repeat)
    ratio = seconds["bfloat16"] / seconds["float32"]
    print(f"patching, smollm2 on {device}: bfloat16 {seconds['bfloat16']:.2f} s, float32 {seconds['float32']:.2f} s "
          f"({ratio:.2f} ×); the head on 9 last rows in bfloat16: strided {strided_s * 1e3:.1f} ms, contiguous "
          f"{dense_s * 1e3:.1f} ms ({strided_s / dense_s:.0f} ×)")
    return [(f"patching in bfloat16 ≤ {HALF_X} × float32 ({device})", f"{ratio:.2f} × ({seconds['bfloat16']:.2f} / "
             f"{seconds['float32']:.2f} s)", ratio <= HALF_X)]


def estimate(device: str, repeat: int) -> list[tuple[str, str, bool]]:
    rows = []
    for name, clean, corrupted, answer, wrong in (
            ("smollm2", CLEAN, CORRUPTED, " Mary", " John"),
            ("toy-induction", prediction.INDUCTION.clean, prediction.INDUCTION.corrupted, None, None)):
        model = mha_viz.load_model(name, device=device)
        attribution.estimate_heads(model, clean, corrupted, answer, wrong)  # warm: the first backward pass
        est_s, real_s = [], []
        for _ in range(repeat):  # alternating, so that both see the same machine
            est_t, est = timed(lambda: attribution.estimate_heads(model, clean, corrupted, answer, wrong), 1)
            real_t, real = timed(lambda: attribution.patch_heads(model, clean, corrupted, answer, wrong), 1)
            est_s.append(est_t)
            real_s.append(real_t)
        e_s, r_s = statistics.median(est_s), statistics.median(real_s)
        agree = attribution.agreement(est.values, real.values)
        ratio = e_s / r_s
        heads = model.num_layers * model.num_heads
        print(f"estimate, {name} on {device}, {heads} heads: estimate {e_s:.3f} s, real patching {r_s:.3f} s "
              f"({ratio:.2f} ×); Pearson r {agree.pearson:.3f}, Spearman ρ {agree.spearman:.3f}; largest "
              f"disagreement {agree.largest:.3f} at layer {agree.where[0]}, head {agree.where[1]}; "
              f"{int(agree.differ.sum())} heads differ by > 0.1")
        if name == "smollm2":
            ids = torch.tensor([mha_viz.tokenize(model, clean).ids], device=model.device)

            def forward():
                with torch.inference_mode():
                    model.hf_model(input_ids=ids, attention_mask=torch.ones_like(ids), use_cache=False)
            forward()
            fwd_s = timed(forward, max(3, repeat))[0]
            page_s = timed(lambda: prediction.explain(model, clean, corrupted, answer, wrong), max(1, repeat))[0]
            print(f"one forward {fwd_s:.3f} s: the estimate is {e_s / fwd_s:.1f} forwards; the page's first step "
                  f"(the estimate, direct logit attribution, both texts' runs for the one-head panel) "
                  f"{page_s:.3f} s = {page_s / fwd_s:.1f} forwards")
            rows.append((f"estimate in forward passes, smollm2 IOI ({device})",
                         f"{e_s / fwd_s:.1f} (page's first step {page_s / fwd_s:.1f})", None))
            rows += [(f"estimate ≤ {ESTIMATE_X} × real patching, smollm2 IOI ({device})",
                      f"{ratio:.2f} × ({e_s:.2f} / {r_s:.2f} s)", ratio <= ESTIMATE_X),
                     (f"estimate vs real Pearson ≥ {ESTIMATE_R}, smollm2 IOI ({device})",
                      f"r {agree.pearson:.3f}, ρ {agree.spearman:.3f}, largest gap {agree.largest:.2f}",
                      agree.pearson >= ESTIMATE_R)]
        else:  # no target: saturated induction heads are where the estimate is known to miss
            rows.append((f"estimate vs real, toy-induction repeat ({device})",
                         f"{ratio:.2f} ×; r {agree.pearson:.3f}, ρ {agree.spearman:.3f}, "
                         f"largest gap {agree.largest:.2f}",
                         None))
    return rows


def norms(device: str, repeat: int) -> list[tuple[str, str, bool]]:
    model = mha_viz.load_model("minilm", device=device)
    text = " ".join(corpus.read_texts("sample")[:60])
    ids = torch.tensor([mha_viz.tokenize(model, text, 512).ids], device=model.device)

    def without():
        cap = model.capture(ids)
        return torch.stack([a[0] for a in cap.attentions]).float().cpu().numpy()

    def with_norms():
        cap = model.capture(ids, inputs=True)
        att = torch.stack([a[0] for a in cap.attentions]).float().cpu().numpy()
        return att, torch.stack([values.value_norms(model, cap, layer)[0] for layer in range(model.num_layers)]).cpu()
    without(), with_norms()  # warm
    a, b = [], []
    for _ in range(repeat):  # alternating, so that both see the same machine
        a.append(timed(without, 1)[0])
        b.append(timed(with_norms, 1)[0])
    base, extra = statistics.median(a), statistics.median(b)
    ratio = extra / base
    print(f"value norms, minilm on {device}, {ids.shape[1]} tokens: capture {base:.3f} s, with value norms "
          f"{extra:.3f} s ({ratio:.2f} ×)")
    return [(f"capture with value norms ≤ {NORMS_X} × without ({device})",
             f"{ratio:.2f} × ({extra:.3f} / {base:.3f} s)", ratio <= NORMS_X)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--device", default="cpu", help="cpu (default), or cuda to add the GPU column")
    parser.add_argument("--only", choices=["norms", "patching", "estimate", "precision"],
                        help="run one of the measurements")
    args = parser.parse_args()
    devices = [args.device] if args.device == "cpu" else ["cpu", args.device]
    verdicts = []
    for device in devices:
        if args.only in (None, "norms"):
            verdicts += norms(device, args.repeat)
        if args.only in (None, "patching"):
            verdicts += patching(device, args.repeat)
        if args.only in (None, "estimate"):
            verdicts += estimate(device, args.repeat)
        if args.only in (None, "precision"):
            verdicts += precision(device, args.repeat)
    print_verdicts(verdicts, target_width=52, value_width=40,
                   where=f"{os.cpu_count()} CPUs; 1-minute load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
