"""Edges of a circuit (issue 41), timed side by side in one run, on SmolLM2's IOI pair and toy-induction's repeat:

1. One plain forward pass of the clean text (`model.hf_model(input_ids=…, use_cache=False)` under
   `torch.inference_mode`): the reference every other time is divided by.
2. `mha_viz.edge_attribution` of every edge, by EAP (one forward on each text, one backward) and by EAP-IG
   (5 steps), in forward passes.
3. Real path patching of the 50 edges of largest |score| by EAP-IG (`mha_viz.circuits.path_patch_many`, batched):
   its time, and the Pearson (and Spearman) correlation of each estimate — EAP and EAP-IG, both on that
   same set of 50 edges — with the real change in m. EAP on its own top 50 is printed for the record.
4. `mha_viz.circuits.faithfulness_curve` for the top 1, 2, 5, 10, 20 and 100 % of the edges by EAP-IG: its time and
   the faithfulness of each circuit.

Targets (SmolLM2, 2-core CPU): EAP at most 5 forward passes' time, EAP-IG at most 15; EAP-IG's Pearson
correlation with real path patching over the top 50 edges at least 0.8 on the IOI pair; the circuit of the
top 5 % of the edges recovers at least 70 % of m (faithfulness ≥ 0.7); and every score and every m of every call
(warm-up included) finite. toy-induction's rows are for the record (its forward, under 1 ms, is mostly overhead).

Each timing is the median of `--repeat` rounds, the ways alternating within each round, after one warm-up
round (the first backward pass, the split run's layout).

5. With `--task N`: EAP over N generated IOI pairs on SmolLM2, batched, against the same pairs one by one
   (`benchmarks/task_eap.py`; issue 56's target: at most 0.5 ×).

Run: `.venv/bin/python benchmarks/circuits.py [--repeat 3] [--device cpu] [--only smollm2|toy-induction]
[--task 100]`.
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
from scipy import stats  # noqa: E402
from task_eap import task_rows  # noqa: E402 - beside this script

import mha_viz  # noqa: E402
from mha_viz.circuits.edges import graph  # noqa: E402
from mha_viz.interventions.prediction import INDUCTION, IOI  # noqa: E402

EAP_X, IG_X, IG_R, FAITH_5 = 5.0, 15.0, 0.8, 0.7
STEPS, TOP = 5, 50
FRACTIONS = (0.01, 0.02, 0.05, 0.10, 0.20, 1.0)
CASES = {  # model: (pair's name, clean, corrupted, answer, wrong)
    "smollm2": ("IOI", IOI.clean, IOI.corrupted, " Mary", " John"),
    "toy-induction": ("repeat", INDUCTION.clean, INDUCTION.corrupted, None, None),
}


def rounds(fns: dict, repeat: int) -> tuple[dict[str, float], dict]:
    """The median time of each function, the functions alternating within each round, and each one's last result."""
    times: dict[str, list[float]] = {name: [] for name in fns}
    out = {}
    for _ in range(repeat):
        for name, fn in fns.items():
            start = time.perf_counter()
            out[name] = fn()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}, out


def scores_of(edges: mha_viz.circuits.Edges, pairs: list[tuple[str, str]]) -> np.ndarray:
    """The scores of `edges` for these (sender, receiver) pairs, in their order."""
    s = edges.scores.set_index(["sender", "receiver"])["score"]
    return s.loc[pairs].to_numpy(dtype=np.float64)


def took(seconds: float) -> str:
    return f"{seconds * 1e3:.1f} ms" if seconds < 0.1 else f"{seconds:.3f} s"


def correlations(est: np.ndarray, real: np.ndarray) -> tuple[float, float]:
    return float(np.corrcoef(est, real)[0, 1]), float(stats.spearmanr(est, real).statistic)


def case(name: str, device: str, repeat: int) -> list[tuple[str, str, bool | None]]:
    pair, clean, corrupted, answer, wrong = CASES[name]
    model = mha_viz.load_model(name, device=device)
    g = graph(model)
    n_edges = g.edge_count
    ids = torch.tensor([mha_viz.tokenize(model, clean).ids], device=model.device)

    def forward():
        with torch.inference_mode():
            model.hf_model(input_ids=ids, attention_mask=torch.ones_like(ids), use_cache=False)

    calls: dict[str, int] = {}
    bad: dict[str, int] = {}  # non-finite scores or m, counted over every call (warm-up included)

    def count(key: str, values) -> None:
        calls[key] = calls.get(key, 0) + 1
        bad[key] = bad.get(key, 0) + int((~np.isfinite(np.asarray(values, dtype=np.float64))).sum())

    def eap():
        e = mha_viz.edge_attribution(model, clean, corrupted, answer, wrong, method="eap")
        count("EAP", e.scores["score"])
        return e

    def ig():
        e = mha_viz.edge_attribution(model, clean, corrupted, answer, wrong, method="eap-ig", steps=STEPS)
        count("EAP-IG", e.scores["score"])
        return e

    ig_edges = ig()  # warm: the first backward pass, the split run's layout (and the edges to patch)
    eap_edges = eap()
    forward()
    top = ig_edges.top(TOP)
    pairs = list(zip(top["sender"], top["receiver"]))
    ks = [max(1, round(f * n_edges)) for f in FRACTIONS]

    def patch():
        real = mha_viz.circuits.path_patch_many(model, clean, corrupted, pairs, answer, wrong)
        count("path patching", real)
        return real

    def curve():
        faith = mha_viz.circuits.faithfulness_curve(model, clean, corrupted, ig_edges, ks)
        count("curve", faith["m"])
        return faith

    patch(), curve()  # warm
    t, out = rounds({"forward": forward, "eap": eap, "eap-ig": ig, "patch": patch, "curve": curve}, repeat)
    eap_edges, ig_edges, real, faith = out["eap"], out["eap-ig"], out["patch"], out["curve"]
    r_ig = correlations(scores_of(ig_edges, pairs), real)
    eap_scores = scores_of(eap_edges, pairs)
    r_eap = correlations(eap_scores, real)
    worst = int(np.argmax(np.abs(eap_scores - real)))
    r_eap_rest = correlations(np.delete(eap_scores, worst), np.delete(real, worst))
    own = eap_edges.top(TOP)
    own_pairs = list(zip(own["sender"], own["receiver"]))
    r_own = correlations(own["score"].to_numpy(dtype=np.float64),
                         mha_viz.circuits.path_patch_many(model, clean, corrupted, own_pairs, answer, wrong))
    overlap = len(set(own_pairs) & set(pairs))
    fwd = t["forward"]
    x = {key: t[key] / fwd for key in t}
    gap = ig_edges.m_clean - ig_edges.m_corrupted

    print(f"\n{name}, {pair} pair, {ig_edges.tokens} tokens ({device}): {len(g.senders)} senders, "
          f"{len(g.receivers)} receivers, {n_edges:,} edges; m clean {ig_edges.m_clean:.3f}, "
          f"corrupted {ig_edges.m_corrupted:.3f} (answer {ig_edges.answer_text!r}, wrong {ig_edges.wrong_text!r})")
    print(f"  one forward {took(fwd)}")
    print(f"  EAP, every edge: {took(t['eap'])} = {x['eap']:.1f} forwards")
    print(f"  EAP-IG ({STEPS} steps): {took(t['eap-ig'])} = {x['eap-ig']:.1f} forwards")
    print(f"  path patching of EAP-IG's top {len(pairs)}, batched: {took(t['patch'])} = {x['patch']:.1f} forwards "
          f"({t['patch'] / len(pairs) * 1e3:.1f} ms an edge); real change in m from {real.min():.3f} to "
          f"{real.max():.3f} (m_clean − m_corrupted {gap:.3f})")
    print(f"  on those {len(pairs)} edges: EAP-IG r {r_ig[0]:.3f} (ρ {r_ig[1]:.3f}), EAP r {r_eap[0]:.3f} "
          f"(ρ {r_eap[1]:.3f}); EAP's largest miss {pairs[worst][0]} → {pairs[worst][1]}: {eap_scores[worst]:.3f} "
          f"against {real[worst]:.3f} real (EAP-IG {scores_of(ig_edges, [pairs[worst]])[0]:.3f}), EAP r without it "
          f"{r_eap_rest[0]:.3f}")
    print(f"  EAP on its own top {TOP} (sharing {overlap} of EAP-IG's): r {r_own[0]:.3f} (ρ {r_own[1]:.3f})")
    print(f"  faithfulness curve, {len(ks)} circuits: {took(t['curve'])} = {x['curve']:.1f} forwards")
    for f, (_, row) in zip(FRACTIONS, faith.iterrows()):
        print(f"    top {f * 100:5.1f} % = {int(row['k']):>6,} edges: faithfulness {row['faithfulness']:.3f} "
              f"(m {row['m']:.3f})")
    f5 = float(faith["faithfulness"].iloc[FRACTIONS.index(0.05)])
    finite = not any(bad.values())
    print("  every score and m finite in every call" if finite else
          "  NON-FINITE values: " + ", ".join(f"{key} {bad[key]:,} in {calls[key]} calls" for key in bad if bad[key]))

    where = f"{name}, {pair} ({device})"
    timed = name == "smollm2"  # the targets are SmolLM2's; the toy model's forward is too short to divide by
    eap_t = f"≤ {EAP_X:g} × forward" if timed else "÷ forward"
    ig_t = f"≤ {IG_X:g} × forward" if timed else "÷ forward"
    r_t = f", Pearson ≥ {IG_R:g}" if pair == "IOI" else ""
    f_t = f" ≥ {FAITH_5:g}" if timed else ""
    return [(f"edges, {where}", f"{n_edges:,} ({len(g.senders)} senders × {len(g.receivers)} receivers)", None),
            (f"every score and m finite, {where}",
             f"{sum(calls.values())} calls" + ("" if finite else f", {sum(bad.values()):,} non-finite"), finite),
            (f"EAP {eap_t}, {where}", f"{x['eap']:.2f} × ({took(t['eap'])} / {took(fwd)})",
             x["eap"] <= EAP_X if timed else None),
            (f"EAP-IG ({STEPS} steps) {ig_t}, {where}", f"{x['eap-ig']:.2f} × ({took(t['eap-ig'])} / {took(fwd)})",
             x["eap-ig"] <= IG_X if timed else None),
            (f"path patching top {len(pairs)}, batched, {where}", f"{x['patch']:.1f} × ({took(t['patch'])})", None),
            (f"EAP-IG vs real over its top {len(pairs)}{r_t}, {where}", f"r {r_ig[0]:.3f}, ρ {r_ig[1]:.3f}",
             r_ig[0] >= IG_R if pair == "IOI" else None),
            (f"EAP vs real, same {len(pairs)} edges, {where}",
             f"r {r_eap[0]:.3f}, ρ {r_eap[1]:.3f} (r {r_eap_rest[0]:.3f} without 1)", None),
            (f"faithfulness curve ({len(ks)} circuits), {where}", f"{x['curve']:.1f} × ({took(t['curve'])})", None),
            (f"top 5 % circuit's faithfulness{f_t}, {where}", f"{f5:.3f} ({ks[2]:,} edges)",
             f5 >= FAITH_5 if timed else None)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--only", choices=list(CASES), help="run one model")
    parser.add_argument("--task", type=int, default=0, metavar="N",
                        help="also EAP over N generated IOI pairs, batched against one by one (benchmarks/task_eap.py)")
    args = parser.parse_args()
    verdicts = []
    for name in CASES:
        if args.only in (None, name):
            verdicts += case(name, args.device, args.repeat)
    if args.task:
        verdicts += task_rows(mha_viz.load_model("smollm2", device=args.device), args.task)
    print_verdicts(verdicts, target_width=64, value_width=44,
                   where=f"{os.cpu_count()} CPUs; 1-minute load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
