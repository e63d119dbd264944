"""Attribution patching over a task (`mha_viz.estimate_heads` given a `PromptSet`): each pair's estimate equals the
estimate of that pair alone (`interventions.estimate.estimate_heads`), the mean is theirs with the seed's interval,
pairs a model cannot run are counted, not run; and, where nothing between a head and the logits bends, the
estimate over the task is patching over the task."""

from __future__ import annotations

import numpy as np
import pytest

import mha_viz
from mha_viz.interventions import estimate
from mha_viz.tasks.prompt_set import Pair, PromptSet
from tests.models.task_pairs import letter_pairs

pytestmark = pytest.mark.model


def test_each_pair_is_the_estimate_of_that_pair_alone(toy_induction):
    toy = toy_induction
    prompts = letter_pairs(6, seed=1)
    progress = []
    task = mha_viz.estimate_heads(toy, prompts, resamples=300, seed=3, progress=lambda f, m: progress.append(f))
    assert task.kept == list(range(6)) and not task.left_out and task.metric == "normalised"
    alone = np.stack([estimate.estimate_heads(toy, p.clean, p.corrupted, p.answer, p.wrong).values
                      for p in prompts.pairs])
    np.testing.assert_allclose(task.per_pair, alone, atol=1e-6)
    np.testing.assert_allclose(task.mean, alone.mean(0), atol=1e-6)
    assert np.all(task.low <= task.mean + 1e-7) and np.all(task.mean <= task.high + 1e-7)
    assert progress == pytest.approx([(i + 1) / 6 for i in range(6)])
    patched = mha_viz.patch_heads(toy, prompts, resamples=300, seed=3)
    np.testing.assert_allclose(task.m_clean, patched.m_clean, atol=1e-5)  # the same pairs' two ends
    corr = np.corrcoef(task.mean.ravel(), patched.mean.ravel())[0, 1]
    assert corr > 0.5, corr  # an estimate of the same quantity (exact only where nothing bends)


def test_pairs_it_cannot_run_are_left_out_and_a_pair_keeps_its_one_pair_answer(toy_induction):
    toy = toy_induction
    good = letter_pairs(3, seed=4).pairs
    bad = (Pair("q w e r q w", "a s d f q w", " e r", " z"),)  # the answer is two tokens
    task = mha_viz.estimate_heads(toy, PromptSet(good + bad, "mixed"), resamples=100)
    assert task.kept == [0, 1, 2] and task.left_out == {"the answer is not one token": 1}
    one = mha_viz.estimate_heads(toy, good[0].clean, good[0].corrupted, good[0].answer, good[0].wrong)
    assert one.estimated and one.values.shape == (toy.num_layers, toy.num_heads)
    with pytest.raises(TypeError, match="resamples"):
        mha_viz.estimate_heads(toy, "q w e", "a s d", resamples=10)
