"""Direct logit attribution over a task (`mha_viz.direct_logit` given a `PromptSet`): each pair's effects equal
that pair's clean prompt alone (`interventions.attribution.direct_logit`), the mean is theirs with the seed's
interval, every head's effect and the rest add up to each pair's logit difference, pairs a model cannot run are
counted, not run."""

from __future__ import annotations

import numpy as np
import pytest

import mha_viz
from mha_viz.interventions import attribution
from mha_viz.tasks.prompt_set import Pair, PromptSet
from tests.models.task_pairs import letter_pairs

pytestmark = pytest.mark.model


def test_each_pair_is_its_clean_prompt_alone(toy_induction):
    toy = toy_induction
    prompts = letter_pairs(5, seed=2)
    task = mha_viz.direct_logit(toy, prompts, resamples=300, seed=1)
    assert task.kept == list(range(5)) and not task.left_out
    alone = [attribution.direct_logit(toy, p.clean, p.answer, p.wrong) for p in prompts.pairs]
    np.testing.assert_allclose(task.per_pair, np.stack([a.per_head for a in alone]), atol=1e-6)
    np.testing.assert_allclose(task.mean, task.per_pair.mean(0), atol=1e-6)
    np.testing.assert_allclose(task.logit, [a.logit for a in alone], atol=1e-5)
    for a in alone:  # the heads and the rest add up to the pair's logit difference (toy-induction caps nothing)
        assert a.per_head.sum() + a.rest == pytest.approx(a.logit, rel=1e-4, abs=1e-4)
    assert np.all(task.low <= task.mean + 1e-6) and np.all(task.mean <= task.high + 1e-6)
    again = mha_viz.direct_logit(toy, prompts, resamples=300, seed=1)
    np.testing.assert_array_equal(task.low, again.low)


def test_pairs_it_cannot_run_are_left_out_and_a_text_takes_no_set_option(toy_induction):
    toy = toy_induction
    good = letter_pairs(3, seed=4).pairs
    bad = (Pair("q w e r q w", "a s d f q w", " e", " e"),)  # the answer is the wrong token
    task = mha_viz.direct_logit(toy, PromptSet(good + bad, "mixed"), resamples=100)
    assert task.kept == [0, 1, 2] and task.left_out == {"the answer and the wrong token are the same": 1}
    one = mha_viz.direct_logit(toy, good[0].clean, good[0].answer, good[0].wrong)
    assert one.per_head.shape == (toy.num_layers, toy.num_heads)
    with pytest.raises(TypeError, match="resamples"):
        mha_viz.direct_logit(toy, "q w e r", resamples=10)


def test_greater_than_runs_on_a_tokenizer_that_writes_digits_one_by_one(smollm2):
    """SmolLM2 writes each digit alone: the two-digit pairs are all left out, and the set made for its tokenizer
    (a decade's digit) runs every pair."""
    from mha_viz.tasks import generators
    from mha_viz.tasks.prompt_set import check

    with pytest.raises(mha_viz.InputError, match="answer is not one token"):
        check(smollm2, generators.greater_than(6, seed=2))
    made = generators.make("greater_than", 6, seed=2, tokenizer=smollm2.tokenizer)
    assert made.source == "greater_than(n=6, seed=2, digits=1)" and check(smollm2, made).kept == list(range(6))
    task = mha_viz.direct_logit(smollm2, made, resamples=100, seed=0)
    assert task.kept == list(range(6)) and np.isfinite(task.mean).all()


def test_the_docstring_task_runs_every_pair_on_smollm2(smollm2):
    """Every parameter name is one token of SmolLM2 with its leading space, and clean and corrupted prompts are
    as long: no pair is left out; the model names the documented parameter next more often than not."""
    from mha_viz.tasks import generators

    task = mha_viz.direct_logit(smollm2, generators.docstring(12, seed=0), resamples=100, seed=0)
    assert task.kept == list(range(12)) and not task.left_out
    assert np.mean(task.logit) > 0
