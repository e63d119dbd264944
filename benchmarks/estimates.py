"""Every cost the app states before or while it works, set against the time that work takes, side by side in one
run: a benchmark, not a test. Target (issue 90): each estimate within 0.5–2 × the time measured.

Run: `.venv/bin/python benchmarks/estimates.py [--tokens 1024 2048]` (about 5 minutes on 2 CPU cores).

Each case is what a page computes once its estimate is shown: Compare texts or models (`features/compare/cost`:
two long runs of SmolLM2 on the same tokens, then a long text against a short sentence, which compares by head
metrics), Head similarity's JS and cosine (`features/similarity/cost`), Across layers' rollout of every layer and
of the last layer alone (`features/across_layers/cost`), the sidebar's *Hide tokens* on a long run
(`budget.seconds.read_seconds` × 3, as `ui/shell/steps` says it) and Head composition's scores on SmolLM2
(`circuits.composition.composition_seconds`). The runs are long (MHA_VIZ_DENSE_MB=0: every head's rows recomputed
when read), as past 1 GiB of attention in the app. Printed: the estimate, the time measured, their ratio, and
whether it lies within 0.5–2 ×; an estimate of 0 (no cost stated) is within target when the work takes under 2 s.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ["MHA_VIZ_DENSE_MB"] = "0"  # every run long: rows recomputed where read, as past the dense limit
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402 - after the path above
from pages import long_text  # noqa: E402 - benchmarks/pages.py, beside this script

import mha_viz  # noqa: E402
from mha_viz import metrics  # noqa: E402
from mha_viz.budget.seconds import read_seconds  # noqa: E402
from mha_viz.circuits import composition  # noqa: E402
from mha_viz.derived import run as derived  # noqa: E402
from mha_viz.features.across_layers.cost import rollout_seconds  # noqa: E402
from mha_viz.features.compare.cost import compare_seconds  # noqa: E402
from mha_viz.features.similarity.cost import similarity_seconds  # noqa: E402

QUICK_S = 2.0  # work that states no cost must take less than this


def timed(work) -> float:
    start = time.perf_counter()
    work()
    return time.perf_counter() - start


def line(name: str, estimate: float, measured: float) -> bool:
    """Print one case as soon as it is measured; whether it is within target."""
    if estimate == 0:
        ok = measured < QUICK_S
        print(f"{name:<44} {'none':>9} {measured:9.2f} {'—':>7}  {'yes' if ok else 'NO'}", flush=True)
        return ok
    ratio = estimate / measured
    ok = 0.5 <= ratio <= 2.0
    print(f"{name:<44} {estimate:9.2f} {measured:9.2f} {ratio:7.2f}  {'yes' if ok else 'NO'}", flush=True)
    return ok


def cases(model, tokens: int):
    """(name, estimate, seconds measured) of every case at this length, yielded as each is measured."""
    text = long_text(tokens)
    run = mha_viz.analyze(model, text, max_tokens=tokens)
    twin = mha_viz.analyze(model, text.replace(" the ", " a ", 1), max_tokens=tokens)  # the same length, one word
    short = mha_viz.analyze(model, "A short sentence to compare with.")
    assert not run.is_dense and run.n == twin.n, (run.is_dense, run.n, twin.n)
    n = f"{run.n:,} tokens"
    yield f"Compare, same tokens ({n})", compare_seconds(run, twin), timed(lambda: mha_viz.compare(run, twin))
    yield (f"Compare, against a sentence ({n})", compare_seconds(run, short),
           timed(lambda: mha_viz.compare(run, short)))
    for kind in ("js", "cosine"):
        yield (f"Head similarity, {kind} ({n})", similarity_seconds(run, kind),
               timed(lambda kind=kind: metrics.head_similarity(run, kind)))
    yield (f"Across layers, every layer's rollout ({n})", rollout_seconds(run, run.num_layers),
           timed(lambda: metrics.rollout(run)))
    last = run.num_layers - 1
    yield (f"Across layers, layer {last}'s rollout alone ({n})", rollout_seconds(run, last + 1),
           timed(lambda: metrics.rollout_layer(run, last)))
    mask = np.zeros(run.n, bool)
    mask[0] = True  # the first token hidden, as *Hide tokens* of the sidebar does for a sink
    yield f"Hide tokens ({n})", 3 * read_seconds(run), timed(lambda: derived.hide_tokens(run, mask))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, nargs="+", default=[1024, 2048])
    args = parser.parse_args()
    os.environ["MHA_VIZ_MAX_TOKENS"] = str(max(args.tokens))
    model = mha_viz.load_model("smollm2", device="cpu")
    print(f"{'case':<44} {'estimate':>9} {'measured':>9} {'ratio':>7}  within 0.5–2 ×")
    within = [line("Head composition (SmolLM2's weights)", composition.composition_seconds(model),
                   timed(lambda: composition.composition_scores(model)))]
    for tokens in args.tokens:
        within += [line(*row) for row in cases(model, tokens)]
    print(f"{sum(within)} of {len(within)} within target")


if __name__ == "__main__":
    main()
