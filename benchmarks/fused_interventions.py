"""The interventions that read no probabilities, on fused attention (SDPA) against the eager attention they ran on
before (`mha_viz_models.loading.switch.fused`, refused for the second column), side by side in one run on SmolLM2:
- switching heads off on a long text (`ablation_outcome.unablated` and `ablated` with 10 heads off), at --lengths;
- real patching of every head over --pairs generated IOI pairs (`mha_viz.patch_heads` given the PromptSet);
- attribution patching over the same pairs (`mha_viz.estimate_heads`).
Each is timed once a way, fused first, after a warm-up; the largest difference between the two ways is printed
beside the ratio (float32 rounding, normalised by each pair's gap for the tasks).

    .venv/bin/python benchmarks/fused_interventions.py [--lengths 1024 4096] [--pairs 20]
"""

from __future__ import annotations

import argparse
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np

import mha_viz
from mha_viz.interventions import ablation_outcome
from mha_viz.tasks import generators
from mha_viz_models.loading import switch


@contextmanager
def _eager():
    """The switch refused: every forward on eager attention, as before."""
    use = switch.use_fused
    switch.use_fused = lambda _model: False
    try:
        yield
    finally:
        switch.use_fused = use


def _both(work) -> tuple[float, float, float]:
    """(fused seconds, eager seconds, largest |difference|) of `work()`, which returns an array."""
    start = time.perf_counter()
    fused = np.asarray(work(), dtype=np.float64)
    t_fused = time.perf_counter() - start
    with _eager():
        start = time.perf_counter()
        eager = np.asarray(work(), dtype=np.float64)
        t_eager = time.perf_counter() - start
    return t_fused, t_eager, float(np.nanmax(np.abs(fused - eager)))


def _heads_off(model, text: str, n: int):
    keep = np.ones((model.num_layers, model.num_heads), dtype=bool)
    keep.ravel()[:: max(1, keep.size // 10)] = False

    def work():
        base = ablation_outcome.unablated(model, text, max_tokens=n)
        off = ablation_outcome.ablated(model, text, keep, base=base, max_tokens=n)
        return [base.loss, off.loss]
    return work


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lengths", type=int, nargs="+", default=[1024, 4096])
    parser.add_argument("--pairs", type=int, default=20)
    args = parser.parse_args()
    model = mha_viz.load_model("smollm2", device="cpu")
    text = " ".join([(Path(mha_viz.__file__).parent / "corpus" / "sample.txt").read_text()] * 8)
    prompts = generators.ioi(args.pairs, seed=0)
    rows = [(f"switch 10 heads off, {n} tokens", _heads_off(model, text, n)) for n in args.lengths] + [
        (f"real patching, {args.pairs} IOI pairs",
         lambda: mha_viz.patch_heads(model, prompts, resamples=10).per_pair),
        (f"attribution patching, {args.pairs} IOI pairs",
         lambda: mha_viz.estimate_heads(model, prompts, resamples=10).per_pair)]
    _heads_off(model, "A short warm-up text for the first forward.", 32)()
    print(f"{'':44s} {'fused':>8s} {'eager':>8s} {'fused/eager':>12s} {'largest diff':>13s}")
    for name, work in rows:
        t_fused, t_eager, diff = _both(work)
        print(f"{name:44s} {t_fused:7.1f}s {t_eager:7.1f}s {t_fused / t_eager:11.2f}x {diff:13.2e}", flush=True)


if __name__ == "__main__":
    main()
