"""Attribution patching over a task (`PromptSet`): each pair's first-order estimate of patching every head
(`interventions.estimate.estimate_heads`, one forward on each prompt and one backward pass a pair), then the mean
over the pairs with its bootstrap interval and a sign-flip p-value per head, as patching over a set
(`tasks.patching_set`). The pairs run one at a time: a pair's passes are already whole-model (no per-head loop to
batch)."""

from __future__ import annotations

import numpy as np

from mha_viz.interventions import estimate
from mha_viz.interventions.patching import check_mode, require_decoder
from mha_viz.progress import report
from mha_viz.tasks.patching_set import TaskPatching, over_the_pairs
from mha_viz.tasks.prompt_set import PromptSet, check, is_task
from mha_viz_models import LoadedModel


def estimate_set(model: LoadedModel, prompts: PromptSet, mode: str = "denoise", *, resamples: int = 1000,
                 level: float = 0.95, seed: int = 0, max_tokens: int | None = None, progress=None) -> TaskPatching:
    """Every head's estimate on every pair of `prompts` (see the module): a `TaskPatching` whose values are the
    estimate's (normalised by each pair's gap, as `estimate_heads`'). Pairs a model cannot run are left out and
    counted; InputError when none is left. progress(fraction, message) after each pair."""
    check_mode(mode)
    require_decoder(model, "the estimate")
    checked = check(model, prompts, max_tokens)
    count = len(checked.kept)
    values = np.zeros((count, model.num_layers, model.num_heads), np.float64)
    ends = np.zeros((count, 2), np.float64)
    for i, kept in enumerate(checked.kept):
        pair = prompts.pairs[kept]
        one = estimate.estimate_heads(model, pair.clean, pair.corrupted, pair.answer, pair.wrong, mode,
                                      max_tokens=max_tokens)
        values[i], ends[i] = one.values, (one.m_clean, one.m_corrupted)
        report(progress, (i + 1) / count, f"Pair {i + 1} of {count}")
    return over_the_pairs(values, ends, checked, prompts, mode, "normalised", resamples=resamples, level=level,
                          seed=seed)


def estimate_heads(model: LoadedModel, clean, corrupted: str | None = None, answer=None, wrong=None,
                   mode: str = "denoise", *, max_tokens: int | None = None, **over_a_set):
    """Attribution patching of every head: of one prompt pair (`interventions.estimate.estimate_heads`: a
    `Patching`), or, when `clean` is a `PromptSet`, of a task (`estimate_set`: a `TaskPatching` with each pair's
    estimates, their mean, its bootstrap interval and a p-value; `over_a_set`: resamples, level, seed,
    progress)."""
    if is_task(clean, corrupted, {k: v for k, v in over_a_set.items() if k != "progress"}, "estimate_heads"):
        return estimate_set(model, clean, mode, max_tokens=max_tokens, **over_a_set)
    return estimate.estimate_heads(model, clean, corrupted, answer, wrong, mode, max_tokens=max_tokens)
