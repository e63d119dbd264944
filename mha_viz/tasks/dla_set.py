"""Direct logit attribution over a task (`PromptSet`): on each pair's clean prompt, each head's direct effect on
logit(answer) − logit(wrong) at the last position (`interventions.attribution.direct_logit`), then the mean over
the pairs with its bootstrap interval and a sign-flip p-value per head (`tasks.uncertainty`). In logits: a direct
effect needs no corrupted run, so there is no gap to divide by (the corrupted prompts are checked all the same,
as a pair of the task)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mha_viz.interventions import attribution
from mha_viz.interventions.patching import require_decoder
from mha_viz.progress import report
from mha_viz.tasks.prompt_set import PromptSet, check
from mha_viz.tasks.uncertainty import MeanOverPairs, mean_over_pairs
from mha_viz_models import LoadedModel


@dataclass
class TaskDirectLogit(MeanOverPairs):
    """Direct logit attribution over a task. per_pair (pairs, layers, heads): each kept pair's direct effects in
    logits; mean, low, high (layers, heads): their mean and its bootstrap interval; p_value: the sign-flip p-value
    of mean ≠ 0; logit (pairs,): each pair's logit difference, which its heads' effects and the rest add up to."""
    logit: np.ndarray


def direct_logit_set(model: LoadedModel, prompts: PromptSet, *, resamples: int = 1000, level: float = 0.95,
                     seed: int = 0, max_tokens: int | None = None, progress=None) -> TaskDirectLogit:
    """Every head's direct effect on every pair of `prompts` (see the module). Pairs a model cannot run are left
    out and counted; InputError when none is left. progress(fraction, message) after each pair."""
    require_decoder(model, "direct logit attribution over a task")
    checked = check(model, prompts, max_tokens)
    count = len(checked.kept)
    values = np.zeros((count, model.num_layers, model.num_heads), np.float64)
    logit = np.zeros(count, np.float64)
    for i, kept in enumerate(checked.kept):
        pair = prompts.pairs[kept]
        one = attribution.direct_logit(model, pair.clean, pair.answer, pair.wrong, max_tokens=max_tokens)
        values[i], logit[i] = one.per_head, one.logit
        report(progress, (i + 1) / count, f"Pair {i + 1} of {count}")
    return TaskDirectLogit(logit.astype(np.float32), **mean_over_pairs(values, resamples=resamples, level=level,
                                                                        seed=seed),
                           kept=list(checked.kept), left_out=dict(checked.left_out), source=prompts.source,
                           level=level, resamples=resamples, seed=seed)


def direct_logit(model: LoadedModel, text, target=None, wrong=None, position: int = -1, *,
                 max_tokens: int | None = None, **over_a_set):
    """Each head's direct effect on a logit (difference): of one text (`interventions.attribution.direct_logit`:
    a `DirectLogit`), or, when `text` is a `PromptSet`, over a task (`direct_logit_set`: a `TaskDirectLogit`
    with each pair's effects, their mean, its bootstrap interval and a p-value; `over_a_set`: resamples, level,
    seed, progress)."""
    if isinstance(text, PromptSet):
        return direct_logit_set(model, text, max_tokens=max_tokens, **over_a_set)
    if over_a_set:
        raise TypeError(f"{', '.join(over_a_set)}: options of a PromptSet, not of one text")
    return attribution.direct_logit(model, text, target, wrong, position, max_tokens=max_tokens)
