"""EAP over a task against the same pairs one by one (issue 56's target), for `benchmarks/circuits.py --task N`:
`N` generated IOI pairs (`mha_viz.tasks.generators.ioi`, seed 0) on a model, `mha_viz.edge_attribution` given
the PromptSet (pairs of one length batched as far as the memory budget allows) against `edge_attribution` of
each kept pair alone, side by side in one run (batched first, then one by one, after one warm-up pair), and the
largest difference between their per-pair scores; then the same for EAP-IG. Target: EAP batched at most 0.5 ×
the pairs one by one."""

from __future__ import annotations

import time

import numpy as np

import mha_viz
from mha_viz.circuits import edges
from mha_viz.tasks import generators

TASK_X = 0.5


def task_rows(model, n: int) -> list[tuple[str, str, bool | None]]:
    """EAP's rows, then EAP-IG's (5 steps): the issue's target is EAP's; EAP-IG's ratio is printed beside it."""
    prompts = generators.ioi(n, seed=0)
    return method_rows(model, prompts, "eap", TASK_X) + method_rows(model, prompts, "eap-ig", None)


def method_rows(model, prompts, method: str, target: float | None) -> list[tuple[str, str, bool | None]]:
    """`method` over `prompts` batched against the same pairs one by one, and the largest difference of their scores."""
    first = prompts.pairs[0]
    edges.edge_attribution(model, first.clean, first.corrupted, first.answer, first.wrong, method=method)  # warm-up
    start = time.perf_counter()
    task = mha_viz.edge_attribution(model, prompts, method=method, metric="raw", resamples=1000)
    batched = time.perf_counter() - start
    start = time.perf_counter()
    alone = [edges.edge_attribution(model, p.clean, p.corrupted, p.answer, p.wrong, method=method)
             .scores["score"].to_numpy() for p in (prompts.pairs[k] for k in task.kept)]
    single = time.perf_counter() - start
    differ = float(np.abs(task.per_pair - np.stack(alone)).max())
    kept = f"{len(task.kept)} of {len(prompts.pairs)} IOI pairs" + (
        f" ({', '.join(task.left_out)})" if task.left_out else "")
    name = {"eap": "EAP", "eap-ig": "EAP-IG (5 steps)"}[method]
    return [(f"{name} over {kept}: batched" + (f" ≤ {target} ×" if target else ", ×") + " one by one",
             f"{batched / single:.2f} × ({batched:.1f} s against {single:.1f} s)",
             None if target is None else batched / single <= target),
            (f"{name}: largest difference of a pair's score, batched against alone", f"{differ:.2e}", None)]
